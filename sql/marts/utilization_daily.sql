-- One row per billing month × day × cluster × GPU model × tenant (level 'tenant'), plus one row
-- per day × cluster × GPU model (level 'gpu_model', tenant_id 'all') with the model's totals
-- and its capacity. Days are 24-hour periods from $month_start (calendar days of the billing
-- timezone unless a DST change falls inside the month); `day` is their first date.
-- Hours are GPU-equivalent hours (a 1g MIG slice counts 1/7), summed in GPU units (1/420
-- GPU-ms, 1,512,000,000 units = 1 GPU-hour) as job_gpu_hours and job_time_buckets store them.
--   tenant_id             the tenant of the job's day (job_day_tenants)
--   allocated_gpu_hours   the job_gpu_hours segments (each in one day)
--   productive_gpu_hours, measured_gpu_hours, mean_util_pct   the job_sample_time rows of the
--                         day (samples' covered time split at day boundaries); productive is 0
--                         for the jobs whose whole time is failed (NODE_FAIL, FAILED,
--                         OUT_OF_MEMORY), as in job_time_buckets. Summed over the month each
--                         equals job_time_buckets.
--   capacity_gpu_hours    gpu_model rows only: inventory GPUs × in-service hours of the day
--                         (NULL without an inventory for the model)
--   allocation_rate_pct   gpu_model rows only: 100 × allocated / capacity
-- Parameters: $billing_month, $month_start, $month_end.
with days as (
    select
        d.day_from,
        d.day_from + interval 1 day as day_to,
        (epoch_ms(d.day_from) - epoch_ms($month_start::timestamp)) // ms_per_day() as day_index
    from (
        select unnest(range($month_start::timestamp, $month_end::timestamp, interval 1 day))
            as day_from
    ) as d
),

job_days as (
    -- allocated time per job and day (job_gpu_hours: a segment lies in one billing day), and
    -- the job's measured time per day; the tenant of the job's day (job_day_tenants)
    select
        g.cluster, g.job_id, g.gpu_model, d.tenant_id, g.day_index,
        g.gpu_units as allocated_units,
        0 as productive_units, 0 as measured_units,
        -- job_sample_time's exact DECIMAL: a double here would make every sum below one of
        -- doubles, whose result depends on the order threads add the rows in
        null::decimal(38, 3) as util_weighted_units
    from job_gpu_hours as g
    join job_day_tenants as d using (billing_month, cluster, job_id, day_index)
    where g.billing_month = $billing_month
    union all
    select
        t.cluster,
        t.job_id,
        t.gpu_model,
        d.tenant_id,
        d.day_index,
        0,
        case
            when u.state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') then 0
            else t.productive_units
        end,
        t.measured_units,
        t.util_weighted_units
    from job_sample_time as t
    join job_day_tenants as d
        on d.billing_month = t.billing_month and d.cluster = t.cluster
        and d.job_id = t.job_id and d.day_index = t.day - t.billing_month
    join job_usage as u
        on u.billing_month = t.billing_month and u.cluster = t.cluster and u.job_id = t.job_id
    where t.billing_month = $billing_month
),

tenant_days as (
    select
        day_index,
        cluster,
        gpu_model,
        tenant_id,
        count(distinct job_id) filter (allocated_units > 0) as jobs,
        sum(allocated_units) as allocated_units,
        sum(productive_units) as productive_units,
        sum(measured_units) as measured_units,
        sum(util_weighted_units) as util_weighted_units
    from job_days
    group by all
),

capacity_days as (
    select
        d.day_index,
        n.cluster,
        n.gpu_model,
        sum(n.gpus * whole_gpu() * greatest(
            epoch_ms(least(coalesce(n.in_service_to, d.day_to), d.day_to))
            - epoch_ms(greatest(coalesce(n.in_service_from, d.day_from), d.day_from)),
            0
        )) as capacity_units
    from catalog_nodes as n
    cross join days as d
    group by all
),

model_days as (
    select
        d.day_index,
        m.cluster,
        m.gpu_model,
        'all' as tenant_id,
        coalesce(sum(t.jobs), 0) as jobs,
        coalesce(sum(t.allocated_units), 0) as allocated_units,
        coalesce(sum(t.productive_units), 0) as productive_units,
        coalesce(sum(t.measured_units), 0) as measured_units,
        sum(t.util_weighted_units) as util_weighted_units,
        any_value(c.capacity_units) as capacity_units
    from days as d
    cross join (
        select distinct cluster, gpu_model from tenant_days
        union
        select distinct cluster, gpu_model from catalog_nodes
    ) as m
    left join tenant_days as t
        on t.day_index = d.day_index and t.cluster = m.cluster and t.gpu_model = m.gpu_model
    left join capacity_days as c
        on c.day_index = d.day_index and c.cluster = m.cluster and c.gpu_model = m.gpu_model
    group by all
),

final as (
    select
        $billing_month::date as billing_month,
        ($billing_month::date + day_index::int) as day,
        cluster,
        gpu_model,
        level,
        tenant_id,
        jobs,
        gpu_hours(allocated_units) as allocated_gpu_hours,
        gpu_hours(productive_units) as productive_gpu_hours,
        gpu_hours(measured_units) as measured_gpu_hours,
        util_weighted_units / nullif(measured_units, 0) as mean_util_pct,
        gpu_hours(capacity_units) as capacity_gpu_hours,
        100.0 * allocated_units / nullif(capacity_units, 0) as allocation_rate_pct
    from (
        select *, 'tenant' as level, null::bigint as capacity_units from tenant_days
        union all by name
        select *, 'gpu_model' as level from model_days
    )
)

select * from final
order by day, cluster, gpu_model, level, tenant_id
