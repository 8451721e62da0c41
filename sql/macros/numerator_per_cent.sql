-- numerator_per_cent(): the charge numerator (GPU units × price per GPU-hour in millionths) of
-- one cent, 15,120,000,000,000 = 1,512,000,000 units a GPU-hour (units_per_gpu_hour()) × 10,000
-- millionths a cent. Written out: the product of the two as INTEGER constants would overflow.
create or replace macro numerator_per_cent() as 15120000000000
