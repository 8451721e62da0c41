-- One row per job × GPU model × billing day: the telemetry-derived time of the job in the
-- billing month, in GPU units (1/420 GPU-ms: a sample's covered milliseconds × the job's share
-- of the GPU). Billing days are 24-hour periods from $month_start, as in utilization_daily
-- (`day` is their first date); a sample's covered time that runs past the end of its day counts
-- in the next day, so each day holds exactly the time inside it.
-- Each sample is attributed to the job segment holding its GPU at its timestamp (equi-join on
-- node, GPU and hour, then the exact range check); its covered time is clipped at the job's
-- end in the month (or the node's next outage edge), never at the hour boundary.
-- Idle samples (util < $idle_threshold_pct) in an unbroken run lasting >= $zombie_min_ms are
-- zombie time: a run is broken by any busy sample of the job's GPU, not by a gap without
-- samples. The daily rollup labels the runs of each series-day (idle_run: 0 before the day's
-- first busy sample, then growing at each busy sample), so runs are summed per piece (job
-- GPU × day × idle_run) and pieces are stitched across midnight here, with no sample-level
-- window.
-- Parameters: $billing_month, $month_start, $sample_files, $idle_threshold_pct, $zombie_min_ms.
with job_gpu_keys as (
    -- one integer per job GPU: the samples (tens of millions of rows) carry it through the
    -- join and the sums instead of four strings; the names come back on the summed rows
    select
        row_number() over (order by cluster, job_id, node, gpu_index) as job_gpu,
        cluster,
        job_id,
        node,
        gpu_index,
        gpu_model
    from (
        select distinct cluster, job_id, node, gpu_index, gpu_model
        from job_gpu_hours
        where billing_month = $billing_month
    )
),

segments as (
    select
        k.job_gpu, g.cluster, g.node, g.gpu_index, g.hour, g.seg_from, g.seg_to,
        epoch_ms(g.cover_until) as cover_until_ms, g.in_outage, g.gpu_share
    from job_gpu_hours as g
    join job_gpu_keys as k using (cluster, job_id, node, gpu_index)
    where g.billing_month = $billing_month
),

attributed as (
    select
        g.job_gpu,
        g.in_outage,
        g.gpu_share,
        s.day,
        s.idle_run,
        s.util_pct,
        epoch_ms(s.ts) as ts_ms,
        least(s.cover_ms, g.cover_until_ms - epoch_ms(s.ts)) as cover_ms
    from read_parquet($sample_files, hive_partitioning = true) as s
    join segments as g
        on g.cluster = s.cluster
        and g.node = s.node
        and g.gpu_index = s.gpu_index
        and g.hour = date_trunc('hour', s.ts)
        and s.ts >= g.seg_from
        and s.ts < g.seg_to
),

sample_sums as (
    -- the only pass over the samples: plain sums per part of a piece, the GPU share and the
    -- day's spill applied to the sums after. Covered times never overlap within a job GPU, so
    -- only a part's last sample can reach past its billing day's end: end_ms and
    -- last_util_pct (of the latest sample) give the spill.
    select
        job_gpu,
        in_outage,
        gpu_share,
        day,
        (ts_ms - epoch_ms($month_start::timestamp)) // 86400000 as day_index,
        case when util_pct < $idle_threshold_pct then idle_run end as run,
        max(idle_run) as last_run,
        sum(cover_ms) as cover_ms,
        sum(cover_ms * util_pct) as util_weighted_ms,
        max(ts_ms + cover_ms) as end_ms,
        arg_max(util_pct, ts_ms) as last_util_pct
    from attributed
    group by all
),

spilled as (
    -- spill_ms: the part of the covered time past the end of the billing day
    select
        *,
        greatest(
            end_ms - epoch_ms($month_start::timestamp) - (day_index + 1) * 86400000, 0
        ) as spill_ms
    from sample_sums
),

day_parts as (
    -- per job GPU, rollup day and billing day: one row per idle-run piece (its idle samples;
    -- run = idle_run) and one row for the busy samples (run NULL); last_run = the highest
    -- idle_run in the row. spill_*: the share of each sum that belongs to the next billing day.
    select
        job_gpu,
        day,
        day_index,
        run,
        max(last_run) as last_run,
        sum(cover_ms) as cover_ms,
        sum(cover_ms * gpu_share) as measured_units,
        sum(util_weighted_ms * gpu_share) as util_weighted_units,
        coalesce(sum(cover_ms * gpu_share) filter (not in_outage), 0)
            as measured_outside_outage_units,
        sum(spill_ms * gpu_share) as spill_units,
        sum(spill_ms * gpu_share * last_util_pct) as spill_util_weighted_units,
        coalesce(sum(spill_ms * gpu_share) filter (not in_outage), 0)
            as spill_outside_outage_units
    from spilled
    group by all
),

pieces as (
    -- the runs are found on whole rollup days: a billing day other than the UTC day splits a
    -- piece in two, which is still one run
    select job_gpu, day, run, max(last_run) as last_run, sum(cover_ms) as cover_ms
    from day_parts
    group by all
),

days as (
    -- whether the job GPU's day ended inside an idle run (its last piece has idle samples)
    select job_gpu, day, coalesce(max(run) = max(last_run), false) as ended_idle
    from pieces
    group by all
),

continued as (
    select
        *,
        coalesce(lag(ended_idle) over (partition by job_gpu order by day), false)
            as previous_day_ended_idle
    from days
),

runs as (
    -- an idle piece starts a run unless it opens its day (no busy sample before it that day)
    -- and the job GPU's previous day with samples ended idle
    select
        p.*,
        sum(case when p.run = 0 and c.previous_day_ended_idle then 0 else 1 end) over (
            partition by p.job_gpu order by p.day, p.run rows unbounded preceding
        ) as run_no
    from pieces as p
    join continued as c using (job_gpu, day)
    where p.run is not null
),

classified as (
    select
        job_gpu, day, run,
        sum(cover_ms) over (partition by job_gpu, run_no) >= $zombie_min_ms as is_zombie
    from runs
),

billed as (
    -- each part in its billing day, less what it spills into the next; the spill in that one
    select
        p.job_gpu, p.day_index, c.is_zombie,
        p.measured_units - p.spill_units as measured_units,
        p.util_weighted_units - p.spill_util_weighted_units as util_weighted_units,
        p.measured_outside_outage_units - p.spill_outside_outage_units
            as measured_outside_outage_units
    from day_parts as p
    left join classified as c using (job_gpu, day, run)
    union all
    select
        p.job_gpu, p.day_index + 1, c.is_zombie,
        p.spill_units, p.spill_util_weighted_units, p.spill_outside_outage_units
    from day_parts as p
    left join classified as c using (job_gpu, day, run)
    where p.spill_units > 0
),

final as (
    select
        $billing_month::date as billing_month,
        k.cluster,
        k.job_id,
        k.gpu_model,
        ($billing_month::date + b.day_index::int) as day,
        sum(b.measured_units)::bigint as measured_units,
        sum(b.util_weighted_units) as util_weighted_units,
        sum(b.measured_outside_outage_units)::bigint as measured_outside_outage_units,
        coalesce(sum(b.measured_outside_outage_units) filter (b.is_zombie), 0)::bigint
            as zombie_units,
        coalesce(sum(b.measured_outside_outage_units) filter (not b.is_zombie), 0)::bigint
            as idle_units,
        coalesce(sum(b.measured_outside_outage_units) filter (b.is_zombie is null), 0)::bigint
            as productive_units
    from billed as b
    join job_gpu_keys as k using (job_gpu)
    group by all
)

select * from final
