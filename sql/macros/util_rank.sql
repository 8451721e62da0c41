-- util_rank(util_metric): which utilisation metric a telemetry row carries, by its util_metric
-- column: 2 DCGM GR_ENGINE_ACTIVE (preferred: DESIGN), 1 any other (NULL: the format's own
-- metric), 0 none (a memory- or power-only series). A GPU's rank-1 rows of a UTC hour in which
-- it has valid rank-2 rows are superseded (sql/rollup/day_samples.sql).
create or replace macro util_rank(util_metric) as
case coalesce(util_metric, '')
    when 'DCGM_FI_PROF_GR_ENGINE_ACTIVE' then 2
    when 'none' then 0
    else 1
end
