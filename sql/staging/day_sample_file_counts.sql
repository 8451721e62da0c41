-- One row per telemetry file, UTC day and billing month: rows read (timestamp in the day, or
-- unreadable and owned by the day), loaded, rejected, and duplicates folded (repeated samples,
-- and GPU_UTIL samples superseded by GR_ENGINE_ACTIVE). Reads day_samples and ordered_samples.
with duplicates as (
    select billing_month, cluster, file, count(*) as duplicates_folded
    from (
        select billing_month, cluster, file from ordered_samples
        where next_ts = ts and not look_ahead
        union all
        select billing_month, cluster, file from day_samples where superseded
    )
    group by all
),

final as (
    select
        m.billing_month,
        m.cluster,
        m.file,
        count(*) as rows_read,
        count(*) filter (m.reject_reason is null) as rows_loaded,
        count(*) filter (m.reject_reason is not null) as rows_rejected,
        coalesce(any_value(d.duplicates_folded), 0) as duplicates_folded
    from day_samples as m
    left join duplicates as d using (billing_month, cluster, file)
    where not m.look_ahead
    group by m.billing_month, m.cluster, m.file
)

select * from final
order by billing_month, cluster, file
