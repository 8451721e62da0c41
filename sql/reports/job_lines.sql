-- The Job lines sheet: one row per job of the billing month (job_usage), of the tenants of one
-- department when $department is given (the tenant's department in tenant_month, '' for
-- none), else of every tenant. No order: the sheet streams the rows in its own complete order.
-- Parameters: $billing_month, $department (NULL: every department).
select
    tenant_id, cluster, job_id, account, "user", queue, gpu_model, state, gpus,
    submit_at, start_at, end_at, allocated_gpu_hours, measured_gpu_hours, mean_util_pct,
    productive_gpu_hours, idle_gpu_hours, zombie_gpu_hours, failed_job_gpu_hours,
    failed_infra_gpu_hours, unmeasured_gpu_hours, amount, currency, billing_month
from job_usage
where billing_month = $billing_month
    and ($department is null or tenant_id in (
        select tenant_id
        from tenant_month
        where billing_month = $billing_month and coalesce(department, '') = $department
    ))
