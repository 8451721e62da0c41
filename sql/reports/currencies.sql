-- One row per currency the billing month's money is in (charge lines, tenants, jobs).
-- Parameters: $billing_month.
select distinct currency
from charge_lines
where billing_month = $billing_month and currency is not null
union
select distinct currency
from tenant_month
where billing_month = $billing_month and currency is not null
union
select distinct currency
from job_usage
where billing_month = $billing_month and currency is not null
order by currency
