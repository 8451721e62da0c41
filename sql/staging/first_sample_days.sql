-- One row per canonical samples file of $files: the UTC day of its first readable timestamp
-- (NULL when it has none). Parameters: $files.
select filename as path, min(try_cast(ts as timestamp))::date as first_day
from read_parquet($files, filename = true, union_by_name = true)
group by all
order by path
