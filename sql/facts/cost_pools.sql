-- One row per billing month × cluster × GPU model in cost_mode full_recovery (no rows in
-- rate_card): the pool of cost its GPUs must recover and the derived rate.
--   node cost   Σ nodes.csv monthly_cost of the pool's nodes × in-service ms in the month /
--               ms in the month (a node in service half the month costs half)
--   overhead    the cluster's settings `monthly_overhead`, spread over its GPU models in
--               proportion to their capacity GPU-hours; a cluster with overhead and no GPU in
--               service in the month gets one pool with gpu_model '*' and no capacity, which
--               only the platform line can recover
--   cost_cents  exact: the cluster's cost is Σ (node cost + overhead) rounded half up to the
--               cent once; its pools get their floors plus one cent each by largest remainder
--               (ties by GPU model), so pools sum to the cluster's cost exactly
--   price_micro the derived rate: cost_cents / capacity GPU-hours, rounded half up to
--               millionths (unit_price, DECIMAL(18, 6)); NULL without capacity
-- Exact arithmetic: per cluster the common denominator is month_ms × cluster capacity units,
-- pool numerator = Σ cost_cents × service_ms × cluster_units + overhead_cents × pool_units ×
-- month_ms (HUGEINT). idle_sharing is the month's policy (settings), kept with the pools.
-- Parameters: $billing_month, $month_start, $month_end, $cost_mode, $idle_sharing,
-- $currency.
with node_cost as (
    select
        cluster,
        gpu_model,
        sum(
            (monthly_cost * 100)::hugeint
            * (
                epoch_ms(least(in_service_to, $month_end::timestamp))
                - epoch_ms(greatest(in_service_from, $month_start::timestamp))
            )
        ) as cost_cent_ms
    from catalog_nodes
    where $cost_mode = 'full_recovery'
        and in_service_from < $month_end::timestamp and in_service_to > $month_start::timestamp
    group by all
),

capacity as (
    select cluster, gpu_model, sum(capacity_units)::hugeint as capacity_units
    from gpu_capacity
    where billing_month = $billing_month
    group by all
),

overheads as (
    select cluster, (monthly_overhead * 100)::hugeint as overhead_cents
    from catalog_clusters
    where $cost_mode = 'full_recovery' and monthly_overhead > 0
),

month as (
    select (epoch_ms($month_end::timestamp) - epoch_ms($month_start::timestamp))::hugeint
        as month_ms
),

pools as (
    select
        n.cluster,
        n.gpu_model,
        coalesce(c.capacity_units, 0) as capacity_units,
        n.cost_cent_ms,
        sum(coalesce(c.capacity_units, 0)) over (partition by n.cluster) as cluster_units
    from node_cost as n
    left join capacity as c using (cluster, gpu_model)
),

exact as (
    -- pool cost = numerator / denominator cents
    select
        p.cluster,
        p.gpu_model,
        p.capacity_units,
        p.cost_cent_ms * p.cluster_units
        + coalesce(o.overhead_cents, 0) * p.capacity_units * m.month_ms as numerator,
        m.month_ms * p.cluster_units as denominator
    from pools as p
    cross join month as m
    left join overheads as o using (cluster)
    where p.cluster_units > 0
    union all
    -- a cluster whose nodes hold no GPU in service this month: its overhead alone
    select o.cluster, '*', 0, o.overhead_cents, 1
    from overheads as o
    where not exists (select 1 from pools as p where p.cluster = o.cluster and p.cluster_units > 0)
),

floored as (
    select
        *,
        numerator // denominator as floor_cents,
        numerator % denominator as remainder,
        (
            sum(numerator) over (partition by cluster)
            + any_value(denominator) over (partition by cluster) // 2
        ) // any_value(denominator) over (partition by cluster) as cluster_cents
    from exact
),

rounded as (
    select
        *,
        largest_remainder(floor_cents, remainder, cluster_cents, row(cluster), gpu_model)
            as cost_cents
    from floored
),

priced as (
    select
        *,
        case
            when capacity_units > 0
                then (cost_cents * numerator_per_cent() + capacity_units // 2) // capacity_units
        end as price_micro
    from rounded
),

final as (
    select
        $billing_month::date as billing_month,
        cluster,
        gpu_model,
        capacity_units::bigint as capacity_units,
        gpu_hours(capacity_units) as capacity_gpu_hours,
        cost_cents::bigint as cost_cents,
        money(cost_cents) as amount,
        price_micro::bigint as price_micro,
        (price_micro::decimal(38, 0) / 1000000)::decimal(18, 6) as unit_price,
        $idle_sharing as idle_sharing,
        $currency as currency
    from priced
)

select * from final
order by cluster, gpu_model
