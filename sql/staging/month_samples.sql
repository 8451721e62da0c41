-- One row per canonical telemetry row of one cluster whose timestamp lies in the billing month
-- (or cannot be read), typed, with the reason it is rejected (NULL when valid).
-- file is the path relative to the landing folder ($landing_prefix is that folder plus '/').
-- Parameters: $files (list of Parquet files), $cluster, $landing_prefix, $month_start, $month_end.
with typed as (
    select
        $cluster as cluster,
        filename[length($landing_prefix) + 1:] as file,
        file_row_number + 1 as line,
        try_cast(ts as timestamp) as ts,
        nullif(trim(node::varchar), '') as node,
        try_cast(gpu_index as integer) as gpu_index,
        try_cast(util_pct as double) as util_pct,
        try_cast(mem_used_mib as double) as mem_used_mib,
        try_cast(power_w as double) as power_w
    from read_parquet($files, filename = true, file_row_number = true, union_by_name = true)
)

select
    *,
    case
        when ts is null then 'field ts: missing or not a timestamp'
        when node is null then 'field node: missing'
        when gpu_index is null or gpu_index < 0 then 'field gpu_index: not a GPU index'
        when util_pct is null then 'field util_pct: missing'
        when util_pct < 0 or util_pct > 100 then format('field util_pct: {} is outside 0-100', util_pct)
    end as reject_reason
from typed
where ts is null or (ts >= $month_start::timestamp and ts < $month_end::timestamp)
