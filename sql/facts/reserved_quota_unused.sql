-- One row per billing month × reserved quota (tenant × pool) × cluster × GPU model × unit
-- price: the unused part of a reserved guarantee, charged to its tenant (both cost modes).
-- unused = the integral, while the reserved quota is in force, of max(0, guaranteed GPUs −
-- GPU-equivalents the tenant holds concurrently in the pool), exactly, in GPU units (1/420
-- GPU-ms; a guarantee counts round(guaranteed_gpus × 420) shares), over the steps of
-- quota_steps, the concurrency timeline quota_compliance integrates too (of overlapping quota
-- versions the one valid from later is in force, so a later version with reserved: false ends
-- the charge): gpu_units add up to the quota's unused_guaranteed_gpu_hours there.
-- Price: a pool that is a GPU model (in nodes.csv, rates.yaml or this month's jobs) is priced
-- as that model; any other pool is a queue, priced as the GPU model that carried most of the
-- queue's GPU time in the month (ties: first model by name), or '*' (the fallback rate) when
-- the queue ran nothing. rate_card: the rate in force at each moment and cluster (the steps
-- are cut at rate changes; as for jobs, a cluster's own rate before the all-clusters one):
-- the unused units of each rate period (between two changes of the model's or '*' rates on
-- any cluster) are split over the clusters, then each cluster's part is priced at its rate.
-- full_recovery (cost_pools has the month): the derived rate of each cluster's pool.
-- Cluster: a quota spans clusters, so its unused units are split over the clusters holding
-- its GPU model, pro rata to their capacity GPU-hours in the month (largest remainder in
-- whole units, ties by cluster name); without capacity for the model (rate_card only) pro
-- rata to the model's allocated time per cluster, else one row with cluster '*'. In
-- full_recovery a model with no capacity has no cost to recover: no row.
-- guaranteed_units (the guarantee's integral, split the same way) is the weight of the
-- reserved_quota_first idle-sharing policy; rows with no unused time are kept for it.
-- Parameters: $billing_month.
with is_full_recovery as (
    select count(*) > 0 as on_pools from cost_pools where billing_month = $billing_month
),

reserved_steps as (
    -- the steps of the month (quota_steps) on which a reserved quota is in force
    select
        tenant_id,
        pool,
        step_from,
        greatest(round(guaranteed_share)::bigint - share, 0)::hugeint * step_ms as unused_units,
        round(guaranteed_share)::hugeint * step_ms as guaranteed_units
    from quota_steps
    where billing_month = $billing_month and in_quota and reserved
),

reserved_pools as (
    select distinct tenant_id, pool from reserved_steps
),

segments as (
    select u.queue, g.cluster, g.gpu_model, g.gpu_units
    from job_gpu_hours as g
    join job_usage as u using (billing_month, cluster, job_id)
    where g.billing_month = $billing_month
),

models as (
    select gpu_model from catalog_nodes
    union
    select gpu_model from catalog_rates where gpu_model <> '*'
    union
    select gpu_model from segments
),

queue_models as (
    select queue as pool, gpu_model
    from segments
    where queue is not null
    group by queue, gpu_model
    qualify row_number() over (partition by queue order by sum(gpu_units) desc, gpu_model) = 1
),

pool_models as (
    select
        p.tenant_id,
        p.pool,
        case
            when p.pool in (select gpu_model from models) then p.pool
            else coalesce(q.gpu_model, '*')
        end as gpu_model
    from reserved_pools as p
    left join queue_models as q using (pool)
),

rate_edges as (
    select gpu_model, valid_from as edge from catalog_rates
    union
    select gpu_model, valid_to from catalog_rates
),

step_periods as (
    -- the rate period of each step: no rate of its model (or '*'), on any cluster, changes
    -- inside it, so each cluster's rate is one price across it (1900: before every change)
    select
        s.tenant_id, s.pool, m.gpu_model, s.step_from, s.unused_units, s.guaranteed_units,
        coalesce(max(e.edge), '1900-01-01'::timestamp) as rate_period
    from reserved_steps as s
    join pool_models as m using (tenant_id, pool)
    left join rate_edges as e
        on (e.gpu_model = m.gpu_model or e.gpu_model = '*') and e.edge <= s.step_from
    group by all
),

totals as (
    -- full_recovery prices per cluster pool below: the rate card's periods do not split time
    select
        s.tenant_id,
        s.pool,
        s.gpu_model,
        case when not f.on_pools then s.rate_period end as rate_period,
        sum(s.unused_units) as unused_units,
        sum(s.guaranteed_units) as guaranteed_units
    from step_periods as s
    cross join is_full_recovery as f
    group by all
),

cluster_weights as (
    -- a model's capacity GPU units per cluster; a model without capacity this month
    -- (rate_card only): its allocated GPU units per cluster
    select cluster, gpu_model, sum(units)::hugeint as weight
    from (
        select cluster, gpu_model, capacity_units as units
        from gpu_capacity
        where billing_month = $billing_month
        union all
        select cluster, gpu_model, gpu_units
        from segments
        where not (select on_pools from is_full_recovery)
            and gpu_model not in (
                select gpu_model from gpu_capacity where billing_month = $billing_month
            )
    )
    group by all
),

split as (
    select
        t.*,
        coalesce(w.cluster, '*') as cluster,
        coalesce(w.weight, 1) as weight,
        sum(coalesce(w.weight, 1)) over (
            partition by t.tenant_id, t.pool, t.gpu_model, t.rate_period
        ) as total_weight
    from totals as t
    left join cluster_weights as w using (gpu_model)
    where w.cluster is not null or not (select on_pools from is_full_recovery)
),

floored as (
    select
        *,
        unused_units * weight // total_weight as unused_floor,
        unused_units * weight % total_weight as unused_remainder,
        guaranteed_units * weight // total_weight as guaranteed_floor,
        guaranteed_units * weight % total_weight as guaranteed_remainder
    from split
),

rounded as (
    select
        *,
        largest_remainder(
            unused_floor, unused_remainder, unused_units,
            row(tenant_id, pool, gpu_model, rate_period), cluster
        ) as cluster_unused_units,
        largest_remainder(
            guaranteed_floor, guaranteed_remainder, guaranteed_units,
            row(tenant_id, pool, gpu_model, rate_period), cluster
        ) as cluster_guaranteed_units
    from floored
),

cluster_rates as (
    -- rate_card: the rate in force for each cluster's part in its rate period (cluster '*':
    -- only the all-clusters rates apply)
    select r.*, c.price_micro as rate_micro, c.price_per_gpu_hour as rate_price
    from rounded as r
    left join catalog_rates as c on rate_applies(c, r.gpu_model, r.cluster, r.rate_period)
    qualify
        row_number() over (
            partition by r.tenant_id, r.pool, r.gpu_model, r.rate_period, r.cluster
            order by rate_precedence(c.gpu_model, c.cluster, c.valid_from, c.priority)
        ) = 1
),

priced as (
    select
        r.tenant_id,
        r.pool,
        r.cluster,
        r.gpu_model,
        coalesce(p.unit_price, r.rate_price)::decimal(18, 6) as unit_price,
        coalesce(p.price_micro, r.rate_micro)::bigint as price_micro,
        r.cluster_unused_units,
        r.cluster_guaranteed_units
    from cluster_rates as r
    left join cost_pools as p
        on p.billing_month = $billing_month and p.cluster = r.cluster
        and p.gpu_model = r.gpu_model
),

final as (
    -- rate periods at the same price of a cluster make one row
    select
        $billing_month::date as billing_month,
        tenant_id,
        pool,
        format('{}/{}', tenant_id, pool) as capacity_reservation_id,
        cluster,
        gpu_model,
        unit_price,
        price_micro,
        sum(cluster_unused_units)::bigint as gpu_units,
        gpu_hours(sum(cluster_unused_units)) as gpu_hours,
        sum(cluster_guaranteed_units)::bigint as guaranteed_units,
        sum(cluster_unused_units * price_micro) as charge_numerator
    from priced
    group by all
)

select * from final
order by tenant_id, pool, cluster, gpu_model, unit_price
