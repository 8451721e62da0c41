-- The department page's daily chart: one row per day of the billing month with the allocated
-- GPU-hours of a department's tenants (utilization_daily: exact GPU time split at day
-- boundaries). Summed as whole GPU units (1/420 GPU-ms, 1,512,000,000 an hour, as the
-- gpu_units macro does): a sum of integers is exact whatever order threads add the rows in, a
-- sum of doubles is not, and the same month must give the same page.
-- Parameters: $billing_month, $department ('' for none).
select
    u.day,
    sum(round(u.allocated_gpu_hours * 1512000000)::hugeint) / 1512000000.0
        as allocated_gpu_hours
from utilization_daily as u
inner join tenant_month as t on t.billing_month = u.billing_month and t.tenant_id = u.tenant_id
where u.billing_month = $billing_month
    and u.level = 'tenant'
    and coalesce(t.department, '') = $department
group by u.day
order by u.day
