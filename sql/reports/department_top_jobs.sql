-- The department page's top jobs: the $top_jobs jobs of a department's tenants with the most
-- idle + zombie GPU-hours in the billing month (ties by tenant, cluster, job id).
-- Parameters: $billing_month, $department ('' for none, NULL: every department), $top_jobs.
select
    j.tenant_id,
    t.tenant_name,
    j.cluster,
    j.job_id,
    j."user",
    j.gpu_model,
    j.state,
    j.gpus,
    j.start_at,
    j.end_at,
    j.allocated_gpu_hours,
    j.mean_util_pct,
    j.idle_gpu_hours,
    j.zombie_gpu_hours,
    coalesce(j.idle_gpu_hours, 0) + coalesce(j.zombie_gpu_hours, 0) as wasted_gpu_hours
from job_usage as j
inner join tenant_month as t on t.billing_month = j.billing_month and t.tenant_id = j.tenant_id
where j.billing_month = $billing_month
    and ($department is null or coalesce(t.department, '') = $department)
    and coalesce(j.idle_gpu_hours, 0) + coalesce(j.zombie_gpu_hours, 0) > 0
order by wasted_gpu_hours desc, j.tenant_id, j.cluster, j.job_id
limit $top_jobs
