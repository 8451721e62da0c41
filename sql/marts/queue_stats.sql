-- One row per billing month × cluster × grouping set × tenant × queue × GPU model: queue
-- waits, pending demand and job outcomes of the GPU jobs (gpus > 0) of job_usage.
-- grouping_set says which dimensions the row is for; the others read 'all':
--   tenant_queue_gpu_model  one tenant, queue and GPU model (the detail)
--   tenant | queue | gpu_model   totals over the other two dimensions
--   cluster                 the cluster's total
-- (percentiles do not add up, so every total is computed from the jobs, not from the detail).
-- A job's GPU model is the model of the GPUs it held longest in the month (inventory), else
-- the model it asked for, else 'unknown'; its tenant is job_usage.tenant_id.
--   jobs              GPU jobs of the month (held GPUs in it or were submitted in it)
--   jobs_submitted    submitted in [$month_start, $month_end)
--   jobs_started      started in the month: the jobs whose wait is counted here (once, in the
--                     month the wait ended)
--   wait_*_s          wait = start − queued in seconds, queued = eligible when known, else
--                     submit (coalesce(eligible_at, submit_at): Slurm's Eligible, the time its
--                     begin time, dependencies and holds allowed it to start; stg_jobs ignores
--                     one before submit or after start); negative waits from clock skew count
--                     as 0; p50/p90/p95 interpolate linearly between order statistics
--                     (quantile_cont). A pod that Kueue
--                     admitted waited from its Workload's creation to its admission (the
--                     queue's wait, without the scheduling and image pulls that follow;
--                     kueue_workload_waits of any month): the Workload of the pod itself (a
--                     plain pod), or of the Job that controls the pod (stg_jobs.owner_uid)
--                     for the pods its admission released: those created before any pod of
--                     the Job ended (a pod created later replaces or follows one, in a Job
--                     already admitted, and waited only for itself)
--   kueue_waits       of jobs_started, those whose wait is their Kueue admission wait
--   pending_gpu_hours GPUs × the part of [queued, start) inside the month: Σ wait × GPUs,
--                     prorated at the month edges like allocated time; jobs that never started
--                     wait until they were cancelled (end) or, still PENDING, to the month end
--                     (no queued time, or a never-started job with no end: no pending time).
--                     A Kueue Job's pods exist only once the Job is admitted: the pods its
--                     admission released are pending from the Job's Workload creation
--   outcome counts    jobs that ended in the month, by final state
--   success_rate_pct  100 × COMPLETED / (COMPLETED + FAILED + TIMEOUT + OUT_OF_MEMORY +
--                     NODE_FAIL); cancelled and preempted jobs are reported apart
-- Parameters: $billing_month, $month_start, $month_end.
with held_models as (
    select cluster, job_id, gpu_model
    from job_gpu_hours
    where billing_month = $billing_month
    group by cluster, job_id, gpu_model
    qualify
        row_number() over (
            partition by cluster, job_id order by sum(gpu_ms) desc, gpu_model
        ) = 1
),

kueue_admissions as (
    -- the admitted Workloads of pods and of Jobs, by their owner's uid
    select
        cluster,
        owner_kind,
        owner_uid,
        created_at,
        round(wait_s * 1000)::bigint as kueue_wait_ms
    from kueue_workload_waits
    where owner_kind in ('Pod', 'Job') and is_admitted
    qualify
        row_number() over (
            partition by cluster, owner_kind, owner_uid order by billing_month desc
        ) = 1
),

pod_owners as (
    -- released_on_admission: created before any pod of its Job (in the month's jobs) ended
    select
        cluster,
        job_id,
        owner_uid,
        submit_at <= coalesce(
            min(end_at) over (partition by cluster, owner_uid), submit_at
        ) as released_on_admission
    from stg_jobs
    where billing_month = $billing_month and owner_uid is not null
),

jobs as (
    select
        u.cluster,
        u.job_id,
        u.tenant_id,
        coalesce(u.queue, 'unknown') as queue,
        coalesce(h.gpu_model, u.gpu_model, 'unknown') as gpu_model,
        u.gpus,
        u.state,
        u.submit_at >= $month_start::timestamp and u.submit_at < $month_end::timestamp
            as is_submitted,
        u.start_at >= $month_start::timestamp and u.start_at < $month_end::timestamp
            as is_started,
        u.end_at >= $month_start::timestamp and u.end_at < $month_end::timestamp as is_ended,
        coalesce(u.eligible_at, u.submit_at) as queued_at,
        coalesce(kj.created_at, u.eligible_at, u.submit_at) as pending_from,
        u.start_at,
        coalesce(kp.kueue_wait_ms, kj.kueue_wait_ms) as kueue_wait_ms,
        case
            when u.start_at is not null then u.start_at
            when u.state = 'PENDING' then $month_end::timestamp
            else u.end_at
        end as wait_until
    from job_usage as u
    left join held_models as h using (cluster, job_id)
    left join kueue_admissions as kp
        on kp.cluster = u.cluster and kp.owner_kind = 'Pod' and kp.owner_uid = u.job_id
    left join pod_owners as o using (cluster, job_id)
    left join kueue_admissions as kj
        on kj.cluster = u.cluster and kj.owner_kind = 'Job' and kj.owner_uid = o.owner_uid
        and o.released_on_admission
    where u.billing_month = $billing_month and u.gpus > 0
),

measured as (
    -- waits in whole milliseconds and pending time in GPU units (GPUs to the nearest 1/420,
    -- as job_gpu_hours counts them): the mean and the sums below add integers, exact in any
    -- order (a sum of doubles depends on the order threads add the rows in)
    select
        *,
        wait_ms / 1000.0 as wait_s
    from (
        select
            *,
            case
                when is_started and kueue_wait_ms is not null then greatest(kueue_wait_ms, 0)
                when is_started and queued_at is not null
                    then greatest(epoch_ms(start_at) - epoch_ms(queued_at), 0)
            end as wait_ms,
            case
                when pending_from is not null and wait_until is not null
                    then round(gpus * whole_gpu())::bigint * greatest(
                        epoch_ms(least(wait_until, $month_end::timestamp))
                        - epoch_ms(greatest(pending_from, $month_start::timestamp)),
                        0
                    )
                else 0
            end as pending_units
        from jobs
    )
),

grouped as (
    select
        cluster,
        case
            when grouping(tenant_id, queue, gpu_model) = 0 then 'tenant_queue_gpu_model'
            when grouping(tenant_id) = 0 then 'tenant'
            when grouping(queue) = 0 then 'queue'
            when grouping(gpu_model) = 0 then 'gpu_model'
            else 'cluster'
        end as grouping_set,
        case when grouping(tenant_id) = 0 then tenant_id else 'all' end as tenant_id,
        case when grouping(queue) = 0 then queue else 'all' end as queue,
        case when grouping(gpu_model) = 0 then gpu_model else 'all' end as gpu_model,
        count(*) as jobs,
        count(*) filter (is_submitted) as jobs_submitted,
        count(wait_s) as jobs_started,
        quantile_cont(wait_s, 0.5) as wait_p50_s,
        quantile_cont(wait_s, 0.9) as wait_p90_s,
        quantile_cont(wait_s, 0.95) as wait_p95_s,
        avg(wait_ms) / 1000.0 as wait_mean_s,
        max(wait_s) as wait_max_s,
        gpu_hours(sum(pending_units)) as pending_gpu_hours,
        count(*) filter (is_ended) as jobs_ended,
        count(*) filter (is_ended and state = 'COMPLETED') as completed_jobs,
        count(*) filter (is_ended and state = 'FAILED') as failed_jobs,
        count(*) filter (is_ended and state = 'TIMEOUT') as timeout_jobs,
        count(*) filter (is_ended and state = 'OUT_OF_MEMORY') as out_of_memory_jobs,
        count(*) filter (is_ended and state = 'NODE_FAIL') as node_fail_jobs,
        count(*) filter (is_ended and state = 'CANCELLED') as cancelled_jobs,
        count(*) filter (is_ended and state = 'PREEMPTED') as preempted_jobs,
        count(*) filter (wait_ms is not null and kueue_wait_ms is not null) as kueue_waits
    from measured
    group by grouping sets (
        (cluster, tenant_id, queue, gpu_model),
        (cluster, tenant_id),
        (cluster, queue),
        (cluster, gpu_model),
        (cluster)
    )
),

final as (
    select
        $billing_month::date as billing_month,
        *,
        100.0 * completed_jobs / nullif(
            completed_jobs + failed_jobs + timeout_jobs + out_of_memory_jobs + node_fail_jobs, 0
        ) as success_rate_pct
    from grouped
)

select * exclude (kueue_waits), kueue_waits from final
order by cluster, grouping_set, tenant_id, queue, gpu_model
