-- silence_floor_ms(): the shortest telemetry silence a catalog may ask for (settings
-- silence_min_minutes, at least 1): the daily rollup marks the stretches a GPU's samples leave
-- uncovered that are this long or longer (gpu_sample_rollup.sql silent_until), which is all
-- incidents.sql needs to find the silences of any catalog's length.
create or replace macro silence_floor_ms() as ms_per_minute()
