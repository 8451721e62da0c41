-- The Reliability sheet's availability table: the clusters and GPU models of the billing month,
-- and the nodes that had an incident or fell silent.
-- Parameters: $billing_month.
select
    level, cluster, gpu_model, node, in_service_gpu_hours, down_gpu_hours, availability_pct,
    incidents, recovered, mttr_hours, mtbf_hours, jobs_hit, inferred_incidents,
    silent_gpu_hours
from availability
where billing_month = $billing_month and (level != 'node' or incidents + inferred_incidents > 0)
order by cluster, level = 'node', level = 'gpu_model', gpu_model, node
