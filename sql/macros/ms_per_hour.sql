-- ms_per_hour(): the milliseconds of an hour, 3,600,000 (the time columns count milliseconds).
create or replace macro ms_per_hour() as 3600000
