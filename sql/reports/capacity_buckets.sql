-- The Waste sheet: one row per cluster × GPU model × bucket of the billing month, the buckets
-- in the taxonomy order of DESIGN.md with the capacity row heading each block.
-- Parameters: $billing_month.
select cluster, gpu_model, bucket, gpu_hours
from capacity_buckets
where billing_month = $billing_month
order by cluster, gpu_model,
         coalesce(list_position(['capacity', 'productive', 'idle', 'zombie', 'failed_job',
                                 'failed_infra', 'unmeasured', 'down', 'unallocated'], bucket),
                  100),
         bucket
