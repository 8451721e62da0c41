-- The Trends sheet's forecast: the demand_forecast rows of the billing month.
-- Parameters: $billing_month.
select
    cluster, gpu_model, forecast_month, history_months, forecast_gpu_hours, low_gpu_hours,
    high_gpu_hours, capacity_gpu_hours, forecast_allocation_rate_pct, threshold_month,
    trend_verdict
from demand_forecast
where billing_month = $billing_month
order by cluster, gpu_model, forecast_month
