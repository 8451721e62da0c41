-- One row per scheduler job record read (all files, all months), typed, with the reason it is
-- rejected (NULL when valid). Grain: cluster × file × line. Timestamps become naive UTC.
with known_values as (
    select
        * replace (
            known(nodes) as nodes,
            known(submit_time) as submit_time,
            known(start_time) as start_time,
            known(end_time) as end_time
        )
    from raw_jobs
),

typed as (
    select
        r.cluster,
        r.file,
        r.line,
        r.raw,
        r.parse_error,
        r.job_id,
        r.account,
        r."user",
        r.queue,
        r.qos,
        r.gpu_model,
        r.nodes,
        r.gpus as gpus_text,
        try_cast(r.gpus as double) as gpus,
        r.submit_time,
        r.start_time,
        r.end_time,
        to_utc(r.submit_time, coalesce(z.scheduler_timezone, 'UTC')) as submit_at,
        to_utc(r.start_time, coalesce(z.scheduler_timezone, 'UTC')) as start_at,
        to_utc(r.end_time, coalesce(z.scheduler_timezone, 'UTC')) as end_at,
        r.state as raw_state,
        normal_state(r.state) as state,
        r.exit_code,
        coalesce(r.record_type, 'job') as record_type
    from known_values as r
    left join catalog_clusters as z on z.cluster = r.cluster
),

checked as (
    select
        *,
        case
            when parse_error is not null then parse_error
            when job_id is null then 'field job_id: missing'
            -- a job step only has to be readable: its job carries the figures
            when record_type = 'step' then null
            when account is null then 'field account: missing'
            when gpus is null then format('field gpus: ''{}'' is not a number', gpus_text)
            when gpus < 0 then format('field gpus: {} is negative', gpus_text)
            when submit_time is not null and submit_at is null
                then format('field submit_time: ''{}'' is not a timestamp', submit_time)
            when start_time is not null and start_at is null
                then format('field start_time: ''{}'' is not a timestamp', start_time)
            when end_time is not null and end_at is null
                then format('field end_time: ''{}'' is not a timestamp', end_time)
            when state is null then format('field state: ''{}'' is not a known state', raw_state)
            when end_at < start_at
                then format('field end_time: {} is before start_time {}', end_time, start_time)
            when start_at is not null and nodes is null and gpus > 0
                then 'field nodes: missing for a job that started'
        end as reject_reason
    from typed
),

final as (
    -- a job in several records (overlapping dumps): the most complete, latest record ranks 1;
    -- job steps (record_type 'step') are loaded but never rank: their job is the parent record
    select
        * exclude (gpus_text, submit_time, start_time, end_time),
        case when reject_reason is null and record_type = 'job' then row_number() over (
            partition by cluster, job_id, reject_reason is null and record_type = 'job'
            order by
                end_at is not null desc,
                state not in ('RUNNING', 'PENDING') desc,
                end_at desc nulls last,
                start_at is not null desc,
                file desc,
                line desc
        ) end as record_rank
    from checked
)

select * from final
order by cluster, file, line
