-- One row per billing month × cluster × tenant × pool × source × kind where the GPU quotas
-- configured in the scheduler disagree with the catalog's quota (quotas.yaml) in force at the
-- month's end. The configuration is each cluster's latest dump of each source by file name
-- (stg_quota_configs.is_latest); its valid rows only.
-- What a source configures for a tenant × pool (a pool is a GPU model, or a partition /
-- queue name):
--   slurm_assoc  the GrpTRES GPU limit of the tenant's accounts' account-level associations
--                (summed over its accounts); per-user associations are not tenant quotas
--   slurm_qos    the GrpTRES GPU limit of a QOS, for the tenants whose associations list it
--   kueue        a ClusterQueue's nominalQuota (guarantee) and nominalQuota + borrowingLimit
--                (limit; none in a cohort without borrowingLimit), for the tenants of the
--                namespaces of the LocalQueues pointing to it; its pool is its flavor's
--                ResourceFlavor nvidia.com/gpu.product label, else the flavor's name (both
--                mapped by the cluster's gpu_models setting)
-- A tenant's configured GPUs of one source on a pool are summed over its objects (accounts,
-- QOS, ClusterQueues); Slurm configures no guarantee, so only limits are compared there.
-- An account or namespace is the tenant it maps to at the month's end (unmapped: 'unmapped').
-- Kinds:
--   guarantee_differs  configured guarantee ≠ the catalog's guaranteed_gpus (Kueue)
--   limit_differs      configured limit ≠ the catalog's limit_gpus (either may be no limit)
--   not_in_catalog     a configured guarantee or limit of a tenant × pool with no catalog quota
--   not_configured     a catalog quota that something on the cluster must enforce (a limit;
--                      on Kueue also a guarantee above 0) and that no source of the cluster's
--                      scheduler configures, for a tenant with a configuration or GPU jobs on
--                      the cluster in the month, on a pool the cluster holds (a GPU model of
--                      its nodes, a GPU model or queue of its jobs, a configured pool);
--                      source is the scheduler: slurm or kueue
--   shared_queue       a QOS or ClusterQueue whose GPU quota several tenants share: not
--                      comparable per tenant, listed once per tenant it serves
--   pool_unknown       an untyped GPU limit of an association or QOS without a partition: a
--                      limit on GPUs of any type, which no pool names
-- A catalog quota spans clusters: each cluster's configuration is compared with all of it.
-- GPUs are DOUBLE, as in quota_compliance; NULL limit = no limit.
-- Parameters: $billing_month, $month_end.
with configs as (
    select * from stg_quota_configs
    where is_latest and reject_reason is null
),

accounts as (
    select distinct account from configs where account is not null
),

account_tenant as (
    -- the tenant of each account or namespace at the month's last instant
    select a.account, coalesce(m.tenant_id, 'unmapped') as tenant_id
    from accounts as a
    left join catalog_account_tenants as m
        on m.account = a.account
        and m.valid_from < $month_end::timestamp
        and m.valid_to >= $month_end::timestamp
    qualify row_number() over (partition by a.account order by m.priority nulls last) = 1
),

qos_lists as (
    select cluster, account, trim(unnest(string_split(qos, ','))) as qos
    from configs
    where source = 'slurm_assoc' and qos is not null
),

qos_tenants as (
    -- the tenants whose associations (account-level or a user's) list each QOS
    select q.cluster, q.qos, t.tenant_id
    from qos_lists as q
    join account_tenant as t using (account)
    where q.qos <> ''
    group by all
),

queue_tenants as (
    -- the tenants of the namespaces whose LocalQueues point to each ClusterQueue
    select c.cluster, c.target as queue, t.tenant_id
    from configs as c
    join account_tenant as t using (account)
    where c.source = 'kueue' and c.object_kind = 'LocalQueue'
    group by all
),

flavors as (
    select cluster, flavor, any_value(gpu_model) as gpu_model
    from configs
    where source = 'kueue' and object_kind = 'ResourceFlavor' and gpu_model is not null
    group by all
),

objects as (
    -- every configured GPU guarantee or limit, with the tenants it applies to
    select
        c.cluster,
        t.tenant_id,
        coalesce(c.gpu_model, c.partition) as pool,
        c.source,
        c.guaranteed_gpus,
        c.limit_gpus,
        'association ' || c.object_name as object,
        c.file,
        1 as tenants
    from configs as c
    join account_tenant as t using (account)
    where c.source = 'slurm_assoc' and c."user" is null and c.has_gpu_quota
    union all
    select
        c.cluster,
        q.tenant_id,
        coalesce(c.gpu_model, c.partition),
        c.source,
        c.guaranteed_gpus,
        c.limit_gpus,
        'QOS ' || c.object_name,
        c.file,
        count(*) over (partition by c.cluster, c.object_name, c.gpu_model, c.partition)
    from configs as c
    join qos_tenants as q on q.cluster = c.cluster and q.qos = c.object_name
    where c.source = 'slurm_qos' and c.has_gpu_quota
    union all
    select
        c.cluster,
        q.tenant_id,
        coalesce(f.gpu_model, c.gpu_model),
        c.source,
        c.guaranteed_gpus,
        c.limit_gpus,
        'ClusterQueue ' || c.object_name,
        c.file,
        count(*) over (partition by c.cluster, c.object_name, c.flavor)
    from configs as c
    join queue_tenants as q on q.cluster = c.cluster and q.queue = c.object_name
    left join flavors as f on f.cluster = c.cluster and f.flavor = c.flavor
    where c.source = 'kueue' and c.object_kind = 'ClusterQueue' and c.has_gpu_quota
),

shared as (
    select
        o.*,
        (
            select string_agg(distinct s.tenant_id, ', ' order by s.tenant_id)
            from objects as s
            where s.cluster = o.cluster
                and s.object = o.object
                and s.pool is not distinct from o.pool
        ) as tenant_list
    from objects as o
    where o.tenants > 1
),

configured as (
    -- a tenant's own objects of one source on a pool, summed (no limit if one has none)
    select
        cluster,
        tenant_id,
        pool,
        source,
        sum(guaranteed_gpus) as guaranteed_gpus,
        case when count(*) = count(limit_gpus) then sum(limit_gpus) end as limit_gpus,
        string_agg(object, ', ' order by object) as objects,
        max(file) as file
    from objects
    where tenants = 1
    group by all
),

catalog as (
    select
        tenant_id,
        pool,
        guaranteed_gpus::decimal(18, 3) as guaranteed_gpus,
        limit_gpus::decimal(18, 3) as limit_gpus
    from catalog_quotas
    where valid_from < $month_end::timestamp and valid_to >= $month_end::timestamp
),

compared as (
    select
        c.*,
        k.tenant_id is not null as in_catalog,
        k.guaranteed_gpus as catalog_guaranteed_gpus,
        k.limit_gpus as catalog_limit_gpus
    from configured as c
    left join catalog as k using (tenant_id, pool)
),

schedulers as (
    select distinct cluster, if(source = 'kueue', 'kueue', 'slurm') as scheduler
    from configs
),

cluster_tenants as (
    select distinct o.cluster, o.tenant_id from objects as o
    union
    select distinct c.cluster, t.tenant_id
    from configs as c
    join account_tenant as t using (account)
    union
    select distinct cluster, tenant_id from job_usage where billing_month = $billing_month
),

cluster_pools as (
    select distinct cluster, gpu_model as pool from catalog_nodes
    union
    select distinct cluster, gpu_model from job_usage
    where billing_month = $billing_month and gpu_model is not null
    union
    select distinct cluster, queue from job_usage
    where billing_month = $billing_month and queue is not null
    union
    select distinct cluster, pool from objects where pool is not null
),

not_configured as (
    select
        s.cluster,
        k.tenant_id,
        k.pool,
        s.scheduler as source,
        'not_configured' as kind,
        null::decimal(18, 3) as configured_guaranteed_gpus,
        null::decimal(18, 3) as configured_limit_gpus,
        k.guaranteed_gpus as catalog_guaranteed_gpus,
        k.limit_gpus as catalog_limit_gpus,
        null as config_objects,
        null as config_file,
        format(
            'the catalog quota (guaranteed {:g}, limit {}) is configured by no {} object on {}',
            k.guaranteed_gpus::double,
            coalesce(format('{:g}', k.limit_gpus::double), 'none'),
            if(s.scheduler = 'kueue', 'Kueue', 'Slurm'),
            s.cluster
        ) as detail
    from catalog as k
    join cluster_tenants as t on t.tenant_id = k.tenant_id
    join schedulers as s on s.cluster = t.cluster
    join cluster_pools as p on p.cluster = s.cluster and p.pool = k.pool
    where (k.limit_gpus is not null or (s.scheduler = 'kueue' and k.guaranteed_gpus > 0))
        and not exists (
            select 1 from objects as o
            where o.cluster = s.cluster
                and o.tenant_id = k.tenant_id
                and o.pool = k.pool
                and if(o.source = 'kueue', 'kueue', 'slurm') = s.scheduler
        )
),

differences as (
    select
        cluster,
        tenant_id,
        pool,
        source,
        kind,
        guaranteed_gpus as configured_guaranteed_gpus,
        limit_gpus as configured_limit_gpus,
        catalog_guaranteed_gpus,
        catalog_limit_gpus,
        objects as config_objects,
        file as config_file,
        case kind
            when 'pool_unknown'
                then format(
                    '{} limits GPUs of any type to {:g}: no GPU type or partition names a pool',
                    objects, limit_gpus::double
                )
            when 'not_in_catalog'
                then format(
                    '{} configures guaranteed {}, limit {}; the catalog has no quota of {} on {}',
                    objects,
                    coalesce(format('{:g}', guaranteed_gpus::double), 'none'),
                    coalesce(format('{:g}', limit_gpus::double), 'none'),
                    tenant_id,
                    pool
                )
            when 'guarantee_differs'
                then format(
                    '{} guarantees {:g} GPUs, the catalog {:g}',
                    objects, guaranteed_gpus::double, catalog_guaranteed_gpus::double
                )
            when 'limit_differs' then format(
                '{} limits to {}, the catalog to {}',
                objects,
                coalesce(format('{:g} GPUs', limit_gpus::double), 'no limit'),
                coalesce(format('{:g} GPUs', catalog_limit_gpus::double), 'no limit')
            )
        end as detail
    from (
        select *, 'pool_unknown' as kind from compared where pool is null
        union all
        select *, 'not_in_catalog' from compared where pool is not null and not in_catalog
        union all
        select *, 'guarantee_differs' from compared
        where in_catalog and source = 'kueue'
            and guaranteed_gpus is distinct from catalog_guaranteed_gpus
        union all
        select *, 'limit_differs' from compared
        where in_catalog and limit_gpus is distinct from catalog_limit_gpus
    )
),

shared_rows as (
    select
        s.cluster,
        s.tenant_id,
        s.pool,
        s.source,
        'shared_queue' as kind,
        s.guaranteed_gpus as configured_guaranteed_gpus,
        s.limit_gpus as configured_limit_gpus,
        k.guaranteed_gpus as catalog_guaranteed_gpus,
        k.limit_gpus as catalog_limit_gpus,
        s.object as config_objects,
        s.file as config_file,
        format(
            '{} is shared by tenants {} (guaranteed {}, limit {}): not comparable per tenant',
            s.object,
            s.tenant_list,
            coalesce(format('{:g}', s.guaranteed_gpus::double), 'none'),
            coalesce(format('{:g}', s.limit_gpus::double), 'none')
        ) as detail
    from shared as s
    left join catalog as k on k.tenant_id = s.tenant_id and k.pool = s.pool
),

final as (
    select * from differences
    union all by name
    select * from not_configured
    union all by name
    select * from shared_rows
)

select
    $billing_month::date as billing_month,
    cluster,
    tenant_id,
    pool,
    source,
    kind,
    configured_guaranteed_gpus::double as configured_guaranteed_gpus,
    configured_limit_gpus::double as configured_limit_gpus,
    catalog_guaranteed_gpus::double as catalog_guaranteed_gpus,
    catalog_limit_gpus::double as catalog_limit_gpus,
    config_objects,
    config_file,
    detail
from final
order by cluster, tenant_id, pool, source, kind, config_objects
