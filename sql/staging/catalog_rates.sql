-- One row per rate of the catalog (rates.yaml), in the catalog's order (priority: the first
-- rate in force for a GPU model and cluster prices it): price per GPU-hour (and in
-- micro-units, exact), validity as naive UTC midnights of the billing timezone (open ends
-- 1900 and 9999), cluster ('*': any). Written as catalog_rates_rows by catalog_tables.py.
select gpu_model, price_per_gpu_hour, price_micro, valid_from, valid_to, priority, cluster
from catalog_rates_rows
