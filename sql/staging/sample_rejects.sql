-- One row per telemetry row of the billing month set aside, with its file, line and reason.
-- Reads the temporary table month_samples. Parameters: $billing_month.
select
    $billing_month::date as billing_month,
    cluster,
    file,
    line,
    reject_reason as reason,
    format('ts={} node={} gpu_index={} util_pct={}', ts, node, gpu_index, util_pct) as raw
from month_samples
where reject_reason is not null
order by file, line
