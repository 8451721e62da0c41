-- One row per cluster × GPU model whose buckets do not sum to its capacity (in GPU-ms), or that
-- has job time but no capacity while an inventory exists. Parameters: $billing_month.
with sums as (
    select
        cluster,
        gpu_model,
        sum(gpu_ms) filter (bucket <> 'capacity') as bucket_ms,
        sum(gpu_ms) filter (bucket = 'capacity') as capacity_ms
    from capacity_buckets
    where billing_month = $billing_month
    group by all
)

select *, bucket_ms - capacity_ms as difference_ms
from sums
where capacity_ms is distinct from bucket_ms
    and (capacity_ms is not null or exists (select 1 from catalog_nodes))
order by cluster, gpu_model
