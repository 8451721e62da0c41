-- One row per billing month × job with GPU time: its charge seen two ways, side by side (a
-- showback: what is billed stays charge_lines). The allocation view is what the job is charged
-- for holding its GPUs (job_usage.amount: its charge less its credit); the utilisation view
-- prices only the time that was not held idle: allocation − the idle and zombie GPU-hours at
-- the prices the job's time was charged (per GPU model, the job's charge × idle and zombie
-- units / allocated units, exact, rounded half up to the cent once per job), so the two views
-- reconcile by that difference to the cent. Failed and unmeasured time stay in both views
-- (time without samples is never assumed idle). The waste of failed runs in money, beside them:
-- the failed_job GPU-hours (a FAILED or OUT_OF_MEMORY job outside outage windows) priced the
-- same way; a NODE_FAIL job's time is credited back, so it costs its tenant nothing.
--   allocation_amount, idle_zombie_amount, utilisation_amount (= allocation − idle_zombie),
--   failed_job_amount
-- Parameters: $billing_month, $currency.
with buckets as (
    select
        cluster,
        job_id,
        gpu_model,
        sum(allocated_units)::hugeint as allocated_units,
        sum(idle_units + zombie_units)::hugeint as idle_zombie_units,
        sum(failed_job_units)::hugeint as failed_job_units
    from job_time_buckets
    where billing_month = $billing_month
    group by all
),

charges as (
    select cluster, job_id, gpu_model, sum(charge_numerator) as charge_numerator
    from job_gpu_charges
    where billing_month = $billing_month
    group by all
),

priced as (
    select
        c.cluster,
        c.job_id,
        cents_half_up(sum(
            c.charge_numerator * b.idle_zombie_units // nullif(b.allocated_units, 0)
        )) as idle_zombie_cents,
        cents_half_up(sum(
            c.charge_numerator * b.failed_job_units // nullif(b.allocated_units, 0)
        )) as failed_job_cents
    from charges as c
    join buckets as b using (cluster, job_id, gpu_model)
    group by all
)

select
    $billing_month::date as billing_month,
    u.cluster,
    u.job_id,
    u.tenant_id,
    u.allocated_gpu_hours,
    u.idle_gpu_hours + u.zombie_gpu_hours as idle_zombie_gpu_hours,
    -- the same in GPU units, for exact sums over jobs
    gpu_units(u.allocated_gpu_hours) as allocated_units,
    gpu_units(u.idle_gpu_hours) + gpu_units(u.zombie_gpu_hours) as idle_zombie_units,
    u.amount as allocation_amount,
    money(coalesce(p.idle_zombie_cents, 0)) as idle_zombie_amount,
    u.amount - money(coalesce(p.idle_zombie_cents, 0)) as utilisation_amount,
    u.failed_job_gpu_hours,
    gpu_units(u.failed_job_gpu_hours) as failed_job_units,
    money(coalesce(p.failed_job_cents, 0)) as failed_job_amount,
    $currency as currency
from job_usage as u
left join priced as p using (cluster, job_id)
where u.billing_month = $billing_month and u.allocated_gpu_hours > 0
order by u.cluster, u.job_id
