-- One row per billing month × tenant × cluster × GPU model × charge category × unit price.
-- rate_card mode: usage at the rate in force. Each line's exact amount is rounded to cents once,
-- by the largest-remainder method: every line gets its floor in cents, then the lines with the
-- largest remainders get one more cent each until the lines add up to the exact month total
-- rounded half up. So lines sum to tenants and tenants to the total, to the cent.
-- Parameters: $billing_month, $currency.
with usage as (
    select
        c.tenant_id,
        c.cluster,
        c.gpu_model,
        c.unit_price,
        sum(c.gpu_ms)::bigint as gpu_ms,
        sum(c.charge_numerator) as charge_numerator
    from job_gpu_charges as c
    where c.billing_month = $billing_month
    group by all
),

floored as (
    select
        *,
        charge_numerator // 36000000000 as floor_cents,
        charge_numerator % 36000000000 as remainder
    from usage
),

shortfall as (
    select (sum(charge_numerator) + 18000000000) // 36000000000 - sum(floor_cents) as cents
    from floored
),

rounded as (
    select
        f.*,
        f.floor_cents + case
            when row_number() over (
                order by f.remainder desc, f.tenant_id, f.cluster, f.gpu_model, f.unit_price
            ) <= s.cents then 1 else 0
        end as cents
    from floored as f
    cross join shortfall as s
),

final as (
    select
        $billing_month::date as billing_month,
        r.tenant_id,
        coalesce(t.name, 'Unmapped accounts') as tenant_name,
        coalesce(t.department, 'Unmapped') as department,
        t.cost_center,
        r.cluster,
        r.gpu_model,
        'Usage' as charge_category,
        null::varchar as charge_class,
        format('GPU usage, {} at {} {}/GPU-hour', r.gpu_model, r.unit_price, $currency)
            as charge_description,
        r.gpu_ms / 3600000.0 as gpu_hours,
        r.gpu_ms,
        r.unit_price::decimal(18, 6) as unit_price,
        r.charge_numerator,
        (r.cents::decimal(18, 0) * 0.01::decimal(18, 2))::decimal(18, 2) as amount,
        $currency as currency
    from rounded as r
    left join catalog_tenants as t on t.tenant_id = r.tenant_id
)

select * from final
order by tenant_id, cluster, gpu_model, charge_category, unit_price
