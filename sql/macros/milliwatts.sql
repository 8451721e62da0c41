-- milliwatts(power_w): a power sample in watts as whole milliwatts (rounded to the nearest;
-- DCGM and nvidia-smi report at most milliwatts). Energy (covered time × power) is summed in
-- these integers, exact in any order.
create or replace macro milliwatts(power_w) as round(power_w * 1000)::bigint
