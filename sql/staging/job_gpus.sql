-- One row per GPU a started job of the billing month held: exported by the scheduler
-- (index_source 'export') or assigned lowest-free-first when the export does not say
-- (index_source 'assigned'). Reads the temporary table month_job_gpus.
-- Parameters: $billing_month.
select billing_month, cluster, job_id, node, gpu_index, index_source
from month_job_gpus
where billing_month = $billing_month
order by cluster, job_id, node, gpu_index
