-- One row per exported GPU allocation record (job × node × GPU index), typed, with the reason it
-- is rejected (NULL when valid). Grain: cluster × file × line.
with typed as (
    -- the raw row, gpu_index typed: its text stays for the reject reason
    select
        * replace (try_cast(gpu_index as integer) as gpu_index),
        gpu_index as gpu_index_text
    from raw_allocations
)

select
    * exclude (gpu_index_text),
    case
        when parse_error is not null then parse_error
        when job_id is null then 'field job_id: missing'
        when node is null then 'field node: missing'
        when gpu_index is null or gpu_index < 0
            then format('field gpu_index: ''{}'' is not a GPU index', gpu_index_text)
    end as reject_reason
from typed
