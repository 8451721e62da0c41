-- One row per billing month × tenant × cluster × GPU model × charge category × charge type ×
-- unit price × capacity reservation, as the current inputs and catalog price the month
-- (charge_lines adds the period-close rules). charge_type says what a line charges:
--   usage            allocated GPU-hours × the rate in force (rate_card) or the pool's derived
--                    rate (full_recovery); charge_category 'Usage'
--   credit           the failed_infra part of the usage (node failures, outage windows) given
--                    back at the same rate, a negative amount; charge_category 'Credit'
--   reserved_unused  the unused part of a reserved quota (reserved_quota_unused), charged to
--                    its tenant in both modes; capacity_reservation_id = 'tenant/pool'
--   idle_share       full_recovery: the tenant's share of what its pool has left to recover
--   platform         full_recovery: what no tenant is charged, one line per pool, tenant_id
--                    'platform' (the catalog's tenant of that id when it has one, else
--                    'Platform (unrecovered)')
-- Rounding: each usage, credit and reserved_unused line's exact amount is rounded to cents
-- once, by the largest-remainder method within its charge type: every line gets its floor in
-- cents, then the lines with the largest remainders get one more cent each until the type
-- adds up to its exact total rounded half up. So lines sum to tenants and tenants to the
-- total, to the cent. The usage and credit lines are rounded so in job_line_cents, which
-- also splits each over its jobs (so a tenant's jobs sum to its lines). A closed month is
-- restated, not rounded afresh: a line priced exactly as issued (issued_charge_lines) keeps
-- its issued cents and the others are rounded among themselves (job_line_cents), so that
-- charge_lines corrects only the lines that changed.
-- full_recovery (cost_pools has the month's pools): per pool (cluster × GPU model), left =
-- pool cost − (usage − credits + reserved_unused) as rounded above, in whole cents. A
-- positive left is shared by the month's idle_sharing policy, in whole cents by largest
-- remainder (ties by tenant id):
--   weighted              by the tenants' allocated GPU-hours (usage lines) in the pool
--   even                  equally among the tenants with usage in the pool
--   reserved_quota_first  by the guaranteed GPU-hours of the reserved quotas priced on the
--                         pool; as weighted when the pool has no reservation
--   platform              nobody: all of it goes to the platform line
-- The platform line takes the rest: all of left when no tenant qualifies (nobody used the
-- pool), or a negative left (usage at the rounded rate, or over-sold reservations, charged
-- more than the pool costs: the excess is returned on the platform line, so tenants are
-- charged at the published rates and the lines still add up to the pool cost). So per pool
-- and per cluster the lines sum to the cost exactly. gpu_units of idle_share and platform
-- lines split the pool's idle capacity (capacity − usage − reserved unused) the same way;
-- their charge_numerator is the amount's own (cents × 15,120,000,000,000).
-- Parameters: $billing_month, $currency.
with pools as (
    select * from cost_pools where billing_month = $billing_month
),

job_lines as (
    -- the usage and credit lines, rounded with their jobs' shares (job_line_cents)
    select
        tenant_id, cluster, gpu_model, unit_price,
        case charge_type when 'usage' then 'Usage' else 'Credit' end as charge_category,
        charge_type,
        null::varchar as capacity_reservation_id,
        price_tier,
        sum(gpu_units)::bigint as gpu_units,
        sum(charge_numerator) as charge_numerator,
        sum(cents) as cents
    from job_line_cents
    where billing_month = $billing_month
    group by all
),

reserved_lines as (
    -- issued_cents: a closed month's line priced exactly as issued keeps its cents
    select r.*, i.cents as issued_cents
    from (
        select
            tenant_id, cluster, gpu_model, unit_price,
            'Usage' as charge_category,
            'reserved_unused' as charge_type,
            capacity_reservation_id,
            null::varchar as price_tier,
            sum(gpu_units)::bigint as gpu_units,
            sum(charge_numerator) as charge_numerator
        from reserved_quota_unused
        where billing_month = $billing_month and gpu_units > 0
        group by all
    ) as r
    left join (
        select
            tenant_id, cluster, gpu_model, unit_price, capacity_reservation_id, gpu_units,
            charge_numerator, min(amount * 100)::bigint as cents
        from issued_charge_lines
        where billing_month = $billing_month and charge_type = 'reserved_unused'
        group by all
    ) as i
        on i.tenant_id = r.tenant_id and i.cluster = r.cluster and i.gpu_model = r.gpu_model
        and i.unit_price = r.unit_price
        and i.capacity_reservation_id = r.capacity_reservation_id
        and i.charge_numerator = r.charge_numerator
        and i.gpu_units = r.gpu_units
),

reserved_rounded as (
    -- as job_line_cents rounds the usage and credit lines (and keeps a closed month's)
    select
        * exclude (issued_cents),
        coalesce(issued_cents, largest_remainder(
            charge_numerator // numerator_per_cent(),
            charge_numerator % numerator_per_cent(),
            cents_half_up(sum(charge_numerator) over (partition by issued_cents is null)),
            issued_cents is null,
            row(tenant_id, cluster, gpu_model, unit_price, capacity_reservation_id)
        )) as cents
    from reserved_lines
),

signed as (
    select * replace (case when charge_type = 'credit' then -cents else cents end as cents)
    from (
        select * from job_lines
        union all by name
        select * from reserved_rounded
    )
),

pool_charged as (
    select
        cluster,
        gpu_model,
        sum(cents) as cents,
        sum(gpu_units) filter (charge_type in ('usage', 'reserved_unused')) as busy_units
    from signed
    group by all
),

pool_left as (
    -- full_recovery: what each pool has left to recover, and its idle units
    select
        p.cluster,
        p.gpu_model,
        p.unit_price,
        p.idle_sharing,
        p.cost_cents - coalesce(c.cents, 0) as left_cents,
        greatest(p.capacity_units - coalesce(c.busy_units, 0), 0) as idle_units
    from pools as p
    left join pool_charged as c using (cluster, gpu_model)
),

usage_weights as (
    select cluster, gpu_model, tenant_id, sum(gpu_units)::hugeint as usage_units
    from job_lines
    where charge_type = 'usage' and gpu_units > 0
    group by all
),

reserved_weights as (
    select cluster, gpu_model, tenant_id, sum(guaranteed_units)::hugeint as guaranteed_units
    from reserved_quota_unused
    where billing_month = $billing_month and guaranteed_units > 0
    group by all
),

weights as (
    select
        p.cluster,
        p.gpu_model,
        u.tenant_id,
        case when p.idle_sharing = 'even' then 1 else u.usage_units end as weight
    from pool_left as p
    join usage_weights as u using (cluster, gpu_model)
    where p.idle_sharing in ('weighted', 'even')
        or (p.idle_sharing = 'reserved_quota_first' and not exists (
            select 1 from reserved_weights as r
            where r.cluster = p.cluster and r.gpu_model = p.gpu_model
        ))
    union all
    select p.cluster, p.gpu_model, r.tenant_id, r.guaranteed_units
    from pool_left as p
    join reserved_weights as r using (cluster, gpu_model)
    where p.idle_sharing = 'reserved_quota_first'
),

shares as (
    select
        w.cluster,
        w.gpu_model,
        w.tenant_id,
        p.unit_price,
        p.idle_sharing,
        p.left_cents * w.weight // sum(w.weight) over pool as floor_cents,
        p.left_cents * w.weight % sum(w.weight) over pool as cents_remainder,
        p.left_cents,
        p.idle_units * w.weight // sum(w.weight) over pool as floor_units,
        p.idle_units * w.weight % sum(w.weight) over pool as units_remainder,
        p.idle_units
    from weights as w
    join pool_left as p using (cluster, gpu_model)
    where p.left_cents > 0
    window pool as (partition by w.cluster, w.gpu_model)
),

idle_shares as (
    select
        cluster, gpu_model, tenant_id, unit_price, idle_sharing,
        largest_remainder(
            floor_cents, cents_remainder, left_cents, row(cluster, gpu_model), tenant_id
        ) as cents,
        largest_remainder(
            floor_units, units_remainder, idle_units, row(cluster, gpu_model), tenant_id
        ) as gpu_units
    from shares
),

platform as (
    select
        p.cluster,
        p.gpu_model,
        p.unit_price,
        p.left_cents - coalesce(sum(i.cents), 0) as cents,
        p.idle_units - coalesce(sum(i.gpu_units), 0) as gpu_units
    from pool_left as p
    left join idle_shares as i using (cluster, gpu_model)
    group by p.cluster, p.gpu_model, p.unit_price, p.left_cents, p.idle_units
),

all_lines as (
    select
        tenant_id, cluster, gpu_model, unit_price, charge_category, charge_type,
        capacity_reservation_id, price_tier, gpu_units, charge_numerator, cents
    from signed
    union all
    select
        tenant_id, cluster, gpu_model, unit_price, 'Usage', 'idle_share', null, null,
        gpu_units, cents * numerator_per_cent(), cents
    from idle_shares
    where cents <> 0 or gpu_units <> 0
    union all
    select
        'platform', cluster, gpu_model, unit_price, 'Usage', 'platform', null, null,
        gpu_units, abs(cents) * numerator_per_cent(), cents
    from platform
    where cents <> 0 or gpu_units <> 0
),

final as (
    select
        $billing_month::date as billing_month,
        l.tenant_id,
        coalesce(
            t.name,
            case l.tenant_id
                when 'platform' then 'Platform (unrecovered)' else 'Unmapped accounts'
            end
        ) as tenant_name,
        coalesce(
            t.department,
            case l.tenant_id when 'platform' then 'Platform' else 'Unmapped' end
        ) as department,
        t.cost_center,
        l.cluster,
        l.gpu_model,
        l.charge_category,
        null::varchar as charge_class,
        l.charge_type,
        l.capacity_reservation_id,
        case l.charge_type
            when 'usage'
                then format(
                    'GPU usage, {} at {}{} {}/GPU-hour{}', l.gpu_model,
                    case when p.cluster is not null then 'the derived rate ' else '' end,
                    l.unit_price, $currency, tier.text
                )
            when 'credit'
                then format(
                    'Credit for failed infrastructure, {} at {} {}/GPU-hour{}', l.gpu_model,
                    l.unit_price, $currency, tier.text
                )
            when 'reserved_unused'
                then format(
                    'Reserved capacity unused ({}), {} at {} {}/GPU-hour',
                    l.capacity_reservation_id, l.gpu_model, l.unit_price, $currency
                )
            when 'idle_share'
                then format(
                    'Share of unrecovered {} capacity cost on {} ({} policy)', l.gpu_model,
                    l.cluster, p.idle_sharing
                )
            else
                format(
                    'Capacity cost of {} on {} not recovered from tenants', l.gpu_model, l.cluster
                )
        end as charge_description,
        gpu_hours(l.gpu_units) as gpu_hours,
        l.gpu_units::bigint as gpu_units,
        l.unit_price::decimal(18, 6) as unit_price,
        l.charge_numerator::hugeint as charge_numerator,
        money(l.cents) as amount,
        $currency as currency
    from all_lines as l
    -- the price tier of a usage or credit line, after its price
    cross join (select coalesce(format(' ({})', l.price_tier), '') as text) as tier
    left join catalog_tenants as t on t.tenant_id = l.tenant_id
    left join pools as p on p.cluster = l.cluster and p.gpu_model = l.gpu_model
)

select * from final
order by
    tenant_id, cluster, gpu_model, charge_category desc,
    charge_type_order(charge_type),
    unit_price, capacity_reservation_id, charge_description
