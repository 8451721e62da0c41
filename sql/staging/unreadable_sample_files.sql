-- One row per canonical samples file that has rows without a readable timestamp (row groups
-- without nulls are skipped on their statistics, so this reads little).
-- Parameters: $files.
select distinct filename as path
from read_parquet($files, filename = true, union_by_name = true)
where try_cast(ts as timestamp) is null
order by path
