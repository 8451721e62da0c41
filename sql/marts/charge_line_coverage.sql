-- One row per billing month × tenant × cluster × GPU model × unit price × charge type (usage,
-- credit): how much of the GPU time those charge lines bill rests on telemetry. Each job's
-- GPU time on a line counts as measured in the share its own time in the month was measured
-- (job_time_buckets: measured / allocated units of the job on that GPU model), in whole GPU
-- units (floor); reserved_unused, idle_share and platform lines bill no job time and have no
-- row. A closed month's issued and correction lines take the coverage of the line as computed
-- now (it says what the figures rest on, not what was billed).
--   measured_share_pct  100 × measured_gpu_hours / gpu_hours (NULL without GPU time)
-- Parameters: $billing_month.
with billed as (
    select
        c.tenant_id, c.cluster, c.gpu_model, c.unit_price, c.job_id, 'usage' as charge_type,
        c.gpu_units as units
    from job_gpu_charges as c
    where c.billing_month = $billing_month
    union all
    select
        c.tenant_id, c.cluster, c.gpu_model, c.unit_price, c.job_id, 'credit',
        c.credit_gpu_units
    from job_gpu_charges as c
    where c.billing_month = $billing_month and c.credit_gpu_units > 0
),

job_models as (
    -- the job's time on the GPU model in the month, whatever tenant each day had
    select
        cluster,
        job_id,
        gpu_model,
        sum(measured_units)::hugeint as measured_units,
        sum(allocated_units)::hugeint as allocated_units
    from job_time_buckets
    where billing_month = $billing_month
    group by all
),

measured as (
    select
        b.*,
        coalesce(b.units::hugeint * j.measured_units // nullif(j.allocated_units, 0), 0)
            as measured_units
    from billed as b
    left join job_models as j
        on j.cluster = b.cluster and j.job_id = b.job_id and j.gpu_model = b.gpu_model
)

select
    $billing_month::date as billing_month,
    tenant_id,
    cluster,
    gpu_model,
    unit_price,
    charge_type,
    gpu_hours(sum(units)) as gpu_hours,
    gpu_hours(sum(measured_units)) as measured_gpu_hours,
    100.0 * sum(measured_units) / nullif(sum(units), 0) as measured_share_pct
from measured
group by all
order by tenant_id, cluster, gpu_model, unit_price, charge_type
