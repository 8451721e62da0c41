-- plausible_time(value_at): whether a scheduler record's time can be right: unknown (NULL), or
-- from 1970-01-02 to before 2100 (an epoch zero or a time in milliseconds read as seconds is
-- not; stg_job_records.sql). Telemetry has bounds of its own (sample_file_spans.sql).
create or replace macro plausible_time(value_at) as
value_at is null
or (value_at >= timestamp '1970-01-02' and value_at < timestamp '2100-01-01')
