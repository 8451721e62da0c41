-- The Capacity by day and Capacity by pool sheets: one row per day × cluster × GPU model of
-- the billing month (utilization_daily at the gpu_model level).
-- Parameters: $billing_month.
select day, cluster, gpu_model, allocated_gpu_hours, capacity_gpu_hours
from utilization_daily
where billing_month = $billing_month and level = 'gpu_model'
order by day, cluster, gpu_model
