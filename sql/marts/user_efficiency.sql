-- One row per billing month × tenant × user (the scheduler's user of each job, as job_usage
-- has it; NULL: the export names none): how efficiently the user's jobs held their GPUs, in
-- the manner of Princeton's Jobstats. Figures are sums of job_efficiency's exact integers,
-- made hours, percentages or kWh once:
--   allocated / measured / productive / idle / zombie GPU-hours: the jobs' waste buckets
--     (job_time_buckets), summed; productive_share_pct = 100 × productive ÷ allocated
--   mean_util_pct: measured-time-weighted utilisation, as job_usage's
--   mean_memory_pct: 100 × Σ time × memory used ÷ Σ time × the GPU's memory (settings.yaml
--     gpu_memory_mib), over the time a sample read memory; peak_memory_pct the largest
--     share of its GPU's memory one sample read. NULL when part of that time lies on a GPU
--     model of unknown memory, or nothing read memory
--   energy_kwh: Σ covered time × power of the attributed samples that read power, rounded
--     half up to the Wh; NULL when none did. It is the energy of power_measured_gpu_hours
--     only (a cluster whose exporters send no power, or a GPU whose power reads [N/A], adds
--     no energy), never extrapolated to the rest of the time
--   idlest_jobs: the user's 3 jobs with the most idle + zombie GPU-hours (ties: cluster, job
--     id), as `cluster/job (hours)`, for a notice
--   is_notified: idle + zombie GPU-hours above $notice_idle_gpu_hours (notices-YYYY-MM.csv)
-- Parameters: $billing_month, $notice_idle_gpu_hours.
with ranked as (
    select
        *,
        row_number() over (
            partition by tenant_id, "user" order by idle_units + zombie_units desc, cluster, job_id
        ) as idle_rank
    from job_efficiency
    where billing_month = $billing_month
),

idlest as (
    select
        tenant_id,
        "user",
        string_agg(
            printf('%s/%s (%.2f)', cluster, job_id, gpu_hours(idle_units + zombie_units)),
            '; ' order by idle_rank
        ) as idlest_jobs
    from ranked
    -- a fixed 3: a notice names the few jobs to look at first
    where idle_rank <= 3 and idle_units + zombie_units > 0
    group by all
),

users as (
    select
        tenant_id,
        "user",
        count(*) as jobs,
        -- every exact measure of job_efficiency, each keeping its name (allocated_units, ...)
        sum(columns('_units$')),
        max(peak_memory_mib) as peak_memory_mib,
        max(peak_memory_pct) as peak_memory_pct
    from ranked
    group by all
),

final as (
    select
        $billing_month::date as billing_month,
        u.tenant_id,
        t.department,
        u."user",
        u.jobs,
        gpu_hours(u.allocated_units) as allocated_gpu_hours,
        gpu_hours(u.measured_units) as measured_gpu_hours,
        gpu_hours(u.productive_units) as productive_gpu_hours,
        100.0 * u.productive_units / nullif(u.allocated_units, 0) as productive_share_pct,
        gpu_hours(u.idle_units) as idle_gpu_hours,
        gpu_hours(u.zombie_units) as zombie_gpu_hours,
        gpu_hours(u.idle_units + u.zombie_units) as idle_zombie_gpu_hours,
        u.util_weighted_units / nullif(u.measured_units, 0) as mean_util_pct,
        gpu_hours(u.memory_units) as memory_measured_gpu_hours,
        case
            when u.memory_unknown_units = 0
                then 100.0 * u.memory_mib_units / nullif(u.memory_size_mib_units, 0)
        end as mean_memory_pct,
        case when u.memory_unknown_units = 0 then u.peak_memory_pct end as peak_memory_pct,
        u.peak_memory_mib,
        gpu_hours(u.power_units) as power_measured_gpu_hours,
        -- whole Wh, rounded half up, as an exact kWh DECIMAL; none without a power reading
        case
            when u.power_units > 0
                then (
                    (u.energy_mw_units + mw_units_per_kwh() // 2000)
                    // (mw_units_per_kwh() // 1000)
                )::decimal(18, 0) * 0.001::decimal(18, 3)
        end as energy_kwh,
        i.idlest_jobs,
        u.idle_units + u.zombie_units > $notice_idle_gpu_hours * units_per_gpu_hour()
            as is_notified
    from users as u
    left join idlest as i
        on i.tenant_id = u.tenant_id and i."user" is not distinct from u."user"
    left join catalog_tenants as t on t.tenant_id = u.tenant_id
)

select * from final
order by tenant_id, "user"
