-- One row per inventory GPU (cluster × node × GPU index) in service during the billing month:
-- its capacity and the parts of it no job held, in milliseconds.
--   busy_union_ms: the union of the intervals jobs held it (two jobs at once count once here,
--                  twice in job time: that difference is the overlap data-quality error)
--   down_ms:       outage time no job held;  unallocated_ms: the rest.
-- Parameters: $billing_month, $month_start, $month_end.
with gpus as (
    select
        n.cluster,
        n.node,
        n.gpu_model,
        unnest(range(n.gpus)) as gpu_index,
        greatest(coalesce(n.in_service_from, $month_start::timestamp), $month_start::timestamp)
            as service_from,
        least(coalesce(n.in_service_to, $month_end::timestamp), $month_end::timestamp)
            as service_to
    from catalog_nodes as n
),

in_service as (
    select * from gpus where service_to > service_from
),

held as (
    -- every interval a job held a GPU, clipped to the GPU's service window
    select
        cluster, node, gpu_index,
        greatest(h.seg_from, i.service_from) as held_from,
        least(h.seg_to, i.service_to) as held_to
    from job_gpu_hours as h
    join in_service as i using (cluster, node, gpu_index)
    where h.billing_month = $billing_month
        and h.seg_to > i.service_from and h.seg_from < i.service_to
),

islands as (
    select
        *,
        sum(starts_island::int) over (partition by cluster, node, gpu_index order by held_from, held_to)
            as island
    from (
        select
            *,
            held_from > coalesce(max(held_to) over (
                partition by cluster, node, gpu_index order by held_from, held_to
                rows between unbounded preceding and 1 preceding
            ), held_from - interval 1 second) as starts_island
        from held
    )
),

busy as (
    select cluster, node, gpu_index, min(held_from) as busy_from, max(held_to) as busy_to
    from islands
    group by cluster, node, gpu_index, island
),

outages as (
    select
        i.cluster, i.node, i.gpu_index,
        greatest(o.outage_from, i.service_from) as outage_from,
        least(o.outage_to, i.service_to) as outage_to
    from in_service as i
    join catalog_outage_windows as o
        on o.cluster = i.cluster and o.node = i.node
        and o.outage_from < i.service_to and o.outage_to > i.service_from
),

outage_busy_overlap as (
    select
        o.cluster, o.node, o.gpu_index,
        sum(epoch_ms(least(o.outage_to, b.busy_to)) - epoch_ms(greatest(o.outage_from, b.busy_from)))
            as overlap_ms
    from outages as o
    join busy as b
        on b.cluster = o.cluster and b.node = o.node and b.gpu_index = o.gpu_index
        and b.busy_from < o.outage_to and b.busy_to > o.outage_from
    group by all
),

final as (
    select
        $billing_month::date as billing_month,
        i.cluster,
        i.node,
        i.gpu_index,
        i.gpu_model,
        epoch_ms(i.service_to) - epoch_ms(i.service_from) as capacity_ms,
        coalesce((
            select sum(epoch_ms(b.busy_to) - epoch_ms(b.busy_from)) from busy as b
            where b.cluster = i.cluster and b.node = i.node and b.gpu_index = i.gpu_index
        ), 0)::bigint as busy_union_ms,
        (coalesce((
            select sum(epoch_ms(o.outage_to) - epoch_ms(o.outage_from)) from outages as o
            where o.cluster = i.cluster and o.node = i.node and o.gpu_index = i.gpu_index
        ), 0) - coalesce((
            select sum(x.overlap_ms) from outage_busy_overlap as x
            where x.cluster = i.cluster and x.node = i.node and x.gpu_index = i.gpu_index
        ), 0))::bigint as down_ms
    from in_service as i
)

select *, capacity_ms - busy_union_ms - down_ms as unallocated_ms
from final
order by cluster, node, gpu_index
