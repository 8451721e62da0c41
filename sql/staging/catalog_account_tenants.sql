-- One row per scheduler account seen in the exports and tenant mapping that matches it, in
-- priority order (exact names before glob patterns; the first valid at a moment wins; none:
-- tenant 'unmapped'), valid from/to as naive UTC. Written as catalog_account_tenants_rows
-- by pipelines/defs/ingest/catalog_tables.py (account_tenants).
select account, tenant_id, priority, valid_from, valid_to
from catalog_account_tenants_rows
