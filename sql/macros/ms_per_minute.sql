-- ms_per_minute(): the milliseconds of a minute, 60,000.
create or replace temp macro ms_per_minute() as 60000
