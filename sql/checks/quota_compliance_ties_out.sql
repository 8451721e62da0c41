-- One row per broken invariant of quota_compliance in the billing month:
--   'row'        a tenant × pool whose figures contradict each other: mean GPUs outside
--                [0, peak], borrowed or unused-guarantee hours outside [0, used] / [0,
--                guaranteed], minutes above limit longer than the month, or used hours that
--                are not guaranteed − unused + borrowed
--   'gpu_model'  a GPU model whose used GPU-hours over all tenants differ from its allocated
--                GPU-hours in job_gpu_hours (the concurrency step function lost or invented
--                time)
-- Parameters: $billing_month.
with quota as (
    select * from quota_compliance where billing_month = $billing_month
),

row_errors as (
    select
        'row' as level,
        format('{}/{}', tenant_id, pool) as subject,
        used_gpu_hours as actual,
        guaranteed_gpu_hours - unused_guaranteed_gpu_hours + borrowed_gpu_hours as expected
    from quota
    where mean_gpus < 0
        or mean_gpus > peak_gpus + 1e-9
        or borrowed_gpu_hours < 0
        or borrowed_gpu_hours > used_gpu_hours + 1e-6
        or unused_guaranteed_gpu_hours < 0
        or unused_guaranteed_gpu_hours > guaranteed_gpu_hours + 1e-6
        or minutes_above_limit > hours * 60 + 1e-6
        or abs(
            used_gpu_hours
            - (guaranteed_gpu_hours - unused_guaranteed_gpu_hours + borrowed_gpu_hours)
        ) > 1e-6
),

allocated as (
    select gpu_model, gpu_hours(sum(gpu_units)) as gpu_hours
    from job_gpu_hours
    where billing_month = $billing_month
    group by all
),

model_errors as (
    select
        'gpu_model' as level,
        a.gpu_model as subject,
        coalesce(sum(q.used_gpu_hours), 0) as actual,
        any_value(a.gpu_hours) as expected
    from allocated as a
    left join quota as q on q.pool = a.gpu_model
    group by all
    having abs(coalesce(sum(q.used_gpu_hours), 0) - any_value(a.gpu_hours)) > 1e-6
),

final as (
    select * from row_errors
    union all
    select * from model_errors
)

select * from final
order by level, subject
