-- One row per GPU series × hour × idle-run piece of a day's rollup samples file (just
-- written; the hours file goes beside it): the sums attribution needs for a job that holds
-- the GPU for the whole hour, which it reads instead of the hour's samples (a sixtieth of the
-- rows at one sample a minute).
-- run: the samples' idle-run label (NULL for the busy ones); last_*: the hour's latest sample
-- in the piece. util_weighted_ms: Σ covered ms × utilisation %, exact (DECIMAL): summed in
-- integers (util_milli_pct), so the same samples give the same value in any row order.
-- Parameters: $samples_file.
select
    series_key,
    hour,
    run,
    count(*) as samples,
    sum(cover_ms)::bigint as cover_ms,
    (sum(cover_ms * util_milli_pct(util_pct)) * 0.001)::decimal(18, 3) as util_weighted_ms,
    max(ts) as last_ts,
    arg_max(cover_ms, ts) as last_cover_ms,
    arg_max(util_pct, ts) as last_util_pct
from read_parquet($samples_file)
group by all
