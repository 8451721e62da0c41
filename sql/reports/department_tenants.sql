-- One row per tenant of a department in the billing month: its tenants in tenant_month plus
-- any tenant only the department's charge lines name. A tenant's amount is the sum of the
-- department's charge lines of that tenant, so the department's pages tie out to its lines;
-- correction_amount the part of it on Correction lines (a closed month re-run since its close:
-- amount − correction_amount was issued).
-- Parameters: $billing_month, $department ('' for none, NULL: every department: the
-- organisation page).
with charged as (
    select
        tenant_id,
        any_value(tenant_name order by tenant_name) as tenant_name,
        any_value(cost_center order by cost_center) as cost_center,
        any_value(coalesce(department, '') order by department) as department,
        sum(amount) as amount,
        coalesce(sum(amount) filter (charge_class = 'Correction'), 0) as correction_amount
    from charge_lines
    where billing_month = $billing_month
        and ($department is null or coalesce(department, '') = $department)
    group by tenant_id
),

members as (
    select *
    from tenant_month
    where billing_month = $billing_month
        and ($department is null or coalesce(department, '') = $department)
),

final as (
    select
        coalesce(m.tenant_id, c.tenant_id) as tenant_id,
        coalesce(m.tenant_name, c.tenant_name, coalesce(m.tenant_id, c.tenant_id)) as tenant_name,
        coalesce(m.cost_center, c.cost_center) as cost_center,
        coalesce(m.department, c.department, '') as department,
        m.owner,
        -- a tenant only charge lines name used nothing this month: each count is 0
        coalesce(columns([
            'jobs', 'allocated_gpu_hours', 'productive_gpu_hours', 'idle_gpu_hours',
            'zombie_gpu_hours', 'failed_job_gpu_hours', 'failed_infra_gpu_hours',
            'unmeasured_gpu_hours'
        ]), 0),
        m.mean_util_pct,
        coalesce(c.amount, 0)::decimal(18, 2) as amount,
        coalesce(c.correction_amount, 0)::decimal(18, 2) as correction_amount,
        m.budget,
        coalesce(m.budget_status, 'no budget') as budget_status,
        coalesce(m.quota_flags, '') as quota_flags
    from members as m
    full join charged as c using (tenant_id)
)

select * from final
order by amount desc, tenant_id
