-- One row per job (cluster + job id) that matters to the billing month: it held GPUs inside
-- [$month_start, $month_end), or it was submitted in the month. Of a job's records the one
-- stg_job_records ranks first (most complete, latest) wins.
-- Running jobs end at their cluster's export time: the latest timestamp in its exports.
-- owner_uid: a Kubernetes pod's controlling owner (a Job's pods: the Job); NULL elsewhere.
-- eligible_at: when the job became eligible to start (Slurm's Eligible), NULL when the export
-- has none or when it lies before submit or after start (impossible: the record's clocks
-- disagree), in which case is_eligible_ignored is true (data_quality counts those jobs); its
-- queue wait then runs from submit (queue_stats: start − coalesce(eligible_at, submit_at)).
-- Parameters: $billing_month, $month_start, $month_end.
with valid as (
    select
        *,
        -- eligible before submit or after start: ignored
        coalesce(eligible_at < submit_at or eligible_at > start_at, false) as is_eligible_ignored
    from stg_job_records
    where reject_reason is null
),

export_times as (
    select cluster, max(greatest(submit_at, start_at, end_at)) as export_at
    from valid
    group by cluster
),

final as (
    select
        $billing_month::date as billing_month,
        r.cluster,
        r.job_id,
        r.account,
        r."user",
        r.queue,
        r.qos,
        r.gpu_model,
        r.gpus,
        r.nodes,
        r.submit_at,
        case when not r.is_eligible_ignored then r.eligible_at end as eligible_at,
        r.start_at,
        r.end_at,
        r.end_at is null and r.start_at is not null as is_running,
        case when r.start_at is not null then coalesce(r.end_at, e.export_at) end as held_until,
        r.state,
        r.raw_state,
        r.exit_code,
        r.file,
        r.line,
        r.owner_uid,
        r.is_eligible_ignored
    from valid as r
    join export_times as e on e.cluster = r.cluster
    where r.record_rank = 1
)

select * from final
where
    (start_at < $month_end::timestamp and held_until > $month_start::timestamp)
    or (submit_at >= $month_start::timestamp and submit_at < $month_end::timestamp)
order by cluster, job_id
