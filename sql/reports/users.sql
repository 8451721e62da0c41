-- The Users sheet and the department page's users: one row per tenant × user with GPU time in
-- the billing month (user_efficiency; of one department when $department is given, '' for
-- none), the most idle + zombie GPU-hours first (ties: tenant, user).
-- Parameters: $billing_month, $department (NULL: every department).
select
    u.tenant_id,
    coalesce(t.tenant_name, u.tenant_id) as tenant_name,
    coalesce(u."user", '') as "user",
    u.jobs,
    u.allocated_gpu_hours,
    u.productive_share_pct,
    u.idle_gpu_hours,
    u.zombie_gpu_hours,
    u.idle_zombie_gpu_hours,
    u.mean_util_pct,
    u.mean_memory_pct,
    u.peak_memory_pct,
    u.power_measured_gpu_hours,
    u.energy_kwh,
    u.idlest_jobs,
    u.is_notified
from user_efficiency as u
left join tenant_month as t using (billing_month, tenant_id)
where u.billing_month = $billing_month
    and ($department is null or coalesce(t.department, '') = $department)
order by u.idle_zombie_gpu_hours desc, u.tenant_id, u."user"
