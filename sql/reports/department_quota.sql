-- One row per tenant × pool of a department's tenants in the billing month (quota_compliance).
-- Parameters: $billing_month, $department ('' for none, NULL: every department).
select
    q.tenant_id,
    t.tenant_name,
    q.pool,
    q.has_quota,
    q.guaranteed_gpus,
    q.limit_gpus,
    q.mean_gpus,
    q.peak_gpus,
    q.used_gpu_hours,
    q.borrowed_gpu_hours,
    q.minutes_above_limit,
    q.quota_use_pct,
    q.breach,
    q.idle_quota,
    q.chronic_borrowing
from quota_compliance as q
inner join tenant_month as t on t.billing_month = q.billing_month and t.tenant_id = q.tenant_id
where q.billing_month = $billing_month
    and ($department is null or coalesce(t.department, '') = $department)
order by q.tenant_id, q.pool
