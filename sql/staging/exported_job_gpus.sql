-- One row per GPU held by a started job, as the scheduler exported it, with the
-- share of that GPU the job held in 1/420ths (420 = a whole GPU). The job's record says how
-- much it held (gpus, in GPU-equivalents) and is billed for it; the rows say which GPUs:
-- - rows naming fewer GPUs than it holds (a 2-GPU job with one row): each holds a whole GPU,
--   and loading.py::assign_gpu_indices places the rest as for a job whose rows name none;
-- - rows naming more (a 0.5 GPU-eq job on one GPU, a 1-GPU job on eight): its GPU-eq shared
--   among them exactly, the units a share cannot hold evenly one each on the first GPUs (node,
--   then index), so that the shares sum to the job's GPU-eq (420 over 8 GPUs: 4 × 53, 4 × 52).
-- The temporary table exported_job_gpus, over the temporary table placement_jobs (every job
-- loaded, whichever month: the assignment of the jobs whose export does not say which GPUs
-- they held steers clear of them, loading.py::assign_gpu_indices); job_gpus.sql keeps the
-- month's jobs.
with exported as (
    -- a GPU once: its other records are duplicates folded (stg_allocation_records)
    select
        j.billing_month,
        j.cluster,
        j.job_id,
        a.node,
        a.gpu_index,
        round(whole_gpu() * j.gpus)::integer as job_units,
        count(*) over (partition by j.cluster, j.job_id) as named,
        row_number() over (partition by j.cluster, j.job_id order by a.node, a.gpu_index) as nth
    from placement_jobs as j
    join stg_allocation_records as a
        on a.cluster = j.cluster and a.job_id = j.job_id and a.record_rank = 1
    where j.start_at is not null
),

final as (
    select
        billing_month,
        cluster,
        job_id,
        node,
        gpu_index,
        case
            when named * whole_gpu() <= job_units then whole_gpu()
            else greatest(1, job_units // named + (nth <= job_units % named)::integer)
        end::integer as gpu_share,
        'export' as index_source
    from exported
)

select * from final
