-- has_offset(text): whether a timestamp text carries its own offset after the time of day (Z,
-- +01:00, +0100, +01). DuckDB's cast to TIMESTAMP drops an offset, so to_utc and to_utc_first
-- read such text as an instant instead (pipelines/formats/canonical.py has the same rule).
create or replace macro has_offset(value) as
regexp_matches(value, '\d:\d\d(:\d\d(\.\d*)?)?(Z|[+-]\d\d(:?\d\d)?)$')
