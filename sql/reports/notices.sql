-- notices-YYYY-MM.csv: one row per user to notify of the billing month (user_efficiency
-- is_notified: idle + zombie GPU-hours above settings.yaml notice_idle_gpu_hours), ready for
-- a mail merge. The catalog has no users file, so the address is the tenant's owner
-- (tenants.yaml owner; empty when it has none) and address_source says so. Figures are fixed
-- decimals (hours and percentages to 2 places, energy to the Wh), so the same month gives the
-- same bytes; most idle + zombie GPU-hours first (ties: tenant, user). energy_kwh is the energy
-- of power_measured_gpu_hours (empty when no sample of the user's jobs read power).
-- Parameters: $billing_month, $notice_idle_gpu_hours.
select
    strftime(u.billing_month, '%Y-%m') as billing_month,
    coalesce(u."user", '') as "user",
    u.tenant_id,
    coalesce(t.name, u.tenant_id) as tenant_name,
    coalesce(u.department, '') as department,
    coalesce(t.owner, '') as address,
    'tenant owner' as address_source,
    u.jobs,
    round(u.allocated_gpu_hours, 2)::decimal(18, 2) as allocated_gpu_hours,
    round(u.idle_gpu_hours, 2)::decimal(18, 2) as idle_gpu_hours,
    round(u.zombie_gpu_hours, 2)::decimal(18, 2) as zombie_gpu_hours,
    round(u.idle_zombie_gpu_hours, 2)::decimal(18, 2) as idle_zombie_gpu_hours,
    $notice_idle_gpu_hours::decimal(18, 3) as threshold_gpu_hours,
    round(u.productive_share_pct, 2)::decimal(18, 2) as productive_share_pct,
    round(u.mean_util_pct, 2)::decimal(18, 2) as mean_util_pct,
    round(u.mean_memory_pct, 2)::decimal(18, 2) as mean_memory_pct,
    round(u.peak_memory_pct, 2)::decimal(18, 2) as peak_memory_pct,
    round(u.power_measured_gpu_hours, 2)::decimal(18, 2) as power_measured_gpu_hours,
    u.energy_kwh,
    coalesce(u.idlest_jobs, '') as idlest_jobs
from user_efficiency as u
left join catalog_tenants as t on t.tenant_id = u.tenant_id
where u.billing_month = $billing_month and u.is_notified
order by u.idle_zombie_gpu_hours desc, u.tenant_id, u."user"
