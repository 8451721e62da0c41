-- One row per job × tenant × GPU model × unit price: the job's allocated time in the billing
-- month priced at the rate in force (rate_card mode). Each hour segment takes the tenant its
-- account maps to and the rate valid at its hour's start, or at its billing day's start when
-- that day begins inside the hour (job_gpu_hours cuts segments there), so a reorganisation or
-- a rate change at a midnight of the billing timezone splits the job's time exactly, in a
-- timezone off UTC by part of an hour too (job_gpu_hours.priced_at). The rate: the GPU
-- model's own before the '*' fallback, and of those a rate for the segment's cluster before
-- the all-clusters one (two rates of one model and cluster in force at once are a catalog
-- error). Time no rate prices stops the run before this step (checks/job_time_has_a_rate).
-- A price tier (rates.yaml tiers, catalog_price_tiers) in force then for the job's queue,
-- else for its QoS, multiplies the price: the tiered price in millionths is rounded half up
-- once (price_tier names the tier, NULL at the plain rate).
-- full_recovery mode (cost_pools has the month's pools): the time is priced at the derived
-- rate of its cluster × GPU model pool instead, one rate for the month; time on a GPU model
-- with no pool (not in the inventory: capacity_buckets_sum_to_capacity fails) keeps the rate
-- card, and cluster_cost_recovered fails on the cluster it inflates.
-- charge_numerator = gpu_units (1/420 GPU-ms) × price in millionths; dividing it by
-- 15,120,000,000,000 (1,512,000,000 units per GPU-hour × 10,000 millionths per cent) gives cents.
-- The credited part is the failed_infra time (all of a NODE_FAIL job, else its time inside
-- outage windows): the tenant is charged for it and credited back on a line of its own.
-- Parameters: $billing_month.
with segments as (
    select
        g.cluster, g.job_id, j.account, j.queue, j.qos, g.gpu_model, g.priced_at,
        g.gpu_units,
        -- (a product, not a CASE: DuckDB 2.0.1 derives wrong statistics for the CASE here and
        -- its compressed materialization then overflows)
        g.gpu_units * (g.in_outage or j.state = 'NODE_FAIL')::int as credit_units
    from job_gpu_hours as g
    join stg_jobs as j using (billing_month, cluster, job_id)
    where g.billing_month = $billing_month
),

account_hours as (
    -- the tenant of each account when priced: the first matching mapping valid then
    select s.account, s.priced_at, coalesce(m.tenant_id, 'unmapped') as tenant_id
    from (select distinct account, priced_at from segments) as s
    left join catalog_account_tenants as m on mapping_applies(m, s.account, s.priced_at)
    qualify
        row_number() over (
            partition by s.account, s.priced_at order by m.priority nulls last
        ) = 1
),

model_hours as (
    -- the rate in force for each cluster and GPU model when priced
    select s.cluster, s.gpu_model, s.priced_at, r.price_per_gpu_hour, r.price_micro
    from (select distinct cluster, gpu_model, priced_at from segments) as s
    left join catalog_rates as r on rate_applies(r, s.gpu_model, s.cluster, s.priced_at)
    qualify
        row_number() over (
            partition by s.cluster, s.gpu_model, s.priced_at
            order by rate_precedence(r.gpu_model, r.cluster, r.valid_from, r.priority)
        ) = 1
),

pool_rates as (
    -- full_recovery: the derived rate of each cluster × GPU model pool (none in rate_card)
    select s.cluster, s.gpu_model, p.unit_price, p.price_micro
    from (select distinct cluster, gpu_model from segments) as s
    left join cost_pools as p
        on p.billing_month = $billing_month and p.cluster = s.cluster
        and p.gpu_model = s.gpu_model and p.price_micro is not null
),

tier_hours as (
    -- the tier of each queue and QoS when priced: the queue's before the QoS's
    select
        s.queue, s.qos, s.priced_at, t.multiplier_e4,
        -- the multiplier as written (a double prints 0.5, its DECIMAL 0.5000)
        case
            when t.queue is not null then format('queue {} × {}', t.queue, t.multiplier::double)
            else format('QoS {} × {}', t.qos, t.multiplier::double)
        end as price_tier
    from (select distinct queue, qos, priced_at from segments) as s
    join catalog_price_tiers as t
        on (t.queue = s.queue or t.qos = s.qos)
        and s.priced_at >= t.valid_from and s.priced_at < t.valid_to
    qualify
        row_number() over (partition by s.queue, s.qos, s.priced_at order by t.queue is null) = 1
),

rated as (
    -- the derived rate of the segment's pool in full_recovery, else the rate card's
    select
        s.cluster, s.job_id, a.tenant_id, s.gpu_model, s.gpu_units, s.credit_units,
        coalesce(p.unit_price, m.price_per_gpu_hour) as rate_price,
        coalesce(p.price_micro, m.price_micro) as rate_micro,
        t.multiplier_e4,
        t.price_tier
    from segments as s
    join account_hours as a using (account, priced_at)
    join model_hours as m using (cluster, gpu_model, priced_at)
    join pool_rates as p using (cluster, gpu_model)
    left join tier_hours as t
        on t.queue is not distinct from s.queue and t.qos is not distinct from s.qos
        and t.priced_at = s.priced_at
),

priced as (
    select
        * exclude (rate_price, rate_micro, multiplier_e4),
        case
            when multiplier_e4 is null then rate_micro
            else (rate_micro::hugeint * multiplier_e4 + 5000) // 10000
        end::bigint as price_micro
    from rated
),

final as (
    select
        $billing_month::date as billing_month,
        cluster,
        job_id,
        tenant_id,
        gpu_model,
        -- exact: a DECIMAL product, not a division (which DuckDB makes a DOUBLE)
        (price_micro::decimal(18, 0) * 0.000001)::decimal(18, 6) as unit_price,
        price_tier,
        sum(gpu_units)::bigint as gpu_units,
        sum(gpu_units::hugeint * price_micro) as charge_numerator,
        sum(credit_units)::bigint as credit_gpu_units,
        sum(credit_units::hugeint * price_micro) as credit_numerator
    from priced
    group by all
)

select * from final
order by cluster, job_id, tenant_id, gpu_model, unit_price, price_tier
