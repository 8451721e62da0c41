-- The telemetry behind the month's figures (telemetry_coverage): one row per cluster ×
-- utilisation metric, of every cluster ($department NULL) or of the clusters where the
-- department's tenants held GPUs in the billing month; each cluster's metrics by their share
-- of its sampled time, the larger first.
-- Parameters: $billing_month, $department (NULL: every department; '' for none).
with department_clusters as (
    select distinct j.cluster
    from job_usage as j
    join tenant_month as t on t.billing_month = j.billing_month and t.tenant_id = j.tenant_id
    where j.billing_month = $billing_month
        and coalesce(t.department, '') = $department
        and j.allocated_gpu_hours > 0
)

select * exclude (billing_month)
from telemetry_coverage
where billing_month = $billing_month
    and ($department is null or cluster in (select cluster from department_clusters))
order by cluster, sampled_gpu_hours desc, util_metric
