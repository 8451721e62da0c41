-- One row per quota of the catalog (quotas.yaml): a tenant's guaranteed and limit GPUs on a
-- pool (cluster/gpu_model), reserved or not, valid from/to (naive UTC midnights of the billing
-- timezone, open ends 1900 and 9999). Written as catalog_quotas_rows by catalog_tables.py.
select tenant_id, pool, guaranteed_gpus, limit_gpus, reserved, valid_from, valid_to
from catalog_quotas_rows
