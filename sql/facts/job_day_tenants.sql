-- One row per job × billing day of the month on which it holds GPUs: the tenant its account
-- maps to at the day's start (the first catalog_account_tenants mapping valid then, by
-- priority; none: 'unmapped'). The tenants' usage, waste and quota figures (job_time_buckets,
-- tenant_month, utilization_daily, quota_steps) split a job's time by it, so a job running
-- across a reorganisation (tenants.yaml valid_from / valid_to: midnights of the billing
-- timezone) counts for the old tenant up to it and for the new one after, as its charges do
-- (job_gpu_charges, hour by hour). job_usage names one tenant per job: that of most of its
-- charged time.
-- Billing days are 24-hour periods from $month_start (day_index from 0), as in
-- utilization_daily and job_sample_time: the billing timezone's days, unless a DST change
-- falls inside the month, after which a mapping's midnight lies an hour from a day's start
-- and that hour counts for the day's tenant here (its charge is exact).
-- Parameters: $billing_month, $month_start, $month_end.
with job_days as (
    select
        cluster,
        job_id,
        account,
        unnest(range(
            (
                epoch_ms(greatest(start_at, $month_start::timestamp))
                - epoch_ms($month_start::timestamp)
            ) // ms_per_day(),
            (
                epoch_ms(least(held_until, $month_end::timestamp)) - 1
                - epoch_ms($month_start::timestamp)
            ) // ms_per_day() + 1
        )) as day_index
    from stg_jobs
    where billing_month = $billing_month and held_until > start_at
        and start_at < $month_end::timestamp and held_until > $month_start::timestamp
),

account_days as (
    -- the tenant of each account on each day: the first matching mapping valid at its start
    select a.account, a.day_index, coalesce(m.tenant_id, 'unmapped') as tenant_id
    from (
        select distinct
            account,
            day_index,
            $month_start::timestamp + day_index * interval 1 day as day_start
        from job_days
    ) as a
    left join catalog_account_tenants as m on mapping_applies(m, a.account, a.day_start)
    qualify
        row_number() over (
            partition by a.account, a.day_index order by m.priority nulls last
        ) = 1
)

select $billing_month::date as billing_month, j.cluster, j.job_id, j.day_index, a.tenant_id
from job_days as j
join account_days as a
    on a.account is not distinct from j.account and a.day_index = j.day_index
order by j.cluster, j.job_id, j.day_index
