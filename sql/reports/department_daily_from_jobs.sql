-- The department page's daily chart without utilization_daily: one row per day with the
-- allocated GPU-hours of the jobs of a department's tenants that started that day (jobs
-- started before the month on its first day), in whole GPU units as department_daily.sql.
-- Days as in utilization_daily: 24-hour days from $period_start, the period's start in UTC.
-- Parameters: $billing_month, $department ('' for none, NULL: every department), $period_start.
select
    $billing_month::date + (
        (
            epoch_ms(greatest(j.start_at, $period_start::timestamp))
            - epoch_ms($period_start::timestamp)
        ) // ms_per_day()
    )::int as day,
    gpu_hours(sum(gpu_units(j.allocated_gpu_hours))) as allocated_gpu_hours
from job_usage as j
inner join tenant_month as t on t.billing_month = j.billing_month and t.tenant_id = j.tenant_id
where j.billing_month = $billing_month
    and ($department is null or coalesce(t.department, '') = $department)
    and j.start_at is not null
    and j.allocated_gpu_hours > 0
group by all
order by day
