-- The Charges sheet: one row per charge line of the billing month, of one department when
-- $department is given ('' for the lines without one), else of every department.
-- Parameters: $billing_month, $department (NULL: every department).
select
    tenant_id, tenant_name, department, cost_center, cluster, gpu_model, charge_category,
    charge_class, charge_description, gpu_hours, unit_price, amount, currency
from charge_lines
where billing_month = $billing_month
    and ($department is null or coalesce(department, '') = $department)
order by
    tenant_id, cluster, gpu_model, charge_category, charge_class nulls first,
    charge_description, unit_price, amount, gpu_hours
