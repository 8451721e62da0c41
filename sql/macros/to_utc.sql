-- to_utc(text, zone): a scheduler timestamp as naive UTC.
-- Text with its own offset (Z, +01:00) keeps it; text without one is local time in `zone`
-- (the cluster's scheduler_timezone). Unparseable text gives NULL; the caller rejects it.
create or replace temp macro to_utc(value, zone) as
case
    when value is null then null
    when regexp_matches(value, '(Z|[+-]\d\d:?\d\d)$')
        then timezone('UTC', try_cast(value as timestamptz))
    else timezone('UTC', timezone(zone, try_cast(value as timestamp)))
end
