"""GPU telemetry: daily Parquet rollups of the samples, and the billing month's view of them.

Each UTC day is rolled up on its own (`roll_up_days`, the daily `gpu_sample_rollup` asset) in
an in-memory DuckDB, never the warehouse, so days can run in parallel processes:

    <telemetry_dir>/cluster=<c>/day=<YYYY-MM-DD>/samples_<k>_0.parquet  the samples of chunk k
    <telemetry_dir>/cluster=<c>/day=<YYYY-MM-DD>/hours_<k>_0.parquet    their sums per series-hour
    <telemetry_dir>/quality/day=<YYYY-MM-DD>/sample_rejects.parquet      its rejected rows
    <telemetry_dir>/quality/day=<YYYY-MM-DD>/sample_file_counts.parquet  its counts per file
    <telemetry_dir>/quality/day=<YYYY-MM-DD>/sample_series.parquet       each series' metric, step
    <telemetry_dir>/quality/day=<YYYY-MM-DD>/sample_nodes.parquet        the catalog it applied

A sample names its series by series_key (sql/macros/series_key.sql) only: the series file has
the names, the hours file the day's idle threshold.

A large day is rolled up in chunks of nodes, one after the other (`node_chunks`), so that each
fits DuckDB's memory; most days are one chunk. A day rolled up alone writes a chunk's files
while it reads the next (`ChunkWriter`).

A day is written to a staging folder and moved into place once complete, so a failed day leaves
the previous output; its quality folder moves last and marks the day as rolled up. The monthly
tables sample_rejects, sample_file_counts and sample_series load the rejects, counts and series
of the days a billing month overlaps into the warehouse; attribution reads the samples in place.

Staging folders and partial files carry the name of their process (pipelines/leftovers.py):
each rollup run first removes those of dead runs, e.g. of a rollup killed mid-day.
"""

from __future__ import annotations

import collections
import datetime as dt
import functools
import hashlib
import inspect
import itertools
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.catalog import Catalog
from pipelines.checkpoints import checkpoint
from pipelines.defs.ingest.tables import write_arrow, write_rows, write_table
from pipelines.defs.partitions import FIRST_DAY
from pipelines.defs.resources import ChargebackResource, prepare_connection
from pipelines.landing import ExportFile, decompression_errors, discover
from pipelines.leftovers import owned_name, replace_text
from pipelines.months import BillingMonth
from pipelines.sql import bind, create_table, run, sql_text

# Every column a canonical samples file may carry: one empty file with all of them joins every
# read, so that optional columns exist (as NULL) even when no export has them.
SAMPLE_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us")), ("node", pa.string()), ("gpu_index", pa.int32()),
    ("util_pct", pa.float64()), ("mem_used_mib", pa.float64()), ("power_w", pa.float64()),
    ("source_line", pa.int64()), ("job_id", pa.string()), ("gpu_uuid", pa.string()),
    ("gpu_model", pa.string()), ("pod", pa.string()), ("namespace", pa.string()),
    # which metric util_pct came from (DCGM: GR_ENGINE_ACTIVE beats GPU_UTIL; 'none' for a
    # memory- or power-only series) and why a converted row cannot be read
    ("util_metric", pa.string()), ("parse_error", pa.string()),
    # DCGM on a MIG GPU: the instance a row measures (GPU_I_ID) and its compute slices
    ("gpu_instance", pa.string()), ("gpu_instance_slices", pa.int32()),
    # a GPU index as the export wrote it where it is no number (DCGM's `gpu` label), so that
    # the reject's raw keeps it
    ("gpu_index_text", pa.string()),
])  # fmt: skip

# The columns of the daily rollup files (gpu_sample_rollup.sql), for a month without samples.
ROLLUP_SCHEMA = pa.schema([
    ("series_key", pa.uint64()), ("hour", pa.timestamp("us")), ("ts", pa.timestamp("us")),
    ("util_pct", pa.float64()), ("mem_used_mib", pa.float64()), ("power_w", pa.float64()),
    ("cover_ms", pa.int64()), ("run", pa.int64()), ("silent_until", pa.timestamp("us")),
    ("cluster", pa.string()), ("day", pa.date32()),
])  # fmt: skip

# The columns of the rollup's sums per series-hour (gpu_sample_hours.sql), for a month without.
HOURS_SCHEMA = pa.schema([
    ("series_key", pa.uint64()), ("hour", pa.timestamp("us")), ("run", pa.int64()),
    ("samples", pa.int64()), ("cover_ms", pa.int64()),
    ("util_weighted_ms", pa.decimal128(18, 3)), ("last_ts", pa.timestamp("us")),
    ("last_cover_ms", pa.int64()), ("last_util_pct", pa.float64()),
    ("mem_cover_ms", pa.int64()), ("mem_mib_ms", pa.int64()), ("peak_mem_mib", pa.int64()),
    ("power_mw_ms", pa.int64()), ("power_cover_ms", pa.int64()), ("last_mem_mib", pa.int64()),
    ("last_power_mw", pa.int64()), ("idle_threshold_pct", pa.float64()),
])  # fmt: skip

SOURCES_SCHEMA = pa.schema([
    ("path", pa.string()), ("file", pa.string()), ("cluster", pa.string()),
    ("file_id", pa.int32()),
    # the utilisation metric of the file's rows that do not carry DCGM GR_ENGINE_ACTIVE (its
    # format's: ExportFormat.util_metric), which the rollup names each series' samples by
    ("util_metric", pa.string()),
])  # fmt: skip

# The telemetry step the catalog declares for a cluster (settings `telemetry: {step_s}`, the
# cluster's own or the catalog-wide one), for the rollup; a cluster without one is absent.
DECLARED_STEPS_SCHEMA = pa.schema([("cluster", pa.string()), ("step_ms", pa.int64())])

# The GPUs of each node of the inventory (catalog nodes.csv), against which the rollup judges a
# sample's GPU index; a node of no inventory is absent, and any index of it is taken.
INVENTORY_GPUS_SCHEMA = pa.schema(
    [("cluster", pa.string()), ("node", pa.string()), ("gpus", pa.int32())]
)


def roll_up_days(
    chargeback: ChargebackResource,
    catalog: Catalog,
    days: list[dt.date],
    on_day: Callable[[int, dt.date, dict[str, int], float], None] | None = None,
) -> dict[str, dict[str, int]]:
    """Write the daily rollup (samples, rejects, counts per file) of each UTC day in `days`;
    `on_day(k, day, counts, seconds)` after each (the k-th, from 1).

    Returns the rows written per day: samples, rejected rows, files with rows that day.
    """
    landing_dir, telemetry_dir = Path(chargeback.landing_dir), chargeback.telemetry_dir
    chargeback.remove_dead_leftovers()
    sources = sample_sources(landing_dir, telemetry_dir, catalog)
    files = readable_sample_files(telemetry_dir, [source["path"] for source in sources])
    per_day: dict[str, dict[str, int]] = {}
    with chargeback.scratch() as con:
        write_table(con, "sample_sources", sources, SOURCES_SCHEMA)
        write_table(con, "declared_steps", declared_steps(sources, catalog), DECLARED_STEPS_SCHEMA)
        write_table(con, "inventory_gpus", inventory_gpus(catalog), INVENTORY_GPUS_SCHEMA)
        spans = sample_file_spans(con, files, cache=telemetry_dir / "spans")
        owners = unreadable_row_owners(spans, landing_dir, sources)
        estimated = estimated_day_samples(spans, days)
        at_once = days_at_once(estimated, days)
        cursors: list[duckdb.DuckDBPyConnection] = []
        local = threading.local()

        def roll_up(day: dt.date) -> tuple[dict[str, int], float]:
            # each thread its own cursor: a day's temporary tables and the macros are the
            # connection's own
            if not hasattr(local, "con"):
                local.con = prepare_connection(con.cursor())
                cursors.append(local.con)
            started = time.perf_counter()
            owned = sorted(path for path, owner in owners.items() if owner == day)
            day_files = files_of_day(files, spans, day, owned)
            counts = _roll_up_day(
                local.con, telemetry_dir, day, day_files, owned, catalog, estimated[day],
                overlap_writes=at_once == 1,
            )  # fmt: skip
            return counts, time.perf_counter() - started

        try:
            with ThreadPoolExecutor(max_workers=at_once) as pool:
                # at most `at_once` days submitted ahead: a failed day stops the rollup with
                # only the days already running left to finish
                waiting = iter(days)
                running = collections.deque(
                    (day, pool.submit(roll_up, day)) for day in itertools.islice(waiting, at_once)
                )
                k = 0
                while running:
                    day, future = running.popleft()
                    counts, seconds = future.result()
                    if (following := next(waiting, None)) is not None:
                        running.append((following, pool.submit(roll_up, following)))
                    k += 1
                    per_day[day.isoformat()] = counts
                    if on_day is not None:
                        on_day(k, day, counts, seconds)
        finally:
            for cursor in cursors:
                cursor.close()
    return per_day


# Days of at most this many samples (estimated from the files' spans) are rolled up two at once,
# each on a cursor of its own: such a day is largely DuckDB's fixed cost per statement, which
# a second day overlaps (the demo's 91 days: 42-43.5 -> 31-33 s in paired runs). So are days
# rolled up in chunks (more than CHUNK_SAMPLES): a chunk's statements leave the second core
# idle at times (its rows come from one or two row groups of a file, which one thread scans),
# and each day holds one chunk at a time: four 10,000-GPU days took 28.0-31.0 s a day one by
# one, 24.6-25.2 s two at once, at 1.2-1.3 and 1.7-1.8 GiB peak RSS (two runs of
# benchmarks/rollup_day.py --days 4 --at-once 1, then 2). Since a day alone writes a chunk
# while it reads the next (ChunkWriter), one by one took 21.8 s a day at 1,468 MiB, two at
# once 21.1 s at 1,858 MiB (one pair of the same runs). Days between run one at a time: eight
# 1.44 M-sample days of the bench month two at once gained 2-9 % (three pairs) for 610-630 ->
# 860-950 MiB, near the bench's 1 GiB target. Days at once share the scratch database's
# memory limit.
SMALL_DAY_SAMPLES = 1_000_000


def estimated_day_samples(
    spans: dict[str, FileSpan], days: list[dt.date]
) -> collections.Counter[dt.date]:
    """The samples of each of `days`, estimated as its files' plausible rows spread evenly over
    the UTC days each file spans."""
    per_day: collections.Counter[dt.date] = collections.Counter()
    for span in spans.values():
        if span.first_ts is None or span.last_ts is None:
            continue
        first, last = span.first_ts.date(), span.last_ts.date()
        share = span.plausible_rows / ((last - first).days + 1)
        for day in days:
            if first <= day <= last:
                per_day[day] += share
    return per_day


def days_at_once(estimated: collections.Counter[dt.date], days: list[dt.date]) -> int:
    """How many of `days` to roll up at once: two when each is small (SMALL_DAY_SAMPLES of
    their `estimated_day_samples`) or the largest is rolled up in chunks (CHUNK_SAMPLES: each
    day then holds a chunk at most), else one."""
    largest = max((estimated[day] for day in days), default=0)
    overlap = largest <= SMALL_DAY_SAMPLES or largest > CHUNK_SAMPLES
    return 2 if overlap and len(days) > 1 else 1


def declared_steps(sources: list[dict], catalog: Catalog) -> list[dict]:
    """The declared telemetry step in ms of each cluster of `sources` that has one."""
    clusters = sorted({source["cluster"] for source in sources})
    return [
        {"cluster": cluster, "step_ms": step_ms}
        for cluster in clusters
        if (step_ms := catalog.settings.telemetry_step_ms(cluster)) is not None
    ]


def inventory_gpus(catalog: Catalog) -> list[dict]:
    """The GPU count of each node of the inventory (none without nodes.csv)."""
    return [
        {"cluster": node.cluster, "node": node.node, "gpus": node.gpus}
        for node in catalog.nodes or []
    ]


@dataclass(frozen=True)
class FileSpan:
    """A samples file's first and last plausible timestamp (None: it has none) and its rows
    without one: no readable timestamp, or one outside the file's plausible window (before
    1970, after 2099, or more than 365 days from its median sample day; see
    sql/rollup/sample_file_spans.sql)."""

    first_ts: dt.datetime | None
    last_ts: dt.datetime | None
    unreadable_rows: int
    plausible_rows: int  # the rows with a plausible timestamp
    # the plausible rows of each UTC day that has some, in day order
    day_rows: tuple[tuple[dt.date, int], ...] = ()


def sample_file_spans(
    con: duckdb.DuckDBPyConnection,
    files: list[str],
    cache: Path | None = None,
    *,
    temporary: bool = False,
) -> dict[str, FileSpan]:
    """The span of every file of `files` that has rows, in one read of their timestamp column
    (a file without rows has no span, and no day reads it). Leaves the table
    sample_file_spans (of the connection's database, not temporary: every day's cursor
    reads it), whose windows of plausible timestamps day_samples.sql reads.

    `cache`: a folder of the spans found before, one small file per samples file as it was
    then (`_file_key`: its path, size, modification time and inode, and the SQL that found
    it), so that a file's span is found once, not by every run (a daily run would otherwise
    read the timestamps of every file of the landing folder again)."""
    sql_key = sql_text("rollup/sample_file_spans").encode()
    keys = {path: _file_key(Path(path), sql_key) for path in files} if cache else {}
    known = {
        path: _span_from_json(found.read_text(encoding="utf-8"))
        for path, key in keys.items()
        if (found := cache / f"{key}.json").is_file()
    }
    unknown = [path for path in files if path not in known]
    if unknown:
        create_table(
            con, "sample_file_spans", "rollup/sample_file_spans", {"files": unknown},
            temporary=temporary,
        )  # fmt: skip
    else:
        write_arrow(con, "sample_file_spans", SPANS_SCHEMA.empty_table(), temporary=temporary)
    if known:
        rows = [{"path": path, **span} for path, span in known.items()]
        con.register("known_spans", pa.Table.from_pylist(rows, schema=SPANS_SCHEMA))
        try:
            con.execute("insert into sample_file_spans by name select * from known_spans")
        finally:
            con.unregister("known_spans")
    if cache and unknown:
        found_now = con.execute(
            "select * from sample_file_spans where list_contains($unknown, path)",
            {"unknown": unknown},
        )
        names = [column[0] for column in found_now.description]
        cache.mkdir(parents=True, exist_ok=True)
        for values in found_now.fetchall():
            span = dict(zip(names, values, strict=True))
            entry = cache / f"{keys[span.pop('path')]}.json"
            replace_text(entry, json.dumps(span, default=lambda value: value.isoformat()))
    rows = con.execute(
        "select path, first_ts, last_ts, unreadable_rows, plausible_rows, day_rows "
        "from sample_file_spans order by path"
    ).fetchall()
    return {
        path: FileSpan(*span, tuple((row["day"], row["rows"]) for row in day_rows))
        for path, *span, day_rows in rows
    }


# The columns of sample_file_spans (sql/rollup/sample_file_spans.sql), for the cached spans
SPANS_SCHEMA = pa.schema([
    ("path", pa.string()), ("first_ts", pa.timestamp("us")), ("last_ts", pa.timestamp("us")),
    ("plausible_rows", pa.int64()), ("unreadable_rows", pa.int64()),
    ("median_day", pa.date32()), ("ts_from", pa.timestamp("us")), ("ts_until", pa.timestamp("us")),
    ("day_rows", pa.list_(pa.struct([("day", pa.date32()), ("rows", pa.int64())]))),
])  # fmt: skip


def _span_from_json(text: str) -> dict[str, Any]:
    """A cached span (a row of sample_file_spans but its path), its times typed again."""
    span = json.loads(text)
    for name in ("first_ts", "last_ts", "ts_from", "ts_until"):
        if span[name] is not None:
            span[name] = dt.datetime.fromisoformat(span[name])
    if span["median_day"] is not None:
        span["median_day"] = dt.date.fromisoformat(span["median_day"])
    for row in span["day_rows"]:
        row["day"] = dt.date.fromisoformat(row["day"])
    return span


def _file_key(path: Path, *extra: bytes) -> str:
    """A name for a file as it is now: its path, size, modification time and inode (a file
    written anew, or replaced by a rename, gets another), and `extra`. As git's index does, a
    file is taken to be unchanged while these are."""
    stat = path.stat()
    digest = hashlib.sha256(
        f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ino}".encode()
    )
    for part in extra:
        digest.update(b"\0" + part)
    return digest.hexdigest()[:32]


def files_of_day(
    files: list[str], spans: dict[str, FileSpan], day: dt.date, owned_files: list[str]
) -> list[str]:
    """The files a day's rollup reads: those with samples in the UTC day or the next (the
    look-ahead), the files whose unreadable rows the day owns, and, last, the schema file.

    Without this each day opened every file of the landing folder, and read every file whose
    timestamps Parquet statistics cannot rule out (text timestamps, or none): 13 % of the
    rollup time of the 1,000-GPU bench month, more when the folder holds several months.
    """
    begin = dt.datetime.combine(day, dt.time())
    look_ahead_end = begin + dt.timedelta(days=2)
    *samples_files, schema_file = files
    return [
        path
        for path in samples_files
        if path in owned_files
        or (
            (span := spans.get(path)) is not None
            and span.first_ts is not None
            and span.first_ts < look_ahead_end
            and span.last_ts >= begin
        )
    ] + [schema_file]


# A day of more samples than this (estimated from the files' spans) is rolled up in chunks of
# nodes of about this many samples each, one after the other: a chunk's statements then fit
# DuckDB's memory limit instead of spilling. A 10,000-GPU day (57.6 M samples at 15 s, one file
# sorted by node) at 2GB took 60-66 s in one chunk, 31-34 s in chunks of 2, 4 or 8 M samples
# (benchmarks/rollup_day.py); 4 M peaked at 1.2 GiB RSS, 8 M at 1.7. The 1,000-GPU bench day
# (1.44 M) stays one chunk.
CHUNK_SAMPLES = 4_000_000


def node_chunks(
    con: duckdb.DuckDBPyConnection, params: dict[str, Any], estimated_samples: float
) -> list[tuple[str | None, str | None]]:
    """The chunks a day's rollup reads one after the other, as `(node_from, node_until)`: the
    nodes (as written) in `[node_from, node_until)`, None unbounded; one unbounded chunk for a
    day of at most CHUNK_SAMPLES `estimated_samples`, or whose node names are not all plain
    (sql/rollup/day_node_rows.sql). Cut between nodes so that the chunks' samples in the day are
    about even."""
    whole_day = [(None, None)]
    if estimated_samples <= CHUNK_SAMPLES:
        return whole_day
    nodes = run(con, "rollup/day_node_rows", params).fetchall()
    total = sum(day_rows for _, day_rows, _ in nodes)
    if total <= CHUNK_SAMPLES or not all(plain for _, _, plain in nodes):
        return whole_day
    wanted = -(-total // CHUNK_SAMPLES)
    cuts: list[str | None] = []
    seen = 0
    for node, day_rows, _ in nodes:
        if node is not None and seen >= total * (len(cuts) + 1) / wanted:
            cuts.append(node)
        seen += day_rows
    bounds = [None, *cuts, None]
    return list(itertools.pairwise(bounds))


def _roll_up_day(
    con: duckdb.DuckDBPyConnection,
    telemetry_dir: Path,
    day: dt.date,
    files: list[str],
    owned_files: list[str],
    catalog: Catalog,
    estimated_samples: float,
    *,
    overlap_writes: bool = False,
) -> dict[str, int]:
    """Roll up one UTC day chunk by chunk (node_chunks) into a staging folder, then publish it.

    Each chunk's samples go to `samples_<chunk>_0.parquet` (and its sums per series-hour to
    `hours_<chunk>_0.parquet`); the day's quality files gather every chunk's rows. A series
    whose step waits for the day's cluster step (sql/rollup/series_steps.sql) is carried into
    the next chunk, and the last chunk writes it.

    `overlap_writes`: a chunk's files are written on a cursor and thread of their own while
    `con` reads the next chunk (ChunkWriter), for a day rolled up alone."""
    settings = catalog.settings
    day_start = dt.datetime.combine(day, dt.time())
    month = BillingMonth.containing(day_start, settings.billing_timezone)
    next_month = month.next()
    params = {
        "files": files,
        "owned_files": owned_files,
        "day_start": day_start,
        "day_end": day_start + dt.timedelta(days=1),
        "billing_month": month.first_day,
        "next_billing_month": next_month.first_day,
        "next_billing_month_at": month.end,
        "idle_threshold_pct": float(settings.idle_threshold_pct),
    }
    chunks = node_chunks(con, params, estimated_samples)
    name = owned_name(f"day={day.isoformat()}-{uuid.uuid4().hex[:8]}")
    staging = telemetry_dir / ".staging" / name
    staging.parent.mkdir(parents=True, exist_ok=True)
    # the day's tables that every chunk adds to
    day_tables = ["prior_own_steps", "sample_count_parts", "day_sample_rejects", "day_node_parts"]
    con.execute("create or replace temp table prior_own_steps (cluster varchar, own_step_ms int8)")
    overlap = overlap_writes and len(chunks) > 1
    writer = ChunkWriter(con, staging, f"day_{uuid.uuid4().hex[:8]}", overlap)
    try:
        counts = {"samples": 0}
        series_before = 0
        for number, (node_from, node_until) in enumerate(chunks):
            chunk = {
                **params,
                "node_from": node_from,
                "node_until": node_until,
                "series_before": series_before,
                "last_chunk": number == len(chunks) - 1,
            }
            _read_chunk(con, chunk, writer.tables_of(number), number == 0)
            [(series_before,)] = con.execute(
                "select coalesce(max(series_id), $before) from series_steps",
                {"before": series_before},
            ).fetchall()
            writer.write(chunk, number)
        counts["samples"] = writer.finish()
        quality = staging / "quality" / f"day={day.isoformat()}"
        quality.mkdir(parents=True, exist_ok=True)
        counts["rejected"] = _write_table(
            con, "day_sample_rejects", "billing_month, file, line",
            quality / "sample_rejects.parquet",
        )  # fmt: skip
        counts["files"] = _copy(
            con, "rollup/day_sample_file_counts", params, quality / "sample_file_counts.parquet"
        )
        writer.write_series(quality / "sample_series.parquet")
        _copy(con, "rollup/day_sample_nodes", {}, quality / "sample_nodes.parquet")
        checkpoint("rollup_day_written")
        _publish(staging, telemetry_dir, day)
    finally:
        writer.close()
        shutil.rmtree(staging, ignore_errors=True)
        chunk_tables = ["day_samples", "ordered_samples", "series_steps", "carried_samples"]
        for table in [*chunk_tables, *day_tables]:
            con.execute(f"drop table if exists {table}")
    return counts


def _read_chunk(
    con: duckdb.DuckDBPyConnection, chunk: dict[str, Any], temporary: bool, first: bool
) -> None:
    """Read a chunk of a day (`chunk`: the day's parameters and the chunk's) into its tables
    ordered_samples and series_steps (`temporary` or not: ChunkWriter.tables_of); add its
    quality rows and own steps to the day's tables (created by the `first` chunk) and keep the
    rows of its series that wait for the day's cluster step for the next chunk."""
    create_table(con, "day_samples", "rollup/day_samples", chunk, temporary=temporary)
    if not first:
        con.execute(
            "insert into day_samples by name "
            "select * replace (true as carried) from carried_samples"
        )
    create_table(con, "ordered_samples", "rollup/ordered_samples", chunk, temporary=temporary)
    create_table(con, "series_steps", "rollup/series_steps", chunk, temporary=temporary)
    _add_rows(con, "sample_count_parts", "rollup/sample_count_parts", chunk, first)
    _add_rows(con, "day_sample_rejects", "rollup/day_sample_rejects", chunk, first)
    _add_rows(con, "day_node_parts", "rollup/day_node_parts", chunk, first)
    # the own steps of the series written now: a series that waits is counted where written
    con.execute(
        "insert into prior_own_steps select cluster, own_step_ms from series_steps "
        "where has_own_step and step_ms is not null"
    )
    # the rows of the series that wait for the day's cluster step, for the next chunk
    con.execute(
        "create or replace temp table carried_samples as select * from day_samples "
        "semi join (select series_id from series_steps where step_ms is null) using (series_id)"
    )
    con.execute("drop table day_samples")


class ChunkWriter:
    """Writes each chunk's files (its samples and hours per cluster) and adds its series to the
    day's series (the table day_sample_series, which write_series writes), from the chunk's
    tables ordered_samples and series_steps, one chunk after the other.

    Without `overlap`, on `con`, after each chunk is read, from its temporary tables. With it,
    on a cursor and thread of its own while `con` reads the next chunk: a day's chunks one
    after the other left the second core idle at times (a chunk's rows come from a row group
    or two of a file, which one thread scans), and writing is a third of a chunk's time. A
    10,000-GPU day went 22.7-23.4 -> 20.8-21.4 s, 172-173 -> 186-187 % CPU, 1,210-1,244 ->
    1,407-1,465 MiB peak RSS (benchmarks/rollup_day.py, alternating runs). Each chunk's tables
    are then in a schema of its own, which both cursors read (temporary tables are a cursor's
    own), dropped once its files are written."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, staging: Path, name: str, overlap: bool
    ) -> None:
        # name: the day's, unique in the database; its chunks' schemas are <name>_<chunk>
        self.con, self.staging, self.name = con, staging, name
        self.cursor = prepare_connection(con.cursor()) if overlap else con
        self.pool = ThreadPoolExecutor(max_workers=1) if overlap else None
        self.pending: Future[int] | None = None
        self.samples = 0
        self.schemas: list[str] = []  # created on `con`; each dropped once written, or by close

    def tables_of(self, number: int) -> bool:
        """Make `con` create chunk `number`'s tables where the writer reads them; returns
        whether they are temporary."""
        if self.pool is None:
            return True
        schema = self._schema(number)
        self.con.execute(f"create schema {schema}")
        self.schemas.append(schema)
        self.con.execute(f"set search_path = '{schema},main'")
        return False

    def write(self, chunk: dict[str, Any], number: int) -> None:
        """Write chunk `number` (read last by `con`): now, or on the writer's thread once the
        chunk before it is written."""
        if self.pool is None:
            self.samples += self._write(chunk, number)
            return
        self._wait()
        self.pending = self.pool.submit(self._write, chunk, number, self._schema(number))

    def finish(self) -> int:
        """Wait for the last chunk's files; returns the samples written."""
        self._wait()
        return self.samples

    def write_series(self, target: Path) -> None:
        """Write the day's series, every chunk's, to Parquet at `target`."""
        _write_table(
            self.cursor, "day_sample_series",
            "billing_month, cluster, node, gpu_index, util_metric", target,
        )  # fmt: skip

    def close(self) -> None:
        """Wait for a write still running (a failed day), drop what the chunks left."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            for schema in self.schemas:
                self.cursor.execute(f"drop schema if exists {schema} cascade")
            self.con.execute("reset search_path")
        self.cursor.execute("drop table if exists day_sample_series")
        if self.cursor is not self.con:
            self.cursor.close()

    def _schema(self, number: int) -> str:
        return f"{self.name}_{number}"

    def _wait(self) -> None:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            self.samples += pending.result()

    def _write(self, chunk: dict[str, Any], number: int, schema: str | None = None) -> int:
        con = self.cursor
        if schema is not None:
            con.execute(f"set search_path = '{schema},main'")
        samples = 0
        day = f"day={chunk['day_start'].date().isoformat()}"
        for cluster in _written_clusters(con):
            folder = self.staging / f"cluster={quote(cluster, safe='')}" / day
            folder.mkdir(parents=True, exist_ok=True)
            written = folder / f"samples_{number}_0.parquet"
            samples += _copy(
                con, "rollup/gpu_sample_rollup", {**chunk, "cluster": cluster}, written
            )
            hours = written.with_name(f"hours_{number}_0.parquet")
            _copy(con, "rollup/gpu_sample_hours", {**chunk, "samples_file": str(written)}, hours)
        _add_rows(con, "day_sample_series", "rollup/day_sample_series", chunk, number == 0)
        if schema is None:
            con.execute("drop table ordered_samples")
        else:
            con.execute(f"drop schema {schema} cascade")
            con.execute("reset search_path")
        return samples


def _written_clusters(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The clusters of the chunk's series that have their step (series_steps.sql; the others
    wait for a later chunk): one samples file each, in the cluster's folder.

    Their folders are named as DuckDB's PARTITION_BY names them and its Parquet reader reads
    them back (cluster=<the name percent-encoded>), but each is written by a COPY of its own,
    as a chunk is mostly one cluster's nodes: the samples COPYs of a 10,000-GPU day took
    7.0-7.1 s through PARTITION_BY, 5.3-5.8 s so (benchmarks/rollup_day.py, paired runs); a
    chunk's rows alone, from a table, 0.33-0.37 s against 0.19-0.23 s."""
    return [cluster for (cluster,) in con.execute(
        "select distinct cluster from series_steps where step_ms is not null order by cluster"
    ).fetchall()]  # fmt: skip


def _add_rows(
    con: duckdb.DuckDBPyConnection, table: str, name: str, params: dict[str, Any], first: bool
) -> None:
    """Add the rows of the select in `sql/<name>.sql` to the temporary table `table`, which the
    `first` call creates."""
    if first:
        create_table(con, table, name, params, temporary=True)
        return
    sql = sql_text(name)
    con.execute(f"insert into {table} {sql}", bind(sql, params))


def _write_table(con: duckdb.DuckDBPyConnection, table: str, order: str, target: Path) -> int:
    """COPY the temporary table `table`, its rows in `order`, to Parquet at `target`; returns
    the rows written."""
    return _copy_select(con, f"select * from {table} order by {order}", {}, target)


def _copy(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any], target: Path) -> int:
    """COPY the select of `sql/<name>.sql` to Parquet at `target`; returns the rows written."""
    sql = sql_text(name)
    return _copy_select(con, sql, bind(sql, params), target)


def _copy_select(
    con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any], target: Path
) -> int:
    """COPY the rows of `sql` to Parquet at `target`; returns the rows written."""
    quoted = target.as_posix().replace("'", "''")
    [(rows,)] = con.execute(f"copy ({sql}) to '{quoted}' (format parquet)", params).fetchall()
    return rows


def _publish(staging: Path, telemetry_dir: Path, day: dt.date) -> None:
    """Move a finished day from `staging` into `telemetry_dir`, replacing its earlier output.

    The old quality folder goes first and the new one comes last: while the day is half
    replaced it reads as not rolled up, and the monthly step refuses to use it.
    """
    name = f"day={day.isoformat()}"
    trash = staging.with_name(staging.name + ".old")
    trash.mkdir(parents=True)
    quality = Path("quality") / name
    old = [telemetry_dir / quality, *sorted(telemetry_dir.glob(f"cluster=*/{name}"))]
    for number, folder in enumerate(path for path in old if path.exists()):
        folder.rename(trash / str(number))
    for folder in [*sorted(staging.glob(f"cluster=*/{name}")), staging / quality]:
        target = telemetry_dir / folder.relative_to(staging)
        target.parent.mkdir(parents=True, exist_ok=True)
        folder.rename(target)
    shutil.rmtree(trash, ignore_errors=True)


def unreadable_row_owners(
    spans: dict[str, FileSpan], landing_dir: Path, sources: list[dict]
) -> dict[str, dt.date]:
    """The UTC day that counts the rows without a plausible timestamp (unreadable, or outside
    the file's window) of each samples file that has some: the day of the file's first
    plausible sample; for a file without any, the day its landing file was last modified.

    So each such row is counted (and rejected) once, by a day its file belongs to, never by a
    day that no run rolls up (before plausibility, a point of 1969 made 1969-12-31 the owner,
    and the rows it owned vanished with it).
    """
    landing = {source["path"]: landing_dir / source["file"] for source in sources}
    return {
        path: span.first_ts.date()
        if span.first_ts is not None
        else dt.datetime.fromtimestamp(landing[path].stat().st_mtime, dt.UTC).date()
        for path, span in spans.items()
        if span.unreadable_rows > 0
    }


def write_sample_sources(
    con: duckdb.DuckDBPyConnection, landing_dir: Path, telemetry_dir: Path, catalog: Catalog
) -> list[str]:
    """Every telemetry export as a canonical samples file, as the temporary table
    sample_sources_rows (sql/staging/sample_sources.sql); returns the files to read them by
    (stg_telemetry_files.sql: every export, so that data quality lists one without rows, which
    no day counts, with its 0)."""
    sources = sample_sources(landing_dir, telemetry_dir, catalog)
    write_rows(con, "sample_sources", sources, SOURCES_SCHEMA)
    return readable_sample_files(telemetry_dir, [source["path"] for source in sources])


def rolled_up_days(month: BillingMonth) -> list[dt.date]:
    """The UTC days of `month` the daily rollup has partitions for (from FIRST_DAY on)."""
    first = dt.date.fromisoformat(FIRST_DAY)
    return [day for day in month.utc_days() if day >= first]


def month_quality_files(telemetry_dir: Path, month: BillingMonth) -> dict[str, list[str]]:
    """The rejects, counts per file and series the daily rollups wrote for the UTC days the
    month overlaps (sample_rejects.sql, sample_file_counts.sql, sample_series.sql read them).
    Stops when one of those days is not rolled up, or was rolled up by a release that did not
    write its series."""
    days = rolled_up_days(month)
    quality = [telemetry_dir / "quality" / f"day={day.isoformat()}" for day in days]
    missing = [day.isoformat() for day, folder in zip(days, quality, strict=True)
               if not folder.is_dir()]  # fmt: skip
    if missing:
        raise ValueError(
            f"telemetry of {month.label}: UTC day(s) {', '.join(missing)} not rolled up: "
            "materialise gpu_sample_rollup for them first"
        )
    for name, lacking in (
        ("sample_series.parquet", "each series' metric and step"),
        ("sample_nodes.parquet", "the catalog it judged each node by"),
    ):
        old = [day.isoformat() for day, folder in zip(days, quality, strict=True)
               if not (folder / name).is_file()]  # fmt: skip
        if old:
            raise ValueError(
                f"telemetry of {month.label}: UTC day(s) {', '.join(old)} rolled up by an "
                f"earlier release (without {lacking}): materialise gpu_sample_rollup for these "
                "days again"
            )
    return {
        "reject_files": [str(folder / "sample_rejects.parquet") for folder in quality],
        "count_files": [str(folder / "sample_file_counts.parquet") for folder in quality],
        "series_files": [str(folder / "sample_series.parquet") for folder in quality],
        "node_files": [str(folder / "sample_nodes.parquet") for folder in quality],
    }


def stop_on_days_behind_landing(
    con: duckdb.DuckDBPyConnection,
    landing_dir: Path,
    telemetry_dir: Path,
    month: BillingMonth,
    count_files: list[str],
) -> None:
    """Stop the month when one of its UTC days was rolled up before a telemetry export of it
    landed, changed or left the landing folder: the rows each export (sample_sources) has in
    the day now, from its span (sample_file_spans, cached per file as it is), against the rows
    the day's rollup read from it (`count_files`, the days' sample_file_counts).

    The daily schedule rolls a day up once, the morning after: an export that lands later
    (a node's telemetry shipped a day late, a re-export) would otherwise be in no figure and no
    count of the month. An export that grows with later days (an appended nvidia-smi log)
    keeps its rows in the days before, which stand."""
    if not count_files:
        return
    sources = [
        {"path": path, "file": file, "cluster": cluster}
        for path, file, cluster in con.execute(
            "select path, file, cluster from sample_sources order by path"
        ).fetchall()
    ]
    files = readable_sample_files(telemetry_dir, [source["path"] for source in sources])
    try:
        spans = sample_file_spans(con, files, telemetry_dir / "spans", temporary=True)
    finally:
        con.execute("drop table if exists temp.sample_file_spans")
    owners = unreadable_row_owners(spans, landing_dir, sources)
    days = set(rolled_up_days(month))
    now: collections.Counter[tuple[dt.date, str, str]] = collections.Counter()
    for source in sources:
        if (span := spans.get(source["path"])) is None:
            continue
        export = (source["cluster"], source["file"])
        for day, rows in span.day_rows:
            if day in days:
                now[(day, *export)] += rows
        if (owner := owners.get(source["path"])) in days:
            now[(owner, *export)] += span.unreadable_rows
    then = {
        (day, cluster, file): rows
        for day, cluster, file, rows in con.execute(
            "select day::date, cluster, file, sum(rows_read)::bigint "
            "from read_parquet($files, hive_partitioning = true) group by all",
            {"files": count_files},
        ).fetchall()
    }
    rows = {key: (now.get(key, 0), then.get(key, 0)) for key in now.keys() | then.keys()}
    behind = sorted((*key, *counts) for key, counts in rows.items() if counts[0] != counts[1])
    if behind:
        _stop_on_days_out_of_date(
            month.label,
            {day for day, *_ in behind},
            "rolled up before their telemetry landed or changed",
            [
                f"{file}: {_rows(rows_now)} in {day} now, {rows_then:,} when rolled up"
                for day, _, file, rows_now, rows_then in behind
            ],
        )


def _rows(count: int) -> str:
    return f"{count:,} row" + ("" if count == 1 else "s")


def stop_on_days_rolled_up_by_another_catalog(
    con: duckdb.DuckDBPyConnection, month: BillingMonth, node_files: list[str], catalog: Catalog
) -> None:
    """Stop the month when the catalog now says otherwise than when one of its UTC days was
    rolled up, where that changes the day's figures (`node_files`: the days' sample_nodes,
    day_sample_nodes.sql): a node's GPUs in nodes.csv, against which the day judged its
    series' GPU indexes, when an index the day saw lies between the old count and the new
    (a node of no inventory takes any index); or a cluster's declared telemetry step, which
    each sample of the day stands for.

    A day is rolled up once: without this, correcting nodes.csv or the step after reading the
    month's data quality would change nothing, silently."""
    if not node_files:
        return
    clusters = sorted({cluster for (cluster,) in con.execute(
        "select distinct cluster from read_parquet($files)", {"files": node_files}
    ).fetchall()})  # fmt: skip
    steps = declared_steps([{"cluster": cluster} for cluster in clusters], catalog)
    con.register(
        "catalog_gpus_now", pa.Table.from_pylist(inventory_gpus(catalog), INVENTORY_GPUS_SCHEMA)
    )
    con.register("catalog_steps_now", pa.Table.from_pylist(steps, DECLARED_STEPS_SCHEMA))
    try:
        changed = run(con, "rollup/catalog_changes", {"node_files": node_files}).fetchall()
    finally:
        con.unregister("catalog_gpus_now")
        con.unregister("catalog_steps_now")
    if changed:
        _stop_on_days_out_of_date(
            month.label,
            {day for day, _ in changed},
            "rolled up by another catalog",
            sorted({change for _, change in changed}),
        )


# The differences a stop for days out of date names (the rest are counted)
OUT_OF_DATE_LISTED = 5


def _stop_on_days_out_of_date(
    label: str, days: set[dt.date], why: str, differences: list[str]
) -> NoReturn:
    """Stop the month `label`: its UTC `days` are out of date (`why`), as `differences` say."""
    listed = differences[:OUT_OF_DATE_LISTED]
    if len(differences) > OUT_OF_DATE_LISTED:
        listed.append(f"{len(differences) - OUT_OF_DATE_LISTED} more")
    raise ValueError(
        f"telemetry of {label}: UTC day(s) {', '.join(sorted(d.isoformat() for d in days))} "
        f"{why} ({'; '.join(listed)}): materialise gpu_sample_rollup for these days again"
    )


def check_rollup_columns(
    con: duckdb.DuckDBPyConnection,
    files: list[str],
    columns: tuple[str, ...],
    label: str,
    why: str,
) -> None:
    """Stop the month `label` when rollup files among `files` lack one of `columns` (written
    by an earlier release; `why` says what they lack), naming their days: not a DuckDB binder
    error, nor figures short of what the columns carry."""
    old = [path for (path,) in con.execute(
        "select file_name from parquet_schema($files) group by file_name "
        "having count(*) filter (list_contains($columns, name)) < len($columns) order by 1",
        {"files": files, "columns": list(columns)},
    ).fetchall()]  # fmt: skip
    if old:
        stop_on_old_rollups(label, old, why)


def stop_on_old_rollups(label: str, paths: list[str], why: str) -> None:
    """Stop the month `label`: the rollup files `paths` were written by an earlier release
    (`why`: what they lack); names their days."""
    days = ", ".join(
        sorted({part for path in paths for part in path.split("/") if part.startswith("day=")})
    )
    raise ValueError(
        f"telemetry of {label}: {days} rolled up by an earlier release ({why}): materialise "
        "gpu_sample_rollup for these days again"
    )


def readable_sample_files(telemetry_dir: Path, paths: list[str]) -> list[str]:
    """`paths` plus, last, an empty file with every SAMPLE_SCHEMA column: read together (union
    by name), optional columns exist as NULL even when no samples file has them."""
    return [*paths, str(_empty_parquet(telemetry_dir / "schema", SAMPLE_SCHEMA))]


# Telemetry exports converted at once (`sample_sources`; benchmarks/dcgm_load.py likewise): one
# more than the cores, so that a file's single-threaded JSON parse or Python work leaves no core
# idle. On 2 cores, the demo's 467 exports: 2 at once 32.9-35.3 s, 3 at once 26.3-30.0 s, 4 at
# once 26.9-27.3 s (interleaved runs); the DCGM benchmark's per-metric month 0.86-0.87 M
# samples/s with 2, 0.89-0.95 M with 3 (peak RSS 465-486 -> 570-643 MiB).
CONVERSION_THREADS = min(4, (os.cpu_count() or 1) + 1)


def sample_sources(landing_dir: Path, telemetry_dir: Path, catalog: Catalog) -> list[dict]:
    """Every telemetry export as a canonical samples file: path, landing file, cluster, and
    file_id, the rollup's integer name for the file, numbered in landing file name order (of
    equal samples the last read by file and line wins; an integer sorts faster than a name).

    Files not converted yet are converted a few at once: DuckDB parses one JSON body on one
    thread, so two at once on two cores took the demo's three months (467 files) from 47 s to
    29 s. The first file in name order that cannot be converted stops it, as one by one.
    """
    exports = sorted(discover(landing_dir, "telemetry"), key=lambda export: export.name)

    def convert(export: ExportFile) -> Path:
        return _canonical_samples_file(export, telemetry_dir, catalog)

    with ThreadPoolExecutor(max_workers=CONVERSION_THREADS) as pool:
        paths = list(pool.map(convert, exports))
    return [
        {
            "path": str(path),
            "file": export.name,
            "cluster": export.cluster,
            "file_id": number,
            "util_metric": export.format.util_metric,
        }
        for number, (export, path) in enumerate(zip(exports, paths, strict=True))
    ]


def _canonical_samples_file(export: ExportFile, telemetry_dir: Path, catalog: Catalog) -> Path:
    """The export itself when DuckDB reads it in place, else its canonical Parquet conversion.

    Conversions are cached by the hash of what makes them: the file's content, the converter's
    code and the cluster's settings; a re-run converts nothing again, a changed converter or
    setting converts anew. Which conversion an export has is remembered per export as it is
    now (`_file_key`), so a re-run does not hash the export again either.
    """
    settings = catalog.cluster(export.cluster)
    convert, in_place = export.format.to_parquet, export.format.read_in_place
    # canonical Parquet samples of a UTC cluster, naive times, are read in place: the daily
    # rollup's hot path (its time range reaches the Parquet scan)
    if convert is None or (in_place is not None and in_place(export.path, settings)):
        return export.path
    code = _converter_code(convert)
    # the declared step is the rollup's, not the converter's: changing it converts nothing anew
    made_with = settings.model_dump_json(exclude={"telemetry"}).encode()
    folder = telemetry_dir / "converted" / export.cluster
    # which conversion the export had when it was last seen as it is now: a run does not hash
    # every landing file again (the demo's 783 MB took 0.5 s a run, and a year's landing more)
    seen = folder / "seen" / _file_key(export.path, code, made_with)
    if seen.is_file() and (converted := folder / seen.read_text(encoding="utf-8")).is_file():
        return converted
    digest = hashlib.sha256(bytes.fromhex(export.sha256()))
    digest.update(code)
    digest.update(made_with)
    converted = folder / f"{digest.hexdigest()[:20]}.parquet"
    if not converted.exists():
        converted.parent.mkdir(parents=True, exist_ok=True)
        # a name of its own: days rolled up in parallel may convert the same file at once
        partial = converted.with_name(owned_name(converted.name, ".partial"))
        with decompression_errors(export.path):
            convert(export.path, partial, settings)
        partial.replace(converted)
    seen.parent.mkdir(parents=True, exist_ok=True)
    replace_text(seen, converted.name)
    return converted


@functools.cache
def _converter_code(convert: Callable) -> bytes:
    """The source of the module that holds a format's converter."""
    return Path(inspect.getsourcefile(convert)).read_bytes()


def _empty_parquet(folder: Path, schema: pa.Schema) -> Path:
    """An empty Parquet file with `schema`, named after it (so a changed schema gets a new one)."""
    digest = hashlib.sha256(schema.to_string().encode()).hexdigest()[:12]
    path = folder / f"samples-{digest}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(owned_name(path.name, ".partial"))
        pq.write_table(schema.empty_table(), partial)
        partial.replace(path)
    return path


def month_day_dirs(telemetry_dir: Path, month: BillingMonth) -> list[Path]:
    """The daily rollup folders of every cluster for the UTC days the month touches."""
    days = {f"day={day.isoformat()}" for day in month.utc_days()}
    return [
        day_dir for day_dir in sorted(telemetry_dir.glob("cluster=*/day=*")) if day_dir.name in days
    ]


def month_sample_files(telemetry_dir: Path, month: BillingMonth) -> list[str]:
    """The rollup's samples files of the month, or one empty file when it has no samples."""
    return _month_files(telemetry_dir, month, "samples_*.parquet", ROLLUP_SCHEMA)


def month_hour_files(telemetry_dir: Path, month: BillingMonth) -> list[str]:
    """The rollup's sums per series-hour of the month, or one empty file when it has none."""
    return _month_files(telemetry_dir, month, "hours_*.parquet", HOURS_SCHEMA)


def _month_files(
    telemetry_dir: Path, month: BillingMonth, pattern: str, schema: pa.Schema
) -> list[str]:
    files = [
        str(path)
        for day_dir in month_day_dirs(telemetry_dir, month)
        for path in sorted(day_dir.glob(pattern))
    ]
    return files or [str(_empty_parquet(telemetry_dir / "empty", schema))]
