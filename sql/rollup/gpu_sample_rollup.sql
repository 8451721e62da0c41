-- One row per GPU sample of the UTC day in cluster $cluster, ready for attribution (the file
-- cluster=<c>/day=<d>/samples_<chunk>_0.parquet: its folders name the cluster and day):
-- duplicates (same cluster, node, GPU, timestamp) folded, and each sample's covered time in
-- milliseconds: the series' step but never past its next sample. The billing month's end is
-- not a limit here: attribution clips at each job's end in the month
-- (job_gpu_hours.cover_until).
-- The step (step_ms), the time one sample stands for, is the series' step that day for the
-- sample's metric (series_steps.sql: a series may carry GR_ENGINE_ACTIVE in some hours and
-- another metric in the others, each sampled at its own rhythm).
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
-- What is the same for every sample of a series is not on the samples: the names (cluster,
-- node, GPU; series_key of them gives the key) and the step are in the day's series file
-- (day_sample_series.sql), the idle threshold on the hours file (gpu_sample_hours.sql). At
-- 10,000 GPUs they made half of this file's writing time (0.40 against 0.21 s a chunk of
-- 3.8 M samples).
-- silent_until: the timestamp of the series' next sample, when it comes the same UTC day and
-- leaves the time after this sample's cover uncovered for at least silence_floor_ms() (a
-- minute); NULL otherwise. incidents.sql finds a node's silences from these few marks and
-- each series' first and last covered time of each day (day_sample_series.sql), instead of
-- reading every sample of the month. Mostly NULL, the column costs little to write.
-- A series whose step waits for a later chunk of the day (series_steps.sql: step_ms NULL) is
-- written by that chunk.
-- Reads the temporary tables ordered_samples and series_steps (each series' names and step).
-- Parameters: $cluster, $idle_threshold_pct, $day_end.
with distinct_samples as not materialized (
    -- of equal timestamps the last read wins; the others are folded duplicates. Read twice
    -- below: DuckDB would materialise it, which took a quarter of this statement's time
    -- (0.27-0.29 against 0.20-0.21 s a chunk of 3.8 M samples at 10,000 GPUs)
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
        coalesce(unix_ms(last_busy_ts) - unix_ms(date_trunc('day', ts)) + 1, 0) as idle_run
    from latest_busy
),

final as (
    select
        st.series_key,
        date_trunc('hour', s.ts) as hour,
        s.ts,
        s.util_pct,
        s.mem_used_mib,
        s.power_w,
        sample_cover_ms(s.ts, s.next_ts, st.step_ms) as cover_ms,
        case when s.util_pct < $idle_threshold_pct then s.idle_run end as run,
        -- uncovered for at least the floor: the time to the next sample less the step (a
        -- sample's cover is its step, or less when the next sample comes sooner)
        case
            when s.next_ts < $day_end::timestamp
                and unix_ms(s.next_ts) - unix_ms(s.ts) - st.step_ms >= silence_floor_ms()
                then s.next_ts
        end as silent_until
    from idle_runs as s
    join series_steps as st using (series_id, util_rank)
    where st.cluster = $cluster and st.step_ms is not null
)

select * from final
