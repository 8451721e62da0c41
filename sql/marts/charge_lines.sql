-- One row per billing month × tenant × cluster × GPU model × charge category × charge type ×
-- unit price × capacity reservation × charge class: the bill. An open month is its computed
-- lines. A closed month keeps the lines issued when it was closed, untouched, plus one
-- 'Correction' line (FOCUS ChargeClass) per key whose computed amount now differs: computed −
-- issued, so issued + corrections = computed (for every charge type, so a closed month re-run
-- in another cost mode or idle-sharing policy is corrected line by line, and per cluster the
-- net still adds up to the cost in full_recovery).
-- Parameters: $billing_month.
with computed as (
    select * from computed_charge_lines where billing_month = $billing_month
),

is_closed as (
    select count(*) > 0 as closed from closed_months where billing_month = $billing_month
),

issued as (
    select * exclude (issued_at) from issued_charge_lines where billing_month = $billing_month
),

corrections as (
    select
        $billing_month::date as billing_month,
        coalesce(c.tenant_id, i.tenant_id) as tenant_id,
        coalesce(c.tenant_name, i.tenant_name) as tenant_name,
        coalesce(c.department, i.department) as department,
        coalesce(c.cost_center, i.cost_center) as cost_center,
        coalesce(c.cluster, i.cluster) as cluster,
        coalesce(c.gpu_model, i.gpu_model) as gpu_model,
        coalesce(c.charge_category, i.charge_category) as charge_category,
        'Correction' as charge_class,
        coalesce(c.charge_type, i.charge_type) as charge_type,
        coalesce(c.capacity_reservation_id, i.capacity_reservation_id)
            as capacity_reservation_id,
        'Correction of the issued line: '
        || coalesce(c.charge_description, i.charge_description) as charge_description,
        coalesce(c.gpu_hours, 0) - coalesce(i.gpu_hours, 0) as gpu_hours,
        coalesce(c.gpu_units, 0) - coalesce(i.gpu_units, 0) as gpu_units,
        coalesce(c.unit_price, i.unit_price) as unit_price,
        coalesce(c.charge_numerator, 0) - coalesce(i.charge_numerator, 0) as charge_numerator,
        coalesce(c.amount, 0) - coalesce(i.amount, 0) as amount,
        coalesce(c.currency, i.currency) as currency
    from computed as c
    full join issued as i
        on c.tenant_id = i.tenant_id
        and c.cluster = i.cluster
        and c.gpu_model = i.gpu_model
        and c.charge_category = i.charge_category
        and c.charge_type = i.charge_type
        and c.unit_price is not distinct from i.unit_price
        and c.capacity_reservation_id is not distinct from i.capacity_reservation_id
    where coalesce(c.amount, 0) <> coalesce(i.amount, 0)
        or coalesce(c.gpu_units, 0) <> coalesce(i.gpu_units, 0)
),

final as (
    select * from computed where not (select closed from is_closed)
    union all by name
    select * from issued where (select closed from is_closed)
    union all by name
    select * from corrections where (select closed from is_closed)
)

select * from final
order by
    tenant_id, cluster, gpu_model, charge_category desc,
    charge_type_order(charge_type),
    unit_price, capacity_reservation_id, charge_class nulls first
