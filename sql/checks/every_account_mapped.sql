-- One row per scheduler account of the billing month that maps to no tenant.
-- Parameters: $billing_month.
select cluster, account, count(*) as jobs, sum(allocated_gpu_hours) as gpu_hours
from job_usage
where billing_month = $billing_month and tenant_id = 'unmapped'
group by all
order by cluster, account
