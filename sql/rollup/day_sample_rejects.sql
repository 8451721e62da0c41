-- One row per telemetry row of the UTC day set aside, with the billing month it counts in, its
-- file, line and reason. A day rolled up in chunks adds each chunk's; the rollup writes the
-- rows in order. raw: the row's values, a GPU index that is no number as the export wrote it.
-- Reads the temporary table day_samples and sample_sources.
select
    d.billing_month,
    src.cluster,
    src.file,
    d.line,
    d.reject_reason as reason,
    concat(
        'ts=', d.ts,
        ' node=', d.node,
        ' gpu_index=', coalesce(d.gpu_index::varchar, d.gpu_index_text),
        ' util_pct=', d.util_pct
    ) as raw
from day_samples as d
join sample_sources as src using (file_id)
where d.reject_reason is not null
