-- The Cost views sheet and page section: one row per tenant with GPU time in the billing month
-- (of one department when $department is given, '' for none), its jobs' allocation-based charge
-- beside the utilisation-based one, and what its failed runs cost (cost_views summed exactly).
-- Parameters: $billing_month, $department (NULL: every department).
select
    v.tenant_id,
    coalesce(t.tenant_name, v.tenant_id) as tenant_name,
    count(*) as jobs,
    gpu_hours(sum(v.allocated_units)) as allocated_gpu_hours,
    gpu_hours(sum(v.idle_zombie_units)) as idle_zombie_gpu_hours,
    sum(v.allocation_amount) as allocation_amount,
    sum(v.idle_zombie_amount) as idle_zombie_amount,
    sum(v.utilisation_amount) as utilisation_amount,
    gpu_hours(sum(v.failed_job_units)) as failed_job_gpu_hours,
    sum(v.failed_job_amount) as failed_job_amount
from cost_views as v
left join tenant_month as t using (billing_month, tenant_id)
where v.billing_month = $billing_month
    and ($department is null or coalesce(t.department, '') = $department)
group by v.tenant_id, t.tenant_name
order by allocation_amount desc, v.tenant_id
