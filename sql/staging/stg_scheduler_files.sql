-- One row per scheduler export file of the landing folder, all months (an empty or
-- header-only file too, so that data quality lists it with its 0 rows): cluster, file, kind
-- (jobs, allocations), format and rows read. Written as stg_scheduler_files_rows by
-- pipelines/defs/ingest/loading.py.
select cluster, file, kind, format, rows_read
from stg_scheduler_files_rows
