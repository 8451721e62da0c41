-- One row per job × GPU model of the billing month that held GPUs it did not use while its
-- other GPUs worked (DESIGN: over-allocation, a diagnostic view, not a waste bucket: those
-- GPUs' time is already idle or zombie). Judged on the hours the job held a GPU whole, from
-- the rollup's sums per series-hour (hours_*.parquet: a row without an idle-run label holds
-- busy samples, at or above the idle threshold): an idle GPU has samples in those hours and
-- none busy, a busy one a busy sample in one of them. Not listed: a job of one GPU, a job none
-- of whose GPUs is busy (idle or zombie as a whole), a GPU without samples in its whole hours
-- (unmeasured, not idle), and a job that held no GPU for a whole hour.
--   gpus             the GPUs the job held on the model in the month (job_gpu_hours)
--   busy_gpus        of them, those with a busy sample in an hour held whole
--   idle_gpus        those with samples in their whole hours, none busy ('node/gpu_index')
--   idle_gpu_hours   the idle GPUs' allocated GPU-hours in the month (GPU-equivalents)
-- tenant_id and user as job_usage has them.
-- Parameters: $billing_month, $hour_files.
with held as (
    select cluster, job_id, gpu_model, count(distinct row(node, gpu_index)) as gpus
    from job_gpu_hours
    where billing_month = $billing_month
    group by all
    having count(distinct row(node, gpu_index)) > 1
),

whole_hours as (
    -- the hours a job of several GPUs held a GPU whole
    select g.cluster, g.job_id, g.gpu_model, g.node, g.gpu_index, g.hour
    from job_gpu_hours as g
    semi join held as h
        on h.cluster = g.cluster and h.job_id = g.job_id and h.gpu_model = g.gpu_model
    where g.billing_month = $billing_month
        and g.seg_from = g.hour and g.seg_to = g.hour + interval 1 hour
),

series as (
    select *, series_key(cluster, node, gpu_index) as series_key
    from (select distinct cluster, node, gpu_index from whole_hours)
),

gpu_use as (
    -- per GPU of such a job with samples in its whole hours: whether one of them was busy
    select w.cluster, w.job_id, w.gpu_model, w.node, w.gpu_index, bool_or(r.run is null) as busy
    from whole_hours as w
    join series as s using (cluster, node, gpu_index)
    join read_parquet($hour_files) as r on r.series_key = s.series_key and r.hour = w.hour
    group by all
),

idle as (
    select
        cluster,
        job_id,
        gpu_model,
        count(*) filter (busy) as busy_gpus,
        list(node || '/' || gpu_index order by node, gpu_index) filter (not busy) as idle_gpus
    from gpu_use
    group by all
    having count(*) filter (busy) > 0 and count(*) filter (not busy) > 0
),

idle_hours as (
    select i.cluster, i.job_id, i.gpu_model, gpu_hours(sum(g.gpu_units)) as idle_gpu_hours
    from idle as i
    join job_gpu_hours as g
        on g.billing_month = $billing_month and g.cluster = i.cluster and g.job_id = i.job_id
        and g.gpu_model = i.gpu_model
        and list_contains(i.idle_gpus, g.node || '/' || g.gpu_index)
    group by all
)

select
    $billing_month::date as billing_month,
    i.cluster,
    i.job_id,
    u.tenant_id,
    u."user",
    i.gpu_model,
    h.gpus,
    i.busy_gpus,
    i.idle_gpus,
    t.idle_gpu_hours
from idle as i
join held as h using (cluster, job_id, gpu_model)
join idle_hours as t using (cluster, job_id, gpu_model)
join job_usage as u
    on u.billing_month = $billing_month and u.cluster = i.cluster and u.job_id = i.job_id
order by t.idle_gpu_hours desc, i.cluster, i.job_id, i.gpu_model
