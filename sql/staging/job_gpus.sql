-- One row per GPU a started job of the billing month held, with the share of it the job held
-- (gpu_share, in 1/420ths of a GPU: 420 whole, 60 a 1g MIG slice): exported by the scheduler
-- (index_source 'export') or assigned lowest-free-first when the export does not say
-- (index_source 'assigned'). Reads the temporary table month_job_gpus.
-- Parameters: $billing_month.
select billing_month, cluster, job_id, node, gpu_index, gpu_share, index_source
from month_job_gpus
where billing_month = $billing_month
order by cluster, job_id, node, gpu_index
