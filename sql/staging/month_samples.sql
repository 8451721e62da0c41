-- One row per telemetry row whose timestamp lies in the billing month (or cannot be read),
-- typed, with the reason it is rejected (NULL when valid). $files are canonical samples Parquet:
-- exports read in place and conversions of other formats, each named in sample_sources with
-- its landing file and cluster (source_line points into the original file when converted).
-- Parameters: $files, $month_start, $month_end.
with typed as (
    select
        src.cluster,
        src.file,
        coalesce(s.source_line, s.file_row_number + 1) as line,
        try_cast(s.ts as timestamp) as ts,
        nullif(trim(s.node::varchar), '') as node,
        try_cast(s.gpu_index as integer) as gpu_index,
        try_cast(s.util_pct as double) as util_pct,
        try_cast(s.mem_used_mib as double) as mem_used_mib,
        try_cast(s.power_w as double) as power_w
    from read_parquet($files, filename = true, file_row_number = true, union_by_name = true)
        as s
    join sample_sources as src on src.path = s.filename
)

select
    *,
    case
        when ts is null then 'field ts: missing or not a timestamp'
        when node is null then 'field node: missing'
        when gpu_index is null or gpu_index < 0 then 'field gpu_index: not a GPU index'
        when util_pct is null then 'field util_pct: missing'
        when util_pct < 0 or util_pct > 100
            then format('field util_pct: {} is outside 0-100', util_pct)
    end as reject_reason
from typed
where ts is null or (ts >= $month_start::timestamp and ts < $month_end::timestamp)
