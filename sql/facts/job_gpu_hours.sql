-- One row per job × GPU × hour segment of allocated time inside the billing month: each GPU a
-- job held is cut at hour boundaries (so telemetry joins on node, GPU and hour, an equi-join),
-- where an outage window of its node begins or ends (so outage time is known exactly) and
-- where a billing day begins inside an hour (a billing timezone off UTC by part of an hour,
-- such as Asia/Kolkata: the catalog's validity dates change tenants and rates there).
-- day_index: the billing day of the segment (24-hour periods from $month_start, from 0, as
-- in utilization_daily and job_sample_time). priced_at: the moment the segment's tenant and
-- rate are looked up at (job_gpu_charges), the start of its hour, or of its billing day when
-- that begins inside the hour.
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

off_hour_days as (
    -- the billing days that begin inside an hour (none in a timezone off UTC by whole hours)
    select day_from, date_trunc('hour', day_from) as hour
    from (
        select unnest(range($month_start::timestamp, $month_end::timestamp, interval 1 day))
            as day_from
    )
    where day_from <> date_trunc('hour', day_from)
),

edges as (
    -- the pieces cut inside: where an outage window of the node begins or ends, or a billing
    -- day begins
    select p.cluster, p.job_id, p.node, p.gpu_index, p.hour, e.edge
    from pieces as p
    join (
        select cluster, node, unnest([outage_from, outage_to]) as edge
        from catalog_outage_windows
    ) as e
        on e.cluster = p.cluster and e.node = p.node
        and e.edge > p.piece_from and e.edge < p.piece_to
    union all
    select p.cluster, p.job_id, p.node, p.gpu_index, p.hour, d.day_from
    from pieces as p
    join off_hour_days as d
        on d.hour = p.hour and d.day_from > p.piece_from and d.day_from < p.piece_to
),

cuts as (
    -- the pieces with edges inside them, and their cut points
    select
        p.cluster, p.job_id, p.node, p.gpu_index, p.hour,
        list_sort(list_distinct(
            [any_value(p.piece_from), any_value(p.piece_to)] || list(e.edge)
        )) as points
    from pieces as p
    join edges as e using (cluster, job_id, node, gpu_index, hour)
    group by all
),

cut_segments as (
    select
        p.* exclude (points),
        p.points[i] as seg_from,
        p.points[i + 1] as seg_to
    from (
        select c.*, unnest(range(1, len(c.points))) as i
        from cuts as c
    ) as p
),

segments as (
    select
        p.cluster, p.job_id, p.node, p.gpu_index, p.gpu_share, p.gpu_model, p.hour,
        p.held_to, p.piece_from as seg_from, p.piece_to as seg_to
    from pieces as p
    anti join cuts using (cluster, job_id, node, gpu_index, hour)
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
        (epoch_ms(s.seg_from) - epoch_ms($month_start::timestamp)) // ms_per_day()
            as day_index,
        greatest(s.hour, $month_start::timestamp + day_index * interval 1 day) as priced_at,
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
