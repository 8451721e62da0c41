-- One row per cluster × GPU model (× measure) whose daily figures in utilization_daily do not
-- sum to the month: allocated and productive GPU-hours of the tenant rows against
-- job_time_buckets, the gpu_model rows against the tenant rows, capacity against gpu_capacity
-- (when the inventory is known). Parameters: $billing_month.
with daily as (
    select
        cluster,
        gpu_model,
        coalesce(sum(allocated_gpu_hours) filter (level = 'tenant'), 0) as tenant_allocated,
        coalesce(sum(productive_gpu_hours) filter (level = 'tenant'), 0) as tenant_productive,
        coalesce(sum(allocated_gpu_hours) filter (level = 'gpu_model'), 0) as model_allocated,
        sum(capacity_gpu_hours) filter (level = 'gpu_model') as capacity
    from utilization_daily
    where billing_month = $billing_month
    group by all
),

monthly as (
    select
        cluster,
        gpu_model,
        gpu_hours(sum(allocated_units)) as allocated,
        gpu_hours(sum(productive_units)) as productive
    from job_time_buckets
    where billing_month = $billing_month
    group by all
),

inventory as (
    select cluster, gpu_model, gpu_hours(sum(capacity_units)) as capacity
    from gpu_capacity
    where billing_month = $billing_month
    group by all
),

compared as (
    select
        cluster,
        gpu_model,
        unnest([
            {
                'measure': 'allocated', 'daily': d.tenant_allocated,
                'monthly': coalesce(m.allocated, 0)
            },
            {
                'measure': 'productive', 'daily': d.tenant_productive,
                'monthly': coalesce(m.productive, 0)
            },
            {
                'measure': 'gpu_model rows allocated', 'daily': d.model_allocated,
                'monthly': d.tenant_allocated
            },
            {'measure': 'capacity', 'daily': d.capacity, 'monthly': i.capacity}
        ], recursive := true)
    from daily as d
    full join monthly as m using (cluster, gpu_model)
    left join inventory as i using (cluster, gpu_model)
),

final as (
    select cluster, gpu_model, measure, daily, monthly
    from compared
    where abs(coalesce(daily, 0) - coalesce(monthly, 0)) > 1e-6
)

select * from final
order by cluster, gpu_model, measure
