-- One row per node and outage window of outages.yaml (node patterns expanded against the
-- inventory): from/to as naive UTC, the reason. Written as catalog_outage_windows_rows by
-- catalog_tables.py.
select cluster, node, outage_from, outage_to, reason
from catalog_outage_windows_rows
