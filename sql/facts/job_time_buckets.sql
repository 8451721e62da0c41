-- One row per job × GPU model: the job's allocated time in the billing month split into the
-- waste buckets of DESIGN.md, in milliseconds. The buckets of a job sum to its allocated time:
--   failed_infra: all of a NODE_FAIL job; otherwise its time inside outage windows
--   failed_job:   the rest of a FAILED or OUT_OF_MEMORY job
--   productive / idle / zombie: from the samples covering the rest; unmeasured: no sample.
-- Parameters: $billing_month.
with held as (
    select
        cluster,
        job_id,
        gpu_model,
        count(distinct (node, gpu_index)) as gpus_held,
        sum(gpu_ms)::bigint as allocated_ms,
        coalesce(sum(gpu_ms) filter (in_outage), 0)::bigint as outage_ms
    from job_gpu_hours
    where billing_month = $billing_month
    group by all
),

joined as (
    select
        h.*,
        j.state,
        coalesce(t.measured_ms, 0) as measured_ms,
        t.util_weighted_ms,
        coalesce(t.measured_outside_outage_ms, 0) as measured_outside_outage_ms,
        coalesce(t.productive_ms, 0) as productive_ms,
        coalesce(t.idle_ms, 0) as idle_ms,
        coalesce(t.zombie_ms, 0) as zombie_ms
    from held as h
    join stg_jobs as j on j.billing_month = $billing_month and j.cluster = h.cluster
        and j.job_id = h.job_id
    left join job_sample_time as t on t.billing_month = $billing_month
        and t.cluster = h.cluster and t.job_id = h.job_id and t.gpu_model = h.gpu_model
),

final as (
    select
        $billing_month::date as billing_month,
        cluster,
        job_id,
        gpu_model,
        gpus_held,
        allocated_ms,
        measured_ms,
        util_weighted_ms,
        case when state = 'NODE_FAIL' then allocated_ms else outage_ms end as failed_infra_ms,
        case
            when state in ('FAILED', 'OUT_OF_MEMORY') then allocated_ms - outage_ms else 0
        end as failed_job_ms,
        case when state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') then 0 else productive_ms end
            as productive_ms,
        case when state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') then 0 else idle_ms end
            as idle_ms,
        case when state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') then 0 else zombie_ms end
            as zombie_ms,
        case
            when state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') then 0
            else allocated_ms - outage_ms - measured_outside_outage_ms
        end as unmeasured_ms
    from joined
)

select * from final
order by cluster, job_id, gpu_model
