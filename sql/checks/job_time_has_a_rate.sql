-- One row per cluster × GPU model with job GPU time in the billing month that nothing prices:
-- no rate of the model or '*' (for the cluster or all clusters) in force when the segment is
-- priced (priced_at), as job_gpu_charges looks it up, and no derived rate of its pool in
-- full_recovery. Not an asset check: job_gpu_charges runs it first and stops the run on a
-- row, before any charge with a NULL amount is written. unpriced_from / unpriced_to: the
-- first and last moment of such time (UTC; the time between may be partly priced).
-- Parameters: $billing_month.
with segments as (
    select cluster, gpu_model, priced_at, seg_from, seg_to, gpu_units
    from job_gpu_hours
    where billing_month = $billing_month
),

unpriced as (
    select s.*
    from segments as s
    where
        not exists (
            from catalog_rates as r
            where rate_applies(r, s.gpu_model, s.cluster, s.priced_at)
        )
        and not exists (
            from cost_pools as p
            where p.billing_month = $billing_month and p.cluster = s.cluster
                and p.gpu_model = s.gpu_model and p.price_micro is not null
        )
),

final as (
    select
        cluster,
        gpu_model,
        min(seg_from) as unpriced_from,
        max(seg_to) as unpriced_to,
        gpu_hours(sum(gpu_units)) as gpu_hours
    from unpriced
    group by all
)

select * from final
order by cluster, gpu_model
