-- One row per telemetry row whose timestamp lies in the billing month (or cannot be read),
-- typed, with the reason it is rejected (NULL when valid). $files are canonical samples Parquet:
-- exports read in place and conversions of other formats, each named in sample_sources with
-- its landing file and cluster (source_line points into the original file when converted).
-- util_rank: which utilisation metric a row carries (2 DCGM GR_ENGINE_ACTIVE, 1 any other,
-- 0 none: a memory- or power-only series). Where a GPU has rows of rank 2, its rank-1 rows are
-- superseded (DESIGN: GR_ENGINE_ACTIVE is preferred) and counted as folded duplicates.
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
        try_cast(s.power_w as double) as power_w,
        case coalesce(s.util_metric, '')
            when 'DCGM_FI_PROF_GR_ENGINE_ACTIVE' then 2
            when 'none' then 0
            else 1
        end as util_rank,
        s.parse_error as source_error
    from read_parquet($files, filename = true, file_row_number = true, union_by_name = true)
        as s
    join sample_sources as src on src.path = s.filename
),

checked as (
    select
        * exclude (source_error),
        case
            when source_error is not null then source_error
            when ts is null then 'field ts: missing or not a timestamp'
            when node is null then 'field node: missing'
            when gpu_index is null or gpu_index < 0 then 'field gpu_index: not a GPU index'
            when util_rank > 0 and util_pct is null then 'field util_pct: missing'
            when util_pct < 0 or util_pct > 100
                then format('field util_pct: {} is outside 0-100', util_pct)
        end as reject_reason
    from typed
    where ts is null or (ts >= $month_start::timestamp and ts < $month_end::timestamp)
),

best_ranks as (
    select cluster, node, gpu_index, max(util_rank) as best_rank
    from checked
    where reject_reason is null and util_rank > 0
    group by all
),

final as (
    select
        c.*,
        c.reject_reason is null and c.util_rank > 0 and c.util_rank < b.best_rank as superseded
    from checked as c
    left join best_ranks as b using (cluster, node, gpu_index)
)

select * from final
