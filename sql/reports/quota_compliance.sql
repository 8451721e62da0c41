-- The Quota sheet: one row per tenant × pool of the billing month (quota_compliance).
-- Parameters: $billing_month.
select
    tenant_id, pool, has_quota, guaranteed_gpus, limit_gpus, reserved, used_gpu_hours,
    mean_gpus, peak_gpus, peak_at, guaranteed_gpu_hours, borrowed_gpu_hours,
    unused_guaranteed_gpu_hours, minutes_above_limit, quota_use_pct, borrowing_days, days,
    breach, idle_quota, chronic_borrowing
from quota_compliance
where billing_month = $billing_month
order by tenant_id, pool
