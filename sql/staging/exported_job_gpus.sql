-- One row per GPU held by a started job of the month, as the scheduler exported it.
-- Parameters: $billing_month.
select distinct
    j.billing_month,
    j.cluster,
    j.job_id,
    a.node,
    a.gpu_index,
    'export' as index_source
from stg_jobs as j
join stg_allocation_records as a
    on a.cluster = j.cluster and a.job_id = j.job_id and a.reject_reason is null
where j.billing_month = $billing_month and j.start_at is not null
