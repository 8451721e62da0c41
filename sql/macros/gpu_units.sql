-- gpu_units(hours): GPU-hours back to whole GPU units (1/420 GPU-millisecond), the inverse of
-- gpu_hours(): exact for hours gpu_hours() made from whole units (below 10^6 GPU-hours a
-- value). Sums of GPU-hours a table holds only as doubles go through it, gpu_hours(sum(
-- gpu_units(x))): a sum of integers is exact in any order, one of doubles depends on the order
-- its rows arrive in (thread scheduling).
create or replace macro gpu_units(hours) as round(hours * units_per_gpu_hour())::hugeint
