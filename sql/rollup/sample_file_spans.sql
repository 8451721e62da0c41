-- One row per canonical samples file of $files that has rows: the window of its plausible
-- timestamps [ts_from, ts_until), its first and last timestamp in it (NULL when it has none),
-- its rows with one (plausible_rows) and without one (unreadable_rows: no readable timestamp,
-- or one outside the window), and its plausible rows per UTC day (day_rows: the rows each day's
-- rollup reads, against which a month finds the days rolled up before the file landed or
-- changed).
-- A timestamp is plausible from 1970 to before 2100 and within 365 days of the file's median
-- sample day (the first UTC day by which half its rows in that range are seen): a point
-- stamped in milliseconds, before 1970 or years ahead is a clock or unit error, rejected by the
-- day that owns the file's unreadable rows, never silently outside every rolled-up day.
-- A day's rollup reads only the files whose span reaches into the day or the next one (its
-- look-ahead), and the files that hold unreadable rows the day owns.
-- One read of the timestamp column, grouped by file and UTC day (few groups).
-- Parameters: $files.
with days as (
    select
        filename as path, ts::date as day, count(*) as n_rows, min(ts) as first_ts,
        max(ts) as last_ts
    from (
        select filename, try_cast(ts as timestamp) as ts
        from read_parquet($files, filename = true, union_by_name = true)
    )
    group by all
),

medians as (
    select path, min(day) filter (running * 2 >= total) as median_day
    from (
        select
            path,
            day,
            sum(n_rows) over (partition by path order by day) as running,
            sum(n_rows) over (partition by path) as total
        from days
        where day >= date '1970-01-01' and day < date '2100-01-01'
    )
    group by path
),

windows as (
    select
        path,
        median_day,
        greatest(median_day - interval 365 day, timestamp '1970-01-01') as ts_from,
        least(median_day + interval 366 day, timestamp '2100-01-01') as ts_until
    from medians
),

final as (
    select
        d.path,
        min(d.first_ts) filter (d.day >= w.ts_from and d.day < w.ts_until) as first_ts,
        max(d.last_ts) filter (d.day >= w.ts_from and d.day < w.ts_until) as last_ts,
        coalesce(sum(d.n_rows) filter (d.day >= w.ts_from and d.day < w.ts_until), 0)::bigint
            as plausible_rows,
        coalesce(
            sum(d.n_rows) filter (d.day is null or d.day < w.ts_from or d.day >= w.ts_until),
            0
        )::bigint as unreadable_rows,
        any_value(w.median_day) as median_day,
        any_value(w.ts_from) as ts_from,
        any_value(w.ts_until) as ts_until,
        coalesce(
            list({'day': d.day, 'rows': d.n_rows} order by d.day)
            filter (d.day >= w.ts_from and d.day < w.ts_until),
            []
        ) as day_rows
    from days as d
    left join windows as w using (path)
    group by d.path
)

select * from final
order by path
