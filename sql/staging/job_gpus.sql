-- One row per GPU a started job of the billing month held, with the share of it the job held
-- (gpu_share, in 1/420ths of a GPU: 420 whole, 60 a 1g MIG slice): exported by the scheduler
-- (index_source 'export') or assigned lowest-free-first when the export does not say
-- (index_source 'assigned'). Reads the temporary tables exported_job_gpus
-- (sql/staging/exported_job_gpus.sql) and assigned_job_gpus (loading.py::assign_gpu_indices).
-- exported_job_gpus holds every month's jobs: the month's are kept. Parameters: $billing_month.
with month_jobs as (
    select cluster, job_id from stg_jobs where billing_month = $billing_month
),

held as (
    select billing_month, cluster, job_id, node, gpu_index, gpu_share, index_source
    from exported_job_gpus
    union all
    select billing_month, cluster, job_id, node, gpu_index, gpu_share, index_source
    from assigned_job_gpus
)

select held.*
from held
semi join month_jobs using (cluster, job_id)
order by held.cluster, held.job_id, held.node, held.gpu_index
