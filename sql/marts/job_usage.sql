-- One row per job × billing month: every job that held GPUs in the month or was submitted in
-- it, its allocated hours split into waste buckets, its utilisation and its informational
-- amount (the job's exact charge less its credit, rounded half up; the bill is charge_lines).
-- tenant_id is the tenant of the job's first charged hour (or of its account at submit).
-- Parameters: $billing_month, $currency.
with buckets as (
    select
        cluster,
        job_id,
        sum(allocated_ms) as allocated_ms,
        sum(measured_ms) as measured_ms,
        sum(util_weighted_ms) as util_weighted_ms,
        sum(productive_ms) as productive_ms,
        sum(idle_ms) as idle_ms,
        sum(zombie_ms) as zombie_ms,
        sum(failed_job_ms) as failed_job_ms,
        sum(failed_infra_ms) as failed_infra_ms,
        sum(unmeasured_ms) as unmeasured_ms
    from job_time_buckets
    where billing_month = $billing_month
    group by all
),

charges as (
    select
        cluster,
        job_id,
        arg_min(tenant_id, gpu_ms) filter (gpu_ms > 0) as charged_tenant_id,
        (sum(charge_numerator - credit_numerator) + 18000000000) // 36000000000 as cents
    from job_gpu_charges
    where billing_month = $billing_month
    group by all
),

submit_tenants as (
    select j.cluster, j.job_id, coalesce(m.tenant_id, 'unmapped') as tenant_id
    from stg_jobs as j
    left join catalog_account_tenants as m
        on m.account = j.account
        and coalesce(j.start_at, j.submit_at) >= m.valid_from
        and coalesce(j.start_at, j.submit_at) < m.valid_to
    where j.billing_month = $billing_month
    qualify row_number() over (partition by j.cluster, j.job_id order by m.priority nulls last) = 1
),

final as (
    select
        j.billing_month,
        j.cluster,
        j.job_id,
        coalesce(c.charged_tenant_id, t.tenant_id) as tenant_id,
        j.account,
        j."user",
        j.queue,
        j.gpu_model,
        j.state,
        j.gpus,
        j.submit_at,
        j.start_at,
        j.end_at,
        j.is_running,
        coalesce(b.allocated_ms, 0) / 3600000.0 as allocated_gpu_hours,
        coalesce(b.measured_ms, 0) / 3600000.0 as measured_gpu_hours,
        b.util_weighted_ms / nullif(b.measured_ms, 0) as mean_util_pct,
        coalesce(b.productive_ms, 0) / 3600000.0 as productive_gpu_hours,
        coalesce(b.idle_ms, 0) / 3600000.0 as idle_gpu_hours,
        coalesce(b.zombie_ms, 0) / 3600000.0 as zombie_gpu_hours,
        coalesce(b.failed_job_ms, 0) / 3600000.0 as failed_job_gpu_hours,
        coalesce(b.failed_infra_ms, 0) / 3600000.0 as failed_infra_gpu_hours,
        coalesce(b.unmeasured_ms, 0) / 3600000.0 as unmeasured_gpu_hours,
        (coalesce(c.cents, 0)::decimal(18, 0) * 0.01::decimal(18, 2))::decimal(18, 2) as amount,
        $currency as currency
    from stg_jobs as j
    join submit_tenants as t using (cluster, job_id)
    left join buckets as b using (cluster, job_id)
    left join charges as c using (cluster, job_id)
    where j.billing_month = $billing_month
)

select * from final
order by cluster, job_id
