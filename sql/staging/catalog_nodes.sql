-- One row per GPU node of the inventory (nodes.csv): cluster, GPU model and count, rack,
-- fault domain, driver, service dates (naive UTC midnights of the billing timezone, open ends
-- 1900 and 9999) and monthly cost. Written as catalog_nodes_rows by catalog_tables.py.
select
    cluster, node, gpu_model, gpus, rack, fault_domain, driver_version, in_service_from,
    in_service_to, monthly_cost
from catalog_nodes_rows
