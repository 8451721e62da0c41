-- One row per telemetry export in the landing folder, whatever the month: its cluster, landing
-- file and the rows of its canonical samples file, from the Parquet footer (no scan). 0 rows:
-- an empty file, a header alone, a query_range body without series; data quality lists such
-- an export in every month with 0 rows, like an empty scheduler export (stg_scheduler_files).
-- Reads sample_sources. Parameters: $files (its paths, and the empty schema file).
with footers as (
    select file_name as path, num_rows
    from parquet_file_metadata($files)
),

final as (
    select src.cluster, src.file, coalesce(f.num_rows, 0)::bigint as rows_read
    from sample_sources as src
    left join footers as f using (path)
)

select * from final
order by cluster, file
