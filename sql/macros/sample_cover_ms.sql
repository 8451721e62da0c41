-- sample_cover_ms(ts, next_ts, step_ms): the milliseconds a telemetry sample at ts stands for:
-- its series' step, never past the series' next sample (next_ts; NULL: none). The rollup's
-- samples and its series' metrics (day_sample_series.sql) sum the same covered time.
create or replace macro sample_cover_ms(ts, next_ts, step_ms) as
least(step_ms, coalesce(unix_ms(next_ts), unix_ms(ts) + step_ms) - unix_ms(ts))
