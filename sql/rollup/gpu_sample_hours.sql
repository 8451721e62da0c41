-- One row per GPU series × hour × idle-run piece of a day's rollup samples file (just
-- written; the hours file goes beside it): the sums attribution needs for a job that holds
-- the GPU for the whole hour, which it reads instead of the hour's samples (a sixtieth of the
-- rows at one sample a minute).
-- run: the samples' idle-run label (NULL for the busy ones); last_*: the hour's latest sample
-- in the piece. util_weighted_ms: Σ covered ms × utilisation %, exact (DECIMAL): summed in
-- integers (util_milli_pct), so the same samples give the same value in any row order.
-- Memory and power are summed the same way, in integers (whole_mib, milliwatts): mem_cover_ms
-- is the covered time of the samples that read memory (a series may carry utilisation only),
-- mem_mib_ms Σ covered ms × MiB used, peak_mem_mib the most the hour's samples read,
-- power_mw_ms Σ covered ms × mW (a sample without power adds no energy) and power_cover_ms
-- the covered time of the samples that read power. last_mem_mib and
-- last_power_mw (NULL when that sample read none) let attribution clip the latest sample.
-- idle_threshold_pct: the catalog's threshold the day's idle runs were labelled with (the
-- same on every row; attribution stops on a day labelled with another than the month's).
-- Parameters: $samples_file, $idle_threshold_pct.
select
    series_key,
    hour,
    run,
    count(*) as samples,
    sum(cover_ms)::bigint as cover_ms,
    (sum(cover_ms * util_milli_pct(util_pct)) * 0.001)::decimal(18, 3) as util_weighted_ms,
    max(ts) as last_ts,
    arg_max(cover_ms, ts) as last_cover_ms,
    arg_max(util_pct, ts) as last_util_pct,
    coalesce(sum(cover_ms) filter (mem_used_mib is not null), 0)::bigint as mem_cover_ms,
    coalesce(sum(cover_ms * whole_mib(mem_used_mib)), 0)::bigint as mem_mib_ms,
    max(whole_mib(mem_used_mib)) as peak_mem_mib,
    coalesce(sum(cover_ms * milliwatts(power_w)), 0)::bigint as power_mw_ms,
    coalesce(sum(cover_ms) filter (power_w is not null), 0)::bigint as power_cover_ms,
    arg_max_null(whole_mib(mem_used_mib), ts) as last_mem_mib,
    arg_max_null(milliwatts(power_w), ts) as last_power_mw,
    $idle_threshold_pct::double as idle_threshold_pct
from read_parquet($samples_file)
group by all
