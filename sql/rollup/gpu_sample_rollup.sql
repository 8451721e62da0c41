-- One row per GPU sample of the UTC day, ready for attribution: duplicates (same cluster, node,
-- GPU, timestamp) folded, and each sample's covered time in milliseconds: the series' step
-- but never past its next sample. The billing month's end is not a limit here: attribution
-- clips at each job's end in the month (job_gpu_hours.cover_until).
-- The step (step_ms), the time one sample stands for, of a series that day:
--   1. the step the catalog declares for the cluster (declared_steps), when there is one;
--   2. else the series' own typical spacing: the lower median of the spacings between its
--      samples that day (up to the next day's first one), when it has at least 10 spacings.
--      The lower median is a spacing that really occurred, never the mean of a short and a
--      long one; with 10 or more spacings, at least half of them (5) would have to be long
--      gaps for the step to be a long gap, and then long gaps are the series' rhythm (10
--      spacings are 10 minutes of a 60 s exporter, 150 s of a 15 s one);
--   3. else, a series with few samples that day (a GPU that came up late, an exporter that
--      dropped out), the cluster's typical spacing that day: the lower median of the steps
--      of its series from rule 2, so that one long gap never becomes a step;
--   4. else (no series of the cluster has 10 spacings that day) 60 s.
-- Allocated time that no sample covers is unmeasured (attribution), never idle.
-- run labels the runs of idle samples (util_pct < $idle_threshold_pct) of a series in the
-- day by their latest busy sample: 0 before the day's first busy sample, then 1 + the
-- milliseconds from midnight to the latest busy sample, so labels grow through the day; NULL
-- for a busy sample (stored so, attribution's pass over the samples reads it as it is: 11 %
-- of that statement's time). Attribution sums run pieces by it and stitches them across
-- midnight. The label (idle_run) comes from ordered_samples.last_busy_ts, except in a
-- series with a busy folded duplicate (which must not break an idle run): there it is found
-- again over the distinct samples. series_key (macro series_key) and hour are attribution's
-- join keys, stored so that it does not compute them for every sample (date_trunc alone is a
-- quarter of that join's time).
-- Reads the temporary tables ordered_samples and day_samples (the series' names),
-- sample_sources and declared_steps (cluster, step_ms). Parameters: $idle_threshold_pct.
with distinct_samples as (
    -- of equal timestamps the last read wins; the others are folded duplicates
    select * from ordered_samples
    where not look_ahead and (next_ts is null or next_ts > ts)
),

relabelled_series as (
    -- series with a busy folded duplicate
    select distinct series_id
    from ordered_samples
    where not look_ahead and next_ts = ts and util_pct >= $idle_threshold_pct
),

latest_busy as (
    select * from distinct_samples
    anti join relabelled_series using (series_id)
    union all by name
    select
        * replace (
            last_value(case when util_pct >= $idle_threshold_pct then ts end ignore nulls)
                over (
                    partition by series_id order by ts rows unbounded preceding
                ) as last_busy_ts
        )
    from distinct_samples
    semi join relabelled_series using (series_id)
),

idle_runs as (
    select
        *,
        coalesce(epoch_ms(last_busy_ts) - epoch_ms(date_trunc('day', ts)) + 1, 0) as idle_run
    from latest_busy
),

own_steps as (
    -- spacings: to the next distinct sample (the last one's to the look-ahead, if any)
    select
        series_id,
        count(next_ts) as spacings,
        percentile_disc(0.5) within group (order by epoch_ms(next_ts) - epoch_ms(ts))
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
    -- one row per series: read twice below, computed once
    select n.*, st.own_step_ms, st.spacings >= 10 as has_own_step
    from series as n
    join own_steps as st using (series_id)
),

cluster_steps as (
    select cluster, percentile_disc(0.5) within group (order by own_step_ms) as cluster_step_ms
    from series_steps
    where has_own_step
    group by all
),

steps as (
    select
        s.*,
        coalesce(
            d.step_ms,
            case when s.has_own_step then s.own_step_ms end,
            c.cluster_step_ms,
            60000
        )::bigint as step_ms
    from series_steps as s
    left join cluster_steps as c using (cluster)
    left join declared_steps as d using (cluster)
),

final as (
    select
        st.cluster,
        st.node,
        st.gpu_index,
        s.ts,
        s.util_pct,
        s.mem_used_mib,
        s.power_w,
        least(
            st.step_ms,
            coalesce(epoch_ms(s.next_ts), epoch_ms(s.ts) + st.step_ms) - epoch_ms(s.ts)
        ) as cover_ms,
        st.step_ms,
        case when s.util_pct < $idle_threshold_pct then s.idle_run end as run,
        $idle_threshold_pct::double as idle_threshold_pct,
        st.series_key,
        date_trunc('hour', s.ts) as hour,
        s.ts::date as day
    from idle_runs as s
    join steps as st using (series_id)
)

select * from final
