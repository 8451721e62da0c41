-- ms_per_second(): the milliseconds of a second, 1,000 (the time columns count milliseconds).
create or replace macro ms_per_second() as 1000
