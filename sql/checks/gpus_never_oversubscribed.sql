-- One row per GPU whose jobs held more than the whole GPU at some time in the billing month
-- (two whole jobs at once, or MIG/fractional/shared shares adding up to more than 1; a GPU
-- shared by declaration holds 1/replicas per replica, so only undeclared overlap or more
-- replicas than declared gets here): the excess GPU-hours, when the overlap first began and
-- the jobs that held the GPU while it was oversubscribed.
-- Parameters: $billing_month.
with oversubscribed as (
    select cluster, node, gpu_index, overlap_units
    from gpu_capacity
    where billing_month = $billing_month and overlap_units > 0
),

held as (
    -- the holds of the month's jobs on those GPUs (whole: an overlap may begin before the
    -- month, the excess GPU-hours are the month's)
    select
        j.cluster, g.node, g.gpu_index, j.job_id, g.gpu_share,
        j.start_at as held_from, j.held_until as held_to
    from stg_jobs as j
    join job_gpus as g using (billing_month, cluster, job_id)
    join oversubscribed using (cluster, node, gpu_index)
    where j.billing_month = $billing_month and j.held_until > j.start_at
),

moments as (
    select distinct cluster, node, gpu_index, held_from as moment from held
    union
    select distinct cluster, node, gpu_index, held_to from held
),

intervals as (
    select *
    from (
        select
            cluster, node, gpu_index, moment as interval_from,
            lead(moment) over (partition by cluster, node, gpu_index order by moment)
                as interval_to
        from moments
    )
    where interval_to is not null
),

excess as (
    -- the intervals in which the held shares add up to more than the GPU (420 = whole)
    select i.cluster, i.node, i.gpu_index, i.interval_from, list(h.job_id) as job_ids
    from intervals as i
    join held as h
        on h.cluster = i.cluster and h.node = i.node and h.gpu_index = i.gpu_index
        and h.held_from <= i.interval_from and h.held_to >= i.interval_to
    group by all
    having sum(h.gpu_share) > whole_gpu()
)

select
    o.cluster,
    o.node,
    o.gpu_index,
    gpu_hours(o.overlap_units) as excess_gpu_hours,
    min(e.interval_from) as first_overlap_at,
    array_to_string(list_sort(list_distinct(flatten(list(e.job_ids)))), ', ') as jobs
from oversubscribed as o
join excess as e using (cluster, node, gpu_index)
group by all
order by o.cluster, o.node, o.gpu_index
