-- The close of the billing month, when it is closed (none: open): when, by whom, and what was
-- issued. Parameters: $billing_month.
select closed_at, closed_by, issued_amount
from closed_months
where billing_month = $billing_month
