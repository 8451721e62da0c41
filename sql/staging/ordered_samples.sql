-- One row per valid telemetry row of the month with the timestamp of the next row of its series
-- (cluster, node, GPU). A row whose next row has the same timestamp is a folded duplicate: of
-- equal timestamps the last read (file, line) wins. Reads the temporary table month_samples.
select
    cluster,
    node,
    gpu_index,
    ts,
    util_pct,
    mem_used_mib,
    power_w,
    file,
    line,
    lead(ts) over (partition by cluster, node, gpu_index order by ts, file, line) as next_ts
from month_samples
where reject_reason is null
