-- One row per job × GPU model × billing day: the telemetry-derived time of the job in the
-- billing month, in GPU units (1/420 GPU-ms: a sample's covered milliseconds × the job's share
-- of the GPU). Billing days are 24-hour periods from $month_start, as in utilization_daily
-- (`day` is their first date); a sample's covered time that runs past the end of its day counts
-- in the next day, so each day holds exactly the time inside it.
-- Each sample is attributed to the job segment holding its GPU at its timestamp (equi-join on
-- the series key and hour, then the exact range check); a segment holding its GPU for a whole
-- hour takes the rollup's sums of that hour instead of its samples. A sample's covered time is
-- clipped at the job's end in the month (or the node's next outage edge), never at the hour
-- boundary.
-- Idle samples (util below the catalog's idle threshold, which the rollup applied) in an
-- unbroken run lasting >= $zombie_min_ms are zombie time: a run is broken by any busy sample
-- of the job's GPU, not by a gap without samples. The daily rollup labels the idle samples'
-- runs of each series-day (run: 0 before the day's first busy sample, then growing at each
-- busy sample; NULL for busy samples), so runs are summed per piece (job GPU × day × run) and
-- pieces are stitched across midnight here, with no sample-level window.
-- util_weighted_units (Σ GPU units × utilisation %) is exact: summed in integers, utilisation
-- in thousandths of a percent (util_milli_pct, *_milli_pct_* columns), and made a DECIMAL once
-- at the end, so the same samples give the same value whatever order threads add them in.
-- Memory and power ride along the same pass, summed in integers (whole MiB, milliwatts): the
-- time measured with a memory reading (memory_units), Σ units × MiB used (memory_mib_units),
-- the most memory a sample read (peak_memory_mib), the time measured with a power reading
-- (power_units) and energy, Σ units × mW (energy_mw_units; a GPU shared by several jobs gives
-- each its share, as for time). A sample without a memory or power reading adds no memory
-- time or energy.
-- Parameters: $billing_month, $month_start, $sample_files, $hour_files (the daily rollup's
-- samples and sums per series-hour), $zombie_min_ms.
with numbered_job_gpus as (
    -- one integer per job GPU: the samples (tens of millions of rows) carry integers through
    -- the join and the sums instead of four names, which come back on the summed rows
    select
        row_number() over () as job_gpu,
        -- one integer per job and GPU model: the rows of `final`, summed before the names
        dense_rank() over (order by cluster, job_id, gpu_model) as job_model,
        *
    from (
        select cluster, job_id, node, gpu_index, any_value(gpu_model) as gpu_model
        from job_gpu_hours
        where billing_month = $billing_month
        group by all
    )
),

series as (
    select *, series_key(cluster, node, gpu_index) as series_key
    from (select distinct cluster, node, gpu_index from numbered_job_gpus)
),

parts as (
    -- the month's job GPU hour segments, cut again where a billing day ends inside one (a
    -- billing time zone off UTC by part of an hour), so that each part lies in one billing day
    select
        job_gpu, series_key, hour, hour::date as day, day_index, in_outage, gpu_share,
        cover_until_ms,
        epoch_ms(day_start) + ms_per_day() as day_end_ms,
        greatest(seg_from, day_start) as part_from,
        least(seg_to, day_start + interval 1 day) as part_to
    from (
        select *, $month_start::timestamp + day_index * interval 1 day as day_start
        from (
            select
                k.job_gpu, s.series_key, g.hour, g.in_outage, g.gpu_share, g.seg_from,
                g.seg_to, epoch_ms(g.cover_until) as cover_until_ms,
                unnest(range(
                    (epoch_ms(g.seg_from) - epoch_ms($month_start::timestamp)) // ms_per_day(),
                    (epoch_ms(g.seg_to) - 1 - epoch_ms($month_start::timestamp)) // ms_per_day() + 1
                )) as day_index
            from job_gpu_hours as g
            join numbered_job_gpus as k using (cluster, job_id, node, gpu_index)
            join series as s using (cluster, node, gpu_index)
            where g.billing_month = $billing_month
        )
    )
),

stretches as (
    -- the parts of a job GPU that share a UTC day (the rollup's), billing day, outage state
    -- and cover_until, numbered: the samples are summed per stretch. cover_until and the
    -- billing day's end are at or after the end of each of its parts, and covered times never
    -- overlap within a job GPU, so only a stretch's latest sample can reach past them.
    select row_number() over () as stretch, *
    from (
        select distinct
            job_gpu, day, day_index, in_outage, gpu_share, cover_until_ms, day_end_ms
        from parts
    )
),

stretch_parts as (
    -- whole: the part holds its GPU for the whole hour, and takes the rollup's sums of the hour
    select
        s.stretch, p.series_key, p.hour, p.part_from, p.part_to,
        p.part_from = p.hour and p.part_to = p.hour + interval 1 hour as whole
    from parts as p
    join stretches as s using (job_gpu, day, day_index, in_outage, cover_until_ms)
),

stretch_sums as (
    -- the only pass over the telemetry: plain sums per stretch and idle-run piece (run: the
    -- rollup's label of an idle sample's run, NULL for busy ones), and the latest sample of
    -- each; from the rollup's sums per series-hour and piece for whole hours, from the
    -- samples for the others
    select
        stretch,
        run,
        -- bigint, not the hugeint of a sum: a stretch lies in one day, so even its products
        -- with a whole GPU's share stay below 2^63 by a factor of 100 (1 kW, 200 GiB), and
        -- the rows after this are half as wide (at 10,000 GPUs they outgrew 2GB as hugeint);
        -- a cast that overflowed would fail the run, never wrap
        sum(columns(lambda c: c in (
            'cover_ms', 'util_milli_pct_ms', 'mem_cover_ms', 'mem_mib_ms', 'power_mw_ms',
            'power_cover_ms'
        )))::bigint,
        max(peak_mem_mib) as peak_mem_mib,
        max(last_ts) as last_ts,
        arg_max(last_cover_ms, last_ts) as last_cover_ms,
        arg_max(last_util_milli_pct, last_ts) as last_util_milli_pct,
        arg_max_null(last_mem_mib, last_ts) as last_mem_mib,
        arg_max_null(last_power_mw, last_ts) as last_power_mw
    from (
        select
            g.stretch,
            h.run,
            h.cover_ms,
            util_milli_pct(h.util_weighted_ms) as util_milli_pct_ms,
            h.mem_cover_ms,
            h.mem_mib_ms,
            h.peak_mem_mib,
            h.power_mw_ms,
            h.power_cover_ms,
            h.last_ts,
            h.last_cover_ms,
            util_milli_pct(h.last_util_pct) as last_util_milli_pct,
            h.last_mem_mib,
            h.last_power_mw
        from read_parquet($hour_files) as h
        join stretch_parts as g
            on g.whole and g.series_key = h.series_key and g.hour = h.hour
        union all
        select
            g.stretch,
            s.run,
            s.cover_ms,
            s.cover_ms * util_milli_pct(s.util_pct),
            case when s.mem_used_mib is not null then s.cover_ms else 0 end,
            coalesce(s.cover_ms * whole_mib(s.mem_used_mib), 0),
            whole_mib(s.mem_used_mib),
            coalesce(s.cover_ms * milliwatts(s.power_w), 0),
            case when s.power_w is not null then s.cover_ms else 0 end,
            s.ts,
            s.cover_ms,  -- the union's last_cover_ms: a sample is its own last -- noqa: AL08
            util_milli_pct(s.util_pct),
            whole_mib(s.mem_used_mib),
            milliwatts(s.power_w)
        from read_parquet($sample_files) as s
        join stretch_parts as g
            on not g.whole
            and g.series_key = s.series_key
            and g.hour = s.hour
            and s.ts >= g.part_from
            and s.ts < g.part_to
    )
    group by all
),

clipped as (
    -- the latest sample's covered time past cover_until is dropped (clip_ms); what it covers
    -- past the end of the billing day (spill_ms) counts in the next day
    select
        *,
        greatest(last_end_ms - cover_until_ms, 0) as clip_ms,
        greatest(least(last_end_ms, cover_until_ms) - day_end_ms, 0) as spill_ms
    from (select *, epoch_ms(last_ts) + last_cover_ms as last_end_ms from stretch_sums)
    join stretches using (stretch)
),

day_parts as (
    -- per stretch: one row per idle-run piece (its idle samples, by their run label) and one row
    -- for the busy samples (run NULL), with the time of its latest sample. spill_*: the share
    -- of each sum that belongs to the next billing day.
    select
        job_gpu,
        day,
        day_index,
        run,
        last_ts,
        cover_ms - clip_ms as cover_ms,
        (cover_ms - clip_ms) * gpu_share as measured_units,
        (util_milli_pct_ms - clip_ms * last_util_milli_pct) * gpu_share as util_milli_pct_units,
        case when in_outage then 0 else (cover_ms - clip_ms) * gpu_share end
            as measured_outside_outage_units,
        spill_ms * gpu_share as spill_units,
        spill_ms * gpu_share * last_util_milli_pct as spill_util_milli_pct_units,
        case when in_outage then 0 else spill_ms * gpu_share end as spill_outside_outage_units,
        -- the clipped or spilled time of the latest sample carries its memory and power
        (mem_cover_ms - case when last_mem_mib is null then 0 else clip_ms end) * gpu_share
            as memory_units,
        (mem_mib_ms - clip_ms * coalesce(last_mem_mib, 0)) * gpu_share as memory_mib_units,
        peak_mem_mib,
        (power_cover_ms - case when last_power_mw is null then 0 else clip_ms end) * gpu_share
            as power_units,
        (power_mw_ms - clip_ms * coalesce(last_power_mw, 0)) * gpu_share as energy_mw_units,
        case when last_mem_mib is null then 0 else spill_ms * gpu_share end
            as spill_memory_units,
        spill_ms * gpu_share * coalesce(last_mem_mib, 0) as spill_memory_mib_units,
        case when last_power_mw is null then 0 else spill_ms * gpu_share end
            as spill_power_units,
        spill_ms * gpu_share * coalesce(last_power_mw, 0) as spill_energy_mw_units
    from clipped
),

pieces as (
    -- the runs are found on whole UTC days: a billing day other than the UTC day splits a
    -- piece in two, which is still one run
    select job_gpu, day, run, max(last_ts) as last_ts, sum(cover_ms) as cover_ms
    from day_parts
    group by all
),

days as (
    -- whether the job GPU's day ended inside an idle run (its latest sample is idle)
    select
        job_gpu,
        day,
        coalesce(max(last_ts) filter (run is not null) = max(last_ts), false) as ended_idle
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
    select r.job_gpu, r.day, r.run, t.cover_ms >= $zombie_min_ms as is_zombie
    from runs as r
    join (
        select job_gpu, run_no, sum(cover_ms) as cover_ms from runs group by all
    ) as t using (job_gpu, run_no)
),

billed as (
    -- each row in its billing day, less what it spills into the next; the spill in that one
    select
        p.job_gpu, p.day_index, c.is_zombie,
        p.measured_units, p.util_milli_pct_units, p.measured_outside_outage_units,
        p.spill_units, p.spill_util_milli_pct_units, p.spill_outside_outage_units,
        p.memory_units, p.memory_mib_units, p.peak_mem_mib, p.power_units, p.energy_mw_units,
        p.spill_memory_units, p.spill_memory_mib_units, p.spill_power_units,
        p.spill_energy_mw_units
    from day_parts as p
    left join classified as c using (job_gpu, day, run)
),

job_gpu_days as (
    -- summed on the job GPU's integer first, the names joined on the fewer summed rows
    select
        job_gpu,
        day_index,
        sum(measured_units) as measured_units,
        sum(util_milli_pct_units) as util_milli_pct_units,
        sum(measured_outside_outage_units) as measured_outside_outage_units,
        coalesce(sum(measured_outside_outage_units) filter (is_zombie), 0) as zombie_units,
        coalesce(sum(measured_outside_outage_units) filter (not is_zombie), 0) as idle_units,
        coalesce(sum(measured_outside_outage_units) filter (is_zombie is null), 0)
            as productive_units,
        sum(memory_units) as memory_units,
        sum(memory_mib_units) as memory_mib_units,
        max(peak_mem_mib) as peak_mem_mib,
        sum(power_units) as power_units,
        sum(energy_mw_units) as energy_mw_units
    from (
        select
            job_gpu, day_index, is_zombie,
            measured_units - spill_units as measured_units,
            util_milli_pct_units - spill_util_milli_pct_units as util_milli_pct_units,
            measured_outside_outage_units - spill_outside_outage_units
                as measured_outside_outage_units,
            memory_units - spill_memory_units as memory_units,
            memory_mib_units - spill_memory_mib_units as memory_mib_units,
            -- a sample's reading counts in the day it was taken, its spilled time aside
            peak_mem_mib,
            power_units - spill_power_units as power_units,
            energy_mw_units - spill_energy_mw_units as energy_mw_units
        from billed
        union all
        select
            job_gpu, day_index + 1, is_zombie,
            spill_units, spill_util_milli_pct_units, spill_outside_outage_units,
            spill_memory_units, spill_memory_mib_units, null, spill_power_units,
            spill_energy_mw_units
        from billed
        where spill_units > 0
    )
    group by all
),

job_model_days as (
    select
        k.job_model,
        d.day_index,
        sum(d.measured_units)::bigint as measured_units,
        (sum(d.util_milli_pct_units)::decimal(38, 0) * 0.001)::decimal(38, 3)
            as util_weighted_units,
        sum(d.measured_outside_outage_units)::bigint as measured_outside_outage_units,
        sum(d.zombie_units)::bigint as zombie_units,
        sum(d.idle_units)::bigint as idle_units,
        sum(d.productive_units)::bigint as productive_units,
        sum(d.memory_units)::bigint as memory_units,
        sum(d.memory_mib_units)::hugeint as memory_mib_units,
        max(d.peak_mem_mib)::bigint as peak_memory_mib,
        sum(d.power_units)::bigint as power_units,
        sum(d.energy_mw_units)::hugeint as energy_mw_units
    from job_gpu_days as d
    join numbered_job_gpus as k using (job_gpu)
    group by all
),

job_models as (
    select distinct job_model, cluster, job_id, gpu_model from numbered_job_gpus
),

final as (
    select
        $billing_month::date as billing_month,
        m.cluster,
        m.job_id,
        m.gpu_model,
        ($billing_month::date + d.day_index::int) as day,
        d.* exclude (job_model, day_index)
    from job_model_days as d
    join job_models as m using (job_model)
)

select * from final
