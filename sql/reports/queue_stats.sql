-- The Queue & Service sheet: one row per queue_stats row of the billing month, the cluster
-- totals first and the tenant × queue × GPU model detail last.
-- Parameters: $billing_month.
select
    grouping_set, cluster, tenant_id, queue, gpu_model, jobs, jobs_started, wait_p50_s,
    wait_p90_s, wait_p95_s, wait_mean_s, wait_max_s, pending_gpu_hours, jobs_ended,
    completed_jobs, failed_jobs, timeout_jobs, out_of_memory_jobs, node_fail_jobs,
    cancelled_jobs, preempted_jobs, success_rate_pct, kueue_waits
from queue_stats
where billing_month = $billing_month
order by
    coalesce(
        list_position(
            ['cluster', 'tenant', 'queue', 'gpu_model', 'tenant_queue_gpu_model'], grouping_set
        ),
        100
    ),
    grouping_set, cluster, tenant_id, queue, gpu_model
