-- One row per billing month × cluster × GPU model: the evidence for buying more GPUs, and the
-- verdict it supports. Inputs: capacity_buckets (hours; the earlier months' too, for the
-- trend), queue_stats (its 'gpu_model' rows), availability (its 'gpu_model' rows) and
-- quota_compliance (quotas whose pool is the GPU model; quotas span clusters, so every cluster
-- of a model shows the same idle-quota share).
--   allocated_gpu_hours   job time: productive + idle + zombie + failed_job + failed_infra +
--                         unmeasured
--   allocation_rate_pct   100 × allocated / capacity (NULL without an inventory)
--   productive_share_pct  100 × productive / allocated
--   waste_share_pct       100 × (idle + zombie + failed_job) / allocated: the allocated time
--                         governance can win back. failed_infra (the platform's fault, credited)
--                         and unmeasured (no telemetry: never assumed idle) are not waste;
--                         unmeasured_share_pct shows how much of the evidence is missing
--   idle_quota_share_pct  100 × guaranteed GPU-hours of the quotas flagged idle_quota (used
--                         < 30 % of their guarantee) / all guaranteed GPU-hours of the pool: how
--                         much of what is promised goes to tenants who do not use it
--   wait_p95_s, pending_gpu_hours   from queue_stats; pending_share_pct = 100 × pending /
--                         capacity (demand that waited, relative to what the model can serve)
--   availability_pct      from availability: the GPUs' time in service not inside outages
--   history_months, trend_gpu_hours_per_month   the slope of the least-squares line through
--                         the model's allocated GPU-hours of the last 12 months (this one
--                         included; capacity_buckets), as demand_forecast fits it; NULL below
--                         2 months
-- Verdict, first rule that holds (thresholds are the named constants of `thresholds`):
--   govern first         waste_share_pct >= 25 or idle_quota_share_pct >= 20
--   expansion justified  allocation_rate_pct >= 80 and wait_p95_s >= 4 h (14,400 s) and
--                        waste_share_pct < 15 and unmeasured_share_pct <= 20 (low waste must be
--                        measured, not assumed) and availability_pct >= 97 (a pool short of
--                        GPUs because they are down needs repairs, not purchases) and the
--                        trend is not falling (slope >= 0; unknown below 2 months, which does
--                        not block): governed, available and still short
--   hold                 otherwise
-- verdict_rule states the rule with this row's numbers, e.g.
-- 'waste share 31.0% >= 25% → govern first'.
-- Parameters: $billing_month.
with thresholds as (
    select
        25.0 as govern_waste_pct,
        20.0 as govern_idle_quota_pct,
        expand_allocation_pct() as expand_allocation_pct,
        14400.0 as expand_wait_p95_s,
        15.0 as expand_waste_below_pct,
        20.0 as expand_unmeasured_max_pct,
        97.0 as expand_availability_min_pct
),

bucket_columns as (
    -- a column per bucket, named <bucket>_gpu_hours, in this order
    pivot (from capacity_buckets where billing_month = $billing_month)
    on bucket in (
        'capacity', 'productive', 'idle', 'zombie', 'failed_job', 'failed_infra',
        'unmeasured', 'down', 'unallocated'
    )
    using sum(gpu_hours) as gpu_hours
    group by cluster, gpu_model
),

buckets as (
    -- job time missing from a bucket is none of it; capacity, down and unallocated stay NULL
    -- without an inventory
    select
        cluster,
        gpu_model,
        capacity_gpu_hours,
        coalesce(columns('^(productive|idle|zombie|failed_job|failed_infra|unmeasured)_gpu'), 0),
        down_gpu_hours,
        unallocated_gpu_hours
    from bucket_columns
),

history as (
    -- allocated time per month of the last 12, in exact GPU units (x: months from this one)
    select
        cluster,
        gpu_model,
        datediff('month', $billing_month::date, billing_month) as x,
        sum(gpu_units)::hugeint as y
    from capacity_buckets
    where
        billing_month > $billing_month::date - interval 12 month
        and billing_month <= $billing_month::date
        and bucket in (
            'productive', 'idle', 'zombie', 'failed_job', 'failed_infra', 'unmeasured'
        )
    group by all
),

trends as (
    -- the least-squares slope n·Σxy − Σx·Σy over n·Σx² − (Σx)², from exact sums
    select
        cluster,
        gpu_model,
        count(*) as history_months,
        case
            when count(*) >= 2
                then (count(*) * sum(x * y) - sum(x) * sum(y))::double
                / (count(*) * sum(x * x) - sum(x) * sum(x)) / units_per_gpu_hour()
        end as trend_gpu_hours_per_month
    from history
    group by all
),

available as (
    select cluster, gpu_model, availability_pct
    from availability
    where billing_month = $billing_month and level = 'gpu_model'
),

queues as (
    select cluster, gpu_model, wait_p95_s, pending_gpu_hours
    from queue_stats
    where billing_month = $billing_month and grouping_set = 'gpu_model'
),

quotas as (
    -- the tenants' hours summed as whole GPU units (gpu_units), exact in any order
    select
        pool as gpu_model,
        gpu_hours(sum(gpu_units(guaranteed_gpu_hours))) as guaranteed_gpu_hours,
        gpu_hours(coalesce(sum(gpu_units(guaranteed_gpu_hours)) filter (idle_quota), 0))
            as idle_quota_gpu_hours
    from quota_compliance
    where billing_month = $billing_month
    group by all
),

shares as (
    select
        b.*,
        b.productive_gpu_hours + b.idle_gpu_hours + b.zombie_gpu_hours + b.failed_job_gpu_hours
        + b.failed_infra_gpu_hours + b.unmeasured_gpu_hours as allocated_gpu_hours,
        q.wait_p95_s,
        coalesce(q.pending_gpu_hours, 0) as pending_gpu_hours,
        k.guaranteed_gpu_hours,
        k.idle_quota_gpu_hours,
        a.availability_pct,
        h.history_months,
        h.trend_gpu_hours_per_month
    from buckets as b
    left join queues as q using (cluster, gpu_model)
    left join available as a using (cluster, gpu_model)
    left join trends as h using (cluster, gpu_model)
    left join quotas as k using (gpu_model)
),

rates as (
    select
        *,
        100.0 * allocated_gpu_hours / nullif(capacity_gpu_hours, 0) as allocation_rate_pct,
        100.0 * productive_gpu_hours / nullif(allocated_gpu_hours, 0) as productive_share_pct,
        100.0 * (idle_gpu_hours + zombie_gpu_hours + failed_job_gpu_hours)
        / nullif(allocated_gpu_hours, 0) as waste_share_pct,
        100.0 * unmeasured_gpu_hours / nullif(allocated_gpu_hours, 0) as unmeasured_share_pct,
        100.0 * idle_quota_gpu_hours / nullif(guaranteed_gpu_hours, 0)
            as idle_quota_share_pct,
        100.0 * pending_gpu_hours / nullif(capacity_gpu_hours, 0) as pending_share_pct
    from shares
),

tests as (
    -- each condition of the verdict, and how verdict_rule prints it (a missing figure fails
    -- its condition and prints as unknown)
    select
        r.*,
        coalesce(r.waste_share_pct >= t.govern_waste_pct, false) as high_waste,
        coalesce(r.idle_quota_share_pct >= t.govern_idle_quota_pct, false) as high_idle_quota,
        coalesce(r.allocation_rate_pct >= t.expand_allocation_pct, false) as high_allocation,
        coalesce(r.wait_p95_s >= t.expand_wait_p95_s, false) as long_waits,
        coalesce(r.waste_share_pct < t.expand_waste_below_pct, false) as low_waste,
        coalesce(r.unmeasured_share_pct <= t.expand_unmeasured_max_pct, false) as measured,
        coalesce(r.availability_pct >= t.expand_availability_min_pct, false) as available,
        coalesce(r.trend_gpu_hours_per_month >= 0, true) as not_falling,
        coalesce(format(
            'waste share {:.1f}% {} {:g}%', r.waste_share_pct,
            if(r.waste_share_pct >= t.govern_waste_pct, '>=', '<'), t.govern_waste_pct
        ), 'waste share unknown (no allocated time)') as waste_text,
        coalesce(format(
            'idle quota share {:.1f}% {} {:g}%', r.idle_quota_share_pct,
            if(r.idle_quota_share_pct >= t.govern_idle_quota_pct, '>=', '<'),
            t.govern_idle_quota_pct
        ), 'no guaranteed quota') as idle_quota_text,
        coalesce(format(
            'allocation {:.1f}% {} {:g}%', r.allocation_rate_pct,
            if(r.allocation_rate_pct >= t.expand_allocation_pct, '>=', '<'),
            t.expand_allocation_pct
        ), 'allocation unknown (no inventory)') as allocation_text,
        coalesce(format(
            'p95 wait {:.1f} h {} {:g} h', r.wait_p95_s / 3600,
            if(r.wait_p95_s >= t.expand_wait_p95_s, '>=', '<'), t.expand_wait_p95_s / 3600
        ), 'p95 wait unknown (no job started)') as wait_text,
        coalesce(format(
            'waste share {:.1f}% {} {:g}%', r.waste_share_pct,
            if(r.waste_share_pct < t.expand_waste_below_pct, '<', '>='),
            t.expand_waste_below_pct
        ), 'waste share unknown') as low_waste_text,
        coalesce(format(
            'unmeasured {:.1f}% {} {:g}%', r.unmeasured_share_pct,
            if(r.unmeasured_share_pct <= t.expand_unmeasured_max_pct, '<=', '>'),
            t.expand_unmeasured_max_pct
        ), 'unmeasured unknown') as measured_text,
        coalesce(format(
            'availability {:.1f}% {} {:g}%', r.availability_pct,
            if(r.availability_pct >= t.expand_availability_min_pct, '>=', '<'),
            t.expand_availability_min_pct
        ), 'availability unknown') as available_text,
        coalesce(format(
            'trend {:+.0f} GPU-hours a month over {} months', r.trend_gpu_hours_per_month,
            r.history_months
        ), format('trend unknown ({} month of history)', coalesce(r.history_months, 0)))
            as trend_text
    from rates as r
    cross join thresholds as t
),

final as (
    select
        $billing_month::date as billing_month,
        cluster,
        gpu_model,
        capacity_gpu_hours,
        allocated_gpu_hours,
        productive_gpu_hours,
        idle_gpu_hours,
        zombie_gpu_hours,
        failed_job_gpu_hours,
        failed_infra_gpu_hours,
        unmeasured_gpu_hours,
        down_gpu_hours,
        unallocated_gpu_hours,
        allocation_rate_pct,
        productive_share_pct,
        waste_share_pct,
        unmeasured_share_pct,
        wait_p95_s,
        pending_gpu_hours,
        pending_share_pct,
        guaranteed_gpu_hours,
        idle_quota_gpu_hours,
        idle_quota_share_pct,
        availability_pct,
        history_months,
        trend_gpu_hours_per_month,
        case
            when high_waste or high_idle_quota then 'govern first'
            when high_allocation and long_waits and low_waste and measured and available
                and not_falling
                then 'expansion justified'
            else 'hold'
        end as verdict,
        case
            when high_waste or high_idle_quota
                then concat_ws(
                    '; ',
                    case when high_waste then waste_text end,
                    case when high_idle_quota then idle_quota_text end
                ) || ' → govern first'
            when high_allocation and long_waits and low_waste and measured and available
                and not_falling
                then concat_ws(
                    ', ', allocation_text, wait_text, low_waste_text, measured_text,
                    available_text, trend_text
                ) || ' → expansion justified'
            else concat_ws('; ', waste_text, idle_quota_text) || '; but '
                || concat_ws(
                    ', ',
                    case when not high_allocation then allocation_text end,
                    case when not long_waits then wait_text end,
                    case when not low_waste then low_waste_text end,
                    case when not measured then measured_text end,
                    case when not available then available_text end,
                    case when not not_falling then trend_text end
                ) || ' → hold'
        end as verdict_rule
    from tests
)

select * from final
order by cluster, gpu_model
