-- One row per telemetry file and billing month of a chunk of the UTC day (day_samples.sql): rows
-- read (timestamp in the day, or unreadable and owned by the day), loaded, rejected, and
-- duplicates folded (repeated samples, and the rows of other metrics superseded by
-- GR_ENGINE_ACTIVE in the hours it has: day_samples.sql).
-- The rollup sums the chunks' parts per file (day_sample_file_counts.sql). Each row counts in
-- one chunk: carried rows (an earlier chunk's) are not counted again, and a series' repeated
-- samples count in the chunk that gives it its step (series_steps.sql), where they are folded.
-- Reads the temporary tables day_samples, ordered_samples and series_steps.
with duplicates as (
    select billing_month, file_id, count(*) as duplicates_folded
    from (
        select o.billing_month, o.file_id
        from ordered_samples as o
        semi join (select series_id from series_steps where step_ms is not null) using (series_id)
        where o.next_ts = o.ts and not o.look_ahead
        union all
        select billing_month, file_id from day_samples where superseded and not carried
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
    where not look_ahead and not carried
    group by all
)

select
    c.billing_month,
    c.file_id,
    c.rows_read,
    c.rows_loaded,
    c.rows_rejected,
    coalesce(d.duplicates_folded, 0) as duplicates_folded
from counts as c
left join duplicates as d using (billing_month, file_id)
