-- The Capacity sheet: one row per cluster × GPU model of the billing month (capacity_evidence).
-- Parameters: $billing_month.
select
    cluster, gpu_model, verdict, verdict_rule, capacity_gpu_hours, allocated_gpu_hours,
    allocation_rate_pct, productive_share_pct, waste_share_pct, unmeasured_share_pct,
    wait_p95_s, pending_gpu_hours, pending_share_pct, guaranteed_gpu_hours,
    idle_quota_share_pct, availability_pct, trend_gpu_hours_per_month
from capacity_evidence
where billing_month = $billing_month
order by cluster, gpu_model
