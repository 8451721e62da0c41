-- The Waste sheet: one row per cluster × GPU model × bucket of the billing month, the buckets
-- in $bucket_order (the taxonomy order of DESIGN.md, the capacity row heading each block), any
-- other after them. The Summary sums the waste buckets' amounts per currency.
-- Parameters: $billing_month, $bucket_order.
select cluster, gpu_model, bucket, gpu_hours, amount, currency
from capacity_buckets
where billing_month = $billing_month
order by cluster, gpu_model, coalesce(list_position($bucket_order, bucket), 100), bucket
