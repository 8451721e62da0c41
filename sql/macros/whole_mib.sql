-- whole_mib(mem_used_mib): GPU memory used as whole MiB (rounded to the nearest), the unit
-- DCGM's FB_USED and nvidia-smi's memory.used report. Memory-weighted time is summed in these
-- integers: a sum of doubles depends on the order its rows arrive in (thread scheduling).
create or replace macro whole_mib(mem_used_mib) as round(mem_used_mib)::bigint
