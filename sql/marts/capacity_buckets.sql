-- One row per billing month × cluster × GPU model × bucket of the waste taxonomy, plus one
-- row with bucket 'capacity'. Job time fills productive, idle, zombie, failed_job,
-- failed_infra and unmeasured; GPU time no job held is down (outage) or unallocated. The eight
-- buckets sum to capacity exactly in gpu_units (1/420 GPU-ms) when the inventory (nodes.csv)
-- is known; without
-- it there are no capacity, down or unallocated rows.
-- Parameters: $billing_month.
with job_time as (
    select
        cluster,
        gpu_model,
        sum(productive_units) as productive,
        sum(idle_units) as idle,
        sum(zombie_units) as zombie,
        sum(failed_job_units) as failed_job,
        sum(failed_infra_units) as failed_infra,
        sum(unmeasured_units) as unmeasured
    from job_time_buckets
    where billing_month = $billing_month
    group by all
),

free_time as (
    select
        cluster,
        gpu_model,
        sum(down_units) as down,
        sum(unallocated_units) as unallocated,
        sum(capacity_units) as capacity
    from gpu_capacity
    where billing_month = $billing_month
    group by all
),

long_form as (
    unpivot job_time
    on productive, idle, zombie, failed_job, failed_infra, unmeasured
    into name bucket value gpu_units
    union all by name
    unpivot free_time
    on down, unallocated, capacity
    into name bucket value gpu_units
),

final as (
    select
        $billing_month::date as billing_month,
        cluster,
        gpu_model,
        bucket,
        gpu_hours(sum(gpu_units)::bigint) as gpu_hours,
        sum(gpu_units)::bigint as gpu_units
    from long_form
    group by all
)

select * from final
order by cluster, gpu_model, bucket
