-- One row per billing month × tenant × cluster × GPU model × charge category × unit price, as
-- the current inputs and catalog price the month (charge_lines adds the period-close rules).
-- rate_card mode: 'Usage' lines charge all allocated time at the rate in force; 'Credit' lines
-- give back the failed_infra part (node failures, outage windows) as negative amounts, so the
-- tenant sees both. Each line's exact amount is rounded to cents once, by the largest-remainder
-- method within its category: every line gets its floor in cents, then the lines with the
-- largest remainders get one more cent each until the category adds up to its exact total
-- rounded half up. So lines sum to tenants and tenants to the total, to the cent.
-- Parameters: $billing_month, $currency.
with priced as (
    select
        c.tenant_id, c.cluster, c.gpu_model, c.unit_price,
        'Usage' as charge_category,
        c.gpu_units,
        c.charge_numerator
    from job_gpu_charges as c
    where c.billing_month = $billing_month
    union all
    select
        c.tenant_id, c.cluster, c.gpu_model, c.unit_price,
        'Credit',
        c.credit_gpu_units,
        c.credit_numerator
    from job_gpu_charges as c
    where c.billing_month = $billing_month and c.credit_gpu_units > 0
),

lines as (
    select
        tenant_id, cluster, gpu_model, unit_price, charge_category,
        sum(gpu_units)::bigint as gpu_units,
        sum(charge_numerator) as charge_numerator
    from priced
    group by all
),

floored as (
    select
        *,
        charge_numerator // 15120000000000 as floor_cents,
        charge_numerator % 15120000000000 as remainder
    from lines
),

shortfall as (
    select
        charge_category,
        cents_half_up(sum(charge_numerator)) - sum(floor_cents) as cents
    from floored
    group by charge_category
),

rounded as (
    select
        f.*,
        f.floor_cents + case
            when row_number() over (
                partition by f.charge_category
                order by f.remainder desc, f.tenant_id, f.cluster, f.gpu_model, f.unit_price
            ) <= s.cents then 1 else 0
        end as cents
    from floored as f
    join shortfall as s using (charge_category)
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
        r.charge_category,
        null::varchar as charge_class,
        case r.charge_category
            when 'Usage' then format('GPU usage, {} at {} {}/GPU-hour', r.gpu_model,
                                     r.unit_price, $currency)
            else format('Credit for failed infrastructure, {} at {} {}/GPU-hour', r.gpu_model,
                        r.unit_price, $currency)
        end as charge_description,
        gpu_hours(r.gpu_units) as gpu_hours,
        r.gpu_units,
        r.unit_price::decimal(18, 6) as unit_price,
        r.charge_numerator,
        money(case when r.charge_category = 'Credit' then -r.cents else r.cents end) as amount,
        $currency as currency
    from rounded as r
    left join catalog_tenants as t on t.tenant_id = r.tenant_id
)

select * from final
order by tenant_id, cluster, gpu_model, charge_category desc, unit_price
