-- The Trends sheet's series: month_trends up to the billing month (a later month's rows, in a
-- warehouse that holds one, are not history of this one), the last 12 months.
-- Parameters: $billing_month.
select
    billing_month, level, cluster, gpu_model, tenant_id, allocation_rate_pct,
    allocated_gpu_hours, amount
from month_trends
where billing_month <= $billing_month
    and billing_month > $billing_month::date - interval 12 month
order by billing_month, level, cluster, gpu_model, tenant_id
