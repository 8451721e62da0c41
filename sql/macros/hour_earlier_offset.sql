-- hour_earlier_offset(local_time, zone): a naive local time as naive UTC, read with the offset
-- its zone had an hour earlier. In the hour repeated when clocks go back that is the first
-- occurrence, still in summer time; elsewhere the usual reading, or (just after clocks go
-- forward) a time that does not map back to local_time (to_utc_first tells them apart).
create or replace macro hour_earlier_offset(local_time, zone) as
timezone('UTC', timezone(zone, local_time - interval 1 hour)) + interval 1 hour
