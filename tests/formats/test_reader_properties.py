"""Property tests (hypothesis): every reader, fed a real fixture of tests/fixtures/ mutated
(truncated at any byte, bytes flipped, re-encoded as Latin-1 or UTF-16, CRLF line ends, blank
lines inserted, a 1 MB field inserted, a stray quote opening a field; then gzipped or not),
either stops with the one-line landing error naming the file, or accounts for every input row:

- scheduler exports go through the real load (the `scheduler_exports` step: recognition, the
  readers, the SQL staging): the export's rows in stg_*_records are those stg_scheduler_files
  says were read, each non-blank data line of a line-based export is exactly one row (a pod
  list: one row per item), and a CSV's fast path reads what its row reader reads;
- telemetry exports go through the real conversion and daily rollup (`sample_sources`,
  `roll_up_days` of every day the file has rows in, and the day owning its unreadable rows):
  the per-file counts read exactly the converted rows, read = loaded + rejected, the rejects
  are the rejected rows, and each non-blank sample line is one converted row.

Examples are derandomised (the same in CI every run) and bounded (MAX_EXAMPLES per reader).
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.catalog import Catalog, load_catalog
from pipelines.defs.ingest.assets import catalog as catalog_step
from pipelines.defs.ingest.assets import scheduler_exports
from pipelines.defs.ingest.telemetry import (
    readable_sample_files,
    roll_up_days,
    sample_file_spans,
    sample_sources,
    unreadable_row_owners,
)
from pipelines.defs.resources import prepare_connection
from pipelines.formats import canonical, open_binary
from pipelines.landing import LandingError, discover
from tests.conftest import month_run, resource_for
from tests.ingest.test_catalog_and_landing import catalog_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MAX_EXAMPLES = 40
MEGABYTE = 2**20

# (reader, area, the real fixture, lines of it used: None for all)
READERS = {
    "sacct": ("scheduler", "xdmod-slurm/phillips.log", 40),
    "pod_json": ("scheduler", "kubernetes/pods-2026-11-10T06-00-00Z.json", None),
    "canonical_jobs": ("scheduler", "canonical/jobs.csv", None),
    "canonical_allocations": ("scheduler", "canonical/allocations.csv", None),
    "dcgm_json": ("telemetry", "dcgm/gpu-a01_2026-11-01.json", None),
    "nvidia_smi": ("telemetry", "nvidia-smi/gpu-a01_2026-11.csv", None),
    "canonical_samples": ("telemetry", "canonical/samples.csv", None),
}


def fixture_bytes(reader: str) -> tuple[str, bytes]:
    """(file name, bytes) of a reader's fixture (its first lines, for a large one)."""
    _, fixture, lines = READERS[reader]
    data = (FIXTURES / fixture).read_bytes()
    if lines is not None:
        data = b"".join(data.splitlines(keepends=True)[:lines])
    return Path(fixture).name, data


@dataclass(frozen=True)
class Mutated:
    """A fixture's bytes, mutated as `description` says (which a failing example shows)."""

    description: str
    data: bytes

    def __repr__(self) -> str:
        return f"Mutated({self.description!r}, {len(self.data):,} bytes)"


@st.composite
def mutations(draw: st.DrawFn, data: bytes) -> Mutated:
    """One mutation of `data`, gzipped or not."""
    kinds = ["truncate", "flip", "encode", "crlf", "blank", "field", "quote"]
    kind = draw(st.sampled_from(kinds))
    if kind == "truncate":
        at = draw(st.integers(0, len(data)))
        description, data = f"truncated at byte {at}", data[:at]
    elif kind == "flip":
        # any byte, or one that means something to a reader more often than 1 in 256
        value = st.one_of(st.integers(0, 255), st.sampled_from(b'"\r\n,|:{}[]\x00'))
        flips = draw(st.lists(st.tuples(st.integers(0, len(data) - 1), value),
                              min_size=1, max_size=8))  # fmt: skip
        mutated = bytearray(data)
        for at, value in flips:
            mutated[at] = value
        description, data = f"bytes set {flips}", bytes(mutated)
    elif kind == "encode":
        encoding = draw(st.sampled_from(["latin-1", "utf-16", "utf-16-le", "utf-16-be"]))
        text = data.decode("utf-8")
        description, data = f"encoded {encoding}", text.encode(encoding, errors="replace")
    elif kind == "crlf":
        description, data = "CRLF line ends", data.replace(b"\n", b"\r\n")
    elif kind == "blank":
        lines = data.splitlines(keepends=True)
        blanks = draw(st.lists(st.tuples(st.integers(0, len(lines)),
                                         st.sampled_from([b"\n", b"  \n", b"\t\r\n", b" "])),
                               min_size=1, max_size=4))  # fmt: skip
        for at, blank in sorted(blanks, reverse=True):
            lines.insert(at, blank)
        description, data = f"blank lines {blanks}", b"".join(lines)
    elif kind == "field":
        at = draw(st.integers(0, len(data)))
        description, data = f"1 MB field at byte {at}", data[:at] + b"x" * MEGABYTE + data[at:]
    else:
        # a stray quote opening a field (a name with a quote, a value cut short)
        starts = [0] + [at + 1 for at, byte in enumerate(data) if byte in b",|\n"]
        at = draw(st.sampled_from(starts))
        description, data = f"a quote at byte {at}", data[:at] + b'"' + data[at:]
    if draw(st.booleans()):
        description, data = description + ", gzipped", gzip.compress(data, mtime=0)
    return Mutated(description, data)


def landed(root: Path, area: str, name: str, data: bytes) -> Path:
    path = root / "landing" / area / "c1" / name
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


def assert_one_line_naming(error: LandingError, path: Path) -> None:
    message = str(error)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: "), message


def physical_lines(path: Path, newlines: str) -> list[str]:
    """The file's lines as its reader splits them (decompressed, UTF-8 with replacement):
    `newlines` 'lf' (sacct, like `wc -l`) or 'universal' (\\n, \\r\\n or \\r: csv, nvidia-smi).
    The last line may lack its line end; an empty file has none."""
    with open_binary(path) as handle:
        data = handle.read().removeprefix(codecs.BOM_UTF8)
    text = data.decode("utf-8", errors="replace")
    lines = re.split(r"\n" if newlines == "lf" else r"\r\n|\r|\n", text)
    return lines[:-1] if lines[-1] == "" else lines


def data_line_numbers(export_format: str, path: Path) -> set[int] | None:
    """The 1-based numbers of the lines that must each be one row, or None when the format is
    not read line by line. Blank lines are no rows, nor is a header."""
    if export_format == "empty":
        return set()
    if export_format == "slurm_sacct":
        # every header line, not only the first (dumps appended to one file), is no row
        return {n for n, line in enumerate(physical_lines(path, "lf"), 1)
                if line.strip() and not _is_sacct_header(line)}  # fmt: skip
    if export_format.startswith("canonical"):
        return {n for n, line in enumerate(physical_lines(path, "universal"), 1)
                if n > 1 and line.strip()}  # fmt: skip
    if export_format == "nvidia_smi":
        return {n for n, line in enumerate(physical_lines(path, "universal"), 1)
                if line.strip() and not _is_nvidia_smi_header(line)}  # fmt: skip
    return None


def _is_sacct_header(line: str) -> bool:
    names = [name.strip().lower() for name in line.split("|")]
    return "jobid" in names and not names[0][:1].isdigit()


def _is_nvidia_smi_header(line: str) -> bool:
    names = [field.split("[", 1)[0].strip().lower() for field in line.split(",")]
    return not line[:1].isdigit() and "timestamp" in names


def line_breaks(raw: str) -> int:
    return len(re.findall(r"\r\n|\r|\n", raw))


# why the reader rejects a record as a whole (its shape, not a value)
_SHAPE_ERROR = re.compile(r"^expected \d+ fields, found \d+$|its opening quote never closes")


def assert_every_line_is_a_row(
    expected: set[int] | None, rows: list[tuple[int, str, str | None]]
) -> None:
    """Each expected line is the line of one row (line, raw text, reject reason); a row may
    also cover the lines its quoted field's line breaks span (CSV), unless its shape is wrong
    (a stray quote must not turn the rest of a file into one reject)."""
    if expected is None:
        return
    lines = [line for line, _, _ in rows]
    assert len(lines) == len(set(lines))
    assert set(lines) <= expected
    covered = {
        line + k
        for line, raw, reason in rows
        for k in range(1 if _SHAPE_ERROR.search(reason or "") else line_breaks(raw or "") + 1)
    }
    assert expected - set(lines) <= covered


# a reject names the field it is about, or says why the whole line is no record
_REASON = re.compile(
    r"^field [^ ]+: |^expected \d+ fields, found \d+$|^the last line has no line end"
)


def assert_reasons_name_a_field(reasons: list[str | None]) -> None:
    for reason in reasons:
        assert reason is None or _REASON.search(reason), reason


def check_scheduler_export(root: Path, path: Path, catalog: Catalog) -> None:
    con = prepare_connection(duckdb.connect())
    run = month_run(con, root, catalog=catalog)
    catalog_step.build(run)
    try:
        scheduler_exports.build(run)
    except LandingError as error:
        assert_one_line_naming(error, path)
        return
    [(kind, export_format, rows_read)] = con.execute(
        "select kind, format, rows_read from stg_scheduler_files"
    ).fetchall()
    table = "stg_job_records" if kind == "jobs" else "stg_allocation_records"
    rows = con.execute(f"select line, raw, reject_reason from {table} order by line").fetchall()
    assert len(rows) == rows_read
    assert_reasons_name_a_field([reason for _, _, reason in rows])
    if export_format == "kubernetes_podlist":
        with open_binary(path) as handle:
            items = json.loads(handle.read().decode("utf-8-sig", errors="replace"))["items"]
        assert rows_read == len(items)
    assert_every_line_is_a_row(data_line_numbers(export_format, path), rows)
    [export] = discover(root / "landing", "scheduler")
    settings = catalog.cluster("c1")
    table = export.format.read_table(path, settings) if export.format.read_table else None
    if table is not None:  # the fast path reads exactly what the row reader reads
        assert table.to_pylist() == list(export.format.read_rows(path, settings))


def check_telemetry_export(root: Path, path: Path, catalog: Catalog) -> None:
    chargeback = resource_for(root)
    try:
        [source] = sample_sources(root / "landing", chargeback.telemetry_dir, catalog)
    except LandingError as error:
        assert_one_line_naming(error, path)
        return
    con = prepare_connection(duckdb.connect())
    converted = con.execute(
        "select source_line, parse_error from read_parquet(?) order by source_line",
        [source["path"]],
    ).fetchall()
    assert_reasons_name_a_field([error for _, error in converted])
    # every day a row is stamped in that could be rolled up, and the day that owns the file's
    # rows without a plausible timestamp: each row must be counted by exactly one of them
    days = {day for (day,) in con.execute(
        "select distinct day from (select try_cast(ts as timestamp)::date as day "
        "from read_parquet(?)) where day >= '1970-01-01' and day < '2100-01-01'",
        [source["path"]],
    ).fetchall()}  # fmt: skip
    files = readable_sample_files(chargeback.telemetry_dir, [source["path"]])
    spans = sample_file_spans(con, files)
    days |= set(unreadable_row_owners(spans, root / "landing", [source]).values())
    roll_up_days(chargeback, catalog, sorted(days))
    quality = chargeback.telemetry_dir / "quality"
    read, loaded, rejected = (
        con.execute(
            "select sum(rows_read), sum(rows_loaded), sum(rows_rejected) "
            "from read_parquet(?, union_by_name = true)",
            [[str(p) for p in quality.glob("day=*/sample_file_counts.parquet")]],
        ).fetchone()
        if days
        else (0, 0, 0)
    )
    assert (read or 0, (loaded or 0) + (rejected or 0)) == (len(converted), len(converted))
    rejects = (
        con.execute(
            "select line, reason from read_parquet(?)",
            [[str(p) for p in quality.glob("day=*/sample_rejects.parquet")]],
        ).fetchall()
        if days
        else []
    )
    assert len(rejects) == (rejected or 0)
    assert {line for line, _ in rejects} <= {line for line, _ in converted}
    assert_reasons_name_a_field([reason for _, reason in rejects])
    [export] = discover(root / "landing", "telemetry")
    reasons = dict(rejects)
    if export.format.name == "canonical_samples_csv":  # a row may span lines (quoted breaks)
        columns = (*canonical.SAMPLE_COLUMNS, *canonical.OPTIONAL_SAMPLE_COLUMNS)
        rows = [(row["line"], row["raw"]) for row in canonical.read_rows(path, columns)]
        assert [line for line, _ in rows] == [line for line, _ in converted]
    else:
        rows = [(line, "") for line, _ in converted]
    assert_every_line_is_a_row(
        data_line_numbers(export.format.name, path),
        [(line, raw, reasons.get(line)) for line, raw in rows],
    )


PROPERTY_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    return load_catalog(catalog_dir(tmp_path_factory.mktemp("catalog")))


@pytest.mark.parametrize("reader", list(READERS))
def test_a_mutated_export_is_read_whole_or_stops_with_one_line(reader, catalog):
    area, _, _ = READERS[reader]
    name, data = fixture_bytes(reader)
    check = check_scheduler_export if area == "scheduler" else check_telemetry_export

    @PROPERTY_SETTINGS
    @given(mutations(data))
    def property_holds(mutated: Mutated) -> None:
        with tempfile.TemporaryDirectory() as folder:  # a landing folder of its own each
            root = Path(folder)
            check(root, landed(root, area, name, mutated.data), catalog)

    property_holds()
