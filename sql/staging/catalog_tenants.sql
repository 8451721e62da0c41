-- One row per tenant of the catalog (tenants.yaml): who is billed, in which department and
-- cost center, and its business owner. Validated by pipelines/catalog.py and written as the
-- temporary table catalog_tenants_rows (pipelines/defs/ingest/catalog_tables.py).
select tenant_id, name, department, cost_center, owner
from catalog_tenants_rows
