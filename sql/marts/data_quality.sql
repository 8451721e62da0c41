-- Data quality of the billing month, one row per finding:
--   file                     rows read / loaded / rejected per input file (read = loaded +
--                            rejected) and duplicates folded (records of a job or sample that
--                            another record of it superseded: also a pending array record
--                            whose tasks are listed, the instance rows of a MIG GPU folded
--                            into its sample, and an allocation record naming the GPU another
--                            record of its job names); an export without rows (empty, or a
--                            header alone) is listed with 0 in every month
--   unmapped_account         an account that maps to no tenant, with its GPU-hours
--   eligible_time_ignored    per cluster, the jobs of the month whose eligible time lies
--                            before their submit or after their start (stg_jobs): their queue
--                            wait runs from submit; value: how many
--   telemetry_coverage       measured share of allocated GPU time per cluster
--   overlapping_allocations  a GPU jobs held beyond its whole, with the excess GPU-hours
--   allocation_rows_missing_gpus
--                            a job whose allocation rows name fewer GPUs than its record says
--                            it held (some rows missing or rejected): it is billed for all of
--                            them, the rest placed lowest free first (job_gpus); value: the
--                            GPU-eq placed
--   allocation_rows_beyond_gpus
--                            a job whose allocation rows name more GPUs than its record's GPU
--                            count rounded up: its GPU-eq is shared among them; value: the
--                            GPUs named
--   telemetry_labels         per cluster and kind of telemetry_label_checks (agrees,
--                            label_job_not_in_scheduler, different_job, ...): the GPU-hours of
--                            labelled samples, and how many samples on how many GPUs
-- GPU-hours are summed as whole GPU units (gpu_units): exact, whatever order threads add the
-- rows in.
-- Parameters: $billing_month.
with scheduler_records as (
    -- a job record superseded by another record of its job is folded, and an allocation
    -- record naming a GPU of its job another record names; configured quota records never are
    select cluster, file, reject_reason, record_rank > 1 as folded from stg_job_records
    union all
    select cluster, file, reject_reason, record_rank > 1 from stg_allocation_records
    union all
    select cluster, file, reject_reason, false from stg_quota_configs
),

scheduler_files as (
    select
        cluster,
        'file' as category,
        file as subject,
        count(*) as rows_read,
        count(*) filter (reject_reason is null) as rows_loaded,
        count(*) filter (reject_reason is not null) as rows_rejected,
        count(*) filter (folded) as duplicates_folded
    from scheduler_records
    group by cluster, file
),

sample_files as (
    select
        cluster, 'file' as category, file as subject,
        rows_read, rows_loaded, rows_rejected, duplicates_folded
    from sample_file_counts
    where billing_month = $billing_month
),

empty_files as (
    -- an export without rows (empty, or a header alone) is still an input of the month; no
    -- record or rolled-up day counts it
    select
        cluster, 'file' as category, file as subject,
        0 as rows_read, 0 as rows_loaded, 0 as rows_rejected, 0 as duplicates_folded
    from (
        select cluster, file, rows_read from stg_scheduler_files
        union all
        select cluster, file, rows_read from stg_telemetry_files
    )
    where rows_read = 0
),

unmapped as (
    select
        cluster,
        'unmapped_account' as category,
        account as subject,
        gpu_hours(sum(gpu_units(allocated_gpu_hours))) as value,
        format('{} jobs charged to tenant unmapped', count(*)) as detail
    from job_usage
    where billing_month = $billing_month and tenant_id = 'unmapped'
    group by cluster, account
),

ignored_eligible as (
    select
        cluster,
        'eligible_time_ignored' as category,
        cluster as subject,
        count(*) as value,
        format(
            '{} jobs with an eligible time before submit or after start: waits from submit',
            count(*)
        ) as detail
    from stg_jobs
    where billing_month = $billing_month and is_eligible_ignored
    group by cluster
),

coverage as (
    select
        cluster,
        'telemetry_coverage' as category,
        cluster as subject,
        sum(measured_units) / nullif(sum(allocated_units), 0) as value,
        'measured share of allocated GPU time' as detail
    from job_time_buckets
    where billing_month = $billing_month
    group by cluster
),

overlapping_gpus as (
    select
        cluster,
        'overlapping_allocations' as category,
        format('{}/gpu{}', node, gpu_index) as subject,
        gpu_hours(overlap_units) as value,
        'GPU-hours held beyond the whole GPU (jobs overlapping on it)' as detail
    from gpu_capacity
    where billing_month = $billing_month and overlap_units > 0
),

allocation_rows as (
    -- the month's jobs some allocation row names: how many GPUs they name, and the share of
    -- a GPU placed beyond them
    select
        j.cluster,
        j.job_id,
        j.gpus,
        count(*) filter (g.index_source = 'export') as named,
        coalesce(sum(g.gpu_share) filter (g.index_source = 'assigned'), 0) as assigned_units
    from stg_jobs as j
    join job_gpus as g using (billing_month, cluster, job_id)
    where j.billing_month = $billing_month
    group by j.cluster, j.job_id, j.gpus
    having named > 0
),

allocation_row_findings as (
    select
        cluster,
        'allocation_rows_missing_gpus' as category,
        job_id as subject,
        assigned_units / whole_gpu() as value,
        format(
            'allocation rows name {} GPU(s) of a job holding {} GPU-eq: {} GPU-eq placed lowest '
            || 'free first',
            named, printf('%g', gpus), printf('%g', assigned_units / whole_gpu())
        ) as detail
    from allocation_rows
    where assigned_units > 0
    union all
    select
        cluster,
        'allocation_rows_beyond_gpus' as category,
        job_id as subject,
        named as value,
        format(
            'allocation rows name {} GPUs of a job holding {} GPU-eq: each holds a share of it',
            named, printf('%g', gpus)
        ) as detail
    from allocation_rows
    where named > ceil(gpus)
),

label_checks as (
    select
        cluster,
        'telemetry_labels' as category,
        kind as subject,
        gpu_hours(sum(gpu_units(gpu_hours))) as value,
        format(
            '{} labelled samples on {} GPU(s): {}',
            sum(samples),
            count(distinct row(node, gpu_index)),
            case kind
                when 'agrees' then 'the labelled job held the GPU'
                when 'namespace_mismatch' then 'the labelled pod held it, in another namespace'
                when 'label_job_not_in_scheduler' then 'no scheduler export has the job or pod'
                when 'different_gpu' then 'the labelled job held another GPU of the node'
                when 'different_job' then 'another job held the GPU'
                when 'gpu_unallocated_by_scheduler' then 'no job held the GPU'
            end
        ) as detail
    from telemetry_label_checks
    where billing_month = $billing_month
    group by cluster, kind
),

final as (
    select * from scheduler_files
    union all by name
    select * from sample_files
    union all by name
    select * from empty_files
    union all by name
    select * from unmapped
    union all by name
    select * from ignored_eligible
    union all by name
    select * from coverage
    union all by name
    select * from overlapping_gpus
    union all by name
    select * from allocation_row_findings
    union all by name
    select * from label_checks
)

select
    $billing_month::date as billing_month,
    cluster,
    category,
    subject,
    rows_read::bigint as rows_read,
    rows_loaded::bigint as rows_loaded,
    rows_rejected::bigint as rows_rejected,
    duplicates_folded::bigint as duplicates_folded,
    value::double as value,
    detail
from final
order by category, cluster, subject
