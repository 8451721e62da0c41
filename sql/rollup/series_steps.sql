-- One row per GPU series (cluster, node, GPU) with utilisation samples in the UTC day and
-- utilisation metric they carry (util_rank of day_samples: 2 DCGM GR_ENGINE_ACTIVE, 1 any
-- other; a series carries both in a day when GR_ENGINE_ACTIVE covers some of its hours only,
-- the other metric's rows of those hours being superseded): its names, series_key and step.
-- A temporary table of the day's rollup, read by the samples (gpu_sample_rollup.sql) and by
-- the series' metrics (day_sample_series.sql): computed once.
-- The step (step_ms), the time one sample stands for, of a series' metric that day: each
-- metric its own, as two exporters (DCGM every 15 s, nvidia-smi every minute) each keep their
-- rhythm; one step of both would be the denser one's wherever it has the more spacings, and
-- the other metric's samples would stand for a quarter of their time. It is:
--   1. the step the catalog declares for the cluster (declared_steps), when there is one;
--   2. else the metric's own typical spacing: the lower median of the spacings from each of
--      its samples that day to the series' next one (the day's last to the next day's first),
--      when it has at least 10 spacings. The lower median is a spacing that really occurred,
--      never the mean of a short and a long one; with 10 or more spacings, at least half of
--      them (5) would have to be long gaps for the step to be a long gap, and then long gaps
--      are the series' rhythm (10 spacings are 10 minutes of a 60 s exporter, 150 s of a 15 s
--      one);
--   3. else, a metric with few samples that day (a GPU that came up late, an exporter that
--      dropped out, GR_ENGINE_ACTIVE for a few minutes), the cluster's typical spacing that
--      day: the lower median of the steps of its series' metrics from rule 2, so that one long
--      gap never becomes a step;
--   4. else (no series of the cluster has 10 spacings of a metric that day) 60 s.
-- Of a day rolled up in chunks (day_samples.sql), rules 3 and 4 need the steps of every chunk's
-- series: the own steps of the earlier chunks' series are in prior_own_steps (cluster,
-- own_step_ms), and a series that needs rule 3 or 4 for a metric gets its steps in the last
-- chunk ($last_chunk); before it, its step_ms is NULL (on each of its metrics' rows: a series
-- waits whole) and its rows are carried into the next chunk.
-- own_step_ms and has_own_step: the metric's own typical spacing, and whether it has 10.
-- Reads the temporary tables ordered_samples, day_samples and prior_own_steps, sample_sources
-- and declared_steps (cluster, step_ms). Parameters: $last_chunk.
with distinct_samples as (
    -- of equal timestamps the last read wins; the others are folded duplicates
    select * from ordered_samples
    where not look_ahead and (next_ts is null or next_ts > ts)
),

own_steps as (
    -- spacings: from each sample to the series' next distinct sample (the last one's to the
    -- look-ahead, if any), per metric of the sample
    select
        series_id,
        util_rank,
        count(next_ts) as spacings,
        percentile_disc(0.5) within group (order by unix_ms(next_ts) - unix_ms(ts))
            as own_step_ms
    from distinct_samples
    group by all
),

series as (
    -- the names of each series of the day
    select *, series_key(cluster, node, gpu_index) as series_key
    from (
        select
            d.series_id, any_value(src.cluster) as cluster, any_value(d.node) as node,
            any_value(d.gpu_index) as gpu_index
        from day_samples as d
        join sample_sources as src using (file_id)
        where not d.look_ahead and d.series_id is not null
        group by d.series_id
    )
),

series_steps as materialized (
    -- one row per series and metric: read twice below, computed once
    select n.*, st.util_rank, st.own_step_ms, st.spacings >= 10 as has_own_step
    from series as n
    join own_steps as st using (series_id)
),

cluster_steps as (
    select cluster, percentile_disc(0.5) within group (order by own_step_ms) as cluster_step_ms
    from (
        select cluster, own_step_ms from series_steps where has_own_step
        union all
        select cluster, own_step_ms from prior_own_steps
    )
    group by all
),

steps as (
    select
        s.*,
        coalesce(
            d.step_ms,
            case when s.has_own_step then s.own_step_ms end,
            case when $last_chunk then coalesce(c.cluster_step_ms, 60000) end
        )::bigint as step_ms
    from series_steps as s
    left join cluster_steps as c using (cluster)
    left join declared_steps as d using (cluster)
),

final as (
    select
        series_id,
        cluster,
        node,
        gpu_index,
        series_key,
        util_rank,
        -- NULL on every metric of a series while one of them waits
        case when bool_and(step_ms is not null) over (partition by series_id) then step_ms end
            as step_ms,
        own_step_ms,
        has_own_step
    from steps
)

select * from final
