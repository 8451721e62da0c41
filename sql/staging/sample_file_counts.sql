-- One row per telemetry file and billing month: rows read (timestamp in the month, or
-- unreadable and owned by one of its days), loaded, rejected, and duplicates folded, summed
-- over the daily rollups of the UTC days the month overlaps.
-- Parameters: $billing_month, $count_files (those days' sample_file_counts Parquet).
with final as (
    select
        billing_month,
        cluster,
        file,
        sum(rows_read)::bigint as rows_read,
        sum(rows_loaded)::bigint as rows_loaded,
        sum(rows_rejected)::bigint as rows_rejected,
        sum(duplicates_folded)::bigint as duplicates_folded
    from read_parquet($count_files)
    where billing_month = $billing_month::date
    group by all
)

select * from final
order by cluster, file
