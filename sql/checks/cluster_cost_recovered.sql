-- One row per cluster (level 'cluster') or cluster × GPU model pool (level 'pool') of a
-- full_recovery month whose charge lines (tenants and platform, credits negative, corrections
-- included) do not add up to its cost in cost_pools exactly, to the cent; a cluster or pool
-- with charge lines but no cost counts with cost 0. A rate_card month has no pools: no rows.
-- A line with a NULL amount is a violation of its own (level 'null'): sums skip NULLs.
-- Parameters: $billing_month.
with pools as (
    select cluster, gpu_model, amount from cost_pools where billing_month = $billing_month
),

lines as (
    select cluster, gpu_model, sum(amount) as amount
    from charge_lines
    where billing_month = $billing_month and exists (select 1 from pools)
    group by all
),

by_pool as (
    select
        coalesce(p.cluster, l.cluster) as cluster,
        coalesce(p.gpu_model, l.gpu_model) as gpu_model,
        coalesce(l.amount, 0) as lines_amount,
        coalesce(p.amount, 0) as cost_amount
    from pools as p
    full join lines as l on l.cluster = p.cluster and l.gpu_model = p.gpu_model
),

final as (
    select
        'cluster' as level,
        cluster as subject,
        sum(lines_amount) as lines_amount,
        sum(cost_amount) as cost_amount
    from by_pool
    group by all
    union all
    select 'pool', format('{}/{}', cluster, gpu_model), lines_amount, cost_amount
    from by_pool
    union all
    select 'null', format('{}/{}/{}/{}', tenant_id, cluster, gpu_model, charge_type), null, null
    from charge_lines
    where billing_month = $billing_month and amount is null and exists (select 1 from pools)
)

select * from final
where lines_amount <> cost_amount or level = 'null'
order by level, subject
