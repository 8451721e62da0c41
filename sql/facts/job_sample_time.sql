-- One row per job × GPU model: the telemetry-derived time of the job in the billing month,
-- in GPU units (1/420 GPU-ms: a sample's covered milliseconds × the job's share of the GPU).
-- Each sample is attributed to the job segment holding its GPU at its timestamp (equi-join on
-- node, GPU and hour, then the exact range check); its covered time is clipped at the job's
-- end in the month (or the node's next outage edge), never at the hour boundary.
-- Idle samples (util < $idle_threshold_pct) in an unbroken run lasting >= $zombie_min_ms are
-- zombie time.
-- Parameters: $billing_month, $sample_files, $idle_threshold_pct, $zombie_min_ms.
with attributed as (
    select
        g.cluster,
        g.job_id,
        g.node,
        g.gpu_index,
        g.gpu_model,
        g.in_outage,
        g.gpu_share,
        s.ts,
        s.util_pct,
        least(s.cover_ms, epoch_ms(g.cover_until) - epoch_ms(s.ts)) * g.gpu_share as cover_units,
        s.util_pct < $idle_threshold_pct as is_idle
    from read_parquet($sample_files, hive_partitioning = true) as s
    join job_gpu_hours as g
        on g.billing_month = $billing_month
        and g.cluster = s.cluster
        and g.node = s.node
        and g.gpu_index = s.gpu_index
        and g.hour = date_trunc('hour', s.ts)
        and s.ts >= g.seg_from
        and s.ts < g.seg_to
),

idle_runs as (
    -- a run of idle samples is broken by any busy sample of the same job's GPU
    select
        *,
        count(*) filter (not is_idle) over (
            partition by cluster, job_id, node, gpu_index order by ts
        ) as run_id
    from attributed
),

classified as (
    select
        *,
        is_idle and sum(cover_units // gpu_share) filter (is_idle) over (
            partition by cluster, job_id, node, gpu_index, run_id
        ) >= $zombie_min_ms as is_zombie
    from idle_runs
),

final as (
    select
        $billing_month::date as billing_month,
        cluster,
        job_id,
        gpu_model,
        sum(cover_units)::bigint as measured_units,
        sum(cover_units * util_pct) as util_weighted_units,
        coalesce(sum(cover_units) filter (not in_outage), 0)::bigint
            as measured_outside_outage_units,
        coalesce(sum(cover_units) filter (not in_outage and is_zombie), 0)::bigint
            as zombie_units,
        coalesce(sum(cover_units) filter (not in_outage and is_idle and not is_zombie), 0)
            ::bigint as idle_units,
        coalesce(sum(cover_units) filter (not in_outage and not is_idle), 0)::bigint
            as productive_units
    from classified
    group by all
)

select * from final
