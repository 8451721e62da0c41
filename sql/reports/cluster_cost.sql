-- The Summary's reconciliation in full_recovery: one row per cluster with its cost for the
-- billing month (cost_pools).
-- Parameters: $billing_month.
select cluster, sum(amount) as amount
from cost_pools
where billing_month = $billing_month
group by all
order by all
