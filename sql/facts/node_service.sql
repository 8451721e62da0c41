-- One row per inventory node in service during the billing month: its GPUs and its service
-- window clipped to the month (catalog_nodes' in_service_from/to), the time incidents and
-- availability measure against.
-- Parameters: $billing_month, $month_start, $month_end.
select
    $billing_month::date as billing_month,
    cluster,
    node,
    gpu_model,
    gpus,
    greatest(in_service_from, $month_start::timestamp) as service_from,
    least(in_service_to, $month_end::timestamp) as service_to
from catalog_nodes
where in_service_to > $month_start::timestamp and in_service_from < $month_end::timestamp
order by cluster, node
