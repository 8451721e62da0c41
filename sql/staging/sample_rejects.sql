-- One row per telemetry row set aside that counts in the billing month, with its file, line and
-- reason: the rejects the daily rollups wrote for the UTC days the month overlaps.
-- Parameters: $billing_month, $reject_files (those days' sample_rejects Parquet).
select billing_month, cluster, file, line, reason, raw
from read_parquet($reject_files)
where billing_month = $billing_month::date
order by file, line
