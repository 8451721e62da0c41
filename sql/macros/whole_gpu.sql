-- whole_gpu(): the GPU units of one whole GPU for one millisecond, 420. Time is counted in
-- integer units of 1/420 GPU-millisecond because 420 = lcm(1..7): a MIG 1g slice (a seventh),
-- a half, a third or a quarter of a GPU all hold a whole number of units.
create or replace macro whole_gpu() as 420
