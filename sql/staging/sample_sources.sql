-- One row per telemetry export of the landing folder as a canonical samples file: its path
-- (the export itself when DuckDB reads it in place, else its cached Parquet conversion), the
-- landing file, the cluster, and file_id (the rollup's integer name for the file, in landing
-- file name order). Written as sample_sources_rows by pipelines/defs/ingest/telemetry.py.
select path, file, cluster, file_id
from sample_sources_rows
