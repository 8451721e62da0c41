-- One row per cluster × GPU model whose buckets do not sum to its capacity (in GPU units), or that
-- has job time but no capacity while an inventory exists. Parameters: $billing_month.
with sums as (
    select
        cluster,
        gpu_model,
        sum(gpu_units) filter (bucket <> 'capacity') as bucket_units,
        sum(gpu_units) filter (bucket = 'capacity') as capacity_units
    from capacity_buckets
    where billing_month = $billing_month
    group by all
)

select *, bucket_units - capacity_units as difference_units
from sums
where capacity_units is distinct from bucket_units
    and (capacity_units is not null or exists (select 1 from catalog_nodes))
order by cluster, gpu_model
