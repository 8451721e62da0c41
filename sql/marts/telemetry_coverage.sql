-- One row per billing month × cluster × utilisation metric: which raw metric the cluster's GPU
-- telemetry came from, how often it was sampled, and how much of the cluster's allocated GPU
-- time telemetry measured. A cluster mixing metrics (GPUs exported by DCGM and others by
-- nvidia-smi, DCGM GPUs without GR_ENGINE_ACTIVE) has a row for each, with its share.
--   util_metric        DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_UTIL, nvidia-smi
--                      utilization.gpu or canonical util_pct (what the rollup names each
--                      series' samples by, sql/rollup/day_sample_series.sql); NULL on the one
--                      row of a cluster with allocated GPU time and no sample in the month
--   series             GPUs (node × GPU index) with samples of the metric in the month (a GPU
--                      with GR_ENGINE_ACTIVE in some hours only counts under both metrics)
--   samples            its samples, duplicates folded (GPU_UTIL samples of a UTC hour in which
--                      the GPU has GR_ENGINE_ACTIVE are superseded: not counted)
--   sampled_gpu_hours  the GPU time its samples stand for (each its series' step, never past
--                      the next sample), allocated or not
--   sampled_share_pct  100 × the metric's sampled time / the cluster's: its share of the
--                      cluster's telemetry, in time (so a 15 s and a 60 s metric weigh alike)
--   median_step_s, min_step_s, max_step_s
--                      the sampling interval observed: the lower median (a step that occurred),
--                      least and most of the steps of the metric's series, one per series and
--                      UTC day (the rollup's step_ms for the metric: the time one sample
--                      stands for)
-- The cluster's figures, the same on each of its rows (take them once per cluster; never sum
-- them over its metrics): telemetry cannot be attributed per metric after the rollup.
--   allocated_gpu_hours, measured_gpu_hours
--                      job_time_buckets summed over the cluster's jobs, as job_usage and
--                      charge_line_coverage count them (measured: allocated time covered by
--                      attributed samples)
--   measured_share_pct 100 × measured / allocated GPU time (NULL without allocated time): the
--                      data_quality row telemetry_coverage, as a percentage
-- Parameters: $billing_month.
with metrics as (
    select
        cluster,
        util_metric,
        count(distinct row(node, gpu_index)) as series,
        sum(samples)::bigint as samples,
        sum(cover_ms)::bigint as cover_ms,
        percentile_disc(0.5) within group (order by step_ms) as median_step_ms,
        min(step_ms) as min_step_ms,
        max(step_ms) as max_step_ms
    from sample_series
    where billing_month = $billing_month
    group by all
),

measured as (
    select
        cluster,
        sum(allocated_units)::hugeint as allocated_units,
        sum(measured_units)::hugeint as measured_units
    from job_time_buckets
    where billing_month = $billing_month
    group by all
),

clusters as (
    select cluster from metrics
    union
    select cluster from measured
),

final as (
    select
        $billing_month::date as billing_month,
        c.cluster,
        m.util_metric,
        coalesce(m.series, 0) as series,
        coalesce(m.samples, 0) as samples,
        coalesce(m.cover_ms, 0) / ms_per_hour() as sampled_gpu_hours,
        100.0 * m.cover_ms / nullif(sum(m.cover_ms) over (partition by c.cluster), 0)
            as sampled_share_pct,
        m.median_step_ms / ms_per_second() as median_step_s,
        m.min_step_ms / ms_per_second() as min_step_s,
        m.max_step_ms / ms_per_second() as max_step_s,
        gpu_hours(coalesce(a.allocated_units, 0)) as allocated_gpu_hours,
        gpu_hours(coalesce(a.measured_units, 0)) as measured_gpu_hours,
        100.0 * a.measured_units / nullif(a.allocated_units, 0) as measured_share_pct,
        m.cover_ms
    from clusters as c
    left join metrics as m using (cluster)
    left join measured as a using (cluster)
)

select * exclude (cover_ms) from final
order by cluster, cover_ms desc nulls last, util_metric
