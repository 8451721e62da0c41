-- One row per job × billing month: every job that held GPUs in the month or was submitted in
-- it, its allocated hours split into waste buckets, its utilisation and its amount: its
-- shares of its usage lines less its shares of its credit lines (job_line_cents), so a
-- tenant's jobs add up to its usage and credit lines to the cent (the bill is charge_lines,
-- which a closed month's corrections and, in full_recovery, the idle shares add to).
-- tenant_id is the tenant of most of the job's charged time (its largest job_gpu_charges line;
-- ties: the first tenant by id), or of its account at start. eligible_at: when it became
-- eligible to start, as stg_jobs keeps it (NULL: unknown, its wait runs from submit_at).
-- Parameters: $billing_month, $currency.
with buckets as (
    select
        cluster,
        job_id,
        -- every measure of the table, each keeping its name (allocated_units, idle_units, ...)
        sum(columns('_units$'))
    from job_time_buckets
    where billing_month = $billing_month
    group by all
),

charges as (
    select
        cluster,
        job_id,
        -- a tie goes to the first tenant by id, not to the row a thread happened to see first
        first(tenant_id order by gpu_units desc, tenant_id)
        filter (charge_type = 'usage' and gpu_units > 0) as charged_tenant_id,
        sum(case when charge_type = 'credit' then -cents else cents end) as cents
    from job_line_cents
    where billing_month = $billing_month
    group by all
),

submit_tenants as (
    select j.cluster, j.job_id, coalesce(m.tenant_id, 'unmapped') as tenant_id
    from stg_jobs as j
    left join catalog_account_tenants as m
        on mapping_applies(m, j.account, coalesce(j.start_at, j.submit_at))
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
        j.eligible_at,
        j.start_at,
        j.end_at,
        j.is_running,
        gpu_hours(coalesce(b.allocated_units, 0)) as allocated_gpu_hours,
        gpu_hours(coalesce(b.measured_units, 0)) as measured_gpu_hours,
        b.util_weighted_units / nullif(b.measured_units, 0) as mean_util_pct,
        gpu_hours(coalesce(b.productive_units, 0)) as productive_gpu_hours,
        gpu_hours(coalesce(b.idle_units, 0)) as idle_gpu_hours,
        gpu_hours(coalesce(b.zombie_units, 0)) as zombie_gpu_hours,
        gpu_hours(coalesce(b.failed_job_units, 0)) as failed_job_gpu_hours,
        gpu_hours(coalesce(b.failed_infra_units, 0)) as failed_infra_gpu_hours,
        gpu_hours(coalesce(b.unmeasured_units, 0)) as unmeasured_gpu_hours,
        money(coalesce(c.cents, 0)) as amount,
        $currency as currency
    from stg_jobs as j
    join submit_tenants as t using (cluster, job_id)
    left join buckets as b using (cluster, job_id)
    left join charges as c using (cluster, job_id)
    where j.billing_month = $billing_month
)

select * from final
order by cluster, job_id
