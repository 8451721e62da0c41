-- The rejected rows the Data quality sheet shows: the first $limit rejects of the billing month.
-- Parameters: $billing_month, $limit.
select file, line, reason, raw
from rejects
where billing_month = $billing_month
order by file, line, reason, raw
limit $limit
