-- One row per node with telemetry rows in the UTC day: its highest GPU index, and what the
-- catalog said when the day was rolled up of what the rollup judges by it: the node's GPUs in
-- nodes.csv (inventory_gpus; NULL: not in it), against which a series' GPU index is judged
-- (day_samples.sql), and its cluster's declared telemetry step (declared_steps; NULL: none),
-- which a sample stands for (series_steps.sql). A month stops when the catalog now says
-- otherwise where it changes the day's figures (stop_on_days_rolled_up_by_another_catalog in
-- pipelines/defs/ingest/telemetry.py): a day is rolled up once, and would keep the old
-- judgement silently.
-- Reads the temporary table day_node_parts (day_node_parts.sql), inventory_gpus and
-- declared_steps.
with nodes as (
    select cluster, node, max(max_gpu_index) as max_gpu_index
    from day_node_parts
    group by all
),

final as (
    select
        n.cluster,
        n.node,
        n.max_gpu_index,
        i.gpus as inventory_gpus,
        s.step_ms as declared_step_ms
    from nodes as n
    left join inventory_gpus as i using (cluster, node)
    left join declared_steps as s using (cluster)
)

select * from final
order by cluster, node
