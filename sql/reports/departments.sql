-- One row per department of the billing month: the departments of its tenants (tenant_month)
-- and of its charge lines, '' for none.
-- Parameters: $billing_month.
select coalesce(department, '') as department
from tenant_month
where billing_month = $billing_month
union
select coalesce(department, '')
from charge_lines
where billing_month = $billing_month
order by department
