-- One row per billing month in the warehouse × level × subject: each month's key figures side
-- by side, the series the Trends sheet draws and demand_forecast extends. Whole table: every
-- month, rebuilt by each run from the monthly marts. level:
--   cluster_gpu_model  one GPU model of one cluster (capacity_evidence): capacity and allocated
--                      GPU-hours, allocation rate, productive and waste shares, p95 wait,
--                      pending GPU-hours; availability, incidents and MTTR (availability)
--   tenant             one tenant over all clusters (tenant_month): allocated GPU-hours,
--                      productive and waste shares (waste: idle + zombie + failed_job, as
--                      capacity_evidence counts it), spend, budget and budget used
-- Figures a level does not have are NULL.
with models as (
    select
        billing_month,
        'cluster_gpu_model' as level,
        cluster,
        gpu_model,
        null::varchar as tenant_id,
        capacity_gpu_hours,
        allocated_gpu_hours,
        allocation_rate_pct,
        productive_share_pct,
        waste_share_pct,
        wait_p95_s,
        pending_gpu_hours,
        a.availability_pct,
        a.incidents,
        a.mttr_hours
    from capacity_evidence
    left join (select * from availability where level = 'gpu_model') as a
        using (billing_month, cluster, gpu_model)
),

tenants as (
    select
        billing_month,
        'tenant' as level,
        null::varchar as cluster,
        null::varchar as gpu_model,
        tenant_id,
        allocated_gpu_hours,
        100.0 * productive_gpu_hours / nullif(allocated_gpu_hours, 0) as productive_share_pct,
        100.0 * (idle_gpu_hours + zombie_gpu_hours + failed_job_gpu_hours)
        / nullif(allocated_gpu_hours, 0) as waste_share_pct,
        amount,
        currency,
        budget,
        budget_used_pct
    from tenant_month
)

-- by name: each level has its own figures, so the branches' column counts differ
select * from models  -- noqa: AM07
union all by name
select * from tenants
order by billing_month, level, cluster, gpu_model, tenant_id
