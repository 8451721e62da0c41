-- units_per_gpu_hour(): the GPU units of one GPU-hour, 1,512,000,000 = 420 units a
-- GPU-millisecond (whole_gpu()) × 3,600,000 milliseconds an hour (ms_per_hour()).
create or replace macro units_per_gpu_hour() as 1512000000
