-- The close of the billing month, when it is closed (none: open): when and by whom.
-- Parameters: $billing_month.
select closed_at, closed_by
from closed_months
where billing_month = $billing_month
