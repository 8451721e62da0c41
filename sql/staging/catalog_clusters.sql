-- One row per cluster of settings.yaml: the timezone its scheduler writes local times in,
-- and its monthly overhead (full_recovery). Written as catalog_clusters_rows by
-- catalog_tables.py.
select cluster, scheduler_timezone, monthly_overhead
from catalog_clusters_rows
