-- One row per billing month × cluster × Kueue Workload created in the month (its
-- creationTimestamp inside the month): how long it waited for admission. From the Workload
-- objects of the Kueue dumps (stg_quota_configs); a workload in several dumps counts once, as
-- the latest dump by file name shows it (the most complete state).
--   queue            its LocalQueue (spec.queueName); cluster_queue the admitting
--                    ClusterQueue (status.admission.clusterQueue)
--   quota_reserved_at / admitted_at  the lastTransitionTime of its True QuotaReserved /
--                    Admitted conditions (Admitted follows QuotaReserved once the admission
--                    checks pass; without checks they coincide)
--   owner_kind / owner_uid  what Kueue made the workload of: a Pod (plain pods, which exist
--                    while pending) or a Job (suspended: no pod until admitted)
--   is_admitted      admitted by the time of the dump; else still pending there
--   wait_s           admitted_at − created_at (NULL while pending): the Kubernetes queue wait
--                    queue_stats could take for Kueue-managed pods instead of pod creation to
--                    start (which adds image pulls and scheduling)
-- The tenant is the namespace's at creation (catalog_account_tenants; none: 'unmapped').
-- Parameters: $billing_month, $month_start, $month_end.
with workloads as (
    select
        cluster,
        account as namespace,
        object_name as workload,
        target as queue,
        admitted_queue as cluster_queue,
        created_at,
        quota_reserved_at,
        admitted_at,
        owner_kind,
        owner_uid,
        file
    from stg_quota_configs
    where source = 'kueue' and object_kind = 'Workload' and reject_reason is null
        and created_at >= $month_start::timestamp and created_at < $month_end::timestamp
    qualify row_number() over (
            partition by cluster, account, object_name order by file desc, line desc
        ) = 1
),

final as (
    select
        w.cluster,
        coalesce(m.tenant_id, 'unmapped') as tenant_id,
        w.namespace,
        w.workload,
        w.queue,
        w.cluster_queue,
        w.created_at,
        w.quota_reserved_at,
        w.admitted_at,
        w.owner_kind,
        w.owner_uid,
        w.admitted_at is not null as is_admitted,
        date_diff('millisecond', w.created_at, w.admitted_at) / 1000.0 as wait_s,
        w.file
    from workloads as w
    left join catalog_account_tenants as m on mapping_applies(m, w.namespace, w.created_at)
    qualify row_number() over (
            partition by w.cluster, w.namespace, w.workload order by m.priority nulls last
        ) = 1
)

select $billing_month::date as billing_month, * from final
order by cluster, namespace, workload
