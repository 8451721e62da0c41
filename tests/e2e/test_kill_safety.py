"""Killed, failed and concurrent runs lose nothing: real `dagster asset materialize` processes
killed (SIGKILL) or paused (SIGSTOP) at named checkpoints (CHARGEBACK_TEST_KILL_AT,
pipelines/checkpoints.py); a run's warehouse and reports switch as one (pipelines/commit.py).

Every dataset here is a copy of one history of the hand-computed tiny month: run at the A100
rate of 3.00 (the reference: an uninterrupted run of the inputs the tests then run), then at
2.0133 (the published reports a killed run must leave), then rates.yaml set back to 3.00. The
runs use paths relative to the dataset's folder, so that a copy gives the same report bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pipelines.definitions import all_assets
from pipelines.defs.resources import ChargebackResource
from pipelines.defs.schedules import ROLLUP
from tests.conftest import month_days, write
from tests.e2e.test_cli import DAGSTER, cli_env
from tests.e2e.test_tiny_month import ALLOCATIONS, build_tiny_month

MONTH = "2026-11-01"
MONTHLY = [str(DAGSTER), "asset", "materialize", "-m", "pipelines.definitions",
           "--select", "not key:gpu_sample_rollup", "--partition", MONTH]  # fmt: skip
RATES = """
rates:
  - {{gpu_model: A100, price_per_gpu_hour: {a100}}}
  - {{gpu_model: "*", price_per_gpu_hour: 1.00}}
"""
# 10.75 A100 hours and J6's 1.5 H100 hours (credited), J3's hour in the outage credited
OLD_TOTAL, NEW_TOTAL = Decimal("19.63"), Decimal("29.25")  # 2.0133 / 3.00 an A100 hour
TOTAL_SQL = "select sum(amount) from charge_lines where billing_month = '2026-11-01'"


@dataclass(frozen=True)
class History:
    root: Path
    old: dict[str, bytes]  # the published reports: run at 2.0133, the last run
    new: dict[str, bytes]  # an uninterrupted run at 3.00
    warehouse: bytes  # the live warehouse after the last run


def resource() -> ChargebackResource:
    """The dataset's paths relative to the working directory."""
    return ChargebackResource(
        landing_dir="landing", catalog_dir="catalog", warehouse="warehouse.duckdb",
        reports_dir="reports", duckdb_memory_limit="1GB",
    )  # fmt: skip


def run_month_in_process(root: Path) -> dg.ExecuteInProcessResult:
    with contextlib.chdir(root):
        return dg.materialize(
            all_assets,
            selection=dg.AssetSelection.all() - ROLLUP,
            partition_key=MONTH,
            resources={"chargeback": resource()},
            raise_on_error=False,
        )


def set_a100_rate(root: Path, rate: str) -> None:
    write(root / "catalog/rates.yaml", RATES.format(a100=rate))


def reports_of(root: Path) -> dict[str, bytes]:
    """Every file of the month's reports folder, hidden ones included, by relative path."""
    folder = root / "reports" / "2026-11"
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def without_run_id(files: dict[str, bytes]) -> dict[str, object]:
    """The reports with the manifest parsed and its Dagster run id left out: the one thing
    two runs of the same inputs write differently."""
    manifest = json.loads(files["manifest.json"])
    del manifest["dagster_run_id"]
    return {**files, "manifest.json": manifest}


def total(database: Path) -> Decimal:
    con = duckdb.connect(str(database), read_only=True)
    try:
        return con.execute(TOTAL_SQL).fetchone()[0]
    finally:
        con.close()


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> History:
    root = tmp_path_factory.mktemp("history") / "data"
    build_tiny_month(root)
    with contextlib.chdir(root):
        days = month_days(root, MONTH)
        rollup = dg.materialize(
            all_assets,
            selection=ROLLUP,
            tags={
                "dagster/asset_partition_range_start": days[0].isoformat(),
                "dagster/asset_partition_range_end": days[-1].isoformat(),
            },
            resources={"chargeback": resource()},
        )
    assert rollup.success
    set_a100_rate(root, "3.00")
    assert run_month_in_process(root).success
    new = reports_of(root)
    set_a100_rate(root, "2.0133")
    assert run_month_in_process(root).success
    assert total(root / "warehouse.duckdb") == OLD_TOTAL
    set_a100_rate(root, "3.00")
    return History(root, reports_of(root), new, (root / "warehouse.duckdb").read_bytes())


@pytest.fixture
def dataset(history, tmp_path) -> Path:
    """A copy of the history (reports at 2.0133 published, rates.yaml at 3.00) and a
    DAGSTER_HOME for its processes."""
    root = tmp_path / "data"
    shutil.copytree(history.root, root, symlinks=True)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return root


@dataclass(frozen=True)
class Process:
    """A dagster command running in a dataset's folder; its output goes to a file (a paused
    process must not block on a full pipe)."""

    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text()

    def finish(self, timeout: int = 300) -> int:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            raise

    def stopped(self) -> bool:
        """Whether the process is paused by a signal (state T in /proc)."""
        assert self.popen.poll() is None, self.output()[-3000:]
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "T"


def start(root: Path, args: list[str], **env: str) -> Process:
    home = root.parent / "dagster_home"
    relative = {
        "CHARGEBACK_LANDING_DIR": "landing", "CHARGEBACK_CATALOG_DIR": "catalog",
        "CHARGEBACK_WAREHOUSE": "warehouse.duckdb", "CHARGEBACK_REPORTS_DIR": "reports",
    }  # fmt: skip
    log = root.parent / f"run-{time.monotonic_ns()}.log"
    with log.open("w") as out:
        popen = subprocess.Popen(
            args, cwd=root, env=cli_env(root, home, **relative, **env),
            stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    return Process(popen, log)


def wait_until(condition, timeout: float = 240.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


# What a kill at each checkpoint leaves (pipelines/commit.py): before the commit record, the
# previous reports and the live warehouse untouched; after it, a commit the next run finishes.
KILLS = {
    "after_stg_jobs": "old",  # during the monthly assets
    "workbook_half_written": "old",
    "before_commit": "old",  # every report in staging, the record written aside
    "during_publish": "committed",  # the reports switched, the previous ones not yet removed
    "during_commit": "committed",  # the reports switched, the warehouse not yet
}


def leftovers(root: Path) -> list[str]:
    """What runs leave beside the warehouse and in the reports folder besides the month."""
    return sorted(
        [p.name for p in root.iterdir() if p.name.startswith("warehouse.")]
        + [p.relative_to(root).as_posix() for p in (root / "reports").glob(".*/*")]
    )


@pytest.mark.slow
@pytest.mark.parametrize("point", KILLS)
def test_a_killed_run_leaves_the_last_generation_or_a_commit_to_finish(history, dataset, point):
    killed = start(dataset, MONTHLY, CHARGEBACK_TEST_KILL_AT=point)
    assert killed.finish() == -signal.SIGKILL, killed.output()[-3000:]
    warehouse, record = dataset / "warehouse.duckdb", dataset / "warehouse.duckdb.commit.json"

    # the live warehouse is the last run's, to the byte, until a commit record says otherwise
    assert warehouse.read_bytes() == history.warehouse
    assert record.exists() == (KILLS[point] == "committed")
    work = f"warehouse.run-*@{socket.gethostname()}@{killed.pid}.duckdb"
    if KILLS[point] == "old":
        assert reports_of(dataset) == history.old  # the same bytes, and no other file
        assert len(list(dataset.glob(work))) == 1  # the dead run's working copy
    else:
        assert without_run_id(reports_of(dataset)) == without_run_id(history.new)

    # the next use of the warehouse (here a look between runs) finishes the commit, or removes
    # what the dead run left
    with contextlib.chdir(dataset), resource().connect() as con:
        [(amount,)] = con.execute(TOTAL_SQL).fetchall()
    assert amount == (NEW_TOTAL if KILLS[point] == "committed" else OLD_TOTAL)
    assert leftovers(dataset) == ["warehouse.duckdb", "warehouse.duckdb.lock"]
    if KILLS[point] == "old":
        assert reports_of(dataset) == history.old

    rerun = run_month_in_process(dataset)
    assert rerun.success
    assert without_run_id(reports_of(dataset)) == without_run_id(history.new)
    assert sorted(p.name for p in (dataset / "reports").iterdir()) == ["2026-11"]
    assert total(warehouse) == NEW_TOTAL


@pytest.mark.slow
def test_a_killed_rollup_day_leaves_the_day_as_it_was(history, dataset):
    day = "day=2026-11-15"
    telemetry = dataset / "warehouse_telemetry"

    def day_files() -> dict[str, bytes]:
        return {
            p.relative_to(telemetry).as_posix(): p.read_bytes()
            for p in sorted(telemetry.glob(f"**/{day}/*"))
            if not p.relative_to(telemetry).as_posix().startswith(".staging/")
        }

    before = day_files()
    assert sorted(before) == [
        "cluster=tiny/day=2026-11-15/hours_0_0.parquet",
        "cluster=tiny/day=2026-11-15/samples_0_0.parquet",
        f"quality/{day}/sample_file_counts.parquet",
        f"quality/{day}/sample_nodes.parquet",
        f"quality/{day}/sample_rejects.parquet",
        f"quality/{day}/sample_series.parquet",
    ]
    # a late export with three more samples that day: the day's rollup would change
    con = duckdb.connect()
    con.execute(
        "copy (select 'n1' as node, 1 as gpu_index, "
        "'2026-11-15 12:00'::timestamp + to_minutes(10 * i) as ts, 40.0 as util_pct, "
        "1000.0 as mem_used_mib, 200.0 as power_w from range(3) as r(i)) "
        f"to '{dataset}/landing/telemetry/tiny/c.parquet'"
    )
    con.close()
    rollup = [str(DAGSTER), "asset", "materialize", "-m", "pipelines.definitions",
              "--select", "gpu_sample_rollup", "--partition", "2026-11-15"]  # fmt: skip

    killed = start(dataset, rollup, CHARGEBACK_TEST_KILL_AT="rollup_day_written")
    assert killed.finish() == -signal.SIGKILL, killed.output()[-3000:]
    assert day_files() == before
    assert reports_of(dataset) == history.old
    [left] = (telemetry / ".staging").iterdir()
    assert left.name.startswith(f"{day}-") and left.name.endswith(f"@{killed.pid}")

    again = start(dataset, rollup)
    assert again.finish() == 0, again.output()[-3000:]
    assert list((telemetry / ".staging").iterdir()) == []  # the dead run's folder removed
    counts = duckdb.sql(
        f"select file, rows_read from '{telemetry}/quality/{day}/sample_file_counts.parquet' "
        "order by file"
    ).fetchall()
    assert counts == [
        ("telemetry/tiny/a.parquet", 5),
        ("telemetry/tiny/b.parquet", 1),
        ("telemetry/tiny/c.parquet", 3),
    ]


@pytest.mark.slow
def test_a_run_that_fails_leaves_the_previous_reports_whole(history, dataset):
    # J9 on a GPU J7 holds: the blocking capacity check fails and the workbook is not written,
    # after the FOCUS export (which needs only the charge lines) was
    write(
        dataset / "landing/scheduler/tiny/allocations.csv",
        ALLOCATIONS.replace("J7,n1,0", "J7,n1,1") + "J9,n1,1\n",
    )
    jobs = dataset / "landing/scheduler/tiny/jobs.csv"
    jobs.write_text(
        jobs.read_text()
        + "J9,tiny,alpha,ann,batch,normal,A100,1,n1,2026-11-15T09:00:00,2026-11-15T10:15:00,"
        "2026-11-15T10:30:00,COMPLETED,0\n"
    )
    failed = run_month_in_process(dataset)
    assert not failed.success
    ran = {event.step_key for event in failed.get_step_success_events()}
    assert "focus_export" in ran and "chargeback_workbook" not in ran
    assert reports_of(dataset) == history.old
    assert not (dataset / "reports" / ".staging").exists()  # the run removed its staging
    # the live warehouse as it was; the failed run's tables kept aside to look into
    assert (dataset / "warehouse.duckdb").read_bytes() == history.warehouse
    assert total(dataset / "warehouse_failed.duckdb") == Decimal("30.00")  # J9: 0.25 h x 3.00
    assert leftovers(dataset) == ["warehouse.duckdb", "warehouse.duckdb.lock"]


@pytest.mark.slow
def test_a_second_run_of_the_month_waits_for_the_first_or_stops_with_one_line(history, dataset):
    # paused between two steps, the warehouse closed: only the run lock keeps others out
    first = start(dataset, MONTHLY, CHARGEBACK_TEST_KILL_AT="after_stg_jobs:SIGSTOP")
    wait_until(first.stopped, what="the first run to pause")
    warehouse = dataset / "warehouse.duckdb"
    impatient = start(dataset, MONTHLY, CHARGEBACK_LOCK_WAIT_S="1")
    patient = start(dataset, MONTHLY, CHARGEBACK_LOCK_WAIT_S="300")
    try:
        assert impatient.finish() == 1
        waiting = f"warehouse {warehouse} is in use by pid {first.pid}; waiting up to 300 s"
        wait_until(lambda: waiting in patient.output(), what="the second run to wait")
        assert patient.popen.poll() is None
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert first.finish() == 0, first.output()[-3000:]
    assert patient.finish() == 0, patient.output()[-3000:]

    stop = impatient.output()
    assert (
        f"pipelines.locking.WarehouseBusy: warehouse {warehouse} is still in use by pid "
        f"{first.pid} after 1 s: stopped (CHARGEBACK_LOCK_WAIT_S sets the wait)\n" in stop
    )
    assert "IOException" not in stop and "Could not set lock" not in stop  # no DuckDB trace
    assert without_run_id(reports_of(dataset)) == without_run_id(history.new)
    assert total(dataset / "warehouse.duckdb") == NEW_TOTAL


HOLD = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "read")
sql = "select sum(amount)::varchar from charge_lines where billing_month = '2026-11-01'"
print(con.execute(sql).fetchone()[0], flush=True)
for _ in sys.stdin:
    print(con.execute(sql).fetchone()[0], flush=True)
"""


def open_database(database: Path, mode: str) -> subprocess.Popen:
    """A process with the database open (`read`: a BI tool; `write`: a session that may
    write): prints the month's total when opened and at each line sent to it, until its
    stdin closes."""
    return subprocess.Popen(
        [str(DAGSTER.with_name("python")), "-c", HOLD, str(database), mode],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


def read_total(reader: subprocess.Popen, ask: bool = True) -> Decimal:
    if ask:
        reader.stdin.write("\n")
        reader.stdin.flush()
    return Decimal(reader.stdout.readline())


@pytest.mark.slow
def test_a_writer_delays_the_run_and_a_reader_never_does(dataset):
    warehouse = dataset / "warehouse.duckdb"
    writer = open_database(warehouse, "write")
    assert read_total(writer, ask=False) == OLD_TOTAL
    run = start(dataset, MONTHLY, CHARGEBACK_TEST_KILL_AT="after_charge_lines:SIGSTOP")
    waiting = f"warehouse {warehouse} is in use by pid {writer.pid}; waiting up to 300 s"
    try:
        wait_until(lambda: waiting in run.output(), what="the run to wait for the writer")
    finally:
        writer.stdin.close()
        assert writer.wait(timeout=30) == 0
    # the writer gone, the run goes on: paused with the month's charge lines rebuilt in its
    # working copy; a reader opens the live warehouse meanwhile and holds it to the end
    wait_until(run.stopped, what="the run to pause")
    reader = open_database(warehouse, "read")
    try:
        assert read_total(reader, ask=False) == OLD_TOTAL
        os.kill(run.pid, signal.SIGCONT)
        assert run.finish() == 0, run.output()[-3000:]
        # the run renamed the new warehouse over the one the reader holds: it reads the
        # generation it opened until it reconnects
        assert read_total(reader) == OLD_TOTAL
    finally:
        reader.stdin.close()
        reader.wait(timeout=30)
    assert total(warehouse) == NEW_TOTAL
