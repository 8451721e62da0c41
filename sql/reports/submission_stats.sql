-- The Queue & Service sheet's Submissions section: one row per submission_stats row of the
-- billing month.
-- Parameters: $billing_month.
select
    cluster, tenant_id, queue, submitted_jobs, started_jobs, cancelled_pending_jobs,
    failed_to_start_jobs, pending_jobs, submission_success_pct, ended_jobs, completed_jobs,
    job_success_pct
from submission_stats
where billing_month = $billing_month
order by cluster, tenant_id, queue
