-- One row per billing month × GPU series × utilisation metric of the UTC day: the metric the
-- series' samples came from, the series' step that day (step_ms, as on the rollup's samples),
-- its samples (duplicates folded, as the rollup keeps them) and the milliseconds they stand for
-- (cover_ms, the sum of the rollup's). telemetry_coverage sums them per cluster and month.
-- first_ts: its first sample; covered_until: the end of its last sample's covered time (which
-- the next day's first sample may cut short): where its silences between days begin and end
-- (incidents.sql).
-- A small output of its own rather than a column of the rollup's samples: a metric name on
-- every sample would make the largest file bigger and its writing slower, while the metric is
-- known per series and file. A series keeps the samples of its best-ranked metric only
-- (day_samples supersedes the others), so its samples are DCGM_FI_PROF_GR_ENGINE_ACTIVE
-- (util_rank 2) or all of rank 1, which a file carries in one metric: its format's
-- (sample_sources.util_metric: DCGM_FI_DEV_GPU_UTIL of a DCGM export, nvidia-smi's
-- utilization.gpu, a canonical file's util_pct). So one pass over the day's ordered samples,
-- grouped by series and file (a few groups per GPU), gives every metric's share.
-- A day rolled up in chunks adds each chunk's series that have their step (series_steps.sql),
-- so each series once; the rollup writes the rows in order.
-- Reads the temporary tables ordered_samples and series_steps, and sample_sources.
-- Parameters: $day_start.
with per_file as (
    select
        o.billing_month,
        o.series_id,
        o.file_id,
        count(*) as samples,
        sum(sample_cover_ms(o.ts, o.next_ts, s.step_ms)) as cover_ms,
        min(o.ts) as first_ts,
        max(unix_ms(o.ts) + sample_cover_ms(o.ts, o.next_ts, s.step_ms)) as covered_until_ms
    from ordered_samples as o
    join series_steps as s using (series_id)
    where not o.look_ahead and (o.next_ts is null or o.next_ts > o.ts) and s.step_ms is not null
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
            when s.util_rank = 2 then 'DCGM_FI_PROF_GR_ENGINE_ACTIVE' else src.util_metric
        end as util_metric,
        s.step_ms,
        sum(f.samples)::bigint as samples,
        sum(f.cover_ms)::bigint as cover_ms,
        min(f.first_ts) as first_ts,
        epoch_ms(max(f.covered_until_ms)) as covered_until
    from per_file as f
    join series_steps as s using (series_id)
    join sample_sources as src using (file_id)
    group by all
)

select * from final
