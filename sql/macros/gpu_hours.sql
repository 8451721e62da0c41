-- gpu_hours(units): GPU units (1/420 GPU-millisecond) as GPU-hours: 420 × 3,600,000 per hour.
create or replace macro gpu_hours(units) as units / units_per_gpu_hour()
