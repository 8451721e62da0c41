-- One row per billing month × level × subject: how available the GPUs in service were and how
-- fast they came back, from the month's incidents with a source (outage windows, node
-- failures); the inferred telemetry silences beside them as evidence, never as downtime.
-- level: node; gpu_model (one model of one cluster, node NULL); cluster (gpu_model and node
-- NULL). An ambiguous node failure (several nodes) counts for its GPU model and cluster only.
--   in_service_gpu_hours  the GPUs' hours in service in the month (node_service)
--   down_gpu_hours        their hours inside outage windows: the GPU-hours lost
--   availability_pct      100 × (1 − down / in service)
--   incidents             sourced incidents of the month (outage windows, node failures)
--   recovered             those with a recorded end inside the month
--   mttr_hours            mean time to recover: the recovered incidents' mean duration (all of
--                         it, also before the month); NULL when none recovered
--   mtbf_hours            mean time between failures: the nodes' hours up (in service, not
--                         down) per incident; NULL without incidents
--   jobs_hit              distinct jobs hit by the sourced incidents
--   inferred_incidents, silent_gpu_hours  the telemetry silences and their GPU-hours
-- Parameters: $billing_month, $month_start, $month_end.
with nodes as (
    select *, epoch_ms(service_to) - epoch_ms(service_from) as service_ms
    from node_service
    where billing_month = $billing_month
),

month_incidents as (
    select * from incidents where billing_month = $billing_month
),

node_down as (
    -- outage windows are merged per node: their times add up
    select cluster, node, sum(month_ms) as down_ms
    from month_incidents
    where source = 'outage_window'
    group by all
),

capacity as (
    select
        cluster,
        gpu_model,
        node,
        grouping(gpu_model, node) as grouping_id,
        sum(n.gpus * n.service_ms) as service_gpu_ms,
        sum(n.gpus * coalesce(d.down_ms, 0)) as down_gpu_ms,
        sum(n.service_ms - coalesce(d.down_ms, 0)) as up_node_ms
    from nodes as n
    left join node_down as d using (cluster, node)
    group by grouping sets ((cluster, gpu_model, node), (cluster, gpu_model), (cluster))
),

events as (
    select
        cluster,
        gpu_model,
        node,
        grouping(gpu_model, node) as grouping_id,
        count(*) filter (not inferred) as incidents,
        count(*) filter (not inferred and recovered_in_month) as recovered,
        sum(epoch_ms(ended_at) - epoch_ms(started_at))
        filter (not inferred and recovered_in_month) as recovered_ms,
        count(*) filter (inferred) as inferred_incidents,
        sum(month_ms * gpus) filter (inferred) as silent_gpu_ms
    from month_incidents
    group by grouping sets ((cluster, gpu_model, node), (cluster, gpu_model), (cluster))
),

jobs as (
    select
        cluster,
        gpu_model,
        node,
        grouping(gpu_model, node) as grouping_id,
        count(distinct job_id) as jobs_hit
    from month_incidents, unnest(job_ids) as hit (job_id)
    where not inferred
    group by grouping sets ((cluster, gpu_model, node), (cluster, gpu_model), (cluster))
)

-- the capacity rows lead: an ambiguous failure's row of several nodes finds no node row
select
    $billing_month::date as billing_month,
    case c.grouping_id when 0 then 'node' when 1 then 'gpu_model' else 'cluster' end as level,
    c.cluster,
    c.gpu_model,
    c.node,
    c.service_gpu_ms / ms_per_hour() as in_service_gpu_hours,
    c.down_gpu_ms / ms_per_hour() as down_gpu_hours,
    100.0 * (c.service_gpu_ms - c.down_gpu_ms) / nullif(c.service_gpu_ms, 0) as availability_pct,
    coalesce(e.incidents, 0) as incidents,
    coalesce(e.recovered, 0) as recovered,
    e.recovered_ms / nullif(e.recovered, 0) / ms_per_hour() as mttr_hours,
    c.up_node_ms / nullif(e.incidents, 0) / ms_per_hour() as mtbf_hours,
    coalesce(j.jobs_hit, 0) as jobs_hit,
    coalesce(e.inferred_incidents, 0) as inferred_incidents,
    coalesce(e.silent_gpu_ms, 0) / ms_per_hour() as silent_gpu_hours
from capacity as c
left join events as e
    on e.grouping_id = c.grouping_id
    and e.cluster = c.cluster
    and e.gpu_model is not distinct from c.gpu_model
    and e.node is not distinct from c.node
left join jobs as j
    on j.grouping_id = c.grouping_id
    and j.cluster = c.cluster
    and j.gpu_model is not distinct from c.gpu_model
    and j.node is not distinct from c.node
order by c.cluster, c.grouping_id desc, c.gpu_model, c.node
