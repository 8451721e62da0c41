-- One row per telemetry file, UTC day and billing month: rows read (timestamp in the day, or
-- unreadable and owned by the day), loaded, rejected, and duplicates folded (repeated samples,
-- and GPU_UTIL samples superseded by GR_ENGINE_ACTIVE). Reads day_samples, ordered_samples and
-- sample_sources.
with duplicates as (
    select billing_month, file_id, count(*) as duplicates_folded
    from (
        select billing_month, file_id from ordered_samples
        where next_ts = ts and not look_ahead
        union all
        select billing_month, file_id from day_samples where superseded
    )
    group by all
),

counts as (
    select
        billing_month,
        file_id,
        count(*) as rows_read,
        count(*) filter (reject_reason is null) as rows_loaded,
        count(*) filter (reject_reason is not null) as rows_rejected
    from day_samples
    where not look_ahead
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
        coalesce(d.duplicates_folded, 0) as duplicates_folded
    from counts as c
    join sample_sources as src using (file_id)
    left join duplicates as d using (billing_month, file_id)
)

select * from final
order by billing_month, cluster, file
