-- to_utc(text, zone): a scheduler timestamp as naive UTC.
-- Text with its own offset after the time of day (Z, +01:00, +0100, +01) keeps it; text
-- without one is local time in `zone` (the cluster's scheduler_timezone). Unparseable text
-- gives NULL; the caller rejects it. (A date alone, 2026-11-10, has no offset: the pattern
-- wants a time before it.)
create or replace macro to_utc(value, zone) as
case
    when value is null then null
    when has_offset(value) then timezone('UTC', try_cast(value as timestamptz))
    else timezone('UTC', timezone(zone, try_cast(value as timestamp)))
end
