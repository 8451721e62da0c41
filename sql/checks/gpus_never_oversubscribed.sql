-- One row per GPU whose jobs held more than the whole GPU at some time in the billing month
-- (two whole jobs at once, or MIG/fractional shares adding up to more than 1).
-- Parameters: $billing_month.
select cluster, node, gpu_index, gpu_hours(overlap_units) as excess_gpu_hours
from gpu_capacity
where billing_month = $billing_month and overlap_units > 0
order by cluster, node, gpu_index
