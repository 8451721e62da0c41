-- The Charges sheet: one row per charge line of the billing month, of one department when
-- $department is given ('' for the lines without one), else of every department, with the
-- measured share of its GPU time (charge_line_coverage; NULL for lines that bill no job time).
-- Parameters: $billing_month, $department (NULL: every department).
select
    l.tenant_id, l.tenant_name, l.department, l.cost_center, l.cluster, l.gpu_model,
    l.charge_category, l.charge_class, l.charge_description, l.gpu_hours, l.unit_price, l.amount,
    l.currency, c.measured_share_pct
from charge_lines as l
left join charge_line_coverage as c
    using (billing_month, tenant_id, cluster, gpu_model, unit_price, charge_type)
where l.billing_month = $billing_month
    and ($department is null or coalesce(l.department, '') = $department)
order by
    tenant_id, cluster, gpu_model, charge_category, charge_class nulls first,
    charge_description, unit_price, amount, gpu_hours
