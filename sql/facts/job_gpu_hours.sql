-- One row per job × GPU × hour segment of allocated time inside the billing month: each GPU a
-- job held is cut at hour boundaries (so telemetry joins on node, GPU and hour, an equi-join)
-- and where an outage window of its node begins or ends (so outage time is known exactly).
-- gpu_model is the node's model from the inventory, else the job's, else 'unknown'.
-- gpu_ms is the time the job held (part of) the GPU; gpu_units = gpu_ms × gpu_share, the
-- GPU-equivalent time in 1/420ths of a GPU-millisecond (3,600,000 × 420 units = 1 GPU-hour).
-- Parameters: $billing_month, $month_start, $month_end.
with held as (
    select
        j.cluster,
        j.job_id,
        g.node,
        g.gpu_index,
        g.gpu_share,
        coalesce(n.gpu_model, j.gpu_model, 'unknown') as gpu_model,
        greatest(j.start_at, $month_start::timestamp) as held_from,
        least(j.held_until, $month_end::timestamp) as held_to
    from stg_jobs as j
    join job_gpus as g using (billing_month, cluster, job_id)
    left join catalog_nodes as n on n.cluster = j.cluster and n.node = g.node
    where j.billing_month = $billing_month
),

pieces as (
    select
        *,
        greatest(held_from, hour) as piece_from,
        least(held_to, hour + interval 1 hour) as piece_to
    from (
        select *, unnest(range(date_trunc('hour', held_from), held_to, interval 1 hour)) as hour
        from held
        where held_to > held_from
    )
),

outage_cuts as (
    -- pieces an outage window overlaps, with the window edges that fall inside them
    select
        p.cluster, p.job_id, p.node, p.gpu_index, p.hour,
        list_sort(list_distinct(
            [any_value(p.piece_from), any_value(p.piece_to)]
            || coalesce(list(o.outage_from) filter (
                o.outage_from > p.piece_from and o.outage_from < p.piece_to
            ), [])
            || coalesce(list(o.outage_to) filter (
                o.outage_to > p.piece_from and o.outage_to < p.piece_to
            ), [])
        )) as points
    from pieces as p
    join catalog_outage_windows as o
        on o.cluster = p.cluster and o.node = p.node
        and o.outage_from < p.piece_to and o.outage_to > p.piece_from
    group by all
),

cut_segments as (
    select
        p.* exclude (points),
        p.points[i] as seg_from,
        p.points[i + 1] as seg_to
    from (
        select c.*, unnest(range(1, len(c.points))) as i
        from outage_cuts as c
    ) as p
),

segments as (
    select
        p.cluster, p.job_id, p.node, p.gpu_index, p.gpu_share, p.gpu_model, p.hour,
        p.held_to, p.piece_from as seg_from, p.piece_to as seg_to
    from pieces as p
    anti join outage_cuts using (cluster, job_id, node, gpu_index, hour)
    union all
    select
        p.cluster, p.job_id, p.node, p.gpu_index, p.gpu_share, p.gpu_model, p.hour,
        p.held_to, c.seg_from, c.seg_to
    from pieces as p
    join cut_segments as c using (cluster, job_id, node, gpu_index, hour)
),

final as (
    select
        $billing_month::date as billing_month,
        s.* exclude (held_to),
        epoch_ms(s.seg_to) - epoch_ms(s.seg_from) as gpu_ms,
        (epoch_ms(s.seg_to) - epoch_ms(s.seg_from)) * s.gpu_share as gpu_units,
        (exists (
            select 1 from catalog_outage_windows as o
            where o.cluster = s.cluster and o.node = s.node
                and s.seg_from >= o.outage_from and s.seg_from < o.outage_to
        )) as in_outage,
        -- how far a sample taken in this segment may count: to the job's end in the month or
        -- the next outage edge of the node, not to the hour boundary (a sample at 10:59:30
        -- with a 60 s step covers until 11:00:30 when the job goes on)
        least(s.held_to, coalesce((
            select min(case when o.outage_from > s.seg_from then o.outage_from else o.outage_to end)
            from catalog_outage_windows as o
            where o.cluster = s.cluster and o.node = s.node and o.outage_to > s.seg_from
        ), s.held_to)) as cover_until
    from segments as s
)

select * from final
order by cluster, job_id, node, gpu_index, seg_from
