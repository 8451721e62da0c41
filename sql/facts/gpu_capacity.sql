-- One row per inventory GPU (cluster × node × GPU index) in service during the billing month:
-- its capacity and how it was used, in GPU units (1/420 GPU-ms; a whole GPU for one ms = 420).
-- A sweep over the GPU's timeline (jobs start/stop holding it, outage and service edges) gives,
-- for every elementary interval, the share held by jobs (the sum of their gpu_share):
--   busy_units         the held share, capped at a whole GPU
--   overlap_units      the held share above a whole GPU: jobs holding more than the GPU has
--                      (a data-quality error, reported, never silently summed)
--   down_units         the free share inside outage windows;  unallocated_units: the rest.
-- Parameters: $billing_month, $month_start, $month_end.
with gpus as (
    select
        n.cluster,
        n.node,
        n.gpu_model,
        unnest(range(n.gpus)) as gpu_index,
        greatest(n.in_service_from, $month_start::timestamp) as service_from,
        least(n.in_service_to, $month_end::timestamp) as service_to
    from catalog_nodes as n
),

in_service as (
    select * from gpus where service_to > service_from
),

held as (
    -- each GPU a job held in the month, over the whole time it held it (the span
    -- job_gpu_hours cuts into segments: the capacity needs no cuts)
    select
        j.cluster,
        g.node,
        g.gpu_index,
        g.gpu_share,
        greatest(j.start_at, $month_start::timestamp) as held_from,
        least(j.held_until, $month_end::timestamp) as held_to
    from stg_jobs as j
    join job_gpus as g using (billing_month, cluster, job_id)
    where j.billing_month = $billing_month and j.held_until > j.start_at
),

changes as (
    -- +share when a job starts holding the GPU, -share when it stops
    select
        h.cluster, h.node, h.gpu_index, greatest(h.held_from, i.service_from) as moment,
        h.gpu_share as share_change, 0 as outage_change
    from held as h
    join in_service as i using (cluster, node, gpu_index)
    where h.held_to > i.service_from and h.held_from < i.service_to
    union all
    select h.cluster, h.node, h.gpu_index, least(h.held_to, i.service_to), -h.gpu_share, 0
    from held as h
    join in_service as i using (cluster, node, gpu_index)
    where h.held_to > i.service_from and h.held_from < i.service_to
    union all
    -- outage windows (merged per node, so never overlapping) clipped to the service window
    select i.cluster, i.node, i.gpu_index, greatest(o.outage_from, i.service_from), 0, 1
    from in_service as i
    join catalog_outage_windows as o
        on o.cluster = i.cluster and o.node = i.node
        and o.outage_from < i.service_to and o.outage_to > i.service_from
    union all
    select i.cluster, i.node, i.gpu_index, least(o.outage_to, i.service_to), 0, -1
    from in_service as i
    join catalog_outage_windows as o
        on o.cluster = i.cluster and o.node = i.node
        and o.outage_from < i.service_to and o.outage_to > i.service_from
    union all
    -- the service window's edges bound the timeline
    select cluster, node, gpu_index, service_from, 0, 0 from in_service
    union all
    select cluster, node, gpu_index, service_to, 0, 0 from in_service
),

points as (
    select
        cluster, node, gpu_index, moment,
        sum(share_change) as share_change, sum(outage_change) as outage_change
    from changes
    group by all
),

intervals as (
    select
        cluster, node, gpu_index,
        epoch_ms(lead(moment) over timeline) - epoch_ms(moment) as length_ms,
        sum(share_change) over running as held_share,
        sum(outage_change) over running > 0 as in_outage
    from points
    window
        timeline as (partition by cluster, node, gpu_index order by moment),
        running as (
            partition by cluster, node, gpu_index order by moment
            rows between unbounded preceding and current row
        )
),

used as (
    select
        cluster, node, gpu_index,
        sum(length_ms * least(held_share, whole_gpu()))::bigint as busy_units,
        sum(length_ms * greatest(held_share - whole_gpu(), 0))::bigint as overlap_units,
        coalesce(
            sum(length_ms * (whole_gpu() - least(held_share, whole_gpu()))) filter (in_outage), 0
        )::bigint as down_units
    from intervals
    where length_ms is not null
    group by all
),

final as (
    select
        $billing_month::date as billing_month,
        i.cluster,
        i.node,
        i.gpu_index,
        i.gpu_model,
        (epoch_ms(i.service_to) - epoch_ms(i.service_from)) * whole_gpu() as capacity_units,
        u.busy_units,
        u.overlap_units,
        u.down_units
    from in_service as i
    join used as u using (cluster, node, gpu_index)
)

select *, capacity_units - busy_units - down_units as unallocated_units
from final
order by cluster, node, gpu_index
