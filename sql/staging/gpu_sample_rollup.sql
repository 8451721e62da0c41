-- One row per GPU sample of the month, ready for attribution: duplicates (same cluster, node,
-- GPU, timestamp) folded, and each sample's covered time in milliseconds:
-- the series' step (median spacing) but never past the next sample or the month end.
-- Reads the temporary table ordered_samples. Parameters: $month_end.
with distinct_samples as (
    -- of equal timestamps the last read wins; the others are folded duplicates
    select * from ordered_samples where next_ts is null or next_ts > ts
),

steps as (
    select
        cluster,
        node,
        gpu_index,
        coalesce(median(epoch_ms(next_ts) - epoch_ms(ts)), 60000)::bigint as step_ms
    from distinct_samples
    group by all
),

final as (
    select
        s.cluster,
        s.node,
        s.gpu_index,
        s.ts,
        s.util_pct,
        s.mem_used_mib,
        s.power_w,
        least(
            st.step_ms,
            coalesce(epoch_ms(s.next_ts), epoch_ms(s.ts) + st.step_ms) - epoch_ms(s.ts),
            epoch_ms($month_end::timestamp) - epoch_ms(s.ts)
        ) as cover_ms,
        st.step_ms,
        s.ts::date as day
    from distinct_samples as s
    join steps as st using (cluster, node, gpu_index)
)

select * from final
