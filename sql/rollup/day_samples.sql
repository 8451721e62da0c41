-- One row per telemetry row of the UTC day [$day_start, $day_end), typed, with the reason it is
-- rejected (NULL when valid) and the billing month it counts in; plus the rows without a
-- plausible timestamp of the files in $owned_files (a file's unreadable rows belong to the day
-- of its first plausible sample, so they count once), rejected, their timestamp NULL.
-- Plausible: within the file's window in sample_file_spans (sample_file_spans.sql: from 1970
-- to 2099, and within 365 days of the file's median sample day).
-- $files are canonical samples Parquet: exports read in place and conversions of other formats,
-- each named in sample_sources with its landing file, cluster and file_id (source_line points
-- into the original file when converted).
-- Rows name their file by file_id and their series (cluster, node, GPU) by series_id, the
-- day's number for it: the day's sorts and joins on two integers take half the time they
-- took on the names (the rollup joins the names back once per series).
-- util_rank: which utilisation metric a row carries (macro util_rank: 2 DCGM GR_ENGINE_ACTIVE,
-- 1 any other, 0 none: a memory- or power-only series). A rank-1 row is superseded (DESIGN:
-- GR_ENGINE_ACTIVE is preferred), counted as a folded duplicate, where its GPU has a valid
-- rank-2 row in the same UTC hour; in the day's other hours its rank-1 rows are its samples.
-- By the hour, not the day: DCGM's profiling metrics go blank for hours while a user profiles
-- the GPU (Nsight holds the counters) or until profiling is turned on, while GPU_UTIL and
-- nvidia-smi go on; a day's rule dropped those hours' samples, leaving them unmeasured. So a
-- series may carry both metrics in a day, each in its own hours.
-- look_ahead rows (one per series of the day) carry only the timestamp of the series'
-- successor: the first sample of the next UTC day that the next day keeps, so that covered
-- time reaches past midnight exactly as if the days were one. That is the first row, of the
-- best metric in it, of the first hour of the next day in which the series has valid
-- utilisation rows; for most series, the next day's first hour. It is looked for there
-- first: reading the whole next day for it was a fifth of this statement's time at 10,000
-- GPUs (0.68-0.81 against 0.58-0.62 s a chunk of 3.8 M samples, six runs each).
-- billing_month: $billing_month, or $next_billing_month from $next_billing_month_at on (a
-- billing timezone other than UTC starts a month inside a UTC day).
-- A chunk of the day: the rows whose node, as written, is in [$node_from, $node_until) (NULL:
-- unbounded; the first chunk also takes the rows without a node), so that the Parquet
-- statistics of files sorted by node skip the other chunks' row groups; every series is whole
-- in one chunk (day_node_rows.sql). Its series are numbered from $series_before + 1. carried:
-- false; the rollup adds the rows of an earlier chunk's series that wait for the day's
-- cluster step (series_steps.sql) as carried rows.
-- A series whose GPU index is not a GPU of its node (the index not below the node's GPU count
-- in the inventory, inventory_gpus: nodes.csv) is rejected whole, every row of it that no
-- other check rejects; a node of no inventory takes any index (as stg_allocation_records.sql
-- does). Judged per series of the day, not per row: the series are a few thousand, the rows
-- millions, and the rows meet their series in `final` anyway; what is left per row (the
-- series' reason joined and coalesced) took this statement 0.320 -> 0.334 CPU s on the bench
-- day of benchmarks/rollup_day.py (medians of 40 interleaved runs), under 1 % of the day.
-- Reads sample_sources, sample_file_spans and inventory_gpus (cluster, node, gpus).
-- Parameters: $files, $owned_files, $day_start, $day_end, $billing_month, $next_billing_month,
-- $next_billing_month_at, $node_from, $node_until, $series_before.
with typed as not materialized (
    select
        src.cluster,
        src.file_id,
        s.filename as path,
        coalesce(s.source_line, s.file_row_number + 1) as line,
        try_cast(s.ts as timestamp) as ts,
        nullif(trim(s.node::varchar), '') as node,
        try_cast(s.gpu_index as integer) as gpu_index,
        -- a GPU index that is no number, as written (for the reject's raw)
        s.gpu_index_text,
        try_cast(s.util_pct as double) as util_pct,
        try_cast(s.mem_used_mib as double) as mem_used_mib,
        try_cast(s.power_w as double) as power_w,
        util_rank(s.util_metric) as util_rank,
        s.parse_error as source_error,
        src.median_day,
        src.ts_from,
        src.ts_until
    from read_parquet($files, filename = true, file_row_number = true, union_by_name = true) as s
    join (select * from sample_sources left join sample_file_spans using (path)) as src
        on src.path = s.filename
    where
        ($node_from is null or s.node >= $node_from)
        and (
            $node_until is null or s.node < $node_until
            or ($node_from is null and s.node is null)
        )
),

checked as not materialized (
    select
        * exclude (source_error, median_day, ts_from, ts_until),
        ts >= ts_from and ts < ts_until as in_window,
        case
            when source_error is not null then source_error
            when ts is null then 'field ts: missing or not a timestamp'
            when ts < timestamp '1970-01-01' then format('field ts: {} is before 1970', ts)
            when ts >= timestamp '2100-01-01' then format('field ts: {} is in 2100 or later', ts)
            when ts < ts_from or ts >= ts_until
                then format(
                    'field ts: {} is more than 365 days from {}, the median day of the file''s '
                    || 'samples (a clock or unit error?)',
                    ts,
                    median_day
                )
            when node is null then 'field node: missing'
            when gpu_index is null or gpu_index < 0 then 'field gpu_index: not a GPU index'
            when util_rank > 0 and util_pct is null then 'field util_pct: missing'
            when util_pct < 0 or util_pct > 100
                then format('field util_pct: {} is outside 0-100', util_pct)
            -- a negative reading (an exporter's error value) would take from a job's memory or
            -- energy sums
            when mem_used_mib < 0 then format('field mem_used_mib: {} is negative', mem_used_mib)
            when power_w < 0 then format('field power_w: {} is negative', power_w)
        end as reject_reason
    from typed
),

day_rows as (
    select * exclude (in_window) from checked
    where ts >= $day_start::timestamp and ts < $day_end::timestamp and in_window
    union all
    select * exclude (in_window) replace (null::timestamp as ts) from checked
    where in_window is not true and list_contains($owned_files::varchar[], path)
),

series as (
    -- every series with valid rows in the day, judged against the inventory (index_reason:
    -- why its rows are rejected) and, when it passes, numbered; engine_hours: the hours of
    -- the day in which it has a valid GR_ENGINE_ACTIVE row, bit h set for the hour from h:00
    -- (0: none). Found in the pass that numbers the series: a join of the day's rows to the
    -- (series, hour)s of GR_ENGINE_ACTIVE took 6 % more of this statement's time on the bench
    -- day of benchmarks/rollup_day.py (0.223 against 0.211 s, 30 interleaved runs), where no
    -- series has it
    select
        if(
            index_reason is null,
            row_number() over (
                partition by index_reason is null order by cluster, node, gpu_index
            ) + $series_before,
            null
        )::integer as series_id,
        *
    from (
        select
            d.*,
            case
                when d.gpu_index >= n.gpus
                    then format(
                        'field gpu_index: {} is not a GPU of node {}, which holds {} GPUs '
                        || '(nodes.csv)',
                        d.gpu_index, d.node, n.gpus
                    )
            end as index_reason
        from (
            select
                cluster,
                node,
                gpu_index,
                coalesce(bit_or(1 << hour(ts)) filter (util_rank = 2), 0) as engine_hours
            from day_rows
            where reject_reason is null
            group by all
        ) as d
        left join inventory_gpus as n using (cluster, node)
    )
),

numbered_series as (
    select * from series where series_id is not null
),

next_day_valid as not materialized (
    select cluster, node, gpu_index, util_rank, ts
    from checked
    where ts >= $day_end::timestamp and ts < $day_end::timestamp + interval 1 day
        and reject_reason is null and util_rank > 0
),

early_firsts as (
    -- per series with valid rows in the next day's first hour, its successor: the hour's first
    -- row of the best metric it has there (the hour's rows of a lower one are superseded)
    select cluster, node, gpu_index, arg_min(ts, (-util_rank, ts)) as ts
    from next_day_valid
    where ts < $day_end::timestamp + interval 1 hour
    group by all
),

next_day_firsts as (
    -- per series, its successor. Found in the next day's first hour for most series: the whole
    -- day is read only for the day's series without a row there (none, mostly: DuckDB then
    -- skips that read), whose successor is the first row of the best metric of their first
    -- hour with rows. Two reads, not one filtered by "first hour or not found there": only a
    -- plain time range reaches the Parquet scan.
    select * from early_firsts
    union all
    select cluster, node, gpu_index, arg_min(ts, (hour(ts), -util_rank, ts)) as ts
    from next_day_valid
    semi join (
        select cluster, node, gpu_index from numbered_series
        anti join early_firsts using (cluster, node, gpu_index)
    ) using (cluster, node, gpu_index)
    group by all
),

final as (
    select
        s.series_id,
        d.* exclude (path, cluster) replace (
            coalesce(d.reject_reason, s.index_reason) as reject_reason
        ),
        -- a valid row of rank 1 in an hour of its series' GR_ENGINE_ACTIVE rows (a valid row
        -- has a timestamp in the day, and a numbered series)
        d.reject_reason is null and s.series_id is not null and d.util_rank = 1
        and ((s.engine_hours >> hour(d.ts)) & 1) = 1 as superseded,
        case
            when d.ts >= $next_billing_month_at::timestamp then $next_billing_month::date
            else $billing_month::date
        end as billing_month,
        false as look_ahead,
        false as carried
    from day_rows as d
    left join series as s using (cluster, node, gpu_index)
    union all by name
    select
        s.series_id, ts, 1 as util_rank, false as superseded, true as look_ahead,
        false as carried
    from next_day_firsts
    join numbered_series as s using (cluster, node, gpu_index)
)

select * from final
