-- The Incidents sheet: every incident of the billing month, in time order.
-- Parameters: $billing_month.
select
    cluster, node, gpu_model, gpus, source, inferred, cause, started_at, ended_at,
    duration_hours, recovered_in_month, gpu_hours, jobs_hit, job_ids
from incidents
where billing_month = $billing_month
order by started_at, cluster, node, source
