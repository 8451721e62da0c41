-- One row per billing month × cluster × GPU model × bucket of the waste taxonomy, plus one
-- row with bucket 'capacity'. Job time fills productive, idle, zombie, failed_job,
-- failed_infra and unmeasured; GPU time no job held is down (outage) or unallocated. The eight
-- buckets sum to capacity exactly in gpu_units (1/420 GPU-ms) when the inventory (nodes.csv)
-- is known; without
-- it there are no capacity, down or unallocated rows.
-- amount: the bucket's GPU time in money, at the price the pool's time is charged at.
--   rate_card      the pool's (cluster × GPU model's) usage charge per allocated GPU unit (its
--                  jobs' charges before credits over their time: the rate in force, tiers
--                  included), for every bucket, unallocated and down too; a pool nobody used
--                  takes the rate card's price in force at the end of the month
--   full_recovery  the pool's cost (cost_pools) spread over its buckets by their GPU units, so
--                  the buckets sum to the pool's and the cluster's cost to the cent (an
--                  overhead-only pool without GPUs, cost_pools' '*', has no buckets)
-- Cents by largest remainder within the pool (ties by bucket), so the buckets other than
-- 'capacity' sum to its amount exactly.
-- Parameters: $billing_month, $month_end, $currency.
with job_time as (
    select
        cluster,
        gpu_model,
        sum(productive_units) as productive,
        sum(idle_units) as idle,
        sum(zombie_units) as zombie,
        sum(failed_job_units) as failed_job,
        sum(failed_infra_units) as failed_infra,
        sum(unmeasured_units) as unmeasured
    from job_time_buckets
    where billing_month = $billing_month
    group by all
),

free_time as (
    select
        cluster,
        gpu_model,
        sum(down_units) as down,
        sum(unallocated_units) as unallocated,
        sum(capacity_units) as capacity
    from gpu_capacity
    where billing_month = $billing_month
    group by all
),

long_form as (
    unpivot job_time
    on productive, idle, zombie, failed_job, failed_infra, unmeasured
    into name bucket value gpu_units
    union all by name
    unpivot free_time
    on down, unallocated, capacity
    into name bucket value gpu_units
),

units as (
    select cluster, gpu_model, bucket, sum(gpu_units)::hugeint as gpu_units
    from long_form
    group by all
),

pools as (
    -- each pool's money to spread over its buckets, as cents × pool units (exact): the pool's
    -- cost (full_recovery), else its usage charge per allocated unit × the pool's units
    select
        u.cluster,
        u.gpu_model,
        sum(u.gpu_units) filter (u.bucket <> 'capacity') as pool_units,
        sum(u.gpu_units) filter (u.bucket not in ('capacity', 'down', 'unallocated'))
            as allocated_units,
        any_value(p.cost_cents) as cost_cents,
        any_value(c.charge_numerator) as charge_numerator,
        any_value(r.price_micro) as list_micro
    from units as u
    left join cost_pools as p
        on p.billing_month = $billing_month and p.cluster = u.cluster
        and p.gpu_model = u.gpu_model
    left join (
        select cluster, gpu_model, sum(charge_numerator) as charge_numerator
        from job_gpu_charges
        where billing_month = $billing_month
        group by all
    ) as c on c.cluster = u.cluster and c.gpu_model = u.gpu_model
    left join (
        select m.cluster, m.gpu_model, r.price_micro
        from (select distinct cluster, gpu_model from units) as m
        join catalog_rates as r
            on rate_applies(r, m.gpu_model, m.cluster, $month_end::timestamp - interval 1 hour)
        qualify
            row_number() over (
                partition by m.cluster, m.gpu_model
                order by rate_precedence(r.gpu_model, r.cluster, r.valid_from, r.priority)
            ) = 1
    ) as r on r.cluster = u.cluster and r.gpu_model = u.gpu_model
    group by all
),

pool_cents as (
    select
        cluster,
        gpu_model,
        pool_units,
        case
            when cost_cents is not null then cost_cents::hugeint
            when allocated_units > 0
                then cents_half_up(charge_numerator * pool_units // allocated_units)
            else cents_half_up(pool_units * list_micro)
        end as cents
    from pools
),

shares as (
    select
        u.*,
        p.cents as pool_cents,
        p.cents * u.gpu_units // nullif(p.pool_units, 0) as floor_cents,
        p.cents * u.gpu_units % nullif(p.pool_units, 0) as remainder
    from units as u
    join pool_cents as p using (cluster, gpu_model)
    where u.bucket <> 'capacity'
),

amounts as (
    select
        cluster, gpu_model, bucket,
        largest_remainder(
            floor_cents, remainder, pool_cents, row(cluster, gpu_model), bucket
        ) as cents
    from shares
    union all
    select cluster, gpu_model, 'capacity', cents from pool_cents
),

final as (
    select
        $billing_month::date as billing_month,
        u.cluster,
        u.gpu_model,
        u.bucket,
        gpu_hours(u.gpu_units::bigint) as gpu_hours,
        u.gpu_units::bigint as gpu_units,
        money(a.cents) as amount,
        $currency as currency
    from units as u
    left join amounts as a using (cluster, gpu_model, bucket)
)

select * from final
order by cluster, gpu_model, bucket
