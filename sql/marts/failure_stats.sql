-- One row per billing month × cluster × dimension × value: job outcomes and failed GPU time,
-- in long form. dimension is one of
--   node            an inventory node in service in the month, or a node jobs ran on
--   fault_domain    of the node (inventory; 'unknown' when the node is not in it)
--   driver_version  of the node (inventory; 'unknown' when the node is not in it)
--   exit_code       of the job ('unknown' when the export has none; 'running' for a job that
--                   had not ended by the month's end: its GPU-hours, no outcome yet)
-- Job counts are the GPU jobs that started and ended in the month, each counted once per value
-- (a job on two nodes counts on both: the export does not say which node failed a NODE_FAIL
-- job). GPU-hours (GPU-equivalents, from gpu_units) are the month's segments of every job
-- (job_gpu_hours), so they tie to capacity_buckets: failed_infra = all of a NODE_FAIL job plus
-- outage time, failed_job = the rest of a FAILED or OUT_OF_MEMORY job. interrupted: the GPU
-- time (outside outage windows) of TIMEOUT, CANCELLED and PREEMPTED jobs, reported apart: in
-- the buckets it lies in the samples' (their work may have been checkpointed).
--   infra_failure_rate_pct  100 × NODE_FAIL jobs / jobs
--   job_failure_rate_pct    100 × (FAILED + OUT_OF_MEMORY) jobs / jobs
--   failure_rank            node, fault_domain and driver_version: 1 = the worst value of the
--                           dimension across clusters, by infra failure rate, then job failure
--                           rate, then jobs (all descending), then cluster and value; NULL for
--                           exit codes (rows ordered by jobs instead)
-- Parameters: $billing_month, $month_start, $month_end.
with nodes as (
    select
        cluster,
        node,
        coalesce(fault_domain, 'unknown') as fault_domain,
        coalesce(driver_version, 'unknown') as driver_version
    from catalog_nodes
    where coalesce(in_service_from, $month_start::timestamp) < $month_end::timestamp
        and coalesce(in_service_to, $month_end::timestamp) > $month_start::timestamp
),

job_nodes as (
    select distinct g.cluster, g.job_id, g.node
    from job_gpus as g
    where g.billing_month = $billing_month
),

jobs as (
    -- GPU jobs that started (a job cancelled while pending has no node and no exit code)
    select
        cluster,
        job_id,
        state,
        coalesce(
            exit_code,
            case when end_at < $month_end::timestamp then 'unknown' else 'running' end
        ) as exit_code,
        end_at >= $month_start::timestamp and end_at < $month_end::timestamp as is_ended
    from stg_jobs
    where billing_month = $billing_month and start_at is not null and gpus > 0
),

node_values as (
    -- the node, fault domain and driver of every node a job held
    select
        n.cluster,
        n.node,
        coalesce(i.fault_domain, 'unknown') as fault_domain,
        coalesce(i.driver_version, 'unknown') as driver_version
    from (
        select cluster, node from job_nodes
        union
        select cluster, node from nodes
    ) as n
    left join nodes as i using (cluster, node)
),

job_values as (
    select distinct cluster, job_id, dimension, value
    from (
        select j.cluster, j.job_id, 'node' as dimension, n.node as value
        from job_nodes as j
        join node_values as n using (cluster, node)
        union all
        select j.cluster, j.job_id, 'fault_domain', n.fault_domain
        from job_nodes as j
        join node_values as n using (cluster, node)
        union all
        select j.cluster, j.job_id, 'driver_version', n.driver_version
        from job_nodes as j
        join node_values as n using (cluster, node)
        union all
        select cluster, job_id, 'exit_code', exit_code
        from jobs
    )
),

segments as (
    select
        g.cluster,
        g.job_id,
        g.node,
        j.exit_code,
        g.gpu_units,
        case when j.state = 'NODE_FAIL' or g.in_outage then g.gpu_units else 0 end
            as failed_infra_units,
        case
            when j.state in ('FAILED', 'OUT_OF_MEMORY') and not g.in_outage then g.gpu_units
            else 0
        end as failed_job_units,
        case
            when j.state in ('TIMEOUT', 'CANCELLED', 'PREEMPTED') and not g.in_outage
                then g.gpu_units
            else 0
        end as interrupted_units
    from job_gpu_hours as g
    join jobs as j using (cluster, job_id)
    where g.billing_month = $billing_month
),

segment_values as (
    select
        s.cluster, v.dimension, v.value, s.gpu_units, s.failed_infra_units, s.failed_job_units,
        s.interrupted_units
    from segments as s
    join node_values as n using (cluster, node)
    cross join lateral (
        select * from (
            values
            ('node', s.node),
            ('fault_domain', n.fault_domain),
            ('driver_version', n.driver_version),
            ('exit_code', s.exit_code)
        ) as v (dimension, value)  -- the outer v's column names -- noqa: AL05
    ) as v
),

all_values as (
    select cluster, 'node' as dimension, node as value from node_values
    union
    select cluster, 'fault_domain', fault_domain from node_values
    union
    select cluster, 'driver_version', driver_version from node_values
    union
    select cluster, dimension, value from job_values
),

outcomes as (
    select
        v.cluster,
        v.dimension,
        v.value,
        count(*) as jobs,
        count(*) filter (j.state = 'COMPLETED') as completed_jobs,
        count(*) filter (j.state = 'FAILED') as failed_jobs,
        count(*) filter (j.state = 'OUT_OF_MEMORY') as out_of_memory_jobs,
        count(*) filter (j.state = 'TIMEOUT') as timeout_jobs,
        count(*) filter (j.state = 'NODE_FAIL') as node_fail_jobs,
        count(*) filter (j.state = 'CANCELLED') as cancelled_jobs,
        count(*) filter (j.state = 'PREEMPTED') as preempted_jobs
    from job_values as v
    join jobs as j using (cluster, job_id)
    where j.is_ended
    group by all
),

gpu_time as (
    select
        cluster,
        dimension,
        value,
        gpu_hours(sum(gpu_units)) as allocated_gpu_hours,
        gpu_hours(sum(failed_infra_units)) as failed_infra_gpu_hours,
        gpu_hours(sum(failed_job_units)) as failed_job_gpu_hours,
        gpu_hours(sum(interrupted_units)) as interrupted_gpu_hours
    from segment_values
    group by all
),

joined as (
    select
        a.cluster,
        a.dimension,
        a.value,
        -- a value without ended jobs or GPU time counts 0 of each
        coalesce(columns('^(.*_)?jobs$'), 0),
        100.0 * o.node_fail_jobs / nullif(o.jobs, 0) as infra_failure_rate_pct,
        100.0 * (o.failed_jobs + o.out_of_memory_jobs) / nullif(o.jobs, 0)
            as job_failure_rate_pct,
        coalesce(columns('.*_gpu_hours'), 0)
    from all_values as a
    left join outcomes as o using (cluster, dimension, value)
    -- columns() above reads its hours, which sqlfluff does not see
    left join gpu_time using (cluster, dimension, value)  -- noqa: ST11
),

final as (
    select
        $billing_month::date as billing_month,
        *,
        case
            when dimension <> 'exit_code'
                then row_number() over (
                    partition by dimension
                    order by
                        infra_failure_rate_pct desc nulls last,
                        job_failure_rate_pct desc nulls last,
                        jobs desc,
                        cluster,
                        value
                )
        end as failure_rank
    from joined
)

select * from final
order by dimension, failure_rank, jobs desc, cluster, value
