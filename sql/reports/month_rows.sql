-- One row: how many rows the table $table holds for the billing month.
-- Parameters: $table, $billing_month.
select count(*) as month_rows
from query_table($table)
where billing_month = $billing_month
