-- One row per job × GPU model of the billing month that held GPUs it never used: of its GPUs
-- on the model (more than one), some are busy at times (a sample at or above the idle
-- threshold) and others measured but never busy in the month (DESIGN: over-allocation, a
-- diagnostic view, not a waste bucket: those GPUs' time is already in idle or zombie). A GPU
-- without samples is unmeasured, not idle: it is not counted; nor is a job none of whose GPUs
-- is busy (idle or zombie as a whole, not over-allocated).
--   gpus               the GPUs the job held on the model in the month (job_gpu_hours)
--   busy_gpus          of them, those with a busy sample (job_sample_time)
--   idle_gpus          those with samples, none busy ('node/gpu_index', in order)
--   idle_gpu_hours     the idle GPUs' allocated GPU-hours (GPU-equivalents)
-- tenant_id and user as job_usage has them.
-- Parameters: $billing_month.
with held as (
    select
        cluster,
        job_id,
        gpu_model,
        count(distinct row(node, gpu_index)) as gpus
    from job_gpu_hours
    where billing_month = $billing_month
    group by all
),

sampled as (
    select
        cluster,
        job_id,
        gpu_model,
        list_sort(list_distinct(flatten(list(measured_gpus)))) as measured_gpus,
        list_sort(list_distinct(flatten(list(busy_gpus)))) as busy_gpus
    from job_sample_time
    where billing_month = $billing_month
    group by all
),

idle as (
    select
        h.cluster,
        h.job_id,
        h.gpu_model,
        h.gpus,
        len(s.busy_gpus) as busy_gpus,
        list_filter(s.measured_gpus, lambda gpu: not list_contains(s.busy_gpus, gpu)) as idle_gpus
    from held as h
    join sampled as s using (cluster, job_id, gpu_model)
    where h.gpus > 1 and len(s.busy_gpus) > 0
),

idle_hours as (
    select
        i.cluster,
        i.job_id,
        i.gpu_model,
        gpu_hours(sum(g.gpu_units)) as idle_gpu_hours
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
    i.gpus,
    i.busy_gpus,
    i.idle_gpus,
    h.idle_gpu_hours
from idle as i
join idle_hours as h using (cluster, job_id, gpu_model)
join job_usage as u
    on u.billing_month = $billing_month and u.cluster = i.cluster and u.job_id = i.job_id
order by h.idle_gpu_hours desc, i.cluster, i.job_id, i.gpu_model
