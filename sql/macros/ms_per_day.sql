-- ms_per_day(): the milliseconds of a UTC day, 86,400,000 (UTC has no daylight saving days).
create or replace macro ms_per_day() as 86400000
