-- One row per input file of the billing month that lost more than half of its rows to
-- rejects: a file the pipeline misread as a whole (a headerless sacct dump with one column
-- more than the configured order, CR-only line endings, another export's columns), which must
-- stop the month rather than bill nothing from it. A few bad rows in a file are rejects and
-- the month goes on.
-- Parameters: $billing_month.
select
    cluster,
    subject as file,
    rows_read,
    rows_rejected,
    (
        select reason from rejects as r
        where r.billing_month = $billing_month and r.file = d.subject
        order by r.line
        limit 1
    ) as first_reason
from data_quality as d
where billing_month = $billing_month
    and category = 'file'
    and rows_rejected * 2 > rows_read
order by subject
