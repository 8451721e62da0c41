"""The nvidia-smi CSV reader on hand-written logs, and end to end.

Fixtures: tests/fixtures/nvidia-smi/
  gpu-a01_2026-11.csv      two GPUs every 15 min from 2026-11-02 00:00 (America/New_York, EST,
                           UTC-5); a second run's header repeated at line 6; `[Not Supported]`
                           power; `[N/A]` utilisation at line 9; line 10 cut off, no line end
  gpu-b02.csv              the hour repeated when New York's clocks go back (2026-11-01 02:00
                           EDT -> 01:00 EST): 01:00 and 01:40 logged twice
  gpu-c03.log              `--format=csv,noheader,nounits`
  d04-samples_2026-11.csv  a `hostname` column and `power.draw.instant`; then a run with other
                           fields and no hostname (node from the file name), a blank line, and a
                           line with one field too many
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import duckdb
import pytest

from pipelines.catalog import ClusterSettings
from pipelines.formats import nvidia_smi
from pipelines.landing import LandingError, discover
from tests.conftest import materialize_month, query, write

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
NEW_YORK = ClusterSettings(scheduler_timezone="America/New_York")
A100 = "NVIDIA A100-SXM4-80GB"
UUID_0 = "GPU-3b8e4c1a-6f2d-7e9a-1c4b-2d5e8f7a9b0c"
UUID_1 = "GPU-9d1f2e3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
T = dt.datetime


def rows_of(path: Path, tmp_path: Path, settings: ClusterSettings = NEW_YORK) -> list[tuple]:
    """The converted rows in file order, and checks the count to_parquet returns."""
    out = tmp_path / f"{path.name}.partial"
    written = nvidia_smi.to_parquet(path, out, settings)
    rows = duckdb.execute(
        "select ts, node, gpu_index, util_pct, mem_used_mib, power_w, source_line, gpu_uuid, "
        "gpu_model, parse_error from read_parquet(?) order by source_line",
        [str(out)],
    ).fetchall()
    assert written == len(rows)
    return rows


def test_a_log_with_ugly_rows_reads_as_exact_utc_rows(tmp_path):
    a, b = (UUID_0, A100, None), (UUID_1, A100, None)
    assert rows_of(FIXTURES / "gpu-a01_2026-11.csv", tmp_path) == [
        # 00:00 EST is 05:00 UTC; the header (line 1) is not a sample
        (T(2026, 11, 2, 5, 0, 0, 101000), "gpu-a01", 0, 90.0, 40960.0, 301.25, 2, *a),
        (T(2026, 11, 2, 5, 0, 0, 102000), "gpu-a01", 1, 3.0, 512.0, None, 3, *b),
        (T(2026, 11, 2, 5, 15, 0, 101000), "gpu-a01", 0, 85.0, 40960.0, 298.5, 4, *a),
        (T(2026, 11, 2, 5, 15, 0, 102000), "gpu-a01", 1, 3.0, 512.0, None, 5, *b),
        # line 6 repeats the header
        (T(2026, 11, 2, 5, 30, 0, 101000), "gpu-a01", 0, 80.0, 40960.0, 290.0, 7, *a),
        (T(2026, 11, 2, 5, 30, 0, 102000), "gpu-a01", 1, 3.0, 512.0, None, 8, *b),
        (T(2026, 11, 2, 5, 45, 0, 101000), "gpu-a01", 0, None, 40960.0, None, 9, *a),  # [N/A]
        (T(2026, 11, 2, 5, 45, 0, 102000), "gpu-a01", 1, None, None, None, 10, None, None,
         "expected 7 fields, found 4"),
    ]  # fmt: skip


def test_in_utc_the_timestamps_are_taken_as_they_are(tmp_path):
    rows = rows_of(FIXTURES / "gpu-a01_2026-11.csv", tmp_path, ClusterSettings())
    assert [r[0] for r in rows[:2]] == [
        T(2026, 11, 2, 0, 0, 0, 101000),
        T(2026, 11, 2, 0, 0, 0, 102000),
    ]


def test_the_hour_repeated_when_clocks_go_back_is_placed_by_pass(tmp_path):
    rows = [(r[0], r[2], r[3]) for r in rows_of(FIXTURES / "gpu-b02.csv", tmp_path)]
    assert rows == [
        (T(2026, 11, 1, 4, 40, 0, 100000), 0, 10.0),  # 00:40 EDT
        (T(2026, 11, 1, 4, 40, 0, 150000), 1, 11.0),
        (T(2026, 11, 1, 5, 0, 0, 100000), 0, 20.0),  # 01:00 EDT, first pass
        (T(2026, 11, 1, 5, 0, 0, 150000), 1, 21.0),
        (T(2026, 11, 1, 5, 40, 0, 100000), 0, 30.0),  # 01:40 EDT
        (T(2026, 11, 1, 5, 40, 0, 150000), 1, 31.0),
        (T(2026, 11, 1, 6, 0, 0, 200000), 0, 40.0),  # 01:00 EST: the log stepped back
        (T(2026, 11, 1, 6, 0, 0, 250000), 1, 41.0),
        (T(2026, 11, 1, 6, 40, 0, 200000), 0, 50.0),  # 01:40 EST
        (T(2026, 11, 1, 6, 40, 0, 250000), 1, 51.0),
        (T(2026, 11, 1, 7, 0, 0, 200000), 0, 60.0),  # 02:00 EST
        (T(2026, 11, 1, 7, 0, 0, 250000), 1, 61.0),
    ]


def test_a_log_without_header_or_units_has_the_default_fields(tmp_path):
    assert rows_of(FIXTURES / "gpu-c03.log", tmp_path) == [
        (T(2026, 11, 3, 15, 0, 0, 500000), "gpu-c03", 0, 99.0, 81000.0, 690.12, 1,
         "GPU-c0c0c0c0-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", None),
        (T(2026, 11, 3, 15, 0, 0, 501000), "gpu-c03", 1, 0.0, 0.0, 70.0, 2,
         "GPU-c1c1c1c1-1111-1111-1111-111111111111", "NVIDIA H100 80GB HBM3", None),
    ]  # fmt: skip


def test_each_header_sets_the_columns_below_it(tmp_path):
    assert rows_of(FIXTURES / "d04-samples_2026-11.csv", tmp_path) == [
        (T(2026, 11, 4, 17, 0), "gpu-d04.example.org", 0, 50.0, 1000.0, 400.0, 2, None, None,
         None),
        # no hostname column any more: the file name up to `_`; no power field in this run
        (T(2026, 11, 4, 17, 1), "d04-samples", 0, 55.0, 1100.0, None, 4, None, None, None),
        # line 5 is blank
        (T(2026, 11, 4, 17, 2), "d04-samples", 0, None, None, None, 6, None, None,
         "expected 5 fields, found 6"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "node"),
    [("gpu-a01.csv", "gpu-a01"), ("gpu-a01_2026-11.csv", "gpu-a01"),
     ("gpu-a01.cluster.example.log", "gpu-a01.cluster.example"), ("gpu-a01", "gpu-a01"),
     ("gpu-a01.txt", "gpu-a01")],
)  # fmt: skip
def test_the_node_comes_from_the_file_name(tmp_path, name, node):
    path = tmp_path / name
    shutil.copy(FIXTURES / "gpu-c03.log", path)
    assert {r[1] for r in rows_of(path, tmp_path)} == {node}


def test_a_last_line_without_line_end_is_not_trusted(tmp_path):
    path = tmp_path / "n1.csv"
    path.write_text((FIXTURES / "gpu-c03.log").read_text().rstrip("\n"))  # complete, or not?
    rows = rows_of(path, tmp_path)
    assert [(r[3], r[9]) for r in rows] == [
        (99.0, None),
        (None, "the last line has no line end: cut off while being written"),
    ]


def test_a_value_that_is_no_number_names_its_field_and_value(tmp_path):
    path = tmp_path / "n1.csv"
    path.write_text(
        "timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw.average [W]\n"
        "2026/11/02 00:00:00.000, 0, abc %, 10 MiB, 100 W\n"
        "2026/11/02 00:00:00.000, 1, 50 %, 1O MiB, 100 W\n"
        "2026/11/02 00:00:00.000, 2, 50 %, 10 MiB, 1OO W\n"
        "2026/11/02 00:00:00.000, x1, 50 %, 10 MiB, 100 W\n"
        "2026/11/02 00:00:00.000, 4, 50 W, 10 MiB, 100 W\n"
        # none of these is garbage: nvidia-smi's [N/A] and [Not Supported], an empty field
        "2026/11/02 00:00:00.000, 5, [N/A], , [Not Supported]\n"
    )
    rows = [(r[2], r[3], r[4], r[5], r[6], r[9]) for r in rows_of(path, tmp_path)]
    assert rows == [
        (0, None, 10.0, 100.0, 2, "field utilization.gpu: 'abc %' is not a number"),
        (1, 50.0, None, 100.0, 3, "field memory.used: '1O MiB' is not a number"),
        (2, 50.0, 10.0, None, 4, "field power.draw.average: '1OO W' is not a number"),
        (None, 50.0, 10.0, 100.0, 5, "field index: 'x1' is not a GPU index"),
        (4, None, 10.0, 100.0, 6, "field utilization.gpu: '50 W' is not a number"),
        (5, None, None, None, 7, None),
    ]


def test_windows_line_ends_and_a_byte_order_mark(tmp_path):
    text = (FIXTURES / "gpu-a01_2026-11.csv").read_text().split("\n")[:3]
    path = tmp_path / "gpu-a01.csv"
    path.write_bytes(("\ufeff" + "\r\n".join(text) + "\r\n").encode())
    rows = rows_of(path, tmp_path)
    assert [(r[3], r[6], r[9]) for r in rows] == [(90.0, 2, None), (3.0, 3, None)]


@pytest.mark.parametrize(
    ("text", "settings", "message"),
    [
        ("timestamp, index, memory.used [MiB]\n2026/11/02 00:00:00.000, 0, 1 MiB\n", NEW_YORK,
         "line 1: field utilization.gpu: missing from the header (timestamp, index, "
         "memory.used)"),
        ("timestamp, index, utilization.gpu [%]\n2026/11/02 00:00:00.000, 0, 1 %\n"
         "timestamp, utilization.gpu [%]\n", NEW_YORK,
         "line 3: field index: missing from the header (timestamp, utilization.gpu)"),
        ("timestamp, index, utilization.gpu [%]\n", ClusterSettings(scheduler_timezone="Mars/Base"),
         "line 1: field timestamp: local times in 'Mars/Base', which is not a known time zone "
         "(scheduler_timezone in the catalog's settings.yaml)"),
    ],
)  # fmt: skip
def test_a_malformed_log_stops_with_file_line_and_field(tmp_path, text, settings, message):
    path = tmp_path / "gpu-a01.csv"
    path.write_text(text)
    with pytest.raises(LandingError) as error:  # the landing error, not any ValueError
        nvidia_smi.to_parquet(path, tmp_path / "out.partial", settings)
    assert str(error.value) == f"{path}: {message}"


def test_logs_are_recognised_by_content_not_extension(tmp_path):
    for name in ("gpu-a01_2026-11.csv", "gpu-c03.log", "d04-samples_2026-11.csv"):
        target = tmp_path / "telemetry/c1" / name.replace(".", "-")  # no extension
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / name, target)
    # `nvidia-smi ... > gpu.txt`, as a log is often saved
    shutil.copy(FIXTURES / "gpu-c03.log", tmp_path / "telemetry/c1/gpu-c03.txt")
    assert [f.format.name for f in discover(tmp_path, "telemetry")] == ["nvidia_smi"] * 4


@pytest.mark.parametrize(
    "text",
    [
        "timestamp,node,value\n2026/11/02 00:00:00,n1,5\n",  # a timestamp, but not nvidia-smi's
        "2026/11/02 00:00:00.000, 0, 90 %\n",  # headerless, but not the default fields
        "job_id,node,gpu_index\n",
    ],
)
def test_other_csv_is_not_taken_for_a_log(tmp_path, text):
    path = write(tmp_path / "telemetry/c1/gpu-a01.csv", text)
    with pytest.raises(LandingError) as error:
        discover(tmp_path, "telemetry")
    assert str(error.value).startswith(f"{path}: line 1: unrecognised export, expected ")
    assert "nvidia-smi" in str(error.value)


# ---- end to end ---------------------------------------------------------------------------

# The scheduler and the log both write New York time: J1 and J2 ran 00:00-01:00 EST on Nov 2.
JOBS = """
job_id,cluster,account,user,queue,qos,gpu_model,gpus,nodes,submit_time,start_time,end_time,state,exit_code
J1,ny,alpha,ann,batch,normal,A100,1,gpu-a01,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T01:00:00,COMPLETED,0
J2,ny,alpha,ann,batch,normal,A100,1,gpu-a01,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T01:00:00,COMPLETED,0
"""

ALLOCATIONS = """
job_id,node,gpu_index
J1,gpu-a01,0
J2,gpu-a01,1
"""


def build_smi_month(root: Path, *logs: Path) -> None:
    """Two one-hour jobs on gpu-a01's two GPUs, and the nvidia-smi `logs`, as cluster `ny`."""
    write(root / "landing/scheduler/ny/jobs.csv", JOBS)
    write(root / "landing/scheduler/ny/allocations.csv", ALLOCATIONS)
    for log in logs:
        target = root / "landing/telemetry/ny" / log.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(log, target)
    # the log's 15-minute step, declared: three samples a GPU are too few to estimate it
    write(
        root / "catalog/settings.yaml",
        "clusters:\n  ny: {scheduler_timezone: America/New_York, telemetry: {step_s: 900}}\n",
    )
    write(
        root / "catalog/tenants.yaml",
        """
        tenants:
          - {id: alpha, name: Alpha Lab, department: Science, cost_center: CC-1,
             accounts: [alpha]}
        """,
    )
    write(root / "catalog/rates.yaml", "rates:\n  - {gpu_model: '*', price_per_gpu_hour: 2.00}\n")
    write(root / "catalog/nodes.csv", "node,cluster,gpu_model,gpus\ngpu-a01,ny,A100,2\n")


@pytest.fixture(scope="module")
def smi_month(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("smi")
    build_smi_month(root, FIXTURES / "gpu-a01_2026-11.csv")
    assert materialize_month(root, "2026-11-01").success
    return root


@pytest.mark.slow
def test_jobs_are_measured_in_the_cluster_time_zone(smi_month):
    rows = query(
        smi_month,
        "select job_id, start_at, mean_util_pct, measured_gpu_hours, productive_gpu_hours, "
        "idle_gpu_hours, unmeasured_gpu_hours from job_usage order by job_id",
    )
    start = T(2026, 11, 2, 5)  # 00:00 EST
    assert rows == [
        # 90, 85, 80 % for 15 min each; the 00:45 sample is [N/A]
        ("J1", start, 85.0, 0.75, 0.75, 0.0, 0.25),
        # 3 % three times (idle, too short for zombie); the 00:45 line is cut off
        ("J2", start, 3.0, 0.75, 0.0, 0.75, 0.25),
    ]


@pytest.mark.slow
def test_rows_reconcile_and_rejects_name_the_line(smi_month):
    name = "telemetry/ny/gpu-a01_2026-11.csv"
    files = query(
        smi_month,
        "select subject, rows_read, rows_loaded, rows_rejected, duplicates_folded "
        "from data_quality where category = 'file' and subject like 'telemetry/%'",
    )
    # 10 lines: 2 headers (not samples) and 8 samples
    assert files == [(name, 8, 6, 2, 0)]
    rejects = query(smi_month, "select file, line, reason from rejects order by line")
    assert rejects == [
        (name, 9, "field util_pct: missing"),  # [N/A] utilisation
        (name, 10, "expected 7 fields, found 4"),  # the truncated last line
    ]


@pytest.mark.slow
def test_a_log_missing_a_required_column_stops_the_run_naming_it(tmp_path):
    bad = tmp_path / "gpu-a02.csv"
    bad.write_text("timestamp, index, memory.used [MiB]\n2026/11/02 00:00:00.000, 0, 1 MiB\n")
    build_smi_month(tmp_path / "month", FIXTURES / "gpu-a01_2026-11.csv", bad)
    with pytest.raises(ValueError) as error:
        materialize_month(tmp_path / "month", "2026-11-01")
    path = tmp_path / "month/landing/telemetry/ny/gpu-a02.csv"
    assert str(error.value).startswith(f"{path}: line 1: field utilization.gpu: missing")
    assert "\n" not in str(error.value)
