"""The canonical export format (DESIGN.md "Inputs" 3): jobs, allocations and GPU samples.

Jobs and allocations are CSV (or Parquet) with fixed column names; every row comes out as text
with its file and line so that typing, and rejecting, happens in SQL (`sql/staging/`).
A jobs file may add `job_name` (optional, like every column outside the required ones): the
job's name (a Kubernetes pod's name, Slurm's JobName), NULL when absent; and `eligible_time`
(optional too): when the job became eligible to start (Slurm's Eligible: its begin time,
dependencies and holds met), typed like submit_time; its queue wait runs from it instead of
from submit_time (sql/marts/queue_stats.sql), NULL or absent: from submit_time.

GPU samples are Parquet or CSV. CSV is converted to canonical Parquet (`samples_to_parquet`)
with each row's `source_line` and, for a field that does not read as its type, a `parse_error`
naming the field, so that the row is rejected with its line. CSV files may be gzipped
(`.csv.gz`, recognised by content) and carry CRLF line ends or a UTF-8 byte order mark.

Sample times are stored as naive UTC (DESIGN.md: a timestamp without a zone is in the
cluster's `scheduler_timezone`). Text with its own offset after the time of day (`Z`,
`+01:00`, `+0100`, `+01`: the rule of sql/macros/to_utc.sql, as for the jobs' times) is that
instant; text without one, and a Parquet TIMESTAMP column without a zone, is local time in
the cluster's zone; a Parquet TIMESTAMP WITH TIME ZONE (isAdjustedToUTC) is an instant. In the
hour repeated when clocks go back, a GPU's (node and gpu_index's) rows before its rows step
back in time, in file order, are the first (daylight) pass and the rows after it the second,
as nvidia-smi logs are read (pipelines/formats/nvidia_smi.py).
So a Parquet file is read in place by the rollup when that needs no conversion (its `ts` an
instant, or naive in a UTC cluster: `parquet_read_in_place`), and converted otherwise
(`parquet_samples_to_parquet`: text times, or naive ones of a cluster in another zone).
"""

from __future__ import annotations

import array
import codecs
import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from pipelines.catalog import ClusterSettings
from pipelines.formats import (
    LOCAL_MINUTE_INSTANTS,
    ExportFormat,
    is_utc,
    open_binary,
    open_text,
    without_gz,
)

JOB_COLUMNS = (
    "job_id", "cluster", "account", "user", "queue", "qos", "gpu_model", "gpus", "nodes",
    "submit_time", "eligible_time", "start_time", "end_time", "state", "exit_code", "job_name",
)  # fmt: skip
ALLOCATION_COLUMNS = ("job_id", "node", "gpu_index")
# a configured GPU quota object of a scheduler (pipelines/formats/sacctmgr.py, kueue.py): one
# row per configured GPU limit or guarantee, or per object that configures none
QUOTA_COLUMNS = (
    "source", "object_kind", "object_name", "account", "user", "partition", "qos", "target",
    "cohort", "flavor", "gpu_model", "guaranteed_gpus", "limit_gpus", "created_time",
    "quota_reserved_time", "admitted_time", "admitted_queue", "owner_kind", "owner_uid",
)  # fmt: skip
SAMPLE_COLUMNS = ("ts", "node", "gpu_index", "util_pct", "mem_used_mib", "power_w")
OPTIONAL_SAMPLE_COLUMNS = ("job_id", "gpu_uuid", "gpu_model")
_REQUIRED_SAMPLE_COLUMNS = {"ts", "node", "gpu_index", "util_pct"}
_REQUIRED_JOB_COLUMNS = {"job_id", "account", "gpus", "start_time", "end_time", "state"}
# csv's default field size limit (128 KiB) raises mid-file: a field of any size is a field,
# and a row holding a 1 MB one is loaded or rejected like any other (the limit is module-wide)
csv.field_size_limit(2**31 - 1)


# What a canonical samples file's util_pct measures is not said (the exporter chose it): the
# reports name its metric so
CANONICAL_UTIL_METRIC = "canonical util_pct"


def header_of(path: Path) -> list[str]:
    """Column names of a CSV or Parquet file (lower-cased), or [] when it has none."""
    if without_gz(path).suffix == ".parquet":
        return [name.lower() for name in pq.read_schema(path).names]
    with open_text(path, newline="") as handle:
        first = handle.readline()
    return [name.strip().lower() for name in next(csv.reader([first]), [])]


def _has_columns(
    required: set[str],
    forbidden: frozenset[str] = frozenset(),
    suffixes: tuple[str, ...] = (".csv", ".parquet"),
):
    """A sniffer: a file named with one of `suffixes` (CSV, Parquet; `.gz` aside) whose header
    has `required` and none of `forbidden`."""

    def sniff(path: Path, head: str) -> bool:
        if without_gz(path).suffix not in suffixes:
            return False
        try:
            columns = set(header_of(path))
        except Exception:  # noqa: BLE001 - not readable as CSV/Parquet: not this format
            return False
        return required <= columns and not forbidden & columns

    return sniff


def read_rows(path: Path, columns: tuple[str, ...]) -> Iterator[dict[str, str | None]]:
    """Yield each data row as text: the wanted columns plus `line`, `raw` and `parse_error`.

    A row with a wrong field count is still yielded (with `parse_error`) so it reaches the
    rejects table instead of disappearing. A quoted field may hold line breaks; but a quote
    that never closes would make the rest of the file one field of one rejected row, so a
    record over several lines that runs to the end of the file inside quotes, or has the wrong
    field count, is read line by line instead, and a line whose quote never closes is rejected.
    """
    if without_gz(path).suffix == ".parquet":
        yield from _read_parquet_rows(path, columns)
        return
    with open_text(path, newline="") as handle:
        # the first line alone: a stray quote in the header must not swallow the rows
        header = [name.strip().lower() for name in _fields(handle.readline())]
        positions = [(name, header.index(name)) for name in columns if name in header]
        texts: list[str] = []  # the lines of the record being read

        def recorded() -> Iterator[str]:
            for text in handle:
                texts.append(text)
                yield text

        line = 1
        for fields in csv.reader(recorded()):
            first_line, lines, texts[:] = line + 1, texts[:], []
            line += len(lines)
            # a quote that never closes runs to the end of the file, taking the line end of
            # the last line (if it has one) into the field
            suspect = (
                len(lines) > 1
                or not lines[-1].endswith(("\n", "\r"))
                or (fields[-1] if fields else "").endswith(("\n", "\r"))
            )
            unclosed = suspect and _ends_inside_quotes("".join(lines))
            if unclosed or (len(lines) > 1 and len(fields) != len(header)):
                records = [
                    (first_line + k, _fields(text.rstrip("\r\n")), text)
                    for k, text in enumerate(lines)
                ]
            else:
                records = [(first_line, fields, None)]
            for number, values, text in records:
                if not (text if text is not None else "".join(lines)).strip():
                    continue  # a blank line, spaces or not, is no row
                yield _csv_row(number, values, text, header, positions)


def _csv_row(
    number: int,
    fields: list[str],
    text: str | None,
    header: list[str],
    positions: list[tuple[str, int]],
) -> dict[str, str | None]:
    """The row of one record; `text`, its one line when the record was read line by line
    (then it may end inside quotes)."""
    # a blank field is NULL
    row: dict[str, str | None] = {
        name: (fields[i].strip() or None) if i < len(fields) else None for name, i in positions
    }
    row["line"] = number
    row["raw"] = ",".join(fields)
    if text is not None and _ends_inside_quotes(text):
        at = len(fields) - 1
        name = header[at] if at < len(header) else f"{at + 1}"
        row["parse_error"] = f"field {name}: its opening quote never closes (a stray '\"'?)"
    elif len(fields) != len(header):
        row["parse_error"] = f"expected {len(header)} fields, found {len(fields)}"
    else:
        row["parse_error"] = None
    return row


def _fields(text: str) -> list[str]:
    """The fields of one line of CSV (a quote that does not close runs to its end)."""
    return next(csv.reader([text]), [])


# a quoted field, its quotes doubled inside; and the rest of a field up to its end
_QUOTED = re.compile(r'"[^"]*(?:""[^"]*)*"')
_FIELD_REST = re.compile(r"[^,\r\n]*")


def _ends_inside_quotes(text: str) -> bool:
    """Whether CSV `text` ends inside a quoted field: its opening quote never closes. (Python's
    csv reader, not strict, then returns the rest of the file as that field.)"""
    at = 0
    while at < len(text):
        if text.startswith('"', at):
            quoted = _QUOTED.match(text, at)
            if quoted is None:
                return True
            at = quoted.end()
        at = _FIELD_REST.match(text, at).end() + 1  # past the separator or line end
    return False


def read_table(path: Path, columns: tuple[str, ...]) -> pa.Table | None:
    """The rows `read_rows` yields, as one table of text columns (`line` int64), parsed by
    Arrow's CSV reader; None, for the row reader to read it, unless every line after the header
    is blank or one well-formed row (no field count errors, no line breaks inside quotes, no
    quote left open, no lone carriage returns, valid UTF-8), so that rows and lines pair up
    exactly.

    The file's bytes are checked and its lines counted as bytes, never as Python strings: a
    2 M-job export (336 MB) peaked at 2.5 GB RSS when its text and lines were Python objects
    (benchmarks/scheduler_load.py)."""
    if without_gz(path).suffix != ".csv":
        return None
    with open_binary(path) as handle:
        # a byte order mark would become part of the first column's name
        data = handle.read().removeprefix(codecs.BOM_UTF8)
    # a NUL or a carriage return that does not end a line goes to the row reader (and bytes
    # that are not UTF-8, which Arrow finds below)
    if b"\0" in data or (b"\r" in data and data.count(b"\r") != data.count(b"\r\n")):
        return None
    header_end = data.find(b"\n")
    try:
        first_line = data[: header_end if header_end >= 0 else len(data)].decode("utf-8")
    except UnicodeDecodeError:
        return None
    names = next(csv.reader([first_line.removesuffix("\r")]), [])
    header = [name.strip().lower() for name in names]
    if not header or len(set(names)) < len(names):
        return None
    lines = data.count(b"\n") + 1
    numbers = _row_line_numbers(data, lines)
    # Arrow takes a quote that never closes on the last line as closed at the end of the file
    # (elsewhere the rows and lines stop pairing up): the row reader rejects that line
    if len(numbers) and _ends_inside_quotes(_line_text(data, lines, numbers[-1].as_py())):
        return None
    try:
        # a row with another field count than the header, or bytes that are not UTF-8, raise
        # ArrowInvalid
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid:
        return None
    del data  # the file's bytes, before the columns below are made
    if table.num_rows != len(numbers):
        return None
    out: dict[str, pa.Array] = {}
    for name in columns:
        if name in header:
            trimmed = pc.utf8_trim_whitespace(table.column(header.index(name)))
            # a blank field is NULL
            out[name] = pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.string()), trimmed)
    out["line"] = numbers
    out["raw"] = pc.binary_join_element_wise(*table.columns, ",")
    out["parse_error"] = pa.nulls(table.num_rows, pa.string())
    return pa.table(out)


# A blank line's start: a line end followed by nothing but white space (what str.strip()
# removes, in UTF-8) up to the next line end or the end of the file.
_BLANK_LINE = re.compile(
    rb"\n(?=(?:[\t\x0b\x0c\r\x1c-\x1f ]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]"
    rb"|\xe2\x81\x9f|\xe3\x80\x80)*(?:\n|\Z))"
)


def _row_line_numbers(data: bytes, lines: int) -> pa.Array:
    """The numbers (from 1) of the `lines` lines of `data` after the first that are not
    blank."""
    blank, line, at = [], 1, 0
    for match in _BLANK_LINE.finditer(data):
        line += data.count(b"\n", at, match.start() + 1)
        at = match.start() + 1
        blank.append(line)
    # a buffer of int64 made in C: pa.array(range(...)) took 0.33 s for 2 M lines, this 0.06
    every = array.array("q", range(2, lines + 1))
    numbers = pa.Array.from_buffers(pa.int64(), len(every), [None, pa.py_buffer(every)])
    if not blank:
        return numbers
    return numbers.filter(pc.invert(pc.is_in(numbers, pa.array(blank, pa.int64()))))


def _line_text(data: bytes, lines: int, number: int) -> str:
    """Line `number` (from 1) of the `lines` lines of `data`, without its line end: found from
    the end of the file, as the lines asked for are the last ones."""
    end = len(data)
    for _ in range(lines - number):
        end = data.rindex(b"\n", 0, end)
    start = data.rfind(b"\n", 0, end) + 1
    return data[start:end].decode("utf-8", errors="replace").removesuffix("\r")


def _read_jobs(path: Path, settings: ClusterSettings) -> Iterator[dict[str, str | None]]:
    for row in read_rows(path, JOB_COLUMNS):
        row["record_type"] = "job"
        yield row


def _read_allocations(path: Path, settings: ClusterSettings) -> Iterator[dict[str, str | None]]:
    return read_rows(path, ALLOCATION_COLUMNS)


def _read_jobs_table(path: Path, settings: ClusterSettings) -> pa.Table | None:
    table = read_table(path, JOB_COLUMNS)
    if table is None:
        return None
    return table.append_column("record_type", pa.array(["job"] * table.num_rows, pa.string()))


def _read_allocations_table(path: Path, settings: ClusterSettings) -> pa.Table | None:
    return read_table(path, ALLOCATION_COLUMNS)


_SAMPLE_CHUNK_ROWS = 100_000  # rows typed at a time: memory stays flat on big files
_SAMPLE_TEXT_SCHEMA = pa.schema(
    [(name, pa.string()) for name in (*SAMPLE_COLUMNS, *OPTIONAL_SAMPLE_COLUMNS)]
    + [("line", pa.int64()), ("parse_error", pa.string())]
)
# the columns of telemetry.SAMPLE_SCHEMA a samples CSV can fill
SAMPLE_PARQUET_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us")), ("node", pa.string()), ("gpu_index", pa.int32()),
    ("util_pct", pa.float64()), ("mem_used_mib", pa.float64()), ("power_w", pa.float64()),
    ("source_line", pa.int64()), ("job_id", pa.string()), ("gpu_uuid", pa.string()),
    ("gpu_model", pa.string()), ("parse_error", pa.string()), ("gpu_index_text", pa.string()),
])  # fmt: skip

# A timestamp text with its own offset after the time of day (Z, +01:00, +0100, +01): the
# rule of sql/macros/has_offset.sql, by which the jobs' times are typed
_OFFSET = r"\d:\d\d(:\d\d(\.\d*)?)?(Z|[+-]\d\d(:?\d\d)?)$"
# ts as text typed: naive UTC when it has an offset, else naive as written (local time)
_TEXT_TS = (
    "case when regexp_matches(ts, $offset) then timezone('UTC', try_cast(ts as timestamptz)) "
    "else try_cast(ts as timestamp) end"
)

# One chunk of samples CSV rows (text), typed with the casts the rollup applies to canonical
# Parquet (sql/rollup/day_samples.sql), so that a CSV gives the samples its Parquet twin
# gives. A value that is there but does not cast is the row's parse_error, naming the field
# (the rollup rejects the row with it); a blank one is NULL, as in Parquet. ts: naive UTC
# when the text has an offset, else as written (local_ts: local time, made UTC by _ZONED
# unless the cluster's zone is UTC).
_TYPE_SAMPLES = (
    """
with timed as (
    select *, regexp_matches(ts, $offset) as has_offset, """
    + _TEXT_TS
    + """ as typed_ts
    from chunk
)

select
    typed_ts as ts,
    node,
    try_cast(gpu_index as integer) as gpu_index,
    try_cast(util_pct as double) as util_pct,
    try_cast(mem_used_mib as double) as mem_used_mib,
    try_cast(power_w as double) as power_w,
    line as source_line,
    job_id,
    gpu_uuid,
    gpu_model,
    -- a GPU index that is no number, as written: the reject's raw shows it
    -- (sql/rollup/day_sample_rejects.sql)
    case when try_cast(gpu_index as integer) is null then gpu_index end as gpu_index_text,
    coalesce(parse_error, case
        when ts is not null and typed_ts is null
            then format('field ts: ''{}'' is not a timestamp', ts)
        when gpu_index is not null and try_cast(gpu_index as integer) is null
            then format('field gpu_index: ''{}'' is not a GPU index', gpu_index)
        when util_pct is not null and try_cast(util_pct as double) is null
            then format('field util_pct: ''{}'' is not a number', util_pct)
        when mem_used_mib is not null and try_cast(mem_used_mib as double) is null
            then format('field mem_used_mib: ''{}'' is not a number', mem_used_mib)
        when power_w is not null and try_cast(power_w as double) is null
            then format('field power_w: ''{}'' is not a number', power_w)
    end) as parse_error,
    not has_offset as local_ts,
    line as row_id
from timed
"""
)

# The rows of the temporary table `samples` (ts naive; local_ts: whether it is local time in
# $zone; row_id: the row's place in the file) with ts in UTC, in file order. Local time to UTC
# is worked out once per local minute (zone rules change on whole minutes). A local minute of
# the hour repeated when clocks go back has two instants an hour apart: a GPU's rows take the
# earlier one until its rows step back in time that day, then the later one (as nvidia_smi.py).
_ZONED = f"""
with minutes as (
    select minute, timezone('UTC', timezone($zone, minute)) as guess
    from (select distinct date_trunc('minute', ts) as minute from samples where local_ts)
    where minute is not null
),

{LOCAL_MINUTE_INSTANTS},

placed as (
    select s.*, i.guess, i.earlier, i.later, s.ts - i.minute as past_minute
    from samples as s
    left join instants as i on s.local_ts and i.minute = date_trunc('minute', s.ts)
),

repeated as (
    -- the rows in a repeated hour, and whether their GPU's rows have stepped back that day
    select
        row_id,
        count(*) filter (steps_back) over (
            partition by node, gpu_index, ts::date order by row_id
        ) > 0 as second_pass
    from (
        select
            row_id,
            node,
            gpu_index,
            ts,
            ts < lag(ts) over (partition by node, gpu_index order by row_id) as steps_back
        from placed
        where earlier is not null or later is not null
    )
)

select p.* exclude (guess, earlier, later, past_minute, local_ts, row_id) replace (
    case
        when not p.local_ts or p.guess is null then p.ts
        when r.second_pass then coalesce(p.later, p.guess) + p.past_minute
        else coalesce(p.earlier, p.guess) + p.past_minute
    end as ts
)
from placed as p
left join repeated as r using (row_id)
order by p.row_id
"""


def samples_to_parquet(path: Path, out: Path, settings: ClusterSettings) -> int:
    """Convert one canonical samples CSV (plain or gzipped) to canonical samples Parquet at
    `out`, streaming in a UTC cluster (else the rows are held, in DuckDB, to be put in UTC
    GPU by GPU); returns the rows written (one per data row: none is dropped)."""
    utc = is_utc(settings.scheduler_timezone)
    rows_written = 0
    con = duckdb.connect()
    try:
        con.execute("set TimeZone = 'UTC'")
        with pq.ParquetWriter(out, SAMPLE_PARQUET_SCHEMA) as writer:
            for number, chunk in enumerate(_sample_text_chunks(path)):
                con.register("chunk", chunk)
                typed = con.sql(_TYPE_SAMPLES, params={"offset": _OFFSET}).to_arrow_table()
                con.unregister("chunk")
                rows_written += typed.num_rows
                if utc:
                    _write_table(writer, typed)
                    continue
                con.register("typed", typed)
                add = "insert into samples" if number else "create temp table samples as"
                con.execute(f"{add} select * from typed")
                con.unregister("typed")
            if not utc:
                _write_zoned(con, writer, settings.scheduler_timezone)
    finally:
        con.close()
    return rows_written


def _write_table(writer: pq.ParquetWriter, table: pa.Table) -> None:
    """Write `table`'s columns of the writer's schema, cast to it."""
    writer.write_table(table.select(writer.schema.names).cast(writer.schema))


def _write_zoned(con: duckdb.DuckDBPyConnection, writer: pq.ParquetWriter, zone: str) -> None:
    """Write the rows of the temporary table `samples` with ts in UTC (`_ZONED`), in batches."""
    reader = con.sql(_ZONED, params={"zone": zone}).to_arrow_reader()
    for batch in reader:
        _write_table(writer, pa.Table.from_batches([batch]))


def parquet_read_in_place(path: Path, settings: ClusterSettings) -> bool:
    """Whether the rollup reads a canonical samples Parquet file as it is: its `ts` is an
    instant (TIMESTAMP WITH TIME ZONE, isAdjustedToUTC: DuckDB's UTC session casts it to naive
    UTC), naive TIMESTAMP of a cluster whose zone is UTC (the rollup's hot path: its time
    range reaches the Parquet scan), or neither a time nor text (rejected as it is). Naive
    TIMESTAMP of a cluster in another zone, and text (which may carry offsets), are converted
    (`parquet_samples_to_parquet`)."""
    kind = _ts_kind(pq.read_schema(path))
    return (
        kind == "other"
        or kind == "instant"
        or (kind == "naive" and is_utc(settings.scheduler_timezone))
    )


def _ts_kind(schema: pa.Schema) -> str:
    """What a samples Parquet file's `ts` column (any case) holds: instant, naive, text or
    other."""
    kind = next((field.type for field in schema if field.name.lower() == "ts"), None)
    if isinstance(kind, pa.DictionaryType):
        kind = kind.value_type
    if kind is not None and pa.types.is_timestamp(kind):
        return "naive" if kind.tz is None else "instant"
    if kind is not None and (
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    ):
        return "text"
    return "other"


# A canonical samples Parquet file's rows with ts naive (local_ts: whether it is local time;
# text typed as _TYPE_SAMPLES types it) and their place in the file (row_id), for _ZONED; a
# row without a source_line gets the number the rollup names a row read in place by (from 1).
_PARQUET_SAMPLES = """
create temp table samples as
select * exclude (file_row_number) replace ({replaced}), {added}
from read_parquet($path, file_row_number = true)
"""


def parquet_samples_to_parquet(path: Path, out: Path, settings: ClusterSettings) -> int:
    """Convert a canonical samples Parquet file that `parquet_read_in_place` does not read as it
    is to one with ts in naive UTC, its other columns as they were (and source_line); returns
    the rows written."""
    schema = pq.read_schema(path)
    kind = _ts_kind(schema)
    text = kind == "text"
    replaced = [f"{_TEXT_TS if text else 'try_cast(ts as timestamp)'} as ts"]
    added = [
        "not regexp_matches(ts, $offset) as local_ts"
        if text
        else f"{'true' if kind == 'naive' else 'false'} as local_ts",
        "file_row_number as row_id",
    ]
    line = "file_row_number + 1"
    if "source_line" in {field.name.lower() for field in schema}:
        replaced.append(f"coalesce(source_line, {line}) as source_line")
    else:
        added.append(f"{line} as source_line")
    zone = settings.scheduler_timezone
    utc = is_utc(zone)
    select = "select * exclude (local_ts, row_id) from samples order by row_id" if utc else _ZONED
    con = duckdb.connect()
    try:
        con.execute("set TimeZone = 'UTC'")
        con.execute(
            _PARQUET_SAMPLES.format(replaced=", ".join(replaced), added=", ".join(added)),
            {"path": str(path), **({"offset": _OFFSET} if text else {})},
        )
        copy = f"copy ({select}) to '{_quoted(out)}' (format parquet)"
        return con.execute(copy, {} if utc else {"zone": zone}).fetchone()[0]
    finally:
        con.close()


def _quoted(path: Path) -> str:
    # COPY takes no bound file name; the path is ours (the converter's cache), not input text
    return path.as_posix().replace("'", "''")


def _sample_text_chunks(path: Path) -> Iterator[pa.Table]:
    """The rows of `read_rows` as tables of `_SAMPLE_CHUNK_ROWS` rows, and always one table
    (empty for a file without rows), so that the Parquet file has its schema."""
    rows: list[dict] = []
    for row in read_rows(path, (*SAMPLE_COLUMNS, *OPTIONAL_SAMPLE_COLUMNS)):
        rows.append(row)
        if len(rows) == _SAMPLE_CHUNK_ROWS:
            yield pa.Table.from_pylist(rows, schema=_SAMPLE_TEXT_SCHEMA)
            rows = []
    yield pa.Table.from_pylist(rows, schema=_SAMPLE_TEXT_SCHEMA)


def _read_parquet_rows(path: Path, columns: tuple[str, ...]) -> Iterator[dict[str, str | None]]:
    table = pq.read_table(path)
    names = {name.lower(): name for name in table.column_names}
    data = {name: table.column(names[name]).to_pylist() for name in columns if name in names}
    for index in range(table.num_rows):
        row = {name: _text(values[index]) for name, values in data.items()}
        row["line"] = index + 1
        row["raw"] = repr({name: values[index] for name, values in data.items()})
        row["parse_error"] = None
        yield row


def _text(value: object) -> str | None:
    if value is None:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


FORMATS = [
    ExportFormat(
        name="canonical_jobs",
        kind="jobs",
        expected="canonical jobs CSV/Parquet (job_id, account, gpus, start_time, end_time, state)",
        sniff=_has_columns(_REQUIRED_JOB_COLUMNS),
        read_rows=_read_jobs,
        read_table=_read_jobs_table,
    ),
    ExportFormat(
        name="canonical_allocations",
        kind="allocations",
        expected="canonical allocations CSV/Parquet (job_id, node, gpu_index)",
        # `state`: a jobs file; `ts`, `util_pct`: GPU samples (which may name job_id too)
        sniff=_has_columns(set(ALLOCATION_COLUMNS), frozenset({"state", "ts", "util_pct"})),
        read_rows=_read_allocations,
        read_table=_read_allocations_table,
    ),
    # GPU samples as Parquet, read in place unless its times need putting in UTC
    # (parquet_read_in_place), or as CSV, converted once to the same Parquet
    *(
        ExportFormat.of_samples(
            name=name,
            expected=f"canonical GPU samples {encoding} (ts, node, gpu_index, util_pct, ...)",
            sniff=_has_columns(_REQUIRED_SAMPLE_COLUMNS, suffixes=(suffix,)),
            to_parquet=converter,
            util_metric=CANONICAL_UTIL_METRIC,
            read_in_place=in_place,
        )
        for name, encoding, suffix, converter, in_place in (
            (
                "canonical_samples",
                "Parquet",
                ".parquet",
                parquet_samples_to_parquet,
                parquet_read_in_place,
            ),
            ("canonical_samples_csv", "CSV", ".csv", samples_to_parquet, None),
        )
    ),
]
