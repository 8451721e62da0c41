-- One row per telemetry row of the UTC day set aside, with the billing month it counts in, its
-- file, line and reason. Reads the temporary table day_samples.
select
    billing_month,
    cluster,
    file,
    line,
    reject_reason as reason,
    format('ts={} node={} gpu_index={} util_pct={}', ts, node, gpu_index, util_pct) as raw
from day_samples
where reject_reason is not null
order by billing_month, file, line
