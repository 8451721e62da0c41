-- One row per configured GPU quota object read from the schedulers' configuration dumps (all
-- files: sacctmgr associations and QOS, Kueue ClusterQueue / LocalQueue / ResourceFlavor /
-- Workload objects), typed, with the reason it is rejected (NULL when valid). Grain: cluster ×
-- file × line × pool (a sacctmgr line with typed GPU limits of two types is two rows; a Kueue
-- ClusterQueue one per GPU flavor).
--   source            slurm_assoc | slurm_qos | kueue
--   is_latest         the file is the cluster's latest of its source by file name: the
--                     configuration quota_drift compares (older dumps are history)
--   guaranteed_gpus   Kueue nominalQuota (Slurm has no guarantee: NULL)
--   limit_gpus        Slurm GrpTRES GPUs; Kueue nominalQuota + borrowingLimit (NULL: no limit)
--   has_gpu_quota     the row configures a GPU guarantee or limit (else it is an object that
--                     configures none: an association listing QOS, a LocalQueue, ...)
-- Workload times become naive UTC. Written as raw_quotas by pipelines/defs/ingest/loading.py.
with typed as (
    -- the raw row, GPU counts and times typed: their text stays for the reject reasons
    select
        * replace (
            try_cast(guaranteed_gpus as decimal(18, 3)) as guaranteed_gpus,
            try_cast(limit_gpus as decimal(18, 3)) as limit_gpus
        ),
        guaranteed_gpus as guaranteed_text,
        limit_gpus as limit_text,
        to_utc(created_time, 'UTC') as created_at,
        to_utc(quota_reserved_time, 'UTC') as quota_reserved_at,
        to_utc(admitted_time, 'UTC') as admitted_at
    from raw_quotas
),

checked as (
    select
        *,
        coalesce(
            parse_error,
            unparsed('guaranteed_gpus', guaranteed_text, guaranteed_gpus, 'GPU count'),
            unparsed('limit_gpus', limit_text, limit_gpus, 'GPU count'),
            unparsed('creationTimestamp', created_time, created_at, 'timestamp'),
            unparsed(
                'QuotaReserved lastTransitionTime', quota_reserved_time, quota_reserved_at,
                'timestamp'
            ),
            unparsed('Admitted lastTransitionTime', admitted_time, admitted_at, 'timestamp')
        ) as reject_reason
    from typed
),

latest_files as (
    select cluster, source, max(file) as file
    from checked
    group by cluster, source
),

final as (
    select
        c.cluster,
        c.file,
        c.line,
        c.source,
        c.object_kind,
        c.object_name,
        c.account,
        c."user",
        c.partition,
        c.qos,
        c.target,
        c.cohort,
        c.flavor,
        c.gpu_model,
        c.guaranteed_gpus,
        c.limit_gpus,
        c.guaranteed_gpus is not null or c.limit_gpus is not null as has_gpu_quota,
        c.created_at,
        c.quota_reserved_at,
        c.admitted_at,
        c.admitted_queue,
        c.owner_kind,
        c.owner_uid,
        l.file is not null as is_latest,
        c.raw,
        c.reject_reason
    from checked as c
    left join latest_files as l using (cluster, source, file)
)

select * from final
order by cluster, file, line, gpu_model
