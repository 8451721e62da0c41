-- to_utc_first(text, zone): like to_utc, but a local time that occurs twice (the hour
-- repeated when clocks go back) reads as its first occurrence; to_utc (DuckDB) reads it as the
-- second. No zone goes back by more than an hour, so the first occurrence is the reading with
-- the offset of an hour earlier, when that maps back to the same local time.
-- stg_job_records.sql takes it where the second reading would put a job's start after its end.
create or replace macro to_utc_first(value, zone) as
case
    when
        not has_offset(value)
        and timezone(
            zone, timezone('UTC', hour_earlier_offset(try_cast(value as timestamp), zone))
        ) = try_cast(value as timestamp)
        then hour_earlier_offset(try_cast(value as timestamp), zone)
    else to_utc(value, zone)
end
