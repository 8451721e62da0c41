"""DCGM exporter metrics as Prometheus returns them (DESIGN.md "Inputs", telemetry 1).

A file is the JSON body of `/api/v1/query_range` (`resultType: matrix`), holding one or several
of `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (0-1), `DCGM_FI_DEV_GPU_UTIL` (0-100), `DCGM_FI_DEV_FB_USED`
(MiB) and `DCGM_FI_DEV_POWER_USAGE` (W). Series of other metrics are not samples and are
skipped; a file with series but none of these four stops the run.

DuckDB's JSON reader parses the file, gzipped or not (never Python's `json`), and the points
are pivoted to one canonical sample row per (node, GPU, timestamp) at which any of the four
metrics has a point. No Python touches a point: the file is parsed once, with an explicit
schema, into a row per series holding its points as a list (`raw_series`); the COPY that writes
the Parquet unnests them. Where the series of the file's GPUs overlap in time (a combined
export), their points are put side by side (`_ALIGNED_ROWS`: a positional join of the series
of each metric, checked row by row) or, where they do not line up, grouped by GPU and
timestamp. Labels are written as an ENUM of the file's label texts, the rows by two threads;
one in-memory database serves every file of the process (see `_connection`). The rows are:

- node: label `Hostname`, else `hostname`, else the host part of `instance` (`10.0.0.7:9400` ->
  `10.0.0.7`); GPU index: label `gpu` (one that is no whole number leaves gpu_index NULL, keeps
  its text in `gpu_index_text` for the reject's raw, and gives the row a `parse_error` naming
  it: `field metric.gpu: 'GPU-0' is not a GPU index`); `UUID`, `modelName`, `pod`,
  `namespace` and `hpc_job` (as `job_id`) are kept.
- util_pct: from `DCGM_FI_PROF_GR_ENGINE_ACTIVE` x 100 or from `DCGM_FI_DEV_GPU_UTIL`, and
  `util_metric` names the metric of the row's point. A file with both for a GPU (a combined
  export) keeps both: at a timestamp where both have a point, the GPU has a row of each (memory
  and power on both), elsewhere a row of the one there. Which measures the GPU is the rollup's
  choice, by the UTC hour (sql/rollup/day_samples.sql: GR_ENGINE_ACTIVE supersedes the other
  metric in any hour it has a valid sample), as for the metrics exported one file each: DCGM's
  profiling metrics go blank for hours (Nsight, or profiling not yet on) while GPU_UTIL goes on,
  and a choice per file rejected those hours as `util_pct: missing`. A row of memory or power
  alone takes the GPU's preferred metric (GR_ENGINE_ACTIVE when the file has it for the GPU),
  its util_pct NULL, and is rejected; `none` when the file has no utilisation series for the
  GPU (a file of memory or power only).
- Values are strings: `NaN` (and anything unreadable) becomes NULL; an infinite or out-of-range
  utilisation is kept so that the SQL rejects it with its value.
- Duplicate points (two series of one metric for one GPU and timestamp) become separate rows,
  which the pipeline folds and counts.
- MIG: a partitioned GPU has a series per GPU instance (labels `GPU_I_ID`, `GPU_I_PROFILE`),
  all on its `gpu` index; points pivot per instance, and each instance stays a row with its
  labels (`gpu_instance`, and `gpu_instance_slices` from the profile: `3g.40gb` -> 3). The
  pipeline attributes per physical GPU, so the last row of the GPU and timestamp carries the
  GPU's values (see `_MIG_GPU_ROWS`: slice-weighted utilisation, summed memory, the device's
  power) and wins; the other instance rows are folded downstream as duplicates.
- source_line: `series * 1,000,000 + point`, both 1-based: series is the position in
  `data.result`, point the position in its `values` (line 3000017 = 3rd series, 17th point;
  Prometheus caps a series at 11,000 points per query). A row takes the line of its
  utilisation point, else of its first point. (A body is usually one line, so the real line
  number would say nothing.)
- ts: Prometheus timestamps are Unix seconds, so UTC whatever the cluster's time zone. A point
  stamped before 1970, in 2100 or later, in another unit or not at all has no ts and a
  `parse_error` naming its value (`field values[4][0]: 1762000000000 is not a Unix time in
  seconds (milliseconds?)`): the rollup rejects its row (sql/rollup/day_samples.sql).

The pivot happens within one file. Exported one query
per metric, a file of `DCGM_FI_DEV_FB_USED` or `DCGM_FI_DEV_POWER_USAGE` alone gives rows
without utilisation (`util_metric = 'none'`), which `sql/staging/month_samples.sql` rejects as
it stands; merging them with the utilisation rows of other files, and preferring
GR_ENGINE_ACTIVE within and across files, is for the SQL to do (it has `util_metric` to go by).
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import duckdb

from pipelines.catalog import ClusterSettings
from pipelines.formats import ExportFormat, is_gzip, json_object_sniffer, open_binary
from pipelines.landing import LandingError
from pipelines.sql import bind

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
METRICS = (GR_ENGINE_ACTIVE, GPU_UTIL, FB_USED, POWER_USAGE)
POINTS_PER_SERIES = 1_000_000  # the source_line multiplier

# A query_range body: `{"status": ..., "data": {"resultType": "matrix", "result": [...]}}`.
# Points read as numbers first (3x faster); a value DuckDB cannot read as a number ("+Inf",
# "abc") makes the file be read again with the points as text.
_POINT_TYPES = ("DOUBLE", "VARCHAR")
_BODY_COLUMNS = {
    "status": "VARCHAR",
    "errorType": "VARCHAR",
    "error": "VARCHAR",
    "data": 'STRUCT(resultType VARCHAR, result STRUCT(metric MAP(VARCHAR, VARCHAR), "values" '
    "{point}[][])[])",
}

# The file parsed once into one row per series of data.result (its labels and its points,
# numbered by its place there) and one more row per body (series_no NULL), so that a body
# without series, and a second body, are seen too. The points stay lists here: unnested only
# by the COPY that writes them.
_READ_BODY = """
create or replace temp table raw_series as
select
    status,
    error_type,
    error,
    result_type,
    case when series_index < coalesce(series_count, 0) then series_index + 1 end as series_no,
    s.metric['__name__'] as metric,
    coalesce(
        nullif(trim(s.metric['Hostname']), ''),
        nullif(trim(s.metric['hostname']), ''),
        -- the host of `host:port` or `[ipv6]:port`
        nullif(regexp_replace(s.metric['instance'], $host_port, '\\1\\2'), '')
    ) as node,
    s.metric['gpu'] as gpu,
    s.metric['UUID'] as gpu_uuid,
    s.metric['modelName'] as gpu_model,
    s.metric['pod'] as pod,
    s.metric['namespace'] as namespace,
    s.metric['hpc_job'] as job_id,
    s.metric['GPU_I_ID'] as gpu_instance,
    -- compute slices of a MIG instance: `3g.40gb` (and `1c.3g.40gb`, `1g.10gb+me`) -> 3
    case when s.metric['GPU_I_ID'] is not null then coalesce(
        try_cast(regexp_extract(s.metric['GPU_I_PROFILE'], '(\\d+)g\\.\\d+gb', 1) as integer),
        1
    ) end as gpu_instance_slices,
    s."values" as points,
    len(s."values") as point_count,
    -- Prometheus returns the values of a series in time order
    try_cast(s."values"[1][1] as double) as first_point_s,
    try_cast(s."values"[-1][1] as double) as last_point_s
from (
    select
        status,
        errorType as error_type,
        error,
        data.resultType as result_type,
        len(data.result) as series_count,
        unnest(data.result) as s,
        -- one element longer than data.result: its last row (s NULL) is the body's
        unnest(range(coalesce(len(data.result), 0) + 1)) as series_index
    from read_json($path, format = 'unstructured', records = true, columns = $columns,
        maximum_object_size = $max_size, compression = $compression)
)
"""

# What the checks of the body and its series need, in one pass over raw_series.
_BODY_FACTS = """
select
    count(*) filter (series_no is null) as bodies,
    any_value(status) filter (series_no is null),
    any_value(error_type) filter (series_no is null),
    any_value(error) filter (series_no is null),
    any_value(result_type) filter (series_no is null),
    min(series_no) filter (coalesce(metric, '') = '') as unnamed,
    count(series_no) as series,
    count(series_no) filter (list_contains($metrics, metric)) as known,
    string_agg(distinct metric, ', ' order by metric) as names,
    max(point_count) as longest
from raw_series
"""

# The file's label texts as one ENUM, in text order (so that min() and comparisons agree with
# the text's). The series carry their labels as this type, and so every row written: Parquet
# writes an ENUM column from its dictionary, without hashing each row's text (6x faster).
_LABEL_TYPE = """
create or replace temp type label as enum (
    select distinct text
    from (
        select unnest([node, gpu_uuid, gpu_model, pod, namespace, job_id, gpu_instance]) as text
        from raw_series
        union all
        select unnest([$gr_engine_active, $gpu_util, 'none'])  -- the util_metric values
    )
    where text is not null
    order by text
)
"""

# One row per series of the four metrics, numbered by its place in data.result, with its
# labels (as `label`), its GPU's utilisation metric, the role of its points and its time span
# (the points stay in `raw_series`).
_SERIES = """
create or replace temp table series as
with ranked as (
    select
        * exclude (points, point_count, status, error_type, error, result_type),
        case metric when $gr_engine_active then 2 when $gpu_util then 1 else 0 end as util_rank
    from raw_series
    where metric in ($gr_engine_active, $gpu_util, $fb_used, $power_usage)
),

chosen as (
    select
        *,
        -- GR_ENGINE_ACTIVE when the file has it for the GPU, else GPU_UTIL
        max(util_rank) over (partition by node, gpu) as gpu_util_rank,
        -- the device a series measures: the GPU, or one MIG instance of it
        dense_rank() over (order by node, gpu, gpu_instance) as device_key
    from ranked
)

select
    * exclude (gpu, util_rank, gpu_util_rank, first_point_s, last_point_s) replace (
        node::label as node,
        gpu_uuid::label as gpu_uuid,
        gpu_model::label as gpu_model,
        pod::label as pod,
        namespace::label as namespace,
        job_id::label as job_id,
        gpu_instance::label as gpu_instance
    ),
    try_cast(gpu as integer) as gpu_index,
    -- the label as the file has it, where it is no index: for the reject (reason and raw)
    case when try_cast(gpu as integer) is null then gpu end as gpu_index_text,
    case
        when util_rank > 0 and util_rank = gpu_util_rank then 'util'
        when metric = $fb_used then 'mem'
        when metric = $power_usage then 'power'
        -- GPU_UTIL of a GPU that has GR_ENGINE_ACTIVE: rows of their own, the rollup supersedes
        -- them in the hours GR_ENGINE_ACTIVE has samples
        else 'other_util'
    end as kind,
    case gpu_util_rank when 2 then $gr_engine_active when 1 then $gpu_util else 'none' end::label
        as util_metric,
    least(first_point_s, last_point_s) as first_s,
    greatest(first_point_s, last_point_s) as last_s
from chosen
"""

# Pairs of series of one device whose time spans overlap: their points may share timestamps.
_OVERLAPS = """
select a.series_no, b.series_no, a.kind = b.kind as same_kind
from series as a
join series as b
    on a.device_key = b.device_key and a.series_no < b.series_no
    and a.first_s <= b.last_s and b.first_s <= a.last_s
"""


def _series_points(series: str) -> str:
    """The points of the series, one row each with the columns of `series` (the table `series`,
    or a select of it that adds some): unnested from raw_series."""
    return f"""
    select
        m.* exclude (first_s, last_s),
        unnest(r.points) as point,
        generate_subscripts(r.points, 1) as point_no,
        r.point_count,
        r.points as series_points
    from raw_series as r
    join {series} as m using (series_no)
"""


# One row per point, typed: the start of every way to sample rows below; `{points}` is the
# select of the points. Not materialized: a query reads its points straight from raw_series.
_POINTS = """
points as not materialized ({points}),

valued as not materialized (
    select
        * exclude (point, raw_value),
        series_no * $points_per_series + point_no as source_line,
        case
            when epoch_s >= 0 and epoch_s < $year_2100_s
                then make_timestamp(round(epoch_s * 1e6)::bigint)
        end as ts,
        -- a point stamped before 1970, after 2099 or in another unit is no sample of any day:
        -- its row is rejected (by the day that owns the file's unreadable rows), not lost
        case
            when epoch_s >= 0 and epoch_s < $year_2100_s then case
                when gpu_index_text is not null then format(
                    'field metric.gpu: ''{}'' is not a GPU index', gpu_index_text
                )
            end
            when epoch_s is null or not isfinite(epoch_s) then format(
                'field values[{}][0]: {} is not a Unix time',
                point_no - 1,
                coalesce(format('''{}''', point[1]), 'null')
            )
            else format(
                'field values[{}][0]: {} {}',
                point_no - 1,
                regexp_replace(point[1]::varchar, '\\.0$', ''),
                case
                    when epoch_s < 0 then 'is before 1970 (Unix time in seconds)'
                    when epoch_s >= 1e11 and epoch_s < $year_2100_s * 1e3
                        then 'is not a Unix time in seconds (milliseconds?)'
                    when epoch_s >= 1e14 and epoch_s < $year_2100_s * 1e6
                        then 'is not a Unix time in seconds (microseconds?)'
                    when epoch_s >= 1e17 and epoch_s < $year_2100_s * 1e9
                        then 'is not a Unix time in seconds (nanoseconds?)'
                    else 'is after 2099 (Unix time in seconds)'
                end
            )
        end as parse_error,
        case
            when isnan(raw_value) then null
            when kind = 'util' and metric = $gr_engine_active then round(raw_value * 100, 10)
            when kind in ('util', 'other_util') then raw_value
            when isfinite(raw_value) then raw_value
        end as value
    from (
        select
            *,
            try_cast(point[1] as double) as epoch_s,
            try_cast(point[2] as double) as raw_value
        from points
    )
)
"""

# The points in two halves of the series, each a pipeline of its own: two threads make and
# write the rows (one scan of the file's series is one thread, whatever the cores).
_HALVES = f"""{_series_points("series")}    where r.series_no % 2 = 0
    union all
{_series_points("series")}    where r.series_no % 2 = 1
"""

# The columns of the Parquet file, in order: each select of rows below computes them (among
# others it carries along), and `_copy` writes these.
_ROW_COLUMNS = (
    "ts", "node", "gpu_index", "util_pct", "mem_used_mib", "power_w", "source_line", "job_id",
    "gpu_uuid", "gpu_model", "pod", "namespace", "util_metric", "gpu_instance",
    "gpu_instance_slices", "gpu_index_text", "parse_error",
)  # fmt: skip

# Labels a file may lack: where no series has one, its column is not written.
_OPTIONAL_LABELS = (
    "job_id", "gpu_uuid", "gpu_model", "pod", "namespace", "gpu_instance", "gpu_instance_slices",
    "gpu_index_text",
)  # fmt: skip

# What the choice of rows and columns needs to know of the file's series: the roles of their
# points, one series per device and role, and the optional labels present (a MIG instance's
# among them).
_SERIES_FACTS = f"""
select
    coalesce(list(distinct kind), []),
    count(*) = count(distinct (device_key, kind)),
    {", ".join(f"count({label})" for label in _OPTIONAL_LABELS)}
from series
"""

# No two series of a GPU overlap in time: every point is a sample row of its own.
_ROWS_PER_POINT = (
    "with "
    + _POINTS.replace("{points}", _HALVES)
    + """
select
    * replace (
        case when kind = 'other_util' then $gpu_util::label else util_metric end as util_metric
    ),
    case when kind in ('util', 'other_util') then value end as util_pct,
    case when kind = 'mem' then value end as mem_used_mib,
    case when kind = 'power' then value end as power_w
from valued
"""
)

# A row that is_other_util is the GPU_UTIL point of a GPU that also has GR_ENGINE_ACTIVE (its
# other_util_pct and other_util_line): its utilisation, line and metric are that point's.
_OTHER_UTIL_ROW = """
        if(is_other_util, other_util_pct, util_pct) as util_pct,
        if(is_other_util, other_util_line, source_line) as source_line,
        if(is_other_util, $gpu_util::label, util_metric) as util_metric
"""

# Series of a GPU overlap: the points of one GPU and timestamp make one row, and one more where
# the GPU has both GR_ENGINE_ACTIVE and GPU_UTIL and both have a point there (each row its
# metric's, with the memory and power of the timestamp: the rollup keeps one by the hour). Two
# points of one role there (series $repeating overlap another of their role) make two rows,
# folded downstream; points without a readable timestamp each stay a row of their own.
_ROWS_PER_TIMESTAMP = (
    "with "
    + _POINTS.replace("{points}", _HALVES)
    + """,

copies as (
    select *, case when ts is null then -source_line else 1 end as copy_no
    from valued
    where not list_contains($repeating, series_no)
    union all
    select
        *,
        case
            when ts is null then -source_line
            else row_number() over (partition by device_key, ts, kind order by source_line)
        end as copy_no
    from valued
    where list_contains($repeating, series_no)
),

grouped as (
    select
        ts,
        any_value(node) as node,
        any_value(gpu_index) as gpu_index,
        any_value(value) filter (kind = 'util') as util_pct,
        any_value(value) filter (kind = 'other_util') as other_util_pct,
        any_value(value) filter (kind = 'mem') as mem_used_mib,
        any_value(value) filter (kind = 'power') as power_w,
        coalesce(min(source_line) filter (kind = 'util'), min(source_line)) as source_line,
        min(source_line) filter (kind = 'other_util') as other_util_line,
        count(*) filter (kind = 'util') > 0 as has_util,
        min(job_id) as job_id,
        min(gpu_uuid) as gpu_uuid,
        min(gpu_model) as gpu_model,
        min(pod) as pod,
        min(namespace) as namespace,
        any_value(util_metric) as util_metric,
        any_value(gpu_instance) as gpu_instance,
        any_value(gpu_instance_slices) as gpu_instance_slices,
        any_value(gpu_index_text) as gpu_index_text,
        -- of a point without a timestamp, alone in its row; or of the GPU label, on every row
        min(parse_error) as parse_error
    from copies
    group by device_key, ts, copy_no
),

util_rows as (
    -- the row of the GPU's preferred metric (or of memory and power alone), and one of
    -- GPU_UTIL where the GPU has GR_ENGINE_ACTIVE and GPU_UTIL has a point: each its metric's
    select
        *,
        unnest(
            case
                when other_util_line is null then [false]
                when has_util then [false, true]
                else [true]
            end
        ) as is_other_util
    from grouped
)

select
    * exclude (other_util_pct, other_util_line, has_util, is_other_util) replace ("""
    + _OTHER_UTIL_ROW
    + """    )
from util_rows
"""
)

# _ROWS_PER_TIMESTAMP's rows without grouping, for a file whose devices have one series of
# each role (util, other_util, mem, power: util among them) and whose series line up as
# Prometheus returns the series of one query (sorted by their labels, every GPU at the same
# steps): the series of each role in data.result order, side by side point by point
# (POSITIONAL JOIN), are then the points of one device and timestamp. Each row checks that they
# are: one point of each of the file's $roles roles, of one device and one timestamp stamped
# 1970-2099, the next point of its utilisation series later (no timestamp twice). A row that
# is not stops the query ($not_aligned) and the file is grouped by timestamp instead. As
# there, a row takes the line of its utilisation point and the least labels of its points,
# which are its device's series' least, and an other_util point is a row of its own.
_ALIGNED_ROWS = (
    """with labelled_series as (
    select
        *,
        min(job_id) over device as least_job_id,
        min(gpu_uuid) over device as least_gpu_uuid,
        min(gpu_model) over device as least_gpu_model,
        min(pod) over device as least_pod,
        min(namespace) over device as least_namespace
    from series
    window device as (partition by device_key)
),

"""
    + _POINTS.replace("{points}", _series_points("labelled_series"))
    + """,

util_points as (
    select
        device_key as u_device_key,
        epoch_s as u_epoch_s,
        -- the timestamp of the next point of the series
        case
            when point_no < point_count then try_cast(series_points[point_no + 1][1] as double)
        end as u_next_epoch_s,
        value as util_pct,
        source_line,
        node,
        gpu_index,
        least_job_id as job_id,
        least_gpu_uuid as gpu_uuid,
        least_gpu_model as gpu_model,
        least_pod as pod,
        least_namespace as namespace,
        util_metric,
        gpu_instance,
        gpu_instance_slices,
        gpu_index_text,
        -- a timestamp is valid here (else not aligned): only the GPU label's error
        parse_error
    from valued
    where kind = 'util'
),

side_by_side as (
    select *
    from util_points
    positional join (
        select
            device_key as g_device_key,
            epoch_s as g_epoch_s,
            value as other_util_pct,
            source_line as other_util_line
        from valued
        where kind = 'other_util'
    )
    positional join (
        select device_key as m_device_key, epoch_s as m_epoch_s, value as mem_used_mib
        from valued
        where kind = 'mem'
    )
    positional join (
        select device_key as p_device_key, epoch_s as p_epoch_s, value as power_w
        from valued
        where kind = 'power'
    )
)

select
    * replace ("""
    + _OTHER_UTIL_ROW
    + """    ),
    make_timestamp(round(u_epoch_s * 1e6)::bigint) as ts
from (
    -- a GPU with GR_ENGINE_ACTIVE and GPU_UTIL: a row of each metric (see _ROWS_PER_TIMESTAMP)
    select *, unnest(if(g_device_key is null, [false], [false, true])) as is_other_util
    from side_by_side
)
where
    case
        when
            u_epoch_s >= 0 and u_epoch_s < $year_2100_s
            and coalesce(u_next_epoch_s, 'infinity') > u_epoch_s
            and 1 + (g_device_key is not null)::integer + (m_device_key is not null)::integer
                + (p_device_key is not null)::integer = $roles
            and (g_device_key is null or (g_device_key = u_device_key and g_epoch_s = u_epoch_s))
            and (m_device_key is null or (m_device_key = u_device_key and m_epoch_s = u_epoch_s))
            and (p_device_key is null or (p_device_key = u_device_key and p_epoch_s = u_epoch_s))
            then true
        else error($not_aligned)
    end
"""
)

# A MIG GPU: DCGM exports a series per GPU instance (label GPU_I_ID), all on the same `gpu`.
# Attribution is per physical GPU, so its sample at a timestamp is the GPU's: utilisation the
# slice-weighted mean of its instances' activity (GR_ENGINE_ACTIVE of an instance is relative
# to the instance: a busy 1g.10gb is 1/7 of a busy GPU), memory their sum, power the GPU's
# (a device reading each instance series repeats). Those values go to the last row (highest
# source_line) of the GPU and timestamp, which wins downstream; the other instance rows keep
# their own values and labels (the pod of each instance) and are folded as duplicates, so
# every point stays counted. A device-level series of the GPU (no GPU_I_ID) gives what no
# instance series has, and its points join that row (like points of several metrics do).
# Only the instances present at the timestamp weigh: a point missing (NaN) leaves its
# instance out of the mean rather than counting it idle.
_MIG_GPU_ROWS = """
with device_rows as (
    {rows}
),

devices as (
    -- one value per device (the GPU, or an instance of it) and timestamp: the last read
    select
        node,
        gpu_index,
        ts,
        gpu_instance,
        any_value(gpu_instance_slices) as slices,
        arg_max(util_pct, source_line) filter (util_pct is not null) as util_pct,
        arg_max(mem_used_mib, source_line) filter (mem_used_mib is not null) as mem_used_mib,
        max(power_w) as power_w,
        max(source_line) as last_line
    from device_rows
    where ts is not null and node is not null and gpu_index is not null
    group by all
),

gpus as (
    select
        node,
        gpu_index,
        ts,
        coalesce(
            round(
                sum(slices * util_pct) filter (gpu_instance is not null)
                / sum(slices) filter (gpu_instance is not null and util_pct is not null),
                10
            ),
            any_value(util_pct) filter (gpu_instance is null)
        ) as util_pct,
        coalesce(
            sum(mem_used_mib) filter (gpu_instance is not null),
            any_value(mem_used_mib) filter (gpu_instance is null)
        ) as mem_used_mib,
        max(power_w) as power_w,
        max(last_line) filter (gpu_instance is not null) as last_line
    from devices
    group by all
    having count(gpu_instance) > 0
)

select
    r.* replace (
        case when r.source_line = g.last_line then g.util_pct else r.util_pct end as util_pct,
        case when r.source_line = g.last_line then g.mem_used_mib else r.mem_used_mib end
            as mem_used_mib,
        case when r.source_line = g.last_line then g.power_w else r.power_w end as power_w
    )
from device_rows as r
left join gpus as g using (node, gpu_index, ts)
-- a device-level point of a MIG GPU is in the GPU's row, like the points of several metrics
where r.gpu_instance is not null or g.last_line is null
"""

_NOT_ALIGNED = "dcgm: series not aligned"

_MALFORMED = re.compile(r"Malformed JSON.*? at byte (\d+)")
# keys whose line an error message names (the first occurrence in the file's first MiB)
STATUS_KEY, RESULT_TYPE_KEY, RESULT_KEY = b'"status"', b'"resultType"', b'"result"'
METRIC_KEY, VALUES_KEY = b'"metric"', b'"values"'


def to_parquet(path: Path, out: Path, settings: ClusterSettings) -> int:
    """Convert one query_range body to canonical samples Parquet at `out`; rows written."""
    con = _connection()
    try:
        _read_body(con, path)
        _check_body(con, path)
        con.execute(_LABEL_TYPE, bind(_LABEL_TYPE, _PARAMS))
        con.execute(_SERIES, bind(_SERIES, _PARAMS))
        overlaps = con.execute(_OVERLAPS).fetchall()
        repeating = sorted({n for a, b, same_kind in overlaps if same_kind for n in (a, b)})
        roles, one_per_role, *label_counts = con.execute(_SERIES_FACTS).fetchone()
        labelled = {label for label, n in zip(_OPTIONAL_LABELS, label_counts, strict=True) if n}
        params = {
            **_PARAMS,
            "repeating": repeating,
            "roles": len(roles),
        }
        mig = "gpu_instance" in labelled
        columns = _ROW_COLUMNS if mig else _written_columns(set(roles), labelled)
        if overlaps and not repeating and one_per_role and "util" in roles:
            try:
                return _copy(con, _ALIGNED_ROWS, mig, out, params, columns)
            except duckdb.Error as error:
                if _NOT_ALIGNED not in str(error):
                    raise
        rows = _ROWS_PER_TIMESTAMP if overlaps else _ROWS_PER_POINT
        return _copy(con, rows, mig, out, params, columns)
    finally:
        con.close()


def _written_columns(roles: set[str], labelled: set[str]) -> tuple[str, ...]:
    """The columns of `_ROW_COLUMNS` that can hold a value for the file's series: a metric's
    column where a series has that role, a label's where a series has the label. Readers take
    the samples files with an empty file of every column (union by name), so a missing column
    reads as NULL; not writing it saved a third of a one-metric file's write."""
    by_role = {"util_pct": "util", "mem_used_mib": "mem", "power_w": "power"}
    return tuple(
        column
        for column in _ROW_COLUMNS
        if (column not in by_role or by_role[column] in roles)
        and (column not in _OPTIONAL_LABELS or column in labelled)
    )


def _copy(
    con: duckdb.DuckDBPyConnection,
    rows: str,
    mig: bool,
    out: Path,
    params: dict,
    columns: tuple[str, ...],
) -> int:
    """Write `columns` of the sample rows of the select `rows` (of a MIG GPU: its GPU's rows,
    which need every column) to `out`."""
    rows = f"select {', '.join(columns)} from ({rows})"
    sql = _MIG_GPU_ROWS.format(rows=rows) if mig else rows
    copy = f"copy ({sql}) to '{_quoted(out)}' (format parquet, compression snappy)"
    return con.execute(copy, bind(sql, params)).fetchone()[0]


_DATABASE: tuple[int, duckdb.DuckDBPyConnection] | None = None
_DATABASE_LOCK = threading.Lock()


def _connection() -> duckdb.DuckDBPyConnection:
    """A connection of its own (its temporary tables and types are its own) to this process's
    in-memory database. One database serves every file: a database per file cost as much as
    the conversion itself, re-allocating its memory from the system (page faults) each time."""
    global _DATABASE
    with _DATABASE_LOCK:
        if _DATABASE is None or _DATABASE[0] != os.getpid():  # not a forked parent's
            _DATABASE = (os.getpid(), duckdb.connect())
            # rows in any order (each has its source_line): lets two threads write one file
            _DATABASE[1].execute("set preserve_insertion_order = false")
        con = _DATABASE[1].cursor()
    con.execute("set TimeZone = 'UTC'")  # a setting of the connection, not the database
    return con


_PARAMS = {
    "gr_engine_active": GR_ENGINE_ACTIVE,
    "gpu_util": GPU_UTIL,
    "fb_used": FB_USED,
    "power_usage": POWER_USAGE,
    "points_per_series": POINTS_PER_SERIES,
    "year_2100_s": 4_102_444_800,  # 2100-01-01 in Unix seconds
    "host_port": r"^(?:\[([^\]]*)\]|([^:]*)):\d+$",
    "not_aligned": _NOT_ALIGNED,
}


def _read_body(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Parse the file into the temporary table `raw_series`.

    DuckDB reads a gzipped file in place; it is told so by content, not left to guess from the
    name (a `.json` file may hold gzip, a `.gz` file plain text)."""
    compressed = is_gzip(path)
    size = _decompressed_size(path) if compressed else path.stat().st_size
    for point_type in _POINT_TYPES:
        columns = {**_BODY_COLUMNS, "data": _BODY_COLUMNS["data"].format(point=point_type)}
        params = {
            "path": str(path),
            "columns": columns,
            # the body is one JSON value: DuckDB must be allowed to hold all of it
            "max_size": max(size + 1024, 16 * 2**20),
            "compression": "gzip" if compressed else "none",
            "host_port": _PARAMS["host_port"],
        }
        try:
            con.execute(_READ_BODY, params)
            break
        except duckdb.Error as error:
            if point_type != _POINT_TYPES[-1] and "transform error" in str(error):
                continue  # a point that is not a number: read them as text
            raise LandingError(_json_error(path, error)) from None


def _check_body(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Stop on a file that is not one query_range body, or on series that cannot be read as
    DCGM samples, naming the field (and the series)."""
    facts = con.execute(_BODY_FACTS, {"metrics": list(METRICS)}).fetchone()
    bodies, status, error_type, error, result_type, unnamed, total, known, names, longest = facts
    if bodies != 1:
        raise LandingError(
            f"{path}: line {_line_of(path, STATUS_KEY)}: field status: expected one "
            f"query_range body, found {bodies} JSON values"
        )
    if status != "success":
        detail = f" ({error_type}: {error})" if error_type or error else ""
        raise LandingError(
            f"{path}: line {_line_of(path, STATUS_KEY)}: field status: {status!r}{detail}, "
            "expected 'success' (a Prometheus /api/v1/query_range response body)"
        )
    if result_type != "matrix":
        raise LandingError(
            f"{path}: line {_line_of(path, RESULT_TYPE_KEY)}: field data.resultType: "
            f"{result_type!r}, expected 'matrix' (a Prometheus /api/v1/query_range response body)"
        )
    if unnamed is not None:
        raise LandingError(
            f"{path}: line {_line_of(path, METRIC_KEY)}: field "
            f"data.result[{unnamed - 1}].metric.__name__: missing; export the DCGM metrics "
            "themselves, not an expression over them"
        )
    if total and not known:
        raise LandingError(
            f"{path}: line {_line_of(path, RESULT_KEY)}: field data.result: no "
            f"{', '.join(METRICS)} series (found {names})"
        )
    if longest is not None and longest >= POINTS_PER_SERIES:
        raise LandingError(
            f"{path}: line {_line_of(path, VALUES_KEY)}: field data.result[].values: a series "
            f"of {longest} points; split the export into ranges under {POINTS_PER_SERIES}"
        )


def _json_error(path: Path, error: duckdb.Error) -> str:
    """One line naming the file, the line and what DuckDB could not read."""
    message = str(error).split("\n", 1)[0].removeprefix("Invalid Input Error: ")
    found = _MALFORMED.search(message)
    if found:
        line = _line_at(path, int(found.group(1)))
        reason = message.rsplit(":", 1)[-1].strip()
        return f"{path}: line {line}: field data: malformed JSON ({reason})"
    message = re.sub(r' in file "[^"]*"', "", message)
    return (
        f"{path}: line 1: field data: not a Prometheus query_range body ({message[:200].strip()})"
    )


def _decompressed_size(path: Path) -> int:
    """Bytes of a gzipped file once decompressed, counted while streaming (the gzip trailer
    holds the size modulo 4 GiB, of the last member only)."""
    size = 0
    with open_binary(path) as handle:
        while chunk := handle.read(2**20):
            size += len(chunk)
    return size


def _line_at(path: Path, offset: int) -> int:
    """The 1-based line of byte `offset` of the (decompressed) file, counted without reading it
    all at once."""
    line, remaining = 1, offset
    with open_binary(path) as handle:
        while remaining > 0:
            chunk = handle.read(min(remaining, 2**20))
            if not chunk:
                break
            line += chunk.count(b"\n")
            remaining -= len(chunk)
    return line


def _line_of(path: Path, needle: bytes) -> int:
    """The line of the first occurrence of `needle` within the first (decompressed) MiB, else 1."""
    with open_binary(path) as handle:
        head = handle.read(2**20)
    position = head.find(needle)
    return head.count(b"\n", 0, position) + 1 if position >= 0 else 1


def _quoted(path: Path) -> str:
    # COPY takes no bound file name; the path is ours (the converter's cache), not input text
    return path.as_posix().replace("'", "''")


_RESULT = re.compile(r'"result(Type)?"\s*:')


def _is_api_response(text: str) -> bool:
    """A Prometheus API response: a result, or an error body."""
    return bool(_RESULT.search(text)) or ('"status"' in text and '"errorType"' in text)


FORMAT = ExportFormat.of_samples(
    name="dcgm_prometheus",
    expected="DCGM metrics as a Prometheus /api/v1/query_range JSON body (resultType matrix)",
    sniff=json_object_sniffer(_is_api_response),
    to_parquet=to_parquet,
    util_metric="DCGM_FI_DEV_GPU_UTIL",
)
