-- The department page's daily chart: one row per day of the billing month with the allocated
-- GPU-hours of a department's tenants (utilization_daily: exact GPU time split at day
-- boundaries). Summed as whole GPU units (gpu_units(), 1/420 GPU-ms): a sum of integers is
-- exact whatever order threads add the rows in, a sum of doubles is not, and the same month
-- must give the same page.
-- Parameters: $billing_month, $department ('' for none, NULL: every department).
select
    u.day,
    gpu_hours(sum(gpu_units(u.allocated_gpu_hours))) as allocated_gpu_hours
from utilization_daily as u
inner join tenant_month as t on t.billing_month = u.billing_month and t.tenant_id = u.tenant_id
where u.billing_month = $billing_month
    and u.level = 'tenant'
    and ($department is null or coalesce(t.department, '') = $department)
group by u.day
order by u.day
