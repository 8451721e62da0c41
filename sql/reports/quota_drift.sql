-- The Quota drift sheet: one row per quota_drift row of the billing month (each disagreement
-- between the schedulers' configured quotas and the catalog's).
-- Parameters: $billing_month.
select
    cluster, tenant_id, pool, source, kind, configured_guaranteed_gpus, configured_limit_gpus,
    catalog_guaranteed_gpus, catalog_limit_gpus, config_objects, config_file, detail
from quota_drift
where billing_month = $billing_month
order by cluster, tenant_id, pool, source, kind, config_objects
