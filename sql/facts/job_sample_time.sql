-- One row per job × GPU model: the telemetry-derived time of the job in the billing month,
-- in GPU units (1/420 GPU-ms: a sample's covered milliseconds × the job's share of the GPU).
-- Each sample is attributed to the job segment holding its GPU at its timestamp (equi-join on
-- node, GPU and hour, then the exact range check); its covered time is clipped at the job's
-- end in the month (or the node's next outage edge), never at the hour boundary.
-- Idle samples (util < $idle_threshold_pct) in an unbroken run lasting >= $zombie_min_ms are
-- zombie time: a run is broken by any busy sample of the job's GPU, not by a gap without
-- samples. The daily rollup numbers the runs of each series-day (idle_run: busy samples so
-- far that day), so runs are summed per piece (job GPU × day × idle_run) and pieces are
-- stitched across midnight here, with no sample-level window.
-- Parameters: $billing_month, $sample_files, $idle_threshold_pct, $zombie_min_ms.
with attributed as (
    select
        g.cluster,
        g.job_id,
        g.node,
        g.gpu_index,
        g.gpu_model,
        g.in_outage,
        g.gpu_share,
        s.day,
        s.idle_run,
        s.util_pct,
        least(s.cover_ms, epoch_ms(g.cover_until) - epoch_ms(s.ts)) as cover_ms,
        s.util_pct < $idle_threshold_pct as is_idle
    from read_parquet($sample_files, hive_partitioning = true) as s
    join job_gpu_hours as g
        on g.billing_month = $billing_month
        and g.cluster = s.cluster
        and g.node = s.node
        and g.gpu_index = s.gpu_index
        and g.hour = date_trunc('hour', s.ts)
        and s.ts >= g.seg_from
        and s.ts < g.seg_to
),

pieces as (
    -- per job GPU and day: one row per idle-run piece (its idle samples; run = idle_run) and
    -- one row for the busy samples (run NULL); last_run = the highest idle_run in the row
    select
        cluster,
        job_id,
        gpu_model,
        node,
        gpu_index,
        day,
        case when is_idle then idle_run end as run,
        max(idle_run) as last_run,
        sum(cover_ms) as cover_ms,
        sum(cover_ms * gpu_share) as measured_units,
        sum(cover_ms * gpu_share * util_pct) as util_weighted_units,
        coalesce(sum(cover_ms * gpu_share) filter (not in_outage), 0)
            as measured_outside_outage_units
    from attributed
    group by all
),

days as (
    -- whether the job GPU's day ended inside an idle run (its last piece has idle samples)
    select
        cluster,
        job_id,
        node,
        gpu_index,
        day,
        coalesce(max(run) = max(last_run), false) as ended_idle
    from pieces
    group by all
),

continued as (
    select
        *,
        coalesce(
            lag(ended_idle) over (partition by cluster, job_id, node, gpu_index order by day),
            false
        ) as previous_day_ended_idle
    from days
),

runs as (
    -- an idle piece starts a run unless it opens its day (no busy sample before it that day)
    -- and the job GPU's previous day with samples ended idle
    select
        p.*,
        sum(case when p.run = 0 and c.previous_day_ended_idle then 0 else 1 end) over (
            partition by p.cluster, p.job_id, p.node, p.gpu_index
            order by p.day, p.run rows unbounded preceding
        ) as run_no
    from pieces as p
    join continued as c using (cluster, job_id, node, gpu_index, day)
    where p.run is not null
),

classified as (
    select
        *,
        sum(cover_ms) over (partition by cluster, job_id, node, gpu_index, run_no)
            >= $zombie_min_ms as is_zombie
    from runs
),

final as (
    select
        $billing_month::date as billing_month,
        cluster,
        job_id,
        gpu_model,
        sum(measured_units)::bigint as measured_units,
        sum(util_weighted_units) as util_weighted_units,
        sum(measured_outside_outage_units)::bigint as measured_outside_outage_units,
        coalesce(sum(measured_outside_outage_units) filter (is_zombie), 0)::bigint
            as zombie_units,
        coalesce(sum(measured_outside_outage_units) filter (not is_zombie), 0)::bigint
            as idle_units,
        coalesce(sum(measured_outside_outage_units) filter (is_zombie is null), 0)::bigint
            as productive_units
    from (
        select * from pieces where run is null
        union all by name
        select * from classified
    )
    group by all
)

select * from final
