"""nvidia-smi CSV logs (DESIGN.md "Inputs", telemetry 2).

`nvidia-smi --query-gpu=timestamp,index,uuid,name,utilization.gpu,memory.used,power.draw
--format=csv [-l N] >> <node>.csv`: one file per node, one line per GPU and sample, e.g.

    timestamp, index, uuid, name, utilization.gpu [%], memory.used [MiB], power.draw [W]
    2026/11/01 00:00:00.123, 0, GPU-5d3c..., NVIDIA A100-SXM4-80GB, 87 %, 1234 MiB, 250.12 W

Columns are found by name in the header (units in brackets ignored, any order, other query
fields allowed); `power.draw.average` or `power.draw.instant` stand in for `power.draw`. A file
without a header (`--format=csv,noheader`) has the field order above. Values may carry their
unit or not (`nounits`). Rules, each a decision:

- Header lines are not samples: neither loaded nor rejected. Each one (logs appended by several
  runs repeat it) sets the columns of the lines that follow. Blank lines are skipped too.
- `[N/A]`, `[Not Supported]` (any value in brackets: nvidia-smi's word for none) and an empty
  field become NULL, so a sample without a utilisation is rejected (with its line) and a
  missing power is just missing. Any other value of a number field (`index`,
  `utilization.gpu`, `memory.used`, the power field) that is not a number, with or without its
  unit, makes the line a reject whose `parse_error` names the field and the value
  (`field utilization.gpu: 'abc %' is not a number`): garbage is not an absent reading.
- A line with the wrong number of fields, or a last line without a line end (the writer was cut
  off), keeps its timestamp, GPU and node but no values, so it is rejected with its line;
  `parse_error` says why.
- Node: a `hostname` or `node` column when the header has one, else the file name without its
  extension (and `.gz`), up to the first `_` (`gpu-a01.csv`, `gpu-a01_2026-11.csv.gz` ->
  `gpu-a01`; host names cannot contain `_`). Any extension will do (`.csv`, `.log`, `.txt`,
  none; gzipped or not): a log is recognised by its content.
- Timestamps are local time in the cluster's `scheduler_timezone`, stored as naive UTC. In the
  hour repeated when clocks go back, a GPU's lines before its log steps back in time are the
  first (daylight) pass, the lines after it the second.
- source_line is the 1-based line of the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb
import pyarrow as pa

from pipelines.catalog import ClusterSettings
from pipelines.formats import (
    LOCAL_MINUTE_INSTANTS,
    ExportFormat,
    is_utc,
    open_text,
    without_gz,
)
from pipelines.landing import LandingError

DEFAULT_FIELDS = (
    "timestamp", "index", "uuid", "name", "utilization.gpu", "memory.used", "power.draw",
)  # fmt: skip
_NODE_COLUMNS = ("hostname", "node")
_POWER_COLUMNS = ("power.draw", "power.draw.average", "power.draw.instant")
_REQUIRED = ("timestamp", "index", "utilization.gpu")
_CHUNK_LINES = 200_000  # lines handed to DuckDB at a time: memory stays flat on big logs

_CHUNK_SCHEMA = pa.schema(
    [("source_line", pa.int64()), ("header_no", pa.int32()), ("text", pa.string())]
)
_HEADER_SCHEMA = pa.schema(
    [("header_no", pa.int32()), ("width", pa.int32())]
    + [(f"{column}_at", pa.int32()) for column in (
        "timestamp", "index", "uuid", "name", "util", "mem", "power", "node",
    )]
    + [("power_name", pa.string())]  # the header's power field, for parse errors
)  # fmt: skip

# One typed row per sample line of a chunk (lines as read, with the header above them), local
# time. A line that does not parse keeps its timestamp, GPU and node, and no values or labels.
_TYPE_CHUNK = """
insert into lines
with split as (
    select
        c.source_line,
        h.*,
        string_split(rtrim(c.text, chr(13) || chr(10)), ',') as f,
        suffix(c.text, chr(10)) or suffix(c.text, chr(13)) as has_line_end
    from chunk as c
    join headers as h using (header_no)
),

fielded as (
    select
        source_line,
        case
            when len(f) <> width then format('expected {} fields, found {}', width, len(f))
            when not has_line_end
                then 'the last line has no line end: cut off while being written'
        end as parse_error,
        case when node_at is null then $file_node else nullif(trim(f[node_at]), '') end
            as node,
        trim(f[timestamp_at]) as ts_text,
        trim(f[index_at]) as gpu_text,
        trim(f[uuid_at]) as uuid_text,
        trim(f[name_at]) as name_text,
        f[util_at] as util_text,
        f[mem_at] as mem_text,
        f[power_at] as power_text,
        power_name
    from split
),

valued as (
    select
        *,
        try_cast(gpu_text as integer) as gpu_index,
        try_cast(regexp_extract(util_text, $percent, 1) as double) as util_pct,
        try_cast(regexp_extract(mem_text, $mebibytes, 1) as double) as mem_used_mib,
        try_cast(regexp_extract(power_text, $watts, 1) as double) as power_w
    from fielded
)

select
    source_line,
    node,
    try_strptime(
        ts_text,
        ['%Y/%m/%d %H:%M:%S.%f', '%Y/%m/%d %H:%M:%S', '%Y-%m-%d %H:%M:%S.%f', '%Y-%m-%d %H:%M:%S']
    ) as local_ts,
    gpu_text,
    gpu_index,
    case when parse_error is null then util_pct end as util_pct,
    case when parse_error is null then mem_used_mib end as mem_used_mib,
    case when parse_error is null then power_w end as power_w,
    case when parse_error is null and uuid_text not like '[%' then nullif(uuid_text, '') end
        as gpu_uuid,
    case when parse_error is null and name_text not like '[%' then nullif(name_text, '') end
        as gpu_model,
    -- a value that is there (not empty, not nvidia-smi's `[N/A]`-style none) but no number
    coalesce(parse_error, case
        when gpu_index is null and not no_value(gpu_text)
            then format('field index: ''{}'' is not a GPU index', trim(gpu_text))
        when util_pct is null and not no_value(util_text)
            then format('field utilization.gpu: ''{}'' is not a number', trim(util_text))
        when mem_used_mib is null and not no_value(mem_text)
            then format('field memory.used: ''{}'' is not a number', trim(mem_text))
        when power_w is null and not no_value(power_text)
            then format('field {}: ''{}'' is not a number', power_name, trim(power_text))
    end) as parse_error
from valued
"""

# A field that holds no value: absent (no such column), empty, or in brackets (`[N/A]`,
# `[Not Supported]`, `[Unknown Error]`: nvidia-smi's way of saying there is none).
_NO_VALUE = """
create or replace temp macro no_value(text) as
coalesce(trim(text), '') = '' or starts_with(trim(text), '[')
"""

_LINES = """
create temp table lines (
    source_line bigint, node varchar, local_ts timestamp, gpu_text varchar, gpu_index integer,
    util_pct double, mem_used_mib double, power_w double, gpu_uuid varchar, gpu_model varchar,
    parse_error varchar
)
"""

_COLUMNS_OUT = """
    node, gpu_index, util_pct, mem_used_mib, power_w, source_line, gpu_uuid, gpu_model,
    parse_error
"""

_SAMPLES_UTC = f"select local_ts as ts, {_COLUMNS_OUT} from lines"

# Local time to UTC, worked out once per local minute (zone rules change on whole minutes). A
# local minute of the hour repeated when clocks go back has two instants an hour apart: a GPU's
# lines take the earlier one until its log steps back in time that day, then the later one.
_SAMPLES_ZONED = f"""
with minutes as (
    select minute, timezone('UTC', timezone($zone, minute)) as guess
    from (select distinct date_trunc('minute', local_ts) as minute from lines)
    where minute is not null
),

{LOCAL_MINUTE_INSTANTS},

placed as (
    select l.*, i.guess, i.earlier, i.later, l.local_ts - i.minute as past_minute
    from lines as l
    left join instants as i on i.minute = date_trunc('minute', l.local_ts)
),

repeated as (
    -- the lines in a repeated hour, and whether their GPU's log has stepped back that day
    select
        source_line,
        count(*) filter (steps_back) over (
            partition by gpu_text, local_ts::date order by source_line
        ) > 0 as second_pass
    from (
        select
            source_line,
            gpu_text,
            local_ts,
            local_ts < lag(local_ts) over (partition by gpu_text order by source_line)
                as steps_back
        from placed
        where earlier is not null or later is not null
    )
)

select
    case
        when r.second_pass then coalesce(p.later, p.guess)
        else coalesce(p.earlier, p.guess)
    end + p.past_minute as ts,
    {_COLUMNS_OUT}
from placed as p
left join repeated as r using (source_line)
"""

_NUMBER = r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*{unit}\s*$"
_PARAMS = {
    "percent": _NUMBER.format(unit="%?"),
    "mebibytes": _NUMBER.format(unit="(?:MiB)?"),
    "watts": _NUMBER.format(unit="W?"),
}


def _header_row(names: list[str], number: int, path: Path, line: int) -> dict[str, int | None]:
    """Where the wanted columns sit (1-based, None: absent) in the lines below a header."""
    for required in _REQUIRED:
        if required not in names:
            raise LandingError(
                f"{path}: line {line}: field {required}: missing from the header "
                f"({', '.join(names)})"
            )

    def at(*candidates: str) -> int | None:
        return next((names.index(c) + 1 for c in candidates if c in names), None)

    return {
        "header_no": number,
        "width": len(names),
        "timestamp_at": at("timestamp"),
        "index_at": at("index"),
        "uuid_at": at("uuid"),
        "name_at": at("name"),
        "util_at": at("utilization.gpu"),
        "mem_at": at("memory.used"),
        "power_at": at(*_POWER_COLUMNS),
        "power_name": next((c for c in _POWER_COLUMNS if c in names), None),
        "node_at": at(*_NODE_COLUMNS),
    }


def to_parquet(path: Path, out: Path, settings: ClusterSettings) -> int:
    """Convert one nvidia-smi CSV log to canonical samples Parquet at `out`; rows written."""
    zone = settings.scheduler_timezone
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise LandingError(
            f"{path}: line 1: field timestamp: local times in {zone!r}, which is not a known "
            "time zone (scheduler_timezone in the catalog's settings.yaml)"
        ) from None
    utc = is_utc(zone)
    headers: list[dict[str, int | None]] = []
    con = duckdb.connect()
    try:
        con.execute("set TimeZone = 'UTC'")
        con.execute(_LINES)
        con.execute(_NO_VALUE)
        params = {**_PARAMS, "file_node": without_gz(path).stem.split("_", 1)[0]}
        for chunk in _chunks(path, headers):
            con.register("chunk", chunk)
            con.register("headers", pa.Table.from_pylist(headers, schema=_HEADER_SCHEMA))
            con.execute(_TYPE_CHUNK, params)
            con.unregister("chunk")
            con.unregister("headers")
        sql, params = (_SAMPLES_UTC, {}) if utc else (_SAMPLES_ZONED, {"zone": zone})
        copy = f"copy ({sql}) to '{_quoted(out)}' (format parquet, compression snappy)"
        return con.execute(copy, params).fetchone()[0]
    finally:
        con.close()


def _chunks(path: Path, headers: list[dict[str, int | None]]) -> Iterator[pa.Table]:
    """The sample lines of the file, `_CHUNK_LINES` at a time, each with the number of the
    header above it; every header met is added to `headers`."""
    numbers: list[int] = []
    header_nos: list[int] = []
    texts: list[str] = []
    header_no = None
    with open_text(path, newline="") as handle:  # gzipped or not, without a byte order mark
        for number, text in enumerate(handle, 1):
            if not text.strip():
                continue
            if not text[:1].isdigit() and "timestamp" in text.lower():
                names = [_column_name(field) for field in text.split(",")]
                if "timestamp" in names:
                    headers.append(_header_row(names, number, path, number))
                    header_no = number
                    continue
            if header_no is None:  # `--format=csv,noheader`: the default field order
                headers.append(_header_row(list(DEFAULT_FIELDS), 0, path, number))
                header_no = 0
            numbers.append(number)
            header_nos.append(header_no)
            texts.append(text)
            if len(numbers) >= _CHUNK_LINES:
                yield pa.table([numbers, header_nos, texts], schema=_CHUNK_SCHEMA)
                numbers, header_nos, texts = [], [], []
    yield pa.table([numbers, header_nos, texts], schema=_CHUNK_SCHEMA)


def _column_name(field: str) -> str:
    """`utilization.gpu [%]` -> `utilization.gpu`."""
    return field.split("[", 1)[0].strip().lower()


def _quoted(path: Path) -> str:
    # COPY takes no bound file name; the path is ours (the converter's cache), not input text
    return path.as_posix().replace("'", "''")


_DATA_LINE = re.compile(r"^\s*\d{4}[/-]\d{2}[/-]\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?\s*,\s*\d+\s*,")


def _sniff(path: Path, head: str) -> bool:
    """A header naming `timestamp` and nvidia-smi query fields, or a headerless sample line."""
    first = next((line for line in head.lstrip("\ufeff").splitlines() if line.strip()), "")
    names = [_column_name(field) for field in first.split(",")]
    if "timestamp" in names:
        return bool({"index", "utilization.gpu"} & set(names))
    return bool(_DATA_LINE.match(first)) and len(names) == len(DEFAULT_FIELDS)


FORMAT = ExportFormat.of_samples(
    name="nvidia_smi",
    expected=(
        "nvidia-smi --query-gpu=timestamp,index,uuid,name,utilization.gpu,memory.used,"
        "power.draw --format=csv log"
    ),
    sniff=_sniff,
    to_parquet=to_parquet,
    util_metric="nvidia-smi utilization.gpu",
)
