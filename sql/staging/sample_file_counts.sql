-- One row per telemetry file and billing month: rows read (timestamp in the month or
-- unreadable), loaded, rejected, and duplicates folded (repeated samples, and GPU_UTIL samples
-- superseded by GR_ENGINE_ACTIVE). Reads month_samples and ordered_samples.
-- Parameters: $billing_month.
with duplicates as (
    select cluster, file, count(*) as duplicates_folded
    from (
        select cluster, file from ordered_samples where next_ts = ts
        union all
        select cluster, file from month_samples where superseded
    )
    group by all
),

final as (
    select
        $billing_month::date as billing_month,
        m.cluster,
        m.file,
        count(*) as rows_read,
        count(*) filter (m.reject_reason is null) as rows_loaded,
        count(*) filter (m.reject_reason is not null) as rows_rejected,
        coalesce(any_value(d.duplicates_folded), 0) as duplicates_folded
    from month_samples as m
    left join duplicates as d using (cluster, file)
    group by m.cluster, m.file
)

select * from final
order by cluster, file
