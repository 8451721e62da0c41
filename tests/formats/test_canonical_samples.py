"""Canonical GPU samples as CSV (plain or gzipped): typed like canonical Parquet, a bad field a
reject with its line, told apart from the other CSVs, and the same daily rollup as Parquet."""

from __future__ import annotations

import codecs
import datetime as dt
import gzip
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.catalog import ClusterSettings, load_catalog
from pipelines.defs.ingest.telemetry import roll_up_days, sample_sources
from pipelines.defs.resources import prepare_connection
from pipelines.formats import canonical, nvidia_smi
from pipelines.landing import LandingError, discover
from simulator.demo import generate_demo
from tests.conftest import named_samples, resource_for, write
from tests.ingest.test_catalog_and_landing import catalog_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
T = dt.datetime

# upper case and padded names, optional columns, quotes, a blank line, CRLF line ends and a
# byte order mark; then one bad field per row
UGLY = (
    "\ufeff TS ,node,gpu_index,util_pct,mem_used_mib,power_w,job_id,gpu_uuid,gpu_model\r\n"
    '2026-11-02 10:00:00,n1,0,50.5,1024,250.5,J1,GPU-a,"A100, 80GB"\r\n'
    "2026-11-02T10:05:00,n1,1,0,,,,,\r\n"
    "\r\n"
    "noon,n1,0,5,1,1,,,\r\n"
    "2026-11-02 10:10:00,n1,zero,5,1,1,,,\r\n"
    "2026-11-02 10:10:00,n1,0,high,1,1,,,\r\n"
    "2026-11-02 10:10:00,n1,0,5,lots,1,,,\r\n"
    "2026-11-02 10:10:00,n1,0,5,1,1 W,,,\r\n"
    "2026-11-02 10:15:00,n1,0,5\r\n"
    "2026-11-02 10:20:00,,0,,,,,,\r\n"
    "2026-11-02 10:25:00,n1,0,150,,,,,\r\n"
)


def converted(path: Path, tmp_path: Path) -> list[tuple]:
    out = tmp_path / f"{path.name}.parquet"
    written = canonical.samples_to_parquet(path, out, ClusterSettings())
    rows = duckdb.execute(
        "select ts, node, gpu_index, util_pct, mem_used_mib, power_w, source_line, job_id, "
        "gpu_uuid, gpu_model, parse_error from read_parquet(?) order by source_line",
        [str(out)],
    ).fetchall()
    assert written == len(rows)
    return rows


def test_a_gpu_index_that_is_no_number_keeps_its_text_for_the_reject(tmp_path):
    path = tmp_path / "samples.csv"
    path.write_bytes(UGLY.encode())
    out = tmp_path / "samples.parquet"
    canonical.samples_to_parquet(path, out, ClusterSettings())
    assert duckdb.execute(
        "select source_line, gpu_index_text from read_parquet(?) "
        "where gpu_index_text is not null or source_line = 2 order by source_line",
        [str(out)],
    ).fetchall() == [(2, None), (6, "zero")]


@pytest.mark.parametrize("compressed", [False, True], ids=["csv", "csv.gz"])
def test_every_row_is_a_sample_typed_or_a_parse_error_naming_its_field(tmp_path, compressed):
    path = tmp_path / ("samples.csv.gz" if compressed else "samples.csv")
    data = UGLY.encode()
    path.write_bytes(gzip.compress(data) if compressed else data)
    ten = T(2026, 11, 2, 10, 10)
    assert converted(path, tmp_path) == [
        (T(2026, 11, 2, 10), "n1", 0, 50.5, 1024.0, 250.5, 2, "J1", "GPU-a", "A100, 80GB", None),
        (T(2026, 11, 2, 10, 5), "n1", 1, 0.0, None, None, 3, None, None, None, None),
        (None, "n1", 0, 5.0, 1.0, 1.0, 5, None, None, None,
         "field ts: 'noon' is not a timestamp"),
        (ten, "n1", None, 5.0, 1.0, 1.0, 6, None, None, None,
         "field gpu_index: 'zero' is not a GPU index"),
        (ten, "n1", 0, None, 1.0, 1.0, 7, None, None, None,
         "field util_pct: 'high' is not a number"),
        (ten, "n1", 0, 5.0, None, 1.0, 8, None, None, None,
         "field mem_used_mib: 'lots' is not a number"),
        (ten, "n1", 0, 5.0, 1.0, None, 9, None, None, None,
         "field power_w: '1 W' is not a number"),
        (T(2026, 11, 2, 10, 15), "n1", 0, 5.0, None, None, 10, None, None, None,
         "expected 9 fields, found 4"),
        # blank fields are NULL, as in Parquet: the rollup rejects these rows as it does there
        (T(2026, 11, 2, 10, 20), None, 0, None, None, None, 11, None, None, None, None),
        (T(2026, 11, 2, 10, 25), "n1", 0, 150.0, None, None, 12, None, None, None, None),
    ]  # fmt: skip


def test_a_header_only_file_converts_to_no_rows(tmp_path):
    path = write(tmp_path / "samples.csv", "ts,node,gpu_index,util_pct\n")
    assert converted(path, tmp_path) == []


SAMPLES_CSV = "ts,node,gpu_index,util_pct,job_id\n2026-11-02 10:00:00,n1,0,50,J1\n"


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("samples.csv", SAMPLES_CSV.encode()),
        ("samples.csv.gz", gzip.compress(SAMPLES_CSV.encode())),
        ("samples.csv", gzip.compress(SAMPLES_CSV.encode())),  # gzip by content
        ("samples.csv", codecs.BOM_UTF8 + SAMPLES_CSV.replace("\n", "\r\n").encode()),
    ],
    ids=["csv", "csv.gz", "gzip named .csv", "bom crlf"],
)
def test_samples_csv_is_recognised_in_the_telemetry_folder(tmp_path, name, data):
    path = tmp_path / "landing/telemetry/c1" / name
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    [export] = discover(tmp_path / "landing", "telemetry")
    assert (export.name, export.format.name) == (f"telemetry/c1/{name}", "canonical_samples_csv")


def test_samples_csv_naming_job_id_node_and_gpu_index_is_not_taken_for_allocations(tmp_path):
    path = write(tmp_path / "landing/scheduler/c1/samples.csv", SAMPLES_CSV)
    with pytest.raises(LandingError) as error:
        discover(tmp_path / "landing", "scheduler")
    assert str(error.value).startswith(f"{path}: line 1: unrecognised export, expected ")


@pytest.mark.parametrize(
    "text",
    [
        "job_id,node,gpu_index\nJ1,n1,0\n",  # canonical allocations
        "job_id,account,gpus,start_time,end_time,state\nJ1,a,1,x,y,COMPLETED\n",  # jobs
        "ts,node,gpu_index\n2026-11-02 10:00:00,n1,0\n",  # samples without util_pct
    ],
    ids=["allocations", "jobs", "no util_pct"],
)
def test_other_canonical_csv_is_not_taken_for_samples(tmp_path, text):
    path = write(tmp_path / "landing/telemetry/c1/x.csv", text)
    with pytest.raises(LandingError) as error:
        discover(tmp_path / "landing", "telemetry")
    assert str(error.value).startswith(f"{path}: line 1: unrecognised export, expected ")


def test_samples_csv_and_nvidia_smi_logs_are_told_apart(tmp_path):
    smi = FIXTURES / "nvidia-smi/gpu-a01_2026-11.csv"
    samples = write(tmp_path / "samples.csv", SAMPLES_CSV)
    [samples_csv] = [f for f in canonical.FORMATS if f.name == "canonical_samples_csv"]
    assert samples_csv.sniff(samples, SAMPLES_CSV)
    assert not samples_csv.sniff(smi, smi.read_text())
    assert not nvidia_smi.FORMAT.sniff(samples, SAMPLES_CSV)


# --- the same samples as Parquet, through the daily rollup ---------------------------------

DAYS = [dt.date(2026, 11, 1), dt.date(2026, 11, 2)]
# rows the rollup rejects (NULL util, out of range, no node, no GPU, no timestamp): as
# Parquet, and as CSV text
BAD = pa.table({
    "ts": pa.array([T(2026, 11, 1, 3), T(2026, 11, 1, 4), T(2026, 11, 2, 5), T(2026, 11, 2, 6),
                    None], pa.timestamp("us")),
    "node": ["gpu-a01", "gpu-a01", None, "gpu-a01", "gpu-a01"],
    "gpu_index": pa.array([0, 1, 0, -1, 0], pa.int32()),
    "util_pct": [None, 150.0, 5.0, 5.0, 5.0],
    "mem_used_mib": [1.0, 1.0, 1.0, 1.0, 1.0],
    "power_w": [1.0, 1.0, 1.0, 1.0, 1.0],
})  # fmt: skip


@pytest.fixture(scope="module")
def demo_parquet(tmp_path_factory) -> list[Path]:
    """The demo's canonical samples of 1-3 November (the 3rd: the 2nd's look-ahead)."""
    out = tmp_path_factory.mktemp("canonical")
    generate_demo(out, month="2026-11", seed=7, small=True, export_format="canonical")
    folder = out / "landing/telemetry/atlas"
    return [folder / f"gpu-samples-2026-11-0{day}.parquet" for day in (1, 2, 3)]


def _as_csv(parquet: Path, target: Path, crlf_bom: bool = False) -> None:
    """The Parquet file's rows as canonical CSV text (gzipped when `target` ends `.gz`)."""
    csv = target.with_name(target.name + ".tmp.csv")
    duckdb.execute(f"copy (select * from read_parquet('{parquet}')) to '{csv}' (header)")
    data = csv.read_bytes()
    csv.unlink()
    if crlf_bom:
        data = codecs.BOM_UTF8 + data.replace(b"\n", b"\r\n")
    target.write_bytes(gzip.compress(data) if target.suffix == ".gz" else data)


def _rolled_up(root: Path, files: dict[str, Path | None], write_file) -> dict:
    folder = root / "landing/telemetry/atlas"
    folder.mkdir(parents=True)
    for name, source in files.items():
        write_file(source, folder / name)
    chargeback = resource_for(root)
    counts = roll_up_days(chargeback, load_catalog(catalog_dir(root)), DAYS)
    out = chargeback.telemetry_dir

    def rows(pattern: str, columns: str = "*") -> list[tuple]:
        return duckdb.execute(
            f"select {columns} from read_parquet('{out}/{pattern}') order by all"
        ).fetchall()

    return {
        "counts": counts,
        "samples": rows("cluster=*/day=*/samples_*.parquet"),
        "hours": rows("cluster=*/day=*/hours_*.parquet"),
        "rejects": rows("quality/*/sample_rejects.parquet"),
        "file_counts": rows("quality/*/sample_file_counts.parquet"),
    }


def test_csv_samples_roll_up_exactly_as_the_same_parquet(tmp_path, demo_parquet):
    bad = tmp_path / "bad.parquet"
    pq.write_table(BAD, bad)
    # (Parquet name, CSV name, rows): plain, gzipped, CRLF with a byte order mark
    files = [
        ("nov-01.parquet", "nov-01.csv", demo_parquet[0]),
        ("nov-02.parquet", "nov-02.csv.gz", demo_parquet[1]),
        ("nov-03.parquet", "nov-03.csv", demo_parquet[2]),
        ("zz-bad.parquet", "zz-bad.csv.gz", bad),
    ]
    parquet = _rolled_up(
        tmp_path / "parquet",
        {name: source for name, _, source in files},
        lambda source, target: target.write_bytes(source.read_bytes()),
    )
    csv = _rolled_up(
        tmp_path / "csv",
        {name: source for _, name, source in files},
        lambda source, target: _as_csv(source, target, crlf_bom=target.name == "nov-03.csv"),
    )
    assert parquet["counts"] == csv["counts"]
    assert csv["counts"] == {  # 40 GPUs of the small demo's atlas x 288 five-minute samples
        "2026-11-01": {"samples": 11520, "rejected": 3, "files": 2},
        "2026-11-02": {"samples": 11520, "rejected": 2, "files": 2},
    }
    assert parquet["samples"] == csv["samples"]
    assert parquet["hours"] == csv["hours"]
    # the same rows rejected for the same reasons; a CSV line is the Parquet row plus the header
    assert {r[2] for r in csv["rejects"]} == {"telemetry/atlas/zz-bad.csv.gz"}
    assert [(*r[:2], r[3] + 1, *r[4:]) for r in parquet["rejects"]] == [
        (*r[:2], *r[3:]) for r in csv["rejects"]
    ]
    assert [r[4] for r in csv["rejects"]] == [
        "field util_pct: missing",
        "field util_pct: 150.0 is outside 0-100",
        "field node: missing",
        "field gpu_index: not a GPU index",
        "field ts: missing or not a timestamp",
    ]
    renamed = {f"telemetry/atlas/{old}": f"telemetry/atlas/{new}" for old, new, _ in files}
    assert [(*r[:2], renamed[r[2]], *r[3:]) for r in parquet["file_counts"]] == csv["file_counts"]


def test_days_rolled_up_two_at_once_equal_days_rolled_up_one_by_one(
    tmp_path, demo_parquet, monkeypatch
):
    from pipelines.defs.ingest import telemetry

    files = {f"nov-0{day}.parquet": source for day, source in enumerate(demo_parquet, start=1)}

    def copied(source: Path, target: Path) -> None:
        target.write_bytes(source.read_bytes())

    estimated = telemetry.estimated_day_samples(_spans(demo_parquet), DAYS)
    assert telemetry.days_at_once(estimated, DAYS) == 2  # 11,520 samples a day
    two_at_once = _rolled_up(tmp_path / "two", files, copied)
    monkeypatch.setattr(telemetry, "SMALL_DAY_SAMPLES", 11_519)
    assert telemetry.days_at_once(estimated, DAYS) == 1
    one_by_one = _rolled_up(tmp_path / "one", files, copied)
    assert two_at_once == one_by_one
    assert two_at_once["counts"] == {
        "2026-11-01": {"samples": 11520, "rejected": 0, "files": 1},
        "2026-11-02": {"samples": 11520, "rejected": 0, "files": 1},
    }
    # days rolled up in chunks (of about 4,000 samples here) run two at once again
    monkeypatch.setattr(telemetry, "CHUNK_SAMPLES", 4_000)
    assert telemetry.days_at_once(estimated, DAYS) == 2
    in_chunks = _rolled_up(tmp_path / "chunks", files, copied)
    assert in_chunks == one_by_one
    samples_files = sorted(p.name for p in (tmp_path / "chunks").rglob("samples_*.parquet"))
    assert samples_files == [f"samples_{k}_0.parquet" for k in (0, 0, 1, 1, 2, 2)]


def _spans(paths: list[Path]) -> dict:
    from pipelines.defs.ingest.telemetry import sample_file_spans
    from pipelines.defs.resources import prepare_connection

    return sample_file_spans(prepare_connection(duckdb.connect()), [str(path) for path in paths])


# --- time zones: stored in UTC, a zone-less time local to the cluster -----------------------
# DESIGN.md: a timestamp without a zone is in the cluster's scheduler_timezone, and an explicit
# offset is kept. Twelve one-minute samples per node from 12:00 on 10 November, written as
# local time in Europe/Berlin (UTC+1): each is stored from 11:00 UTC, in cluster `berlin`
# (scheduler_timezone Europe/Berlin) and, when its text names the offset, in cluster `utc`.

ZONE_DAY = dt.date(2026, 11, 10)
MINUTES = range(12)
BERLIN = ClusterSettings(scheduler_timezone="Europe/Berlin")


def _csv(rows: list[tuple[str, str]]) -> str:
    """Samples CSV: per (node, time format), twelve one-minute samples of GPU 0."""
    lines = ["ts,node,gpu_index,util_pct"]
    lines += [f"{text.format(m=m)},{node},0,50" for node, text in rows for m in MINUTES]
    return "\n".join(lines) + "\n"


def _parquet(path: Path, node: str, times: list, kind: pa.DataType) -> None:
    count = len(times)
    pq.write_table(
        pa.table(
            {
                "ts": pa.array(times, kind),
                "node": [node] * count,
                "gpu_index": [0] * count,
                "util_pct": [50.0] * count,
            }
        ),  # fmt: skip
        path,
    )


NOON = [T(2026, 11, 10, 12, m) for m in MINUTES]
OFFSET_CSV = _csv([
    ("csv-colon", "2026-11-10T12:{m:02}:00+01:00"), ("csv-hour", "2026-11-10 12:{m:02}:00+01"),
])  # fmt: skip


@pytest.fixture(scope="module")
def zoned_rollup(tmp_path_factory) -> dict[tuple[str, str], tuple]:
    """The stored (first, last, samples) of each (cluster, node) after one rollup of ZONE_DAY,
    and the path each cluster's naive Parquet is read from."""
    root = tmp_path_factory.mktemp("zones")
    catalog_dir(
        root, **{"settings.yaml": "clusters:\n  berlin: {scheduler_timezone: Europe/Berlin}\n"}
    )
    for cluster in ("berlin", "utc"):
        folder = root / "landing/telemetry" / cluster
        write(folder / "naive.csv", _csv([("csv-naive", "2026-11-10 12:{m:02}:00")]))
        write(folder / "offsets.csv", OFFSET_CSV)
        _parquet(folder / "naive.parquet", "pq-naive", NOON, pa.timestamp("us"))
    berlin = root / "landing/telemetry/berlin"
    instants = [t.replace(tzinfo=ZoneInfo("Europe/Berlin")) for t in NOON]
    _parquet(berlin / "instant.parquet", "pq-tz", instants, pa.timestamp("us", tz="UTC"))
    texts = [f"2026-11-10 12:{m:02}:00" for m in MINUTES[:6]]
    texts += [f"2026-11-10T12:{m:02}:00+01" for m in MINUTES[6:]]
    _parquet(berlin / "text.parquet", "pq-text", texts, pa.string())
    chargeback = resource_for(root)
    catalog = load_catalog(root / "catalog")
    roll_up_days(chargeback, catalog, [ZONE_DAY])
    con = prepare_connection(duckdb.connect())
    stored = con.execute(
        f"select cluster, node, min(ts), max(ts), count(*) from {named_samples(root)} "
        "group by all order by all"
    ).fetchall()
    read_from = {
        source["file"]: source["path"]
        for source in sample_sources(root / "landing", chargeback.telemetry_dir, catalog)
    }
    return {
        "stored": {(cluster, node): tuple(rest) for cluster, node, *rest in stored},
        "read_from": {name: Path(path) for name, path in read_from.items()},
        "landing": root / "landing",
    }


FROM_11_UTC = (T(2026, 11, 10, 11), T(2026, 11, 10, 11, 11), 12)
FROM_12_UTC = (T(2026, 11, 10, 12), T(2026, 11, 10, 12, 11), 12)


def test_naive_csv_times_are_local_time_of_a_non_utc_cluster(zoned_rollup):
    assert zoned_rollup["stored"][("berlin", "csv-naive")] == FROM_11_UTC


@pytest.mark.parametrize("cluster", ["utc", "berlin"])
@pytest.mark.parametrize("node", ["csv-colon", "csv-hour"], ids=["+01:00", "+01"])
def test_csv_times_with_an_offset_keep_it_in_any_cluster(zoned_rollup, cluster, node):
    assert zoned_rollup["stored"][(cluster, node)] == FROM_11_UTC


def test_naive_parquet_times_are_local_time_of_a_non_utc_cluster(zoned_rollup):
    assert zoned_rollup["stored"][("berlin", "pq-naive")] == FROM_11_UTC
    # converted for it (the rollup reads the conversion, not the landing file)
    assert "converted" in zoned_rollup["read_from"]["telemetry/berlin/naive.parquet"].parts


def test_parquet_text_times_are_local_unless_they_carry_an_offset(zoned_rollup):
    assert zoned_rollup["stored"][("berlin", "pq-text")] == FROM_11_UTC


def test_parquet_timestamptz_is_an_instant_read_in_place(zoned_rollup):
    assert zoned_rollup["stored"][("berlin", "pq-tz")] == FROM_11_UTC
    read_from = zoned_rollup["read_from"]["telemetry/berlin/instant.parquet"]
    assert read_from == zoned_rollup["landing"] / "telemetry/berlin/instant.parquet"


def test_naive_times_of_a_utc_cluster_are_utc_and_its_parquet_is_read_in_place(zoned_rollup):
    assert zoned_rollup["stored"][("utc", "csv-naive")] == FROM_12_UTC
    assert zoned_rollup["stored"][("utc", "pq-naive")] == FROM_12_UTC
    read_from = zoned_rollup["read_from"]["telemetry/utc/naive.parquet"]
    assert read_from == zoned_rollup["landing"] / "telemetry/utc/naive.parquet"


# 25 October 2026 in Europe/Berlin: clocks go back from 03:00 CEST to 02:00 CET, so 02:00-02:59
# comes twice. Two GPUs, their rows interleaved, each stepping back once (as nvidia-smi logs
# are read: a GPU's rows before it steps back are the first pass, the rows after it the second)
FALL_BACK_LOCAL = ["01:45", "02:00", "02:30", "02:45", "02:00", "02:30", "03:00"]
FALL_BACK_UTC = [
    T(2026, 10, 24, 23, 45), T(2026, 10, 25, 0), T(2026, 10, 25, 0, 30), T(2026, 10, 25, 0, 45),
    T(2026, 10, 25, 1), T(2026, 10, 25, 1, 30), T(2026, 10, 25, 2),
]  # fmt: skip


def _zoned(out: Path) -> list[tuple]:
    return duckdb.execute(
        "select gpu_index, list(ts order by source_line) from read_parquet(?) "
        "group by gpu_index order by gpu_index",
        [str(out)],
    ).fetchall()


def test_csv_times_in_the_repeated_hour_follow_each_gpus_rows(tmp_path):
    lines = ["ts,node,gpu_index,util_pct"]
    lines += [f"2026-10-25 {hm}:00,n1,{gpu},50" for hm in FALL_BACK_LOCAL for gpu in (0, 1)]
    path = write(tmp_path / "samples.csv", "\n".join(lines) + "\n")
    canonical.samples_to_parquet(path, tmp_path / "out.parquet", BERLIN)
    assert _zoned(tmp_path / "out.parquet") == [(0, FALL_BACK_UTC), (1, FALL_BACK_UTC)]


def test_parquet_times_in_the_repeated_hour_follow_each_gpus_rows(tmp_path):
    local = [T(2026, 10, 25, *map(int, hm.split(":"))) for hm in FALL_BACK_LOCAL]
    path = tmp_path / "samples.parquet"
    pq.write_table(
        pa.table(
            {
                "ts": pa.array([t for t in local for _ in (0, 1)], pa.timestamp("us")),
                "node": ["n1"] * 14,
                "gpu_index": [0, 1] * 7,
                "util_pct": [50.0] * 14,
            }
        ),  # fmt: skip
        path,
    )
    assert not canonical.parquet_read_in_place(path, BERLIN)
    assert canonical.parquet_read_in_place(path, ClusterSettings())
    canonical.parquet_samples_to_parquet(path, tmp_path / "out.parquet", BERLIN)
    assert _zoned(tmp_path / "out.parquet") == [(0, FALL_BACK_UTC), (1, FALL_BACK_UTC)]
