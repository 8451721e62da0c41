-- One row per input row set aside while building the billing month, with file, line and
-- reason: scheduler job records, GPU allocation records, configured quota records and the
-- month's telemetry rows.
-- Parameters: $billing_month.
with final as (
    select file, line, reject_reason as reason, raw
    from stg_job_records
    where reject_reason is not null
    union all
    select file, line, reject_reason, raw
    from stg_allocation_records
    where reject_reason is not null
    union all
    select file, line, reject_reason, raw
    from stg_quota_configs
    where reject_reason is not null
    union all
    select file, line, reason, raw
    from sample_rejects
    where billing_month = $billing_month
)

select $billing_month::date as billing_month, * from final
order by file, line
