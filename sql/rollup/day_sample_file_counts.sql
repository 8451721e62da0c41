-- One row per telemetry file, UTC day and billing month: rows read (timestamp in the day, or
-- unreadable and owned by the day), loaded, rejected, and duplicates folded (repeated samples,
-- and rows superseded by GR_ENGINE_ACTIVE in its hours): the sums of the day's chunks' parts.
-- Reads the temporary table sample_count_parts (sample_count_parts.sql) and sample_sources.
with counts as (
    select
        billing_month,
        file_id,
        sum(rows_read)::bigint as rows_read,
        sum(rows_loaded)::bigint as rows_loaded,
        sum(rows_rejected)::bigint as rows_rejected,
        sum(duplicates_folded)::bigint as duplicates_folded
    from sample_count_parts
    group by all
),

final as (
    select
        c.billing_month,
        src.cluster,
        src.file,
        c.rows_read,
        c.rows_loaded,
        c.rows_rejected,
        c.duplicates_folded
    from counts as c
    join sample_sources as src using (file_id)
)

select * from final
order by billing_month, cluster, file
