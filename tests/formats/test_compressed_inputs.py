"""Every text export gzipped (recognised by content, with or without `.gz` in its name), with
CRLF line ends or with a UTF-8 byte order mark reads as exactly the rows of the plain file.

The plain files are the fixtures of tests/fixtures/ and the demo's canonical CSVs; each variant
is written into tmp_path, under the same name (plus `.gz` where it says so).
"""

from __future__ import annotations

import codecs
import gzip
import random
import shutil
import uuid
from pathlib import Path

import duckdb
import pytest

from pipelines.catalog import ClusterSettings, load_catalog
from pipelines.defs.ingest.loading import read_scheduler_exports
from pipelines.defs.ingest.telemetry import sample_sources
from pipelines.formats import ExportFormat, dcgm, nvidia_smi, slurm
from pipelines.landing import LandingError, discover
from simulator.demo import generate_demo
from tests.ingest.test_catalog_and_landing import catalog_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
UTC = ClusterSettings()
NEW_YORK = ClusterSettings(scheduler_timezone="America/New_York")

# (area, fixture, format it is recognised as, cluster settings to read it with)
REAL_FIXTURES = [
    ("scheduler", "xdmod-slurm/phillips.log", "slurm_sacct", UTC),
    ("scheduler", "xdmod-slurm/parser-cases/utf8-multibyte-chars.log", "slurm_sacct", UTC),
    ("scheduler", "kubernetes/pods-2026-11-10T06-00-00Z.json", "kubernetes_podlist", UTC),
    ("scheduler", "kubernetes/pods-2026-11-10T12-00-00Z.json", "kubernetes_podlist", UTC),
    ("scheduler", "kubernetes/pods-2026-11-10T18-00-00Z.json", "kubernetes_podlist", UTC),
    ("telemetry", "dcgm/gpu-a01_2026-11-01.json", "dcgm_prometheus", UTC),
    ("telemetry", "dcgm/k8s-labels_2026-11-10.json", "dcgm_prometheus", UTC),
    ("telemetry", "nvidia-smi/gpu-a01_2026-11.csv", "nvidia_smi", NEW_YORK),
    ("telemetry", "nvidia-smi/gpu-b02.csv", "nvidia_smi", NEW_YORK),
    ("telemetry", "nvidia-smi/gpu-c03.log", "nvidia_smi", NEW_YORK),
    ("telemetry", "nvidia-smi/d04-samples_2026-11.csv", "nvidia_smi", NEW_YORK),
]
# the demo's canonical CSVs (tests/fixtures/ has none), generated once for the module
DEMO_CSVS = [
    ("scheduler", "jobs-2026-11-part1.csv", "canonical_jobs", UTC),
    ("scheduler", "allocations-2026-11.csv", "canonical_allocations", UTC),
]
# how a variant is written: (gzip it, name ends `.gz`, CRLF line ends, byte order mark)
VARIANTS = {
    "gz": (True, True, False, False),
    "gzip content under the plain name": (True, False, False, False),
    "crlf": (False, False, True, False),
    "bom": (False, False, False, True),
    "gz crlf bom": (True, True, True, True),
}


def write_variant(source: Path, folder: Path, variant: str) -> Path:
    """`source` written into `folder` as `variant` says; returns the new file."""
    compress, gz_name, crlf, bom = VARIANTS[variant]
    data = source.read_bytes()
    assert b"\r" not in data and not data.startswith(codecs.BOM_UTF8)  # plain LF files
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    if bom:
        data = codecs.BOM_UTF8 + data
    if compress:
        data = gzip.compress(data, mtime=0)
    target = folder / (source.name + (".gz" if gz_name else ""))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def rows_read(export_format: ExportFormat, path: Path, settings, tmp_path: Path) -> list:
    """What the pipeline takes from a file: the scheduler rows of both readers (the table fast
    path when the format has one), or the samples of its canonical Parquet conversion."""
    if export_format.area == "scheduler":
        rows = list(export_format.read_rows(path, settings))
        table = export_format.read_table(path, settings) if export_format.read_table else None
        return [rows, table.to_pylist() if table is not None else None]
    out = tmp_path / f"{uuid.uuid4().hex}.parquet"
    written = export_format.to_parquet(path, out, settings)
    rows = duckdb.execute("select * from read_parquet(?) order by all", [str(out)]).fetchall()
    assert written == len(rows)
    return rows


def read_as_landed(source: Path, area: str, root: Path, variant: str | None, settings, tmp_path):
    """The file (or its variant) put in a landing folder: (name, format, rows read)."""
    folder = root / "landing" / area / "c1"
    if variant is None:
        folder.mkdir(parents=True)
        shutil.copy(source, folder / source.name)
    else:
        write_variant(source, folder, variant)
    [export] = discover(root / "landing", area)
    return (
        export.name,
        export.format.name,
        rows_read(export.format, export.path, settings, tmp_path),
    )


@pytest.fixture(scope="module")
def demo_canonical(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("canonical")
    generate_demo(out, month="2026-11", seed=7, small=True, export_format="canonical")
    return out / "landing" / "scheduler" / "atlas"


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize(
    ("area", "fixture", "format_name", "settings"),
    REAL_FIXTURES,
    ids=[case[1].split("/")[-1] for case in REAL_FIXTURES],
)
def test_a_fixture_reads_the_same_in_every_variant(
    tmp_path, area, fixture, format_name, settings, variant
):
    source = FIXTURES / fixture
    name, found, plain = read_as_landed(source, area, tmp_path / "plain", None, settings, tmp_path)
    assert (name, found) == (f"{area}/c1/{source.name}", format_name)
    assert plain and plain[0]  # the fixture has rows to compare
    name, found, rows = read_as_landed(
        source, area, tmp_path / "variant", variant, settings, tmp_path
    )
    # the landing-relative name keeps `.gz`: it is what rejects and data quality show
    suffix = ".gz" if VARIANTS[variant][1] else ""
    assert (name, found) == (f"{area}/c1/{source.name}{suffix}", format_name)
    assert rows == plain


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize(("area", "name", "format_name", "settings"), DEMO_CSVS)
def test_a_canonical_csv_reads_the_same_in_every_variant(
    tmp_path, demo_canonical, area, name, format_name, settings, variant
):
    source = demo_canonical / name
    _, found, plain = read_as_landed(source, area, tmp_path / "plain", None, settings, tmp_path)
    assert found == format_name and len(plain[0]) > 100
    assert plain[1] == plain[0]  # the plain file takes the table fast path
    _, found, rows = read_as_landed(source, area, tmp_path / "variant", variant, settings, tmp_path)
    assert found == format_name
    assert rows == plain


@pytest.mark.parametrize("name", ["gpu-b02.csv", "gpu-c03.log"])
def test_the_node_of_a_gzipped_nvidia_smi_log_is_its_name_without_gz(tmp_path, name):
    # neither log has a node column: the node is the file name up to its extension
    path = write_variant(FIXTURES / "nvidia-smi" / name, tmp_path, "gz")
    assert path.name == f"{name}.gz"
    rows = rows_read(nvidia_smi.FORMAT, path, NEW_YORK, tmp_path)
    assert {row[1] for row in rows} == {name.split(".")[0]}


# sacct's own names for the Open XDMoD field order (`sacct --format` prints them so)
SACCT_NAMES = (
    "JobID", "JobIDRaw", "Cluster", "Partition", "QOS", "Account", "Group", "GID", "User", "UID",
    "Submit", "Eligible", "Start", "End", "Elapsed", "ExitCode", "State", "NNodes", "NCPUS",
    "ReqCPUS", "ReqMem", "ReqTRES", "AllocTRES", "Timelimit", "NodeList", "JobName",
)  # fmt: skip


@pytest.mark.parametrize("bom", [False, True], ids=["header", "byte order mark, header"])
def test_a_slurm_header_in_another_field_order_maps_each_field(tmp_path, bom):
    """The headerless Open XDMoD export, rewritten with a header naming the fields in another
    order (JobID first, the rest shuffled) and each line's fields in that order, gives the same
    rows; a byte order mark before `JobID` does not hide the header."""
    source = FIXTURES / "xdmod-slurm/phillips.log"
    order = [0, *random.Random(15).sample(range(1, len(SACCT_NAMES)), len(SACCT_NAMES) - 1)]
    assert order != sorted(order)
    lines = source.read_text(encoding="utf-8").splitlines()
    header = "|".join(SACCT_NAMES[i] for i in order)
    text = "\n".join(
        [header] + ["|".join(line.split("|")[i] for i in order) for line in lines]
    ) + "\n"  # fmt: skip
    folder = tmp_path / "landing/scheduler/c1"
    folder.mkdir(parents=True)
    path = folder / "reordered.log"
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode("utf-8"))
    [export] = discover(tmp_path / "landing", "scheduler")
    assert export.format.name == "slurm_sacct"

    def comparable(row: dict) -> dict:  # the line moves down one, the raw text is reordered
        return {**row, "line": row["line"] - 1, "raw": None}

    reordered = [comparable(row) for row in slurm.read_rows(path, UTC)]
    plain = [{**row, "raw": None} for row in slurm.read_rows(source, UTC)]
    assert len(plain) == 4285  # wc -l phillips.log
    assert reordered == plain
    assert {row["parse_error"] for row in reordered} == {None}


def test_a_large_gzipped_dcgm_body_is_read_whole(tmp_path):
    """DuckDB needs the decompressed size of one JSON value to read it: a 40 MiB body that
    gzips to a few KiB still reads (its padding is a key no reader looks at)."""
    source = FIXTURES / "dcgm/gpu-a01_2026-11-01.json"
    text = source.read_text(encoding="utf-8")
    padded = text.replace('"data"', '"padding":"' + "x" * 40 * 2**20 + '","data"', 1)
    path = tmp_path / "big.json.gz"
    path.write_bytes(gzip.compress(padded.encode(), mtime=0))
    assert path.stat().st_size < 2**20
    out = tmp_path / "big.parquet"
    assert dcgm.to_parquet(path, out, UTC) == dcgm.to_parquet(source, tmp_path / "a.parquet", UTC)
    big, plain = (
        duckdb.execute("select * from read_parquet(?) order by all", [str(p)]).fetchall()
        for p in (out, tmp_path / "a.parquet")
    )
    assert big == plain


def test_a_malformed_gzipped_dcgm_body_names_file_and_line_as_the_plain_one(tmp_path):
    source = FIXTURES / "dcgm/truncated.json"
    path = write_variant(source, tmp_path, "gz")
    with pytest.raises(LandingError) as plain:
        dcgm.to_parquet(source, tmp_path / "a.parquet", UTC)
    with pytest.raises(LandingError) as gzipped:
        dcgm.to_parquet(path, tmp_path / "b.parquet", UTC)
    assert str(gzipped.value) == str(plain.value).replace(str(source), str(path))
    assert str(gzipped.value).startswith(f"{path}: line ")


def cut_off(source: Path, target: Path) -> Path:
    """`source` gzipped with its end cut off: the head decompresses, the rest does not."""
    data = gzip.compress(source.read_bytes(), mtime=0)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data[: len(data) * 3 // 4])
    return target


def test_a_cut_off_gzipped_scheduler_export_stops_the_load_naming_it(tmp_path):
    path = cut_off(FIXTURES / "xdmod-slurm/phillips.log", tmp_path / "landing/scheduler/c1/a.gz")
    [export] = discover(tmp_path / "landing", "scheduler")  # the head reads fine
    assert export.format.name == "slurm_sacct"
    catalog = load_catalog(catalog_dir(tmp_path))
    with pytest.raises(LandingError) as error:
        read_scheduler_exports(duckdb.connect(), tmp_path / "landing", catalog)
    assert str(error.value) == (
        f"{path}: not a complete gzip file (Compressed file ended before the end-of-stream "
        "marker was reached)"
    )


def test_a_cut_off_gzipped_telemetry_export_stops_its_conversion_naming_it(tmp_path):
    source = FIXTURES / "nvidia-smi/gpu-a01_2026-11.csv"
    path = cut_off(source, tmp_path / "landing/telemetry/c1/gpu-a01.csv.gz")
    with pytest.raises(LandingError) as error:
        discover(tmp_path / "landing", "telemetry")  # too short for even the head to read
    assert str(error.value) == (
        f"{path}: not a complete gzip file (Compressed file ended before the end-of-stream "
        "marker was reached)"
    )
    big = tmp_path / "big.csv"
    lines = source.read_text(encoding="utf-8").splitlines()[:5]
    big.write_text("\n".join(lines[:1] + lines[1:5] * 20_000) + "\n", encoding="utf-8")
    path.unlink()
    cut_off(big, path)
    catalog = load_catalog(catalog_dir(tmp_path))
    with pytest.raises(LandingError) as error:
        sample_sources(tmp_path / "landing", tmp_path / "telemetry", catalog)
    assert str(error.value).startswith(f"{path}: not a complete gzip file (")


def test_a_byte_order_mark_before_a_header_alone_is_still_a_sacct_export(tmp_path):
    # a day without jobs: nothing but the header line, whose first name the mark would hide
    path = tmp_path / "landing/scheduler/c1/sacct-2026-11-02.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(codecs.BOM_UTF8 + ("|".join(SACCT_NAMES) + "\r\n").encode())
    [export] = discover(tmp_path / "landing", "scheduler")
    assert export.format.name == "slurm_sacct"
    assert list(slurm.read_rows(path, UTC)) == []


def test_notes_are_ignored_gzipped_too(tmp_path):
    folder = tmp_path / "landing/scheduler/c1"
    folder.mkdir(parents=True)
    for name in ("README.gz", "old-dump.ignore.gz", "CHANGES.md.gz"):
        (folder / name).write_bytes(gzip.compress(b"not an export\n"))
    write_variant(FIXTURES / "xdmod-slurm/phillips.log", folder, "gz")
    assert [f.name for f in discover(tmp_path / "landing", "scheduler")] == [
        "scheduler/c1/phillips.log.gz"
    ]
