-- One row per billing month × cluster × tenant × queue: what became of the GPU jobs (gpus > 0)
-- submitted in [$month_start, $month_end), whenever they started or ended (as far as the
-- exports tell). Tenant as in job_usage; queue 'unknown' when the export has none (a
-- Kubernetes pod without a Kueue queue label).
--   submitted_jobs          jobs submitted in the month
--   started_jobs            of them, the jobs that started (held GPUs)
--   not_started_jobs        the others: cancelled_pending_jobs (withdrawn before they
--                           started: CANCELLED with no start) + failed_to_start_jobs (ended
--                           without a start in any other state: a Slurm BOOT_FAIL or a pod that
--                           failed before it ran) + pending_jobs (still PENDING in the latest
--                           export: a Kubernetes pod never admitted or scheduled, a Slurm job
--                           waiting; no outcome yet; and a Kueue Workload created in the month
--                           and never admitted whose owner is no pod of the exports: a
--                           suspended Job, which has no pods until admitted)
--   completed_jobs          of the started jobs, those COMPLETED; ended_jobs: those that ended
--                           COMPLETED, FAILED, TIMEOUT, OUT_OF_MEMORY or NODE_FAIL
--   submission_success_pct  100 × started / (submitted − pending): the share of the decided
--                           submissions that got their GPUs (NULL when none is decided)
--   job_success_pct         100 × completed / ended: queue_stats' success rate, for this cohort
--                           (cancelled and preempted jobs are not counted either way)
-- Counts add up across rows; rates are recomputed from the counts, never averaged.
-- Parameters: $billing_month, $month_start, $month_end.
with submitted as (
    select
        cluster,
        tenant_id,
        coalesce(queue, 'unknown') as queue,
        state,
        start_at is not null as is_started
    from job_usage
    where billing_month = $billing_month
        and gpus > 0
        and submit_at >= $month_start::timestamp
        and submit_at < $month_end::timestamp
    union all
    -- pending workloads without pods (a pending plain-pod workload's pod is a job above)
    select w.cluster, w.tenant_id, coalesce(w.queue, 'unknown'), 'PENDING', false
    from kueue_workload_waits as w
    where w.billing_month = $billing_month
        and not w.is_admitted
        and not exists (
            from stg_jobs as j
            where j.billing_month = $billing_month
                and j.cluster = w.cluster and j.job_id = w.owner_uid
        )
),

counts as (
    select
        cluster,
        tenant_id,
        queue,
        count(*) as submitted_jobs,
        count(*) filter (is_started) as started_jobs,
        count(*) filter (not is_started) as not_started_jobs,
        count(*) filter (not is_started and state = 'CANCELLED') as cancelled_pending_jobs,
        count(*) filter (not is_started and state = 'PENDING') as pending_jobs,
        count(*) filter (is_started and state = 'COMPLETED') as completed_jobs,
        count(*) filter (
            is_started
            and state in ('COMPLETED', 'FAILED', 'TIMEOUT', 'OUT_OF_MEMORY', 'NODE_FAIL')
        ) as ended_jobs
    from submitted
    group by all
)

select
    $billing_month::date as billing_month,
    cluster,
    tenant_id,
    queue,
    submitted_jobs,
    started_jobs,
    not_started_jobs,
    cancelled_pending_jobs,
    -- whatever else ended without a start, so the three kinds add up to not_started_jobs
    not_started_jobs - cancelled_pending_jobs - pending_jobs as failed_to_start_jobs,
    pending_jobs,
    completed_jobs,
    ended_jobs,
    100.0 * started_jobs / nullif(submitted_jobs - pending_jobs, 0) as submission_success_pct,
    100.0 * completed_jobs / nullif(ended_jobs, 0) as job_success_pct
from counts
order by cluster, tenant_id, queue
