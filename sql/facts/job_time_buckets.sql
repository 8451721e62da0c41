-- One row per job × GPU model × tenant: the job's allocated time in the billing month split
-- into the waste buckets of DESIGN.md, in GPU units (1/420 GPU-ms; 1,512,000,000 units = 1
-- GPU-hour). tenant_id: the tenant of the job's days (job_day_tenants), one per job but for a
-- job running across a reorganisation, whose time before and after it counts for each.
-- The buckets of a job sum to its allocated time:
--   failed_infra: all of a NODE_FAIL job; otherwise its time inside outage windows
--   failed_job:   the rest of a FAILED or OUT_OF_MEMORY job
--   productive / idle / zombie: from the samples covering the rest; unmeasured: no sample.
-- Parameters: $billing_month.
with held as (
    select
        g.cluster,
        g.job_id,
        g.gpu_model,
        d.tenant_id,
        count(distinct row(g.node, g.gpu_index)) as gpus_held,
        sum(g.gpu_units)::bigint as allocated_units,
        coalesce(sum(g.gpu_units) filter (g.in_outage), 0)::bigint as outage_units
    from job_gpu_hours as g
    join job_day_tenants as d using (billing_month, cluster, job_id, day_index)
    where g.billing_month = $billing_month
    group by all
),

job_sample_totals as (
    -- job_sample_time holds a row per billing day
    select
        t.cluster,
        t.job_id,
        t.gpu_model,
        d.tenant_id,
        sum(measured_units) as measured_units,
        sum(util_weighted_units) as util_weighted_units,
        sum(measured_outside_outage_units) as measured_outside_outage_units,
        sum(productive_units) as productive_units,
        sum(idle_units) as idle_units,
        sum(zombie_units) as zombie_units
    from job_sample_time as t
    join job_day_tenants as d
        on d.billing_month = t.billing_month and d.cluster = t.cluster
        and d.job_id = t.job_id and d.day_index = t.day - t.billing_month
    where t.billing_month = $billing_month
    group by all
),

joined as (
    select
        h.*,
        j.state,
        coalesce(t.measured_units, 0) as measured_units,
        t.util_weighted_units,
        coalesce(t.measured_outside_outage_units, 0) as measured_outside_outage_units,
        coalesce(t.productive_units, 0) as productive_units,
        coalesce(t.idle_units, 0) as idle_units,
        coalesce(t.zombie_units, 0) as zombie_units
    from held as h
    join stg_jobs as j
        on j.billing_month = $billing_month and j.cluster = h.cluster
        and j.job_id = h.job_id
    left join job_sample_totals as t
        on t.cluster = h.cluster and t.job_id = h.job_id and t.gpu_model = h.gpu_model
        and t.tenant_id = h.tenant_id
),

final as (
    select
        $billing_month::date as billing_month,
        cluster,
        job_id,
        gpu_model,
        tenant_id,
        gpus_held,
        allocated_units,
        measured_units,
        util_weighted_units,
        case
            when state = 'NODE_FAIL' then allocated_units else outage_units
        end as failed_infra_units,
        case
            when state in ('FAILED', 'OUT_OF_MEMORY') then allocated_units - outage_units else 0
        end as failed_job_units,
        case when state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') then 0 else productive_units end
            as productive_units,
        case when state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') then 0 else idle_units end
            as idle_units,
        case when state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') then 0 else zombie_units end
            as zombie_units,
        case
            when state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') then 0
            else allocated_units - outage_units - measured_outside_outage_units
        end as unmeasured_units
    from joined
)

select * from final
order by cluster, job_id, gpu_model
