-- One row per GPU held by a started job, as the scheduler exported it, with the
-- share of that GPU the job held in 1/420ths (420 = a whole GPU): a job of 0.5 GPU-equivalents
-- exported on one GPU holds 210; a job holding as many or more GPU-eq than rows holds 420 each.
-- The temporary table exported_job_gpus, over the temporary table placement_jobs (every job
-- loaded, whichever month: the assignment of the jobs whose export does not say which GPUs
-- they held steers clear of them, loading.py::assign_gpu_indices); job_gpus.sql keeps the
-- month's jobs.
with exported as (
    -- a GPU once: its other records are duplicates folded (stg_allocation_records)
    select j.billing_month, j.cluster, j.job_id, a.node, a.gpu_index, j.gpus
    from placement_jobs as j
    join stg_allocation_records as a
        on a.cluster = j.cluster and a.job_id = j.job_id and a.record_rank = 1
    where j.start_at is not null
)

select
    billing_month,
    cluster,
    job_id,
    node,
    gpu_index,
    least(
        whole_gpu(),
        greatest(1, round(whole_gpu() * gpus / count(*) over (partition by cluster, job_id)))
    )::integer as gpu_share,
    'export' as index_source
from exported
