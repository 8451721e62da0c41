-- ms_per_minute(): the milliseconds of a minute, 60,000.
create or replace macro ms_per_minute() as 60000
