-- One row per incident of the billing month: a time a node (or, for an ambiguous node failure,
-- a set of nodes) was down or silent while in service. Three sources, `source`:
--   outage_window      an outage window of outages.yaml (the catalog's record: cause, start and
--                      end). The node is down: its GPU-hours in the window are lost and bill as
--                      the `down` bucket.
--   node_fail          jobs the scheduler ended as NODE_FAIL at a moment no outage window
--                      of their nodes covers (a NODE_FAIL inside a window is one of that outage's
--                      jobs hit). The scheduler records when a node failed, not when it came
--                      back: ended_at is NULL (recovery not recorded) and no time is counted as
--                      down. Slurm does not say which of a multi-node job's nodes failed: one
--                      incident names them all (`node`: their names, comma-separated).
--   telemetry_silence  every GPU of a node stopped reporting for at least $silence_min_ms while
--                      the catalog lists the node in service and no outage window explains it:
--                      inferred (`inferred` true), never counted as down (an exporter can stop
--                      while the node works); its silent GPU-hours are shown as evidence. A node
--                      without a single sample in the month is not silent: its telemetry is
--                      missing (data quality), not interrupted.
-- started_at / ended_at are the incident's own (an outage may run past the month); month_ms
-- (the incident's milliseconds) and gpu_hours (its nodes' GPUs × that time) are clipped to the
-- month and the node's service window; NULL when the end is not recorded. jobs_hit: the jobs
-- holding a GPU of the node at some moment of the incident, or ended by it (NODE_FAIL at its
-- start).
-- Reads sample_series (each series' names and its first and last covered time of each day)
-- and, of the daily rollup's samples files ($sample_files), the samples followed by a
-- stretch without cover (silent_until).
-- Parameters: $billing_month, $month_start, $month_end, $silence_min_ms.
with nodes as (
    select * from node_service where billing_month = $billing_month
),

outages as (
    select
        o.cluster, o.node, 'outage_window' as source, o.reason as cause,
        o.outage_from as started_at, o.outage_to as ended_at
    from catalog_outage_windows as o
    semi join nodes as n
        on o.cluster = n.cluster and o.node = n.node
        and o.outage_from < n.service_to and o.outage_to > n.service_from
),

held as (
    -- each job's hold of each node of the month (start to end, or to the export if running)
    select distinct
        j.cluster, g.node, j.job_id, j.state, j.start_at as held_from, j.held_until as held_to
    from stg_jobs as j
    join job_gpus as g using (billing_month, cluster, job_id)
    where j.billing_month = $billing_month and j.held_until > j.start_at
),

failures as (
    -- NODE_FAIL jobs ending in the month, and whether an outage window of one of their nodes
    -- covers the moment
    select
        h.cluster,
        h.job_id,
        h.held_to as failed_at,
        string_agg(h.node, ',' order by h.node) as nodes,
        bool_or(exists (
            from outages as o
            where o.cluster = h.cluster and o.node = h.node
                and h.held_to >= o.started_at and h.held_to < o.ended_at
        )) as in_outage
    from held as h
    where
        h.state = 'NODE_FAIL'
        and h.held_to >= $month_start::timestamp and h.held_to < $month_end::timestamp
    group by all
),

node_failures as (
    -- the unexplained failures: one incident per cluster, moment and set of nodes
    select distinct
        cluster, nodes as node, 'node_fail' as source, 'NODE_FAIL' as cause,
        failed_at as started_at, null::timestamp as ended_at
    from failures
    where not in_outage
),

series_days as (
    -- each series' days in the month: its node (a sample names its series by key only), its
    -- first sample and the end of its last one's covered time
    select
        cluster,
        node,
        series_key(cluster, node, gpu_index) as series_key,
        day,
        min(first_ts) as first_ts,
        max(covered_until) as covered_until
    from sample_series
    where billing_month = $billing_month
    group by all
),

uncovered as (
    -- each series' time that none of its samples covers, in stretches that do not overlap:
    -- before its first sample of the month, between its days and after its last one
    -- (series_days), and inside a day the stretches the rollup marked (silent_until: those of
    -- silence_floor_ms() or more, between two samples of the day and billing month). Only the
    -- marked samples are read, not the month's: an unmarked stretch is shorter than the floor,
    -- which a silence never is (settings), so it cannot hold one.
    select
        cluster,
        node,
        series_key,
        lag(covered_until) over (partition by cluster, series_key order by day) as uncovered_from,
        first_ts as uncovered_to
    from series_days
    union all
    select cluster, node, series_key, max(covered_until), null from series_days group by all
    union all
    select s.cluster, d.node, s.series_key, epoch_ms(epoch_ms(s.ts) + s.cover_ms), s.silent_until
    from read_parquet($sample_files) as s
    join (select distinct cluster, node, series_key from series_days) as d
        using (cluster, series_key)
    where
        s.silent_until is not null
        and s.ts >= $month_start::timestamp and s.silent_until < $month_end::timestamp
),

in_service as (
    -- the stretches inside the node's service window (its edges bound the open ones), as
    -- long as a silence at least
    select *
    from (
        select
            u.cluster,
            u.node,
            greatest(coalesce(u.uncovered_from, n.service_from), n.service_from) as moment_from,
            least(coalesce(u.uncovered_to, n.service_to), n.service_to) as moment_to
        from uncovered as u
        join nodes as n using (cluster, node)
    )
    where epoch_ms(moment_to) - epoch_ms(moment_from) >= $silence_min_ms
),

node_series as (
    select cluster, node, count(distinct series_key) as series from series_days group by all
),

uncovered_changes as (
    select cluster, node, moment, sum(change) as change
    from (
        select cluster, node, moment_from as moment, 1 as change from in_service
        union all
        select cluster, node, moment_to, -1 from in_service
    )
    group by all
),

silences as (
    -- a node is silent while none of its GPUs' samples covers the time: a sweep counting
    -- its series without cover; kept when as long as a silence
    select cluster, node, silent_from, silent_to
    from (
        select
            c.cluster,
            c.node,
            c.moment as silent_from,
            lead(c.moment) over timeline as silent_to,
            sum(c.change) over running = g.series as silent
        from uncovered_changes as c
        join node_series as g using (cluster, node)
        window
            timeline as (partition by c.cluster, c.node order by c.moment),
            running as (
                partition by c.cluster, c.node order by c.moment
                rows between unbounded preceding and current row
            )
    )
    where silent and epoch_ms(silent_to) - epoch_ms(silent_from) >= $silence_min_ms
),

edges as (
    -- the silences less the outage windows: a sweep over both kinds of edges per node
    select cluster, node, silent_from as moment, 1 as silence_change, 0 as outage_change
    from silences
    union all
    select cluster, node, silent_to, -1, 0 from silences
    union all
    select cluster, node, started_at, 0, 1 from outages semi join silences using (cluster, node)
    union all
    select cluster, node, ended_at, 0, -1 from outages semi join silences using (cluster, node)
),

points as (
    select
        cluster, node, moment,
        sum(silence_change) as silence_change, sum(outage_change) as outage_change
    from edges
    group by all
),

pieces as (
    select
        cluster,
        node,
        moment as piece_from,
        lead(moment) over timeline as piece_to,
        sum(silence_change) over running > 0 as silent,
        sum(outage_change) over running > 0 as in_outage
    from points
    window
        timeline as (partition by cluster, node order by moment),
        running as (
            partition by cluster, node order by moment
            rows between unbounded preceding and current row
        )
),

unexplained_silences as (
    -- an outage cuts a silence into pieces; a piece shorter than a silence is dropped
    select
        cluster, node, 'telemetry_silence' as source, 'telemetry silence' as cause,
        piece_from as started_at, piece_to as ended_at
    from pieces
    where
        silent and not in_outage
        and epoch_ms(piece_to) - epoch_ms(piece_from) >= $silence_min_ms
),

all_incidents as (
    select * from outages
    union all
    select * from node_failures
    union all
    select * from unexplained_silences
),

described as (
    -- the incident's nodes (one, or the nodes of an ambiguous node failure), their GPUs and
    -- the part of the incident inside the month and their service window
    select
        i.*,
        n.gpu_model,
        n.gpus,
        greatest(i.started_at, n.service_from) as month_from,
        least(i.ended_at, n.service_to) as month_to,
        n.node as member
    from all_incidents as i
    join nodes as n on n.cluster = i.cluster and list_contains(string_split(i.node, ','), n.node)
),

hits as (
    select
        d.cluster, d.node, d.source, d.started_at,
        list(distinct h.job_id order by h.job_id) as job_ids
    from described as d
    join held as h
        on h.cluster = d.cluster and h.node = d.member
        and h.held_from < coalesce(d.ended_at, d.started_at + interval 1 millisecond)
        and (h.held_to > d.started_at or h.state = 'NODE_FAIL' and h.held_to = d.started_at)
    group by all
),

incidents as (
    select
        cluster,
        node,
        source,
        started_at,
        any_value(cause) as cause,
        any_value(ended_at) as ended_at,
        -- the GPU model of the nodes (NULL when an ambiguous failure spans several)
        case when count(distinct gpu_model) = 1 then any_value(gpu_model) end as gpu_model,
        sum(gpus)::integer as gpus,
        -- its time in the month, none without a recorded end (an ambiguous node failure has
        -- none, so one node's time is the incident's)
        max(greatest(epoch_ms(month_to) - epoch_ms(month_from), 0))
        filter (ended_at is not null) as month_ms,
        sum(gpus * greatest(epoch_ms(month_to) - epoch_ms(month_from), 0))
        filter (ended_at is not null) as gpu_ms
    from described
    group by all
)

select
    $billing_month::date as billing_month,
    i.cluster,
    i.node,
    i.gpu_model,
    i.gpus,
    i.source,
    i.source = 'telemetry_silence' as inferred,
    i.cause,
    i.started_at,
    i.ended_at,
    (epoch_ms(i.ended_at) - epoch_ms(i.started_at)) / ms_per_hour() as duration_hours,
    -- recovered in the month: its duration counts in the month's MTTR
    coalesce(i.ended_at > $month_start::timestamp and i.ended_at <= $month_end::timestamp, false)
        as recovered_in_month,
    i.month_ms,
    i.gpu_ms / ms_per_hour() as gpu_hours,
    coalesce(len(h.job_ids), 0) as jobs_hit,
    coalesce(h.job_ids, []) as job_ids
from incidents as i
left join hits as h using (cluster, node, source, started_at)
order by i.cluster, i.started_at, i.node, i.source
