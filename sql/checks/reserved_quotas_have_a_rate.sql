-- One row per reserved quota × cluster × GPU model of the billing month priced at no rate:
-- no rate of the model its pool is priced as (or '*') in force for the cluster while the
-- quota is reserved, and no derived rate of its pool in full_recovery. Not an asset check:
-- charge_lines runs it after reserved_quota_unused and stops the run on a row, before any
-- charge line with a NULL amount is written.
-- Parameters: $billing_month.
select capacity_reservation_id, cluster, gpu_model, gpu_hours
from reserved_quota_unused
where billing_month = $billing_month and price_micro is null
order by capacity_reservation_id, cluster, gpu_model
