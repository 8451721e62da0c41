-- One row per node of a chunk of the UTC day (day_samples.sql): its highest GPU index, of its
-- series (series_steps) and of its rejected rows (a series set aside whole for an index its node
-- does not have is among them). The rollup gathers the chunks' rows per node
-- (day_sample_nodes.sql).
-- Reads the temporary tables day_samples and series_steps, and sample_sources.
select cluster, node, max(gpu_index) as max_gpu_index
from (
    select cluster, node, gpu_index from series_steps
    union all
    select src.cluster, d.node, d.gpu_index
    from day_samples as d
    join sample_sources as src using (file_id)
    where d.reject_reason is not null
        and not d.look_ahead
        and not d.carried
        and d.node is not null
        and d.gpu_index >= 0
)
group by all
