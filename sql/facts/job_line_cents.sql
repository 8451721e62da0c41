-- One row per job × usage or credit charge line it is charged on: its share of the line in
-- whole cents, so that a tenant's jobs add up to its usage and credit lines to the cent (a
-- job's amount in job_usage, the Job lines sheet, is its usage cents less its credit cents).
-- A line (tenant × cluster × GPU model × unit price × price tier × charge type, as in
-- computed_charge_lines, which takes its usage and credit lines' cents from here) is rounded
-- once: every line gets its exact amount's floor in cents, then the lines with the largest
-- remainders one cent more each until its charge type adds up to the type's exact total
-- rounded half up. A line's cents are then split over its jobs in proportion to their exact
-- amounts, by largest remainder (ties by cluster and job id).
-- A closed month (its lines in issued_charge_lines) is restated, not rounded afresh: a line
-- priced exactly as issued (the same exact amount and GPU units) keeps its issued cents, and
-- only the other lines are rounded so, among themselves, to their own exact total rounded half
-- up. Rounded afresh, a late job's remainder could move the cent of another tenant's unchanged
-- line, and charge_lines would correct a line nothing changed.
--   charge_type   'usage' (charge_numerator, gpu_units of job_gpu_charges) or 'credit' (the
--                 failed_infra part: credit_numerator, credit_gpu_units); cents are positive
--                 for both, the credit line's sign is computed_charge_lines'
-- Parameters: $billing_month.
with charged as (
    select
        cluster, job_id, tenant_id, gpu_model, unit_price, price_tier, 'usage' as charge_type,
        gpu_units, charge_numerator
    from job_gpu_charges
    where billing_month = $billing_month
    union all
    select
        cluster, job_id, tenant_id, gpu_model, unit_price, price_tier, 'credit',
        credit_gpu_units, credit_numerator
    from job_gpu_charges
    where billing_month = $billing_month and credit_gpu_units > 0
),

lines as (
    select
        tenant_id, cluster, gpu_model, unit_price, price_tier, charge_type,
        sum(gpu_units) as line_units,
        sum(charge_numerator) as line_numerator,
        sum(charge_numerator) // numerator_per_cent() as floor_cents,
        sum(charge_numerator) % numerator_per_cent() as remainder
    from charged
    group by all
),

issued as (
    -- a closed month's issued usage and credit lines, in positive cents (none while open)
    select
        tenant_id, cluster, gpu_model, unit_price, charge_type, gpu_units, charge_numerator,
        min(abs(amount) * 100)::bigint as cents
    from issued_charge_lines
    where billing_month = $billing_month and charge_type in ('usage', 'credit')
    group by all
),

kept as (
    -- issued_cents: the line is priced exactly as issued, and keeps its cents
    select l.*, i.cents as issued_cents
    from lines as l
    left join issued as i
        on i.tenant_id = l.tenant_id and i.cluster = l.cluster and i.gpu_model = l.gpu_model
        and i.charge_type = l.charge_type
        and i.unit_price is not distinct from l.unit_price
        and i.charge_numerator = l.line_numerator
        and i.gpu_units = l.line_units
),

line_cents as (
    select
        tenant_id, cluster, gpu_model, unit_price, price_tier, charge_type, line_numerator,
        coalesce(issued_cents, largest_remainder(
            floor_cents,
            remainder,
            cents_half_up(sum(line_numerator) over rounded_together),
            row(charge_type, issued_cents is null),
            row(tenant_id, cluster, gpu_model, unit_price, price_tier)
        )) as line_cents
    from kept
    window rounded_together as (partition by charge_type, issued_cents is null)
),

shares as (
    select
        c.*,
        l.line_cents,
        -- a line of no amount (a zero price) gives each of its jobs 0 cents; NULL money
        -- stays NULL
        case
            when l.line_numerator = 0 then 0
            else c.charge_numerator * l.line_cents // l.line_numerator
        end as floor_cents,
        case
            when l.line_numerator = 0 then 0
            else c.charge_numerator * l.line_cents % l.line_numerator
        end as remainder
    from charged as c
    join line_cents as l
        on l.tenant_id = c.tenant_id and l.cluster = c.cluster and l.gpu_model = c.gpu_model
        and l.charge_type = c.charge_type
        -- a NULL tier is the plain rate; a NULL price (no rate: the run stops before this)
        -- still reaches the lines, for checks/charges_tie_out
        and l.unit_price is not distinct from c.unit_price
        and l.price_tier is not distinct from c.price_tier
),

final as (
    select
        $billing_month::date as billing_month,
        cluster,
        job_id,
        tenant_id,
        gpu_model,
        unit_price,
        price_tier,
        charge_type,
        gpu_units,
        charge_numerator,
        largest_remainder(
            floor_cents,
            remainder,
            line_cents,
            row(tenant_id, cluster, gpu_model, unit_price, price_tier, charge_type),
            row(cluster, job_id)
        )::bigint as cents
    from shares
)

select * from final
order by cluster, job_id, tenant_id, gpu_model, unit_price, price_tier, charge_type
