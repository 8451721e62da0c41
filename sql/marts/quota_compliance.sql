-- One row per billing month × tenant × pool: how the tenant's concurrent GPUs on the pool
-- compared with its quota. A pool is a GPU model or a queue (a job's GPU time counts towards
-- the pools named after its GPU model and its queue); every quota in force during the month
-- has a row, used or not, and so has every tenant × GPU model used without a quota
-- (has_quota false: guaranteed 0, no limit, all use borrowed).
-- Concurrency is the exact step function of the tenant's job_gpu_hours segments in
-- GPU-equivalents (quota_steps: shares are 1/420ths of a GPU, so a 1g MIG slice counts 1/7),
-- cut at quota changes and at day boundaries; quotas are effective-dated, so each step takes
-- the guarantee and limit in force then (of overlapping versions, the one valid from later).
-- Sums run in integer GPU units (share × ms) and become hours at the end (1,512,000,000 units =
-- 1 GPU-hour).
--   used_gpu_hours             integral of concurrent GPUs over the month
--   mean_gpus / peak_gpus      time-weighted mean over the whole month / maximum (peak_at:
--                              first time the peak was reached)
--   guaranteed_gpu_hours       integral of the guarantee in force (guaranteed × hours in month
--                              when one quota covers the whole month)
--   borrowed_gpu_hours         integral of max(0, concurrent − guaranteed)
--   unused_guaranteed_gpu_hours integral of max(0, guaranteed − concurrent)
--   minutes_above_limit        time with concurrent > limit (no limit: never)
--   quota_use_pct              100 × used / guaranteed_gpu_hours (NULL without a guarantee)
--   guaranteed_gpus, limit_gpus, reserved: the latest quota version in force in the month.
-- Flags:
--   breach             minutes_above_limit > 0
--   idle_quota         quota_use_pct < 30 (a guarantee held but mostly unused)
--   chronic_borrowing  borrowing_days > 50 % of the month's days, where a borrowing day is a
--                      day whose mean concurrent GPUs exceed the guarantee in force (used
--                      GPU-hours of the day > guaranteed GPU-hours of the day): bursts above
--                      the guarantee that the tenant's quieter hours offset do not count
-- Days are quota_steps' 24-hour periods from the month's start (calendar days of the billing
-- timezone unless a DST change falls inside the month).
-- Parameters: $billing_month.
with thresholds as (
    select
        30.0 as idle_quota_below_pct,
        0.5 as chronic_borrowing_day_share
),

month_steps as (
    -- the tenant's concurrent GPUs on the pool and the quota in force, step by step
    select * from quota_steps where billing_month = $billing_month
),

day_use as (
    select
        tenant_id,
        pool,
        day_index,
        sum(share * step_ms) as used_units,
        sum(guaranteed_share * step_ms) as guaranteed_units
    from month_steps
    group by all
),

latest_quota as (
    -- the version valid from latest is in force from its start, so a step has it
    select tenant_id, pool, guaranteed_gpus, limit_gpus, reserved
    from month_steps
    where in_quota
    qualify
        row_number() over (partition by tenant_id, pool order by quota_from desc, step_from) = 1
),

per_pool as (
    select
        tenant_id,
        pool,
        bool_or(in_quota) as has_quota,
        sum(share * step_ms) as used_units,
        sum(step_ms) as month_ms,
        max(share) as peak_share,
        sum(guaranteed_share * step_ms) as guaranteed_units,
        sum(greatest(share - guaranteed_share, 0) * step_ms) as borrowed_units,
        sum(greatest(guaranteed_share - share, 0) * step_ms) as unused_guaranteed_units,
        coalesce(sum(step_ms) filter (share > limit_share), 0) as above_limit_ms
    from month_steps
    group by all
),

peaks as (
    select s.tenant_id, s.pool, min(s.step_from) as peak_at
    from month_steps as s
    join per_pool as p using (tenant_id, pool)
    where s.share = p.peak_share and p.peak_share > 0
    group by all
),

day_counts as (
    select
        b.tenant_id,
        b.pool,
        count(*) as days,
        count(*) filter (b.used_units > b.guaranteed_units) as borrowing_days
    from day_use as b
    group by all
),

final as (
    select
        $billing_month::date as billing_month,
        p.tenant_id,
        p.pool,
        p.has_quota,
        coalesce(q.guaranteed_gpus, 0) as guaranteed_gpus,
        q.limit_gpus,
        coalesce(q.reserved, false) as reserved,
        p.month_ms / ms_per_hour() as hours,
        gpu_hours(p.used_units) as used_gpu_hours,
        p.used_units / (p.month_ms * whole_gpu()) as mean_gpus,
        p.peak_share / whole_gpu() as peak_gpus,
        k.peak_at,
        gpu_hours(p.guaranteed_units) as guaranteed_gpu_hours,
        gpu_hours(p.borrowed_units) as borrowed_gpu_hours,
        gpu_hours(p.unused_guaranteed_units) as unused_guaranteed_gpu_hours,
        p.above_limit_ms / ms_per_minute() as minutes_above_limit,
        100.0 * p.used_units / nullif(p.guaranteed_units, 0) as quota_use_pct,
        d.borrowing_days,
        d.days,
        p.above_limit_ms > 0 as breach,
        coalesce(
            100.0 * p.used_units / nullif(p.guaranteed_units, 0) < t.idle_quota_below_pct, false
        ) as idle_quota,
        d.borrowing_days > t.chronic_borrowing_day_share * d.days as chronic_borrowing
    from per_pool as p
    join day_counts as d using (tenant_id, pool)
    cross join thresholds as t
    left join latest_quota as q using (tenant_id, pool)
    left join peaks as k using (tenant_id, pool)
)

select * from final
order by tenant_id, pool
