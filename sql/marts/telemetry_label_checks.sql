-- One row per billing month × cluster × node × GPU × telemetry label × kind: what the labels
-- of the month's GPU samples (DCGM `hpc_job` as job_id, `pod`, `namespace`) say held the GPU,
-- against what the scheduler says held it then (job_gpu_hours), in samples and GPU-hours.
--   agrees                        the labelled job held the GPU then
--   namespace_mismatch            the labelled pod held it, but in another namespace than the
--                                 label's; or a namespace-only label on a GPU another
--                                 account held
--   label_job_not_in_scheduler    no scheduler record has that job id (hpc_job) or pod name
--   different_gpu                 the labelled job held another GPU of the node then: the GPU
--                                 indices the pipeline assigned are not the ones it used
--   different_job                 another job held the GPU (and the labelled one no GPU of
--                                 the node)
--   gpu_unallocated_by_scheduler  no job held the GPU
-- samples: labelled samples (each MIG instance's its own); gpu_hours: their time in
-- GPU-equivalents; first/last_sample_at: of the label's samples in the hours of that kind.
-- scheduler_job_ids / scheduler_accounts: the jobs the scheduler had on the GPU in those
-- hours while labelled samples were taken; label_job_gpu_indexes: where it had the labelled
-- job instead (different_gpu).
-- A label with hpc_job is matched by job id (its namespace is not compared); else a pod by
-- name (stg_job_records.job_name, which is the pod name for Kubernetes records), its
-- namespace compared with the pod's account; else a namespace with the accounts holding the
-- GPU.
-- Cheap at scale: the samples of one GPU (or MIG instance), hour and label are aggregated
-- first (a hash aggregate over the projected label columns, no join per sample); the samples
-- inside each scheduler segment of that hour are then counted from the first timestamp and
-- the spacing (exact for regular sampling). A sample stands for its GPU's step (the median
-- spacing of its labelled hours, 60 s when unknown) × its share of the GPU (a MIG instance:
-- its slices / 7). Samples count distinct timestamps to the second (metrics exported in
-- separate files, or one file landed twice, are one sample).
-- Reads $files (the paths of sample_sources plus an empty file with every column read),
-- sample_sources, job_gpu_hours, stg_jobs and stg_job_records.
-- Parameters: $files, $billing_month, $month_start, $month_end.
with samples as (
    select
        src.cluster,
        nullif(trim(s.node::varchar), '') as node,
        try_cast(s.gpu_index as integer) as gpu_index,
        s.gpu_instance,
        coalesce(s.gpu_instance_slices * (whole_gpu() // 7), whole_gpu()) as gpu_share,
        try_cast(s.ts as timestamp) as ts,
        nullif(trim(s.job_id::varchar), '') as label_job_id,
        nullif(trim(s.pod), '') as label_pod,
        nullif(trim(s.namespace), '') as label_namespace
    from read_parquet($files, filename = true, union_by_name = true) as s
    join sample_sources as src on src.path = s.filename
    where nullif(trim(s.job_id::varchar), '') is not null
        or nullif(trim(s.pod), '') is not null
        or nullif(trim(s.namespace), '') is not null
),

hours as (
    -- one row per GPU (or MIG instance) × hour × label
    select
        cluster, node, gpu_index, gpu_instance,
        date_trunc('hour', ts) as hour,
        label_job_id, label_pod, label_namespace,
        any_value(gpu_share) as gpu_share,
        -- distinct timestamps (to the second): the same sample in several files counts once;
        -- a bitmap of the hour's seconds is ~10x cheaper than count(distinct ts)
        bit_count(bitstring_agg(
            (extract(minute from ts) * 60 + extract(second from ts))::integer, 0, 3599
        )) as samples,
        min(ts) as first_ts,
        max(ts) as last_ts
    from samples
    where ts >= $month_start::timestamp and ts < $month_end::timestamp
        and node is not null and gpu_index is not null
    group by all
),

steps as (
    select
        cluster, node, gpu_index,
        coalesce(
            median((epoch_ms(last_ts) - epoch_ms(first_ts)) / (samples - 1)) filter (samples > 1),
            60000
        ) as step_ms
    from hours
    group by all
),

spans as (
    select
        h.*,
        s.step_ms,
        dense_rank() over (
            order by h.cluster, h.label_job_id, h.label_pod, h.label_namespace
        ) as label_id,
        row_number() over (
            order by
                h.cluster, h.node, h.gpu_index, h.gpu_instance, h.hour, h.label_job_id,
                h.label_pod, h.label_namespace
        ) as span_id,
        epoch_ms(h.first_ts) as first_ms,
        -- the spacing of the span's samples (its GPU's step when it has one sample)
        case
            when h.samples > 1
                then (epoch_ms(h.last_ts) - epoch_ms(h.first_ts)) / (h.samples - 1)
            else s.step_ms
        end as spacing_ms
    from hours as h
    join steps as s using (cluster, node, gpu_index)
),

labels as (
    select distinct label_id, cluster, label_job_id, label_pod, label_namespace from spans
),

scheduler_jobs as (
    -- every job the scheduler exports know (any month), with its account
    select cluster, job_id, account, job_name
    from stg_job_records
    where reject_reason is null and record_type = 'job' and record_rank = 1
),

pods as (
    select cluster, job_id, account, job_name as pod
    from scheduler_jobs
    where job_name is not null
),

candidates as (
    -- the scheduler jobs a label names, and whether the label's namespace fits them
    select l.label_id, j.job_id, true as namespace_fits
    from labels as l
    join scheduler_jobs as j on j.cluster = l.cluster and j.job_id = l.label_job_id
    union all
    select
        l.label_id,
        p.job_id,
        l.label_namespace is null or l.label_namespace = p.account as namespace_fits
    from labels as l
    join pods as p on p.cluster = l.cluster and p.pod = l.label_pod
    where l.label_job_id is null
),

holders as (
    -- the scheduler's job segments on each span's GPU in its hour, and the labelled job's on
    -- the node's other GPUs, with the span's samples taken inside each (sample k of a span is
    -- at first_ms + k × spacing_ms)
    select
        sp.span_id,
        g.job_id,
        j.account,
        c.job_id is not null as is_labelled_job,
        case
            when c.job_id is not null then c.namespace_fits
            when sp.label_job_id is null and sp.label_pod is null
                then (j.account is not distinct from sp.label_namespace)
        end as fits,
        greatest(
            0,
            least(sp.samples, ceil((epoch_ms(g.seg_to) - sp.first_ms) / sp.spacing_ms))
            - greatest(0, ceil((epoch_ms(g.seg_from) - sp.first_ms) / sp.spacing_ms))
        ) as held_samples,
        g.gpu_index = sp.gpu_index as on_span_gpu,
        g.gpu_index
    from (
        -- the segments on the span's own GPU, whichever job's
        select s.span_id, g.*
        from spans as s
        join job_gpu_hours as g using (cluster, node, gpu_index, hour)
        where g.billing_month = $billing_month
        union all
        -- and the candidate jobs' segments on the node's other GPUs
        select s.span_id, g.*
        from spans as s
        join candidates as k on k.label_id = s.label_id
        join job_gpu_hours as g
            on g.billing_month = $billing_month
            and g.cluster = s.cluster
            and g.node = s.node
            and g.hour = s.hour
            and g.job_id = k.job_id
            and g.gpu_index <> s.gpu_index
    ) as g
    join spans as sp using (span_id)
    left join stg_jobs as j
        on j.billing_month = $billing_month and j.cluster = g.cluster and j.job_id = g.job_id
    left join candidates as c on c.label_id = sp.label_id and c.job_id = g.job_id
),

judged as (
    select
        sp.*,
        k.label_id is not null as label_known,
        coalesce(sum(h.held_samples) filter (h.on_span_gpu and h.fits), 0) as matching,
        coalesce(sum(h.held_samples) filter (h.on_span_gpu and not h.fits), 0) as unfitting,
        coalesce(sum(h.held_samples) filter (h.on_span_gpu and h.is_labelled_job), 0)
            as held_by_labelled_job,
        coalesce(sum(h.held_samples) filter (h.on_span_gpu and not h.is_labelled_job), 0)
            as held_by_others,
        coalesce(list(distinct h.job_id) filter (h.on_span_gpu and h.held_samples > 0), [])
            as scheduler_job_ids,
        coalesce(list(distinct h.account) filter (h.on_span_gpu and h.held_samples > 0), [])
            as scheduler_accounts
    from spans as sp
    left join (select distinct label_id from candidates) as k using (label_id)
    left join holders as h using (span_id)
    group by all
),

away as (
    -- the node's other GPUs where the labelled job was while more of the span's samples were
    -- taken than on the span's GPU (a job on several GPUs is on all of them at once)
    select
        e.span_id,
        list(e.gpu_index order by e.gpu_index) filter (e.held > j.held_by_labelled_job)
            as gpu_indexes
    from (
        select span_id, gpu_index, sum(held_samples) as held
        from holders
        where not on_span_gpu
        group by all
    ) as e
    join judged as j using (span_id)
    group by e.span_id
),

parts as (
    -- a span's samples: those the scheduler agrees with, those held by a job whose namespace
    -- is not the label's, and the rest
    select
        j.*,
        coalesce(a.gpu_indexes, []) as label_job_gpu_indexes,
        least(j.samples, j.matching) as agreeing,
        least(j.samples - least(j.samples, j.matching), j.unfitting) as unfit
    from judged as j
    left join away as a using (span_id)
),

kinds as (
    select *, 'agrees' as kind, agreeing as kind_samples from parts
    union all
    select *, 'namespace_mismatch', unfit from parts
    union all
    select
        *,
        case
            when label_job_id is null and label_pod is null then 'gpu_unallocated_by_scheduler'
            when not label_known then 'label_job_not_in_scheduler'
            when len(label_job_gpu_indexes) > 0 then 'different_gpu'
            when held_by_others > 0 then 'different_job'
            else 'gpu_unallocated_by_scheduler'
        end,
        samples - agreeing - unfit
    from parts
),

grouped as (
    select
        $billing_month::date as billing_month,
        cluster,
        node,
        gpu_index,
        label_job_id,
        label_pod,
        label_namespace,
        kind,
        list_sort(list_distinct(flatten(list(scheduler_job_ids)))) as job_ids,
        list_sort(list_distinct(flatten(list(scheduler_accounts)))) as accounts,
        list_sort(list_distinct(flatten(
            list(label_job_gpu_indexes) filter (kind = 'different_gpu')
        ))) as gpu_indexes,
        min(first_ts) as first_sample_at,
        max(last_ts) as last_sample_at,
        sum(kind_samples)::bigint as samples,
        -- in whole ms (a median step may be fractional): a sum of integers, exact in any order
        gpu_hours(sum(round(kind_samples * step_ms)::hugeint * gpu_share)) as gpu_hours
    from kinds
    where kind_samples > 0
    group by all
),

final as (
    select
        * exclude (
            job_ids, accounts, gpu_indexes, first_sample_at, last_sample_at, samples,
            gpu_hours
        ),
        nullif(array_to_string(job_ids, ','), '') as scheduler_job_ids,
        nullif(array_to_string(accounts, ','), '') as scheduler_accounts,
        nullif(array_to_string(gpu_indexes, ','), '') as label_job_gpu_indexes,
        first_sample_at,
        last_sample_at,
        samples,
        gpu_hours
    from grouped
)

select * from final
order by cluster, node, gpu_index, label_job_id, label_pod, label_namespace, kind
