-- The finance workbook's tenants: one row per tenant of the billing month (tenant_month),
-- the largest amount first.
-- Parameters: $billing_month.
select
    tenant_id, tenant_name, department, cost_center, allocated_gpu_hours,
    productive_gpu_hours, idle_gpu_hours, zombie_gpu_hours, failed_job_gpu_hours,
    failed_infra_gpu_hours, unmeasured_gpu_hours, amount, budget, budget_status, currency
from tenant_month
where billing_month = $billing_month
order by amount desc nulls last, tenant_id
