-- One row per canonical samples file of $files: its first and last readable timestamp (NULL
-- when it has none) and its rows without a readable timestamp. A day's rollup reads only the
-- files whose span reaches into the day or the next one (its look-ahead), and the files that
-- hold unreadable rows the day owns.
-- Parameters: $files.
select
    filename as path,
    min(try_cast(ts as timestamp)) as first_ts,
    max(try_cast(ts as timestamp)) as last_ts,
    count(*) filter (try_cast(ts as timestamp) is null) as unreadable_rows
from read_parquet($files, filename = true, union_by_name = true)
group by all
order by path
