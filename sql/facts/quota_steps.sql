-- One row per billing month × tenant × pool × step: an interval [step_from, step_to) of the
-- month on which the GPU-equivalents the tenant holds in the pool and the quota version in
-- force are constant. The one concurrency timeline quota_compliance and reserved_quota_unused
-- both integrate.
-- A pool is a GPU model or a queue: a job's GPU time counts towards the pools named after its
-- GPU model and its queue (the tenant of the job's day, job_day_tenants: a job running across a
-- reorganisation counts for each tenant on its days). Pools: every quota in force
-- in the month, and every GPU model a tenant used.
--   share             the held GPU-equivalents in 1/420 GPU (+gpu_share at seg_from,
--                     −gpu_share at seg_to: a 1g MIG slice is 60)
--   in_quota          a quota version is in force (of overlapping versions the one valid from
--                     later; ties: reserved first, then the larger guarantee)
--   guaranteed_share  its guarantee × 420, to the nearest share (0 without a quota);
--                     limit_share its limit × 420 (NULL: no limit); reserved its flag. Whole
--                     shares, so the integrals of quota_compliance are sums of integers, exact
--                     in any order
--   day_index         the 24-hour period from $month_start the step lies in
--   guaranteed_gpus, limit_gpus, quota_from: the version in force as the catalog gives it
--                     (quota_from clipped to the month; all NULL out of quota)
-- Steps are cut at job segment edges, quota version edges, day boundaries (from $month_start)
-- and rate changes (catalog_rates), so each lies in one day and one rate period.
-- Parameters: $billing_month, $month_start, $month_end.
with quotas as (
    -- quota versions in force during the month, their validity clipped to it
    select
        * exclude (valid_from, valid_to),
        greatest(valid_from, $month_start::timestamp) as quota_from,
        least(valid_to, $month_end::timestamp) as quota_to
    from catalog_quotas
    where valid_from < $month_end::timestamp and valid_to > $month_start::timestamp
),

segments as (
    select d.tenant_id, g.gpu_model, u.queue, g.gpu_share, g.seg_from, g.seg_to
    from job_gpu_hours as g
    join job_day_tenants as d using (billing_month, cluster, job_id, day_index)
    join job_usage as u using (billing_month, cluster, job_id)
    where g.billing_month = $billing_month
),

pools as (
    select distinct tenant_id, pool from quotas
    union
    select distinct tenant_id, gpu_model from segments
),

pool_segments as (
    select p.tenant_id, p.pool, s.gpu_share, s.seg_from, s.seg_to
    from segments as s
    join pools as p on p.tenant_id = s.tenant_id and p.pool in (s.gpu_model, s.queue)
),

cuts as (
    -- day boundaries and rate changes inside the month
    select unnest(range($month_start::timestamp, $month_end::timestamp, interval 1 day)) as ts
    union
    select valid_from from catalog_rates
    where valid_from > $month_start::timestamp and valid_from < $month_end::timestamp
    union
    select valid_to from catalog_rates
    where valid_to > $month_start::timestamp and valid_to < $month_end::timestamp
),

events as (
    select tenant_id, pool, ts, sum(delta) as delta
    from (
        select tenant_id, pool, seg_from as ts, gpu_share as delta from pool_segments
        union all
        select tenant_id, pool, seg_to, -gpu_share from pool_segments
        union all
        select p.tenant_id, p.pool, c.ts, 0 from pools as p cross join cuts as c
        union all
        select tenant_id, pool, quota_from, 0 from quotas
        union all
        select tenant_id, pool, quota_to, 0 from quotas
        union all
        select tenant_id, pool, $month_end::timestamp, 0 from pools
    )
    group by all
),

steps as (
    select
        tenant_id,
        pool,
        ts as step_from,
        lead(ts) over (partition by tenant_id, pool order by ts) as step_to,
        sum(delta) over (
            partition by tenant_id, pool order by ts
            rows between unbounded preceding and current row
        ) as share
    from events
),

final as (
    select
        $billing_month::date as billing_month,
        s.tenant_id,
        s.pool,
        s.step_from,
        s.step_to,
        epoch_ms(s.step_to) - epoch_ms(s.step_from) as step_ms,
        (epoch_ms(s.step_from) - epoch_ms($month_start::timestamp)) // ms_per_day() as day_index,
        s.share,
        q.quota_from is not null as in_quota,
        round(coalesce(q.guaranteed_gpus, 0) * whole_gpu())::bigint as guaranteed_share,
        round(q.limit_gpus * whole_gpu())::bigint as limit_share,
        coalesce(q.reserved, false) as reserved,
        q.guaranteed_gpus,
        q.limit_gpus,
        q.quota_from
    from steps as s
    left join quotas as q
        on q.tenant_id = s.tenant_id and q.pool = s.pool
        and s.step_from >= q.quota_from and s.step_from < q.quota_to
    where s.step_to is not null
    qualify
        row_number() over (
            partition by s.tenant_id, s.pool, s.step_from
            order by q.quota_from desc, q.reserved desc, q.guaranteed_gpus desc
        ) = 1
)

select * from final
order by tenant_id, pool, step_from
