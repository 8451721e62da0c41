-- One row per GPU series × utilisation metric × UTC day of the billing month's telemetry: the
-- metric its samples came from, the series' step that day (step_ms, the time one sample stands
-- for), its samples (duplicates folded) and their covered milliseconds, as the daily rollups
-- wrote them (sql/rollup/day_sample_series.sql) for the UTC days the month overlaps; and
-- its first sample and the end of its last one's covered time that day (first_ts,
-- covered_until).
-- Parameters: $billing_month, $series_files (those days' sample_series Parquet).
select
    billing_month, day, cluster, node, gpu_index, util_metric, step_ms, samples, cover_ms,
    first_ts, covered_until
from read_parquet($series_files)
where billing_month = $billing_month::date
order by cluster, node, gpu_index, day, util_metric
