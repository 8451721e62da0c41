-- One row per UTC day of $node_files (the days' sample_nodes, day_sample_nodes.sql) and each
-- thing the catalog now says otherwise than when the day was rolled up, where it changes the
-- day's figures:
--   a node's GPUs in nodes.csv, when a GPU index the day saw of the node (up to max_gpu_index)
--   may lie at or above the smaller of the old and the new count: a series judged by one is
--   kept and by the other set aside (no inventory: any index is taken);
--   a cluster's declared telemetry step, which each of the day's samples stands for.
-- Reads catalog_gpus_now (cluster, node, gpus) and catalog_steps_now (cluster, step_ms): the
-- catalog as it is now (pipelines/defs/ingest/telemetry.py registers them).
-- Parameters: $node_files.
with rolled_up as (
    select
        regexp_extract(filename, 'day=([0-9-]+)', 1)::date as day,
        cluster,
        node,
        max_gpu_index,
        inventory_gpus,
        declared_step_ms
    from read_parquet($node_files, filename = true)
),

node_changes as (
    select
        r.day,
        format(
            'node {} of {}: {} when rolled up, {} now',
            r.node,
            r.cluster,
            coalesce(format('{} GPUs in nodes.csv', r.inventory_gpus), 'not in nodes.csv'),
            coalesce(format('{} GPUs', g.gpus), 'not in nodes.csv')
        ) as change
    from rolled_up as r
    left join catalog_gpus_now as g using (cluster, node)
    where r.inventory_gpus is distinct from g.gpus
        and r.max_gpu_index
        >= least(coalesce(r.inventory_gpus, 2147483647), coalesce(g.gpus, 2147483647))
),

step_changes as (
    select distinct
        r.day,
        format(
            'cluster {}: telemetry step {} when rolled up, {} now',
            r.cluster,
            coalesce(format('{:g} s declared', r.declared_step_ms / 1000), 'not declared'),
            coalesce(format('{:g} s', s.step_ms / 1000), 'not declared')
        ) as change
    from rolled_up as r
    left join catalog_steps_now as s using (cluster)
    where r.declared_step_ms is distinct from s.step_ms
)

select * from node_changes
union all
select * from step_changes
order by day, change
