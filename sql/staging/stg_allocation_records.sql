-- One row per exported GPU allocation record (job × node × GPU index), typed, with the reason it
-- is rejected (NULL when valid). Grain: cluster × file × line.
-- A record is checked against its job as the exports have it, whichever month the job is
-- of (an allocations file may cover several months): the job's record that ranks first in
-- stg_job_records (the one stg_jobs keeps), the nodes of its hostlist (the temporary table
-- raw_node_names, expanded by loading.py) and, for a node of the inventory, its GPU count
-- (catalog_nodes). A rejected record holds no GPU: its job is placed as a job without it
-- (exported_job_gpus.sql, loading.py::assign_gpu_indices).
-- record_rank: a GPU (job × node × index) counts once, however many loaded records name it
-- (one export listing it twice, overlapping exports): as for job records (stg_job_records), the
-- latest record (file, then line) ranks 1 and the others are duplicates folded (data_quality);
-- NULL for a rejected record.
with typed as (
    -- the raw row, gpu_index typed: its text stays for the reject reason
    select
        * replace (try_cast(gpu_index as integer) as gpu_index),
        gpu_index as gpu_index_text
    from raw_allocations
),

jobs as (
    -- each job an allocation record names (job steps are no job): whether a record of it is
    -- loaded, and the nodes of the one that ranks first
    select
        cluster,
        job_id,
        bool_or(reject_reason is null) as is_loaded,
        any_value(nodes) filter (record_rank = 1) as nodes
    from stg_job_records
    semi join typed using (cluster, job_id)
    where record_type = 'job'
    group by cluster, job_id
),

checked as (
    select
        a.* exclude (gpu_index_text),
        case
            when a.parse_error is not null then a.parse_error
            when a.job_id is null then 'field job_id: missing'
            when a.node is null then 'field node: missing'
            when a.gpu_index is null or a.gpu_index < 0
                then format('field gpu_index: ''{}'' is not a GPU index', a.gpu_index_text)
            when j.job_id is null
                then format(
                    'field job_id: no job {} of cluster {} in the exports', a.job_id, a.cluster
                )
            when not j.is_loaded
                then format(
                    'field job_id: every record of job {} in the exports is rejected', a.job_id
                )
            when m.node is null
                then format(
                    'field node: {} is not one of the nodes of job {} ({})',
                    a.node, a.job_id, coalesce(j.nodes, 'none')
                )
            when a.gpu_index >= n.gpus
                then format(
                    'field gpu_index: {} is not a GPU of node {}, which holds {} GPUs (nodes.csv)',
                    a.gpu_index, a.node, n.gpus
                )
        end as reject_reason
    from typed as a
    left join jobs as j on j.cluster = a.cluster and j.job_id = a.job_id
    left join raw_node_names as m on m.nodes = j.nodes and m.node = a.node
    left join catalog_nodes as n on n.cluster = a.cluster and n.node = a.node
),

final as (
    select
        *,
        case
            when reject_reason is null
                then row_number() over (
                    partition by cluster, job_id, node, gpu_index, reject_reason is null
                    order by file desc, line desc
                )
        end as record_rank
    from checked
)

select * from final
order by cluster, file, line
