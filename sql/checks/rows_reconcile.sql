-- One row per input file of the billing month whose rows do not reconcile: read must equal
-- loaded + rejected, and the rejects table must hold exactly the rejected rows.
-- Parameters: $billing_month.
with rejected as (
    select file, count(*) as rows_in_rejects
    from rejects
    where billing_month = $billing_month
    group by file
)

select
    d.cluster,
    d.subject as file,
    d.rows_read,
    d.rows_loaded,
    d.rows_rejected,
    coalesce(r.rows_in_rejects, 0) as rows_in_rejects
from data_quality as d
left join rejected as r on r.file = d.subject
where d.billing_month = $billing_month
    and d.category = 'file'
    and (
        d.rows_read <> d.rows_loaded + d.rows_rejected
        or d.rows_rejected <> coalesce(r.rows_in_rejects, 0)
    )
order by d.subject
