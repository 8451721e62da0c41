-- One row per broken tie: a tenant whose lines do not sum to its amount, a tenant whose jobs'
-- amounts (job_usage, the Job lines sheet) do not sum to its usage and credit lines, a month
-- total that is not the exact usage minus the exact credits plus the exact unused
-- reservations, each rounded half up to the cent (plus, in full_recovery, the idle-share and
-- platform lines, whose sum to the cluster cost cluster_cost_recovered checks; in a closed
-- month, the lines priced exactly as issued count their issued cents and only the others are
-- rounded, as job_line_cents restates them), or a line more
-- than a cent from its exact amount (charge_numerator / 15,120,000,000,000 cents, a
-- magnitude). NULL money (a price missing upstream) is a violation of its own, level 'null':
-- the sums above skip NULLs, so without it a month of NULL amounts would tie out.
-- Parameters: $billing_month.
with lines as (
    select tenant_id, sum(amount) as amount
    from charge_lines
    where billing_month = $billing_month
    group by tenant_id
),

tenants as (
    select tenant_id, amount from tenant_month where billing_month = $billing_month
),

tenant_ties as (
    select
        'tenant' as level,
        coalesce(l.tenant_id, t.tenant_id) as subject,
        coalesce(l.amount, 0) as lines_amount,
        coalesce(t.amount, 0) as expected_amount
    from lines as l
    full join tenants as t using (tenant_id)
    where coalesce(l.amount, 0) <> coalesce(t.amount, 0)
),

job_ties as (
    select
        'jobs' as level,
        tenant_id as subject,
        coalesce(j.amount, 0) as lines_amount,
        coalesce(l.amount, 0) as expected_amount
    from (
        select tenant_id, sum(amount) as amount from job_usage
        where billing_month = $billing_month
        group by tenant_id
    ) as j
    full join (
        select tenant_id, sum(amount) as amount from computed_charge_lines
        where billing_month = $billing_month and charge_type in ('usage', 'credit')
        group by tenant_id
    ) as l using (tenant_id)
    where coalesce(j.amount, 0) <> coalesce(l.amount, 0)
),

kept as (
    -- a closed month's lines priced exactly as issued, which keep their issued cents: per
    -- charge type, their exact amount and cents (none while the month is open)
    select
        i.charge_type,
        sum(i.charge_numerator) as numerator,
        sum(abs(i.amount) * 100)::hugeint as cents
    from issued_charge_lines as i
    join computed_charge_lines as c
        on c.billing_month = i.billing_month
        and c.tenant_id = i.tenant_id and c.cluster = i.cluster and c.gpu_model = i.gpu_model
        and c.charge_type = i.charge_type
        and c.unit_price is not distinct from i.unit_price
        and c.capacity_reservation_id is not distinct from i.capacity_reservation_id
        and c.charge_numerator = i.charge_numerator
        and c.gpu_units = i.gpu_units
    where i.billing_month = $billing_month
        and i.charge_type in ('usage', 'credit', 'reserved_unused')
    group by all
),

exact as (
    -- per charge type, the exact amount of the month's lines, in charge numerators
    select 'usage' as charge_type, coalesce(sum(charge_numerator), 0) as numerator
    from job_gpu_charges where billing_month = $billing_month
    union all
    select 'credit', coalesce(sum(credit_numerator), 0)
    from job_gpu_charges where billing_month = $billing_month
    union all
    select 'reserved_unused', coalesce(sum(charge_numerator), 0)
    from reserved_quota_unused where billing_month = $billing_month
),

rounded as (
    -- per charge type, its lines' cents: the kept lines' issued cents and the others' exact
    -- amount rounded half up once (a credit's cents are given back)
    select
        sum(
            (coalesce(k.cents, 0) + cents_half_up(e.numerator - coalesce(k.numerator, 0)))
            * case e.charge_type when 'credit' then -1 else 1 end
        ) as cents
    from exact as e
    left join kept as k using (charge_type)
),

total_tie as (
    select
        'total' as level,
        'month' as subject,
        (select coalesce(sum(amount), 0) from tenants) as lines_amount,
        money((select cents from rounded)) + (
            select coalesce(sum(amount), 0) from computed_charge_lines
            where billing_month = $billing_month and charge_type in ('idle_share', 'platform')
        ) as expected_amount
),

line_ties as (
    select
        'line' as level,
        format('{}/{}/{}/{}/{}', tenant_id, cluster, gpu_model, charge_type, unit_price)
            as subject,
        amount as lines_amount,
        charge_numerator::double / (numerator_per_cent() * 100) as expected_amount
    from charge_lines
    where billing_month = $billing_month
        and charge_class is distinct from 'Correction'  -- differences of two rounded lines
        and abs(abs(amount) * numerator_per_cent() * 100 - charge_numerator) >= numerator_per_cent()
),

null_money as (
    select
        'null' as level,
        format(
            'charge_lines {}/{}/{}/{}/{}', tenant_id, cluster, gpu_model, charge_type,
            coalesce(unit_price::varchar, 'no price')
        ) as subject,
        amount as lines_amount,
        charge_numerator::double / (numerator_per_cent() * 100) as expected_amount
    from charge_lines
    where billing_month = $billing_month and (amount is null or charge_numerator is null)
    union all
    select
        'null',
        format('job_gpu_charges {}/{}/{}/{}', cluster, job_id, tenant_id, gpu_model),
        null,
        null
    from job_gpu_charges
    where billing_month = $billing_month
        and (unit_price is null or charge_numerator is null or credit_numerator is null)
    union all
    select
        'null',
        format('reserved_quota_unused {}/{}/{}', capacity_reservation_id, cluster, gpu_model),
        null,
        null
    from reserved_quota_unused
    where billing_month = $billing_month and (price_micro is null or charge_numerator is null)
)

select
    level,
    subject,
    lines_amount::double as lines_amount,
    expected_amount::double as expected_amount
from (
    select * from tenant_ties
    union all
    select * from job_ties
    union all
    select * from total_tie where lines_amount is distinct from expected_amount
    union all
    select * from line_ties
    union all
    select * from null_money
)
order by level, subject
