-- One row per node name as the files of a UTC day's rollup ($files) write it, NULL included:
-- its rows in the day [$day_start, $day_end) and whether it is plain, a VARCHAR without
-- surrounding white space (or NULL).
-- A day larger than a chunk is rolled up in chunks of nodes (day_samples.sql: $node_from,
-- $node_until), cut where these counts say: a chunk's rows are read by the node column as
-- written, so that the Parquet statistics of files sorted by node skip the other chunks' row
-- groups. That needs every GPU series' rows under one spelling of its node, in every file the
-- day reads (its look-ahead and the unreadable rows it owns too): a day with a name that is
-- not plain is rolled up in one chunk. One read of the node and timestamp columns, grouped by
-- node (few groups).
-- Parameters: $files, $day_start, $day_end.
with names as (
    select
        node,
        any_value(typeof(node)) as node_type,
        count(*) filter (ts >= $day_start::timestamp and ts < $day_end::timestamp) as day_rows
    from (
        select s.node, try_cast(s.ts as timestamp) as ts
        from read_parquet($files, union_by_name = true) as s
    )
    group by node
)

select
    node::varchar as node,
    day_rows,
    node is null or (node_type = 'VARCHAR' and node::varchar = trim(node::varchar)) as plain
from names
order by node nulls first
