-- One row per GPU and telemetry label of the billing month whose samples disagree with the
-- scheduler's attribution (telemetry_label_checks rows of any kind but 'agrees').
-- Parameters: $billing_month.
select
    cluster,
    node,
    gpu_index,
    kind,
    label_job_id,
    label_pod,
    label_namespace,
    scheduler_job_ids,
    samples,
    gpu_hours
from telemetry_label_checks
where billing_month = $billing_month and kind <> 'agrees'
order by gpu_hours desc, cluster, node, gpu_index, kind, label_job_id, label_pod, label_namespace
