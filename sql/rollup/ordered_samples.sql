-- One row per valid utilisation sample of the day (and each series' look-ahead sample of the
-- next day) with the timestamp of the next row of its series (series_id), whichever metric
-- (util_rank) each carries: a series may carry GR_ENGINE_ACTIVE in some hours of the day and
-- another metric in the others (day_samples.sql), and its samples follow each other across.
-- A row whose next row has the same timestamp is a folded duplicate: of equal timestamps the
-- last read (file_id, line: landing file name order) wins (two metrics never share a
-- timestamp: the lower one is superseded in that hour). Memory and power that came in series
-- of their own (util_rank 0) join the sample of the same GPU and timestamp.
-- last_busy_ts: the timestamp of the series' latest busy row (util_pct >= $idle_threshold_pct)
-- so far in the same order, folded duplicates included; found in the sort that finds next_ts,
-- so that the rollup labels idle runs without sorting the day again (last_value ignoring
-- NULLs adds 0.04 s to a bench day's window, a running count of busy rows 0.25 s).
-- line orders the rows but is not kept (no statement after this one reads it): the window
-- sort carries every column kept, and the column util_rank made this statement 3.9 % slower on
-- the bench day of benchmarks/rollup_day.py, 1.6 % without line (40 interleaved runs).
-- Reads the temporary table day_samples. Parameters: $idle_threshold_pct.
with utilisation as (
    select * from day_samples
    where reject_reason is null and util_rank > 0 and not superseded
),

other_metrics as (
    select
        series_id, ts,
        arg_max(mem_used_mib, (file_id, line)) filter (mem_used_mib is not null) as mem_used_mib,
        arg_max(power_w, (file_id, line)) filter (power_w is not null) as power_w
    from day_samples
    where reject_reason is null and util_rank = 0 and not look_ahead
    group by all
)

select
    u.series_id,
    u.ts,
    u.util_pct,
    u.util_rank,
    coalesce(u.mem_used_mib, o.mem_used_mib) as mem_used_mib,
    coalesce(u.power_w, o.power_w) as power_w,
    u.file_id,
    u.billing_month,
    u.look_ahead,
    lead(u.ts) over series_order as next_ts,
    last_value(case when u.util_pct >= $idle_threshold_pct then u.ts end ignore nulls)
        over series_order as last_busy_ts
from utilisation as u
left join other_metrics as o using (series_id, ts)
window series_order as (
    partition by u.series_id
    order by u.ts, u.file_id, u.line
    rows unbounded preceding
)
