-- One row per billing month × tenant: usage and waste (its jobs' GPU units in
-- job_time_buckets: a job running across a reorganisation counts for each tenant for its days
-- with it; jobs: the jobs job_usage names it for), the charge (from charge_lines), the budget
-- and its status: ok, warn (>= 80 % used), over (> 100 %), or 'no budget'. Every catalog
-- tenant appears, used or not; 'unmapped' appears when it has jobs or GPU time, 'platform'
-- (full_recovery's unrecovered capacity cost) when it has charge lines and the catalog has no
-- tenant of that id. quota_flags lists the quota_compliance flags raised, e.g.
-- 'breach (A100-80GB), idle_quota (H100)'.
-- Parameters: $billing_month, $budget_month, $currency.
with jobs as (
    select tenant_id, count(*) as jobs
    from job_usage
    where billing_month = $billing_month
    group by tenant_id
),

usage as (
    -- the tenant's time in GPU units, its jobs' job_time_buckets summed and made hours once
    -- (a sum of the jobs' hours, doubles, would depend on the order threads add them in)
    select
        b.tenant_id,
        gpu_hours(sum(b.allocated_units)) as allocated_gpu_hours,
        gpu_hours(sum(b.measured_units)) as measured_gpu_hours,
        gpu_hours(sum(b.productive_units)) as productive_gpu_hours,
        gpu_hours(sum(b.idle_units)) as idle_gpu_hours,
        gpu_hours(sum(b.zombie_units)) as zombie_gpu_hours,
        gpu_hours(sum(b.failed_job_units)) as failed_job_gpu_hours,
        gpu_hours(sum(b.failed_infra_units)) as failed_infra_gpu_hours,
        gpu_hours(sum(b.unmeasured_units)) as unmeasured_gpu_hours,
        sum(b.util_weighted_units) / nullif(sum(b.measured_units), 0) as mean_util_pct
    from job_time_buckets as b
    where b.billing_month = $billing_month
    group by b.tenant_id
),

charges as (
    select tenant_id, sum(amount) as amount
    from charge_lines
    where billing_month = $billing_month
    group by tenant_id
),

flags as (
    select
        tenant_id,
        string_agg(format('{} ({})', flag, pool), ', ' order by flag, pool) as quota_flags
    from (
        select tenant_id, pool, 'breach' as flag from quota_compliance
        where billing_month = $billing_month and breach
        union all
        select tenant_id, pool, 'idle_quota' from quota_compliance
        where billing_month = $billing_month and idle_quota
        union all
        select tenant_id, pool, 'chronic_borrowing' from quota_compliance
        where billing_month = $billing_month and chronic_borrowing
    )
    group by tenant_id
),

tenants as (
    select tenant_id, name as tenant_name, department, cost_center, owner from catalog_tenants
    union all
    select 'unmapped', 'Unmapped accounts', 'Unmapped', null, null
    where exists (select 1 from jobs where tenant_id = 'unmapped')
        or exists (select 1 from usage where tenant_id = 'unmapped')
    union all
    select 'platform', 'Platform (unrecovered)', 'Platform', null, null
    where exists (select 1 from charges where tenant_id = 'platform')
        and not exists (select 1 from catalog_tenants where tenant_id = 'platform')
),

final as (
    select
        $billing_month::date as billing_month,
        t.tenant_id,
        t.tenant_name,
        t.department,
        t.cost_center,
        t.owner,
        coalesce(n.jobs, 0) as jobs,
        -- a tenant without jobs has 0 of every usage figure (only usage has *_gpu_hours)
        coalesce(columns('.*_gpu_hours'), 0),
        u.mean_util_pct,
        coalesce(c.amount, 0)::decimal(18, 2) as amount,
        $currency as currency,
        b.amount::decimal(18, 2) as budget,
        100.0 * coalesce(c.amount, 0) / nullif(b.amount, 0) as budget_used_pct,
        case
            when b.amount is null then 'no budget'
            when coalesce(c.amount, 0) > b.amount then 'over'
            when coalesce(c.amount, 0) >= 0.8 * b.amount then 'warn'
            else 'ok'
        end as budget_status,
        coalesce(f.quota_flags, '') as quota_flags
    from tenants as t
    left join jobs as n using (tenant_id)
    left join usage as u using (tenant_id)
    left join charges as c using (tenant_id)
    left join flags as f using (tenant_id)
    left join catalog_budgets as b on b.tenant_id = t.tenant_id and b.month = $budget_month
)

select * from final
order by tenant_id
