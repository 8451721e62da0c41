-- One row per scheduler job record read (all files, all months), typed, with the reason it is
-- rejected (NULL when valid). Grain: cluster × file × line. Timestamps become naive UTC.
-- eligible_at: when the job became eligible to start (Slurm's Eligible, canonical
-- eligible_time; NULL when the export has none), typed like submit_at; stg_jobs decides
-- whether it is used.
-- Times a record cannot have are rejected, not billed: a submit, start or end time before
-- 1970-01-02 or from 2100 on (an epoch zero, a unit error: macro plausible_time), an end more
-- than 365 days after the start (a clock error: `End` years ahead; a job of a GPU cluster
-- does not run a year), and a job in a final state (COMPLETED, FAILED, ...) that started
-- with no end time. Held to its cluster's export time as a running job is (stg_jobs), each
-- would be billed for every hour from its start to that time.
with known_values as (
    select
        * replace (
            known(nodes) as nodes,
            known(submit_time) as submit_time,
            known(eligible_time) as eligible_time,
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
        r.job_name,
        r.account,
        r."user",
        r.queue,
        r.qos,
        r.gpu_model,
        r.nodes,
        n.node_count,
        r.gpus as gpus_text,
        try_cast(r.gpus as double) as gpus,
        r.submit_time,
        r.eligible_time,
        r.start_time,
        r.end_time,
        coalesce(z.scheduler_timezone, 'UTC') as zone,
        to_utc(r.submit_time, zone) as submit_at,
        to_utc(r.eligible_time, zone) as eligible_at,
        to_utc(r.start_time, zone) as start_at,
        to_utc(r.end_time, zone) as end_at,
        r.state as raw_state,
        normal_state(r.state) as state,
        r.exit_code,
        r.owner_uid,
        coalesce(r.record_type, 'job') as record_type
    from known_values as r
    left join catalog_clusters as z on z.cluster = r.cluster
    left join raw_node_lists as n on n.nodes = r.nodes
),

started_in_order as (
    -- a local time in the hour repeated when clocks go back reads as its second occurrence
    -- (to_utc); a job that started in the first and ended in the second then reads as ending
    -- before it starts. Its start is read as the first occurrence where that puts it in order.
    select
        * replace (
            case
                when end_at < start_at and to_utc_first(start_time, zone) <= end_at
                    then to_utc_first(start_time, zone)
                else start_at
            end as start_at
        )
    from typed
),

read_in_order as (
    -- and so are its submit and eligible times, where the second reading is after its start
    select
        * replace (
            case
                when submit_at > start_at and to_utc_first(submit_time, zone) <= start_at
                    then to_utc_first(submit_time, zone)
                else submit_at
            end as submit_at,
            case
                when eligible_at > start_at and to_utc_first(eligible_time, zone) <= start_at
                    then to_utc_first(eligible_time, zone)
                else eligible_at
            end as eligible_at
        )
    from started_in_order
),

node_sizes as (
    -- the most GPUs one node of the cluster holds (inventory), and all of its GPUs: more on a
    -- node, or more pending than the cluster has, is a broken record, not a job. Without an
    -- inventory: 64 per node (more than any GPU server holds) and 65,536 pending.
    select cluster, max(gpus) as node_gpus, sum(gpus) as cluster_gpus
    from catalog_nodes
    group by cluster
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
            when nodes is not null and node_count is null
                then format('field nodes: ''{}'' is not a hostlist', nodes)
            when nodes is not null and gpus > node_count * coalesce(s.node_gpus, 64)
                then format(
                    'field gpus: {} GPUs on {} node(s), more than the {} a node holds',
                    gpus_text, node_count, coalesce(s.node_gpus, 64)
                )
            when nodes is null and gpus > coalesce(s.cluster_gpus, 65536)
                then format(
                    'field gpus: {} GPUs asked for, more than the {} of cluster {}',
                    gpus_text, coalesce(s.cluster_gpus, 65536), cluster
                )
            when submit_time is not null and submit_at is null
                then format('field submit_time: ''{}'' is not a timestamp', submit_time)
            when eligible_time is not null and eligible_at is null
                then format('field eligible_time: ''{}'' is not a timestamp', eligible_time)
            when start_time is not null and start_at is null
                then format('field start_time: ''{}'' is not a timestamp', start_time)
            when end_time is not null and end_at is null
                then format('field end_time: ''{}'' is not a timestamp', end_time)
            when not plausible_time(submit_at)
                then format('field submit_time: ''{}'' is not a plausible time', submit_time)
            when not plausible_time(start_at)
                then format('field start_time: ''{}'' is not a plausible time', start_time)
            when not plausible_time(end_at)
                then format('field end_time: ''{}'' is not a plausible time', end_time)
            when state is null then format('field state: ''{}'' is not a known state', raw_state)
            when start_at is not null and end_at is null and state not in ('RUNNING', 'PENDING')
                then format(
                    'field end_time: missing for a {} job that started (only a running job '
                    || 'has no end)',
                    state
                )
            when end_at < start_at
                then format('field end_time: {} is before start_time {}', end_time, start_time)
            when end_at > start_at + interval 365 days
                then format(
                    'field end_time: {} is more than 365 days after start_time {}', end_time,
                    start_time
                )
            when start_at is not null and nodes is null and gpus > 0
                then 'field nodes: missing for a job that started'
        end as reject_reason
    from read_in_order
    left join node_sizes as s using (cluster)
),

pending_arrays as (
    -- Slurm lists an array's waiting tasks as one record (`123_[4-9,12%2]`, state PENDING):
    -- the array (`123`) and the ranges of task ids it stands for
    select
        cluster,
        file,
        line,
        regexp_extract(job_id, '^([0-9]+)_\[', 1) as array_id,
        -- `4-9,12%2` -> ['4-9', '12'] (`%2`: at most 2 tasks at once)
        string_split(regexp_extract(job_id, '\[([0-9,-]*)', 1), ',') as ranges
    from checked
    where reject_reason is null and record_type = 'job' and state = 'PENDING'
        and regexp_matches(job_id, '^[0-9]+_\[')
),

array_tasks as (
    -- every record of one array task (`123_4`)
    select distinct
        cluster,
        regexp_extract(job_id, '^([0-9]+)_([0-9]+)$', 1) as array_id,
        regexp_extract(job_id, '^([0-9]+)_([0-9]+)$', 2)::bigint as task
    from checked
    where reject_reason is null and record_type = 'job'
        and regexp_full_match(job_id, '[0-9]+_[0-9]+')
),

superseded as (
    -- a pending array record one of whose tasks some dump lists: the tasks are the jobs now
    select distinct a.cluster, a.file, a.line, true as is_superseded
    from (
        select
            *,
            try_cast(split_part(piece, '-', 1) as bigint) as first_task,
            coalesce(
                try_cast(nullif(split_part(piece, '-', 2), '') as bigint),
                try_cast(split_part(piece, '-', 1) as bigint)
            ) as last_task
        from (select *, unnest(ranges) as piece from pending_arrays)
    ) as a
    join array_tasks as t
        on t.cluster = a.cluster and t.array_id = a.array_id
        and t.task between a.first_task and a.last_task
),

final as (
    -- a job in several records (overlapping dumps): the most complete, latest record ranks 1;
    -- job steps (record_type 'step') are loaded but never rank: their job is the parent record.
    -- The pending records of one array (`123_[1-9]`, later `123_[4-9]`) are one job, its
    -- latest record; a pending array record whose tasks are listed never ranks 1 (counted
    -- folded, like a duplicate): its tasks are the jobs.
    select
        c.* exclude (
            gpus_text, zone, submit_time, eligible_time, start_time, end_time, node_gpus,
            cluster_gpus
        ),
        case
            when c.reject_reason is null and c.record_type = 'job'
                then row_number() over (
                    partition by
                        c.cluster,
                        coalesce(p.array_id || '_[]', c.job_id),
                        c.reject_reason is null and c.record_type = 'job'
                    order by
                        s.is_superseded is not null,
                        c.end_at is not null desc,
                        c.state not in ('RUNNING', 'PENDING') desc,
                        c.end_at desc nulls last,
                        c.start_at is not null desc,
                        c.file desc,
                        c.line desc
                ) + (s.is_superseded is not null)::integer
        end as record_rank
    from checked as c
    left join pending_arrays as p using (cluster, file, line)
    left join superseded as s using (cluster, file, line)
)

select * from final
order by cluster, file, line
