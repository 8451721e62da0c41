-- One row per job × billing month that held GPUs in the month: its user and tenant (as
-- job_usage has them), its waste buckets in GPU units (1/420 GPU-ms) summed from
-- job_time_buckets as they are, and its memory use and energy from the telemetry attributed to
-- it (job_sample_time), all exact integers.
-- Memory: memory_units is the job's time measured with a memory reading, memory_mib_units
-- Σ units × MiB used, memory_size_mib_units Σ units × the GPU's memory (settings.yaml
-- gpu_memory_mib of its model), so mean memory use = memory_mib_units ÷ memory_size_mib_units.
-- memory_unknown_units is the time on GPU models whose memory the catalog does not give: the
-- ratios are NULL when it is above 0 (a part of the job unknown is never guessed) or when
-- nothing read memory. A GPU shared by several jobs (MIG, time-slicing) reads its memory as a
-- whole: each of them sees the device's memory use.
-- Energy: power_units is the job's time measured with a power reading, energy_mw_units
-- Σ units × mW over that time (a GPU shared by several jobs: each its share of the device's
-- power, as of its time); time without a power reading adds no energy.
-- Parameters: $billing_month.
with buckets as (
    select
        cluster,
        job_id,
        -- each keeping its name; whole units, a job's well within bigint
        sum(columns('^(allocated|measured|productive|idle|zombie)_units$'))::bigint,
        sum(util_weighted_units) as util_weighted_units
    from job_time_buckets
    where billing_month = $billing_month
    group by all
),

telemetry as (
    select
        t.cluster,
        t.job_id,
        sum(t.memory_units)::bigint as memory_units,
        sum(t.memory_mib_units)::hugeint as memory_mib_units,
        coalesce(sum(t.memory_units * m.memory_mib), 0)::hugeint as memory_size_mib_units,
        coalesce(sum(t.memory_units) filter (m.memory_mib is null), 0)::bigint
            as memory_unknown_units,
        max(t.peak_memory_mib) as peak_memory_mib,
        max(100.0 * t.peak_memory_mib / m.memory_mib) as peak_memory_pct_known,
        sum(t.power_units)::bigint as power_units,
        sum(t.energy_mw_units)::hugeint as energy_mw_units
    from job_sample_time as t
    left join catalog_gpu_models as m using (gpu_model)
    where t.billing_month = $billing_month
    group by all
),

final as (
    select
        u.billing_month,
        u.cluster,
        u.job_id,
        u.tenant_id,
        u."user",
        u.gpu_model,
        u.state,
        b.allocated_units,
        b.measured_units,
        b.util_weighted_units,
        b.productive_units,
        b.idle_units,
        b.zombie_units,
        coalesce(t.memory_units, 0) as memory_units,
        coalesce(t.memory_mib_units, 0) as memory_mib_units,
        coalesce(t.memory_size_mib_units, 0) as memory_size_mib_units,
        coalesce(t.memory_unknown_units, 0) as memory_unknown_units,
        t.peak_memory_mib,
        case when t.memory_unknown_units = 0 then t.peak_memory_pct_known end
            as peak_memory_pct,
        coalesce(t.power_units, 0) as power_units,
        coalesce(t.energy_mw_units, 0) as energy_mw_units
    from job_usage as u
    join buckets as b using (cluster, job_id)
    left join telemetry as t using (cluster, job_id)
    where u.billing_month = $billing_month
)

select * from final
order by cluster, job_id
