-- One row per GPU sample of the UTC day, ready for attribution: duplicates (same cluster, node,
-- GPU, timestamp) folded, and each sample's covered time in milliseconds: the series' step
-- (the median spacing of its samples that day, up to the next day's first one) but never past
-- its next sample. The billing month's end is not a limit here: attribution clips at each
-- job's end in the month (job_gpu_hours.cover_until).
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
-- Reads the temporary tables ordered_samples and day_samples (the series' names) and
-- sample_sources. Parameters: $idle_threshold_pct.
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

steps as (
    select series_id, coalesce(median(epoch_ms(next_ts) - epoch_ms(ts)), 60000)::bigint as step_ms
    from distinct_samples
    group by all
),

series as (
    -- the names of each series of the day
    select *, series_key(cluster, node, gpu_index) as series_key
    from (
        select d.series_id, any_value(src.cluster) as cluster, any_value(d.node) as node,
            any_value(d.gpu_index) as gpu_index
        from day_samples as d
        join sample_sources as src using (file_id)
        where not d.look_ahead and d.series_id is not null
        group by d.series_id
    )
),

final as (
    select
        n.cluster,
        n.node,
        n.gpu_index,
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
        n.series_key,
        date_trunc('hour', s.ts) as hour,
        s.ts::date as day
    from idle_runs as s
    join steps as st using (series_id)
    join series as n using (series_id)
)

select * from final
