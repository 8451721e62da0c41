-- The Data quality sheet: one row per data_quality row of the billing month, the input files
-- first.
-- Parameters: $billing_month.
select
    category, cluster, subject, rows_read, rows_loaded, rows_rejected, duplicates_folded,
    value, detail
from data_quality
where billing_month = $billing_month
order by category <> 'file', category, cluster nulls first, subject nulls first, detail
