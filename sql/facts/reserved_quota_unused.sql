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
-- the queue ran nothing. rate_card: the rate in force at each moment (the steps are cut at
-- rate changes). full_recovery (cost_pools has the month): the derived rate of each cluster's
-- pool.
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

step_rates as (
    -- the rate card in force at each step: the model's own rate before the '*' fallback
    select s.tenant_id, s.pool, m.gpu_model, s.unused_units, s.guaranteed_units,
        r.price_micro, r.price_per_gpu_hour
    from reserved_steps as s
    join pool_models as m using (tenant_id, pool)
    left join catalog_rates as r
        on (r.gpu_model = m.gpu_model or r.gpu_model = '*')
        and s.step_from >= r.valid_from and s.step_from < r.valid_to
    qualify row_number() over (
        partition by s.tenant_id, s.pool, s.step_from
        order by r.gpu_model = '*', r.valid_from desc, r.priority
    ) = 1
),

totals as (
    -- full_recovery prices per cluster below: the rate card does not split the time
    select
        s.tenant_id,
        s.pool,
        s.gpu_model,
        case when not f.on_pools then s.price_micro end as rate_micro,
        case when not f.on_pools then s.price_per_gpu_hour end as rate_price,
        sum(s.unused_units) as unused_units,
        sum(s.guaranteed_units) as guaranteed_units
    from step_rates as s
    cross join is_full_recovery as f
    group by all
),

capacity as (
    select cluster, gpu_model, sum(capacity_units)::hugeint as weight
    from gpu_capacity
    where billing_month = $billing_month
    group by all
),

cluster_weights as (
    select cluster, gpu_model, weight from capacity
    union all
    select s.cluster, s.gpu_model, sum(s.gpu_units)::hugeint
    from segments as s
    where not (select on_pools from is_full_recovery)
        and s.gpu_model not in (select gpu_model from capacity)
    group by all
),

split as (
    select
        t.*,
        coalesce(w.cluster, '*') as cluster,
        coalesce(w.weight, 1) as weight,
        sum(coalesce(w.weight, 1)) over (
            partition by t.tenant_id, t.pool, t.gpu_model, t.rate_micro
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
        unused_floor + case
            when row_number() over (
                partition by tenant_id, pool, gpu_model, rate_micro
                order by unused_remainder desc, cluster
            ) <= unused_units - sum(unused_floor) over (
                partition by tenant_id, pool, gpu_model, rate_micro
            ) then 1 else 0
        end as cluster_unused_units,
        guaranteed_floor + case
            when row_number() over (
                partition by tenant_id, pool, gpu_model, rate_micro
                order by guaranteed_remainder desc, cluster
            ) <= guaranteed_units - sum(guaranteed_floor) over (
                partition by tenant_id, pool, gpu_model, rate_micro
            ) then 1 else 0
        end as cluster_guaranteed_units
    from floored
),

final as (
    select
        $billing_month::date as billing_month,
        r.tenant_id,
        r.pool,
        format('{}/{}', r.tenant_id, r.pool) as capacity_reservation_id,
        r.cluster,
        r.gpu_model,
        coalesce(p.unit_price, r.rate_price)::decimal(18, 6) as unit_price,
        coalesce(p.price_micro, r.rate_micro)::bigint as price_micro,
        r.cluster_unused_units::bigint as gpu_units,
        gpu_hours(r.cluster_unused_units) as gpu_hours,
        r.cluster_guaranteed_units::bigint as guaranteed_units,
        r.cluster_unused_units * coalesce(p.price_micro, r.rate_micro) as charge_numerator
    from rounded as r
    left join cost_pools as p
        on p.billing_month = $billing_month and p.cluster = r.cluster
        and p.gpu_model = r.gpu_model
)

select * from final
order by tenant_id, pool, cluster, gpu_model, unit_price
