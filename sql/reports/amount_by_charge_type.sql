-- The Summary's reconciliation by charge type: one row per cluster × charge type of the
-- billing month with its net amount (charge_lines).
-- Parameters: $billing_month.
select cluster, charge_type, sum(amount) as amount
from charge_lines
where billing_month = $billing_month
group by all
order by all
