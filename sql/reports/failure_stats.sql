-- The Failures sheet: one row per failure_stats row of the billing month, by dimension, the
-- worst value of each first.
-- Parameters: $billing_month.
select
    dimension, failure_rank, cluster, value, jobs, completed_jobs, failed_jobs,
    out_of_memory_jobs, timeout_jobs, node_fail_jobs, cancelled_jobs, preempted_jobs,
    infra_failure_rate_pct, job_failure_rate_pct, allocated_gpu_hours,
    failed_infra_gpu_hours, failed_job_gpu_hours, interrupted_gpu_hours
from failure_stats
where billing_month = $billing_month
order by dimension, failure_rank nulls last, jobs desc, cluster, value
