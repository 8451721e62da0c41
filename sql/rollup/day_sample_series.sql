-- One row per billing month × GPU series × utilisation metric of the UTC day: the metric the
-- samples came from, the series' step that day for it (step_ms, as on the rollup's samples),
-- its samples (duplicates folded, as the rollup keeps them) and the milliseconds they stand for
-- (cover_ms, the sum of the rollup's). telemetry_coverage sums them per cluster and month.
-- first_ts: its first sample; covered_until: the end of its last sample's covered time (which
-- the next day's first sample, or the series' next sample of another metric, may cut short):
-- where its silences between days begin and end (incidents.sql, which takes a series' first
-- and last of its metrics' rows of the day).
-- A small output of its own rather than a column of the rollup's samples: a metric name on
-- every sample would make the largest file bigger and its writing slower, while the metric is
-- known per series, file and rank. A series' samples are DCGM_FI_PROF_GR_ENGINE_ACTIVE
-- (util_rank 2) in the hours that have it and of rank 1 in the others (day_samples supersedes
-- the rank-1 rows of the hours of rank 2), so a series may have a row of each. Its rank-1
-- samples of a file carry the file's metric: its format's (sample_sources.util_metric:
-- DCGM_FI_DEV_GPU_UTIL of a DCGM export, nvidia-smi's utilization.gpu, a canonical file's
-- util_pct). So one pass over the day's ordered samples, grouped by series, rank and file (a
-- few groups per GPU), gives every metric's share.
-- A day rolled up in chunks adds each chunk's series that have their step (series_steps.sql),
-- so each series once; the rollup writes the rows in order.
-- Reads the temporary tables ordered_samples and series_steps, and sample_sources.
-- Parameters: $day_start.
with steps as (
    -- each series' steps of its metrics side by side (most series have one), so that its
    -- samples join them by series_id alone: by (series_id, util_rank) the statement took
    -- 0.032 s, so 0.028 s, on the bench day of benchmarks/rollup_day.py (0.025 s when a
    -- series had one metric; 40 interleaved runs)
    select
        series_id,
        any_value(step_ms) filter (util_rank = 1) as other_step_ms,
        any_value(step_ms) filter (util_rank = 2) as engine_step_ms
    from series_steps
    where step_ms is not null
    group by series_id
),

samples as (
    select o.*, if(o.util_rank = 2, s.engine_step_ms, s.other_step_ms) as step_ms
    from ordered_samples as o
    join steps as s using (series_id)
    where not o.look_ahead and (o.next_ts is null or o.next_ts > o.ts)
),

per_file as (
    select
        billing_month,
        series_id,
        util_rank,
        file_id,
        count(*) as samples,
        sum(sample_cover_ms(ts, next_ts, step_ms)) as cover_ms,
        min(ts) as first_ts,
        max(unix_ms(ts) + sample_cover_ms(ts, next_ts, step_ms)) as covered_until_ms
    from samples
    group by all
),

final as (
    select
        f.billing_month,
        $day_start::date as day,
        s.cluster,
        s.node,
        s.gpu_index,
        case
            when f.util_rank = 2 then 'DCGM_FI_PROF_GR_ENGINE_ACTIVE' else src.util_metric
        end as util_metric,
        s.step_ms,
        sum(f.samples)::bigint as samples,
        sum(f.cover_ms)::bigint as cover_ms,
        min(f.first_ts) as first_ts,
        epoch_ms(max(f.covered_until_ms)) as covered_until
    from per_file as f
    join series_steps as s using (series_id, util_rank)
    join sample_sources as src using (file_id)
    group by all
)

select * from final
