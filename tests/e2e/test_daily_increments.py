"""Daily telemetry rollups: processing a month day by day gives the marts of processing it whole.

The tiny month (tests/e2e/test_tiny_month.py) with its telemetry landed as one file per UTC day:

- whole month: every file landed, the month's days rolled up in one run, then the month;
- day by day: each day rolled up in a run of its own as its file lands, except Nov 15 whose
  file lands late, after the month ran: then only that day and the month's assets re-run.

Both give the same rollup Parquet and the same rows in every monthly table. And the days rolled
up by two runs at once under Dagster's multiprocess executor (the step in a child process) give
the Parquet and marts of an in-process run.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pipelines.definitions import all_assets
from pipelines.defs.resources import ChargebackResource
from pipelines.defs.schedules import ROLLUP
from tests.conftest import (
    materialize_days,
    materialize_month,
    materialize_monthly,
    month_days,
    query,
    resource_for,
)
from tests.e2e.test_tiny_month import build_tiny_month

# slow (quick tier: make test-quick): materialises the tiny month day by day, whole and
# under the multiprocess executor
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DAGSTER = REPO / ".venv" / "bin" / "dagster"
MONTH = "2026-11-01"
LATE_DAY = "2026-11-15"


def build_daily_files(root: Path) -> Path:
    """The tiny month with a.parquet split into one file per UTC day; returns the folder of
    the held-back late file (nothing else is in it)."""
    build_tiny_month(root)
    telemetry = root / "landing/telemetry/tiny"
    late = root / "late"
    late.mkdir()
    con = duckdb.connect()
    try:
        days = [d for (d,) in con.execute(
            "select distinct ts::date::varchar from read_parquet(?) order by 1",
            [str(telemetry / "a.parquet")],
        ).fetchall()]  # fmt: skip
        for day in days:
            folder = late if day == LATE_DAY else telemetry
            con.execute(
                f"copy (select * from read_parquet('{telemetry}/a.parquet') "
                f"where ts::date = '{day}' order by node, gpu_index, ts) "
                f"to '{folder}/samples-{day}.parquet'"
            )
    finally:
        con.close()
    (telemetry / "a.parquet").unlink()
    return late


def monthly_tables(root: Path) -> dict[str, list[tuple]]:
    """Every row of every table with a billing_month column, in a fixed order."""
    con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        tables = [t for (t,) in con.execute(
            "select distinct table_name from information_schema.columns "
            "where column_name = 'billing_month' order by 1"
        ).fetchall()]  # fmt: skip
        return {t: con.execute(f"select * from {t} order by all").fetchall() for t in tables}
    finally:
        con.close()


def rollup_rows(root: Path) -> dict[str, list[tuple]]:
    """Every row of the rollup and quality Parquet, per file path under the telemetry folder."""
    telemetry = resource_for(root).telemetry_dir
    files = sorted([*telemetry.glob("cluster=*/day=*/*.parquet"), *telemetry.glob("quality/*/*")])
    con = duckdb.connect()
    try:
        return {
            path.relative_to(telemetry).as_posix(): con.execute(
                "select * from read_parquet(?) order by all", [str(path)]
            ).fetchall()
            for path in files
        }
    finally:
        con.close()


def assert_same_tables(got: dict[str, list[tuple]], expected: dict[str, list[tuple]]) -> None:
    assert sorted(got) == sorted(expected)
    differ = [name for name in expected if got[name] != expected[name]]
    assert not differ, f"differ: {differ}"


@pytest.fixture(scope="module")
def whole_month(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("whole")
    late = build_daily_files(root)
    shutil.move(late / f"samples-{LATE_DAY}.parquet", root / "landing/telemetry/tiny")
    assert materialize_month(root, MONTH).success
    return root


def test_day_by_day_with_a_late_day_gives_the_marts_of_the_whole_month(whole_month, tmp_path):
    root = tmp_path
    late = build_daily_files(root)
    for day in month_days(root, MONTH):  # each day's file lands, then its day runs
        assert materialize_days(root, [day]).success
    assert materialize_month(root, MONTH).success
    before_late = monthly_tables(root)
    # J7's samples (Nov 15) were missing: the day lands late, it and the month re-run alone
    assert before_late["job_usage"] != monthly_tables(whole_month)["job_usage"]
    shutil.move(late / f"samples-{LATE_DAY}.parquet", root / "landing/telemetry/tiny")
    # the month alone again would leave the landed file out of every figure and count: it stops
    with pytest.raises(ValueError) as stop:
        materialize_monthly(root, MONTH)
    assert str(stop.value) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-15 rolled up before their telemetry landed "
        "or changed (telemetry/tiny/samples-2026-11-15.parquet: 5 rows in 2026-11-15 now, 0 "
        "when rolled up): materialise gpu_sample_rollup for these days again"
    )
    assert materialize_days(root, [dt.date.fromisoformat(LATE_DAY)]).success
    monthly = dg.materialize(
        [*all_assets],
        selection=dg.AssetSelection.all() - ROLLUP,
        partition_key=MONTH,
        resources={"chargeback": resource_for(root)},
    )
    assert monthly.success

    assert_same_tables(rollup_rows(root), rollup_rows(whole_month))
    assert_same_tables(monthly_tables(root), monthly_tables(whole_month))
    # the hand-computed figures of test_tiny_month, J1's zombie and J7's late samples included
    assert query(
        root,
        "select job_id, productive_gpu_hours, zombie_gpu_hours, unmeasured_gpu_hours "
        "from job_usage where job_id in ('J1', 'J2', 'J7') order by 1",
    ) == [("J1", 1.0, 2.0, 0.0), ("J2", 1.0, 0.0, 1.0), ("J7", 0.75, 0.0, 0.0)]


def test_a_month_stops_when_one_of_its_days_is_not_rolled_up(tmp_path):
    build_daily_files(tmp_path)
    days = month_days(tmp_path, MONTH)
    assert materialize_days(tmp_path, days[:14] + days[15:16]).success  # Nov 15, 16 only later
    with pytest.raises(ValueError, match="telemetry of 2026-11: UTC day"):
        dg.materialize(
            [*all_assets],
            selection=dg.AssetSelection.all() - ROLLUP,
            partition_key=MONTH,
            resources={"chargeback": resource_for(tmp_path)},
        )


def rollup_job_multiprocess() -> dg.JobDefinition:
    """The daily rollup job under the multiprocess executor, paths from CHARGEBACK_* (a child
    process rebuilds it from this function)."""
    return dg.Definitions(
        assets=all_assets,
        jobs=[
            dg.define_asset_job(
                "rollup_multiprocess", selection=ROLLUP, executor_def=dg.multiprocess_executor
            )
        ],
        resources={"chargeback": ChargebackResource.from_env()},
    ).resolve_job_def("rollup_multiprocess")


def test_days_under_the_multiprocess_executor_match_an_in_process_run(
    whole_month, tmp_path, monkeypatch
):
    root = tmp_path / "multiprocess"
    build_daily_files(root)
    shutil.move(root / f"late/samples-{LATE_DAY}.parquet", root / "landing/telemetry/tiny")
    chargeback = resource_for(root)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    for name, value in {
        "DAGSTER_HOME": str(home),
        "CHARGEBACK_LANDING_DIR": chargeback.landing_dir,
        "CHARGEBACK_CATALOG_DIR": chargeback.catalog_dir,
        "CHARGEBACK_WAREHOUSE": chargeback.warehouse,
        "CHARGEBACK_REPORTS_DIR": chargeback.reports_dir,
        "CHARGEBACK_DUCKDB_MEMORY_LIMIT": chargeback.duckdb_memory_limit,
    }.items():
        monkeypatch.setenv(name, value)
    days = month_days(root, MONTH)
    # the instance's storage is made once, before the two runs: two processes creating the
    # SQLite schedule storage of an empty DAGSTER_HOME at once stamp its schema version twice
    # ("Version table 'alembic_version' has more than one head present")
    instance = dg.DagsterInstance.get()
    # two processes at once: the second half of the month from the CLI (in-process executor)
    # while a multiprocess-executor run rolls up the first half in a child process
    cli = subprocess.Popen(
        [str(DAGSTER), "asset", "materialize", "-m", "pipelines.definitions", "--select",
         "gpu_sample_rollup", "--partition-range", f"{days[15]}...{days[-1]}"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    tags = {
        "dagster/asset_partition_range_start": days[0].isoformat(),
        "dagster/asset_partition_range_end": days[14].isoformat(),
    }
    with (
        instance,
        dg.execute_job(
            dg.build_reconstructable_job(
                "tests.e2e.test_daily_increments", "rollup_job_multiprocess"
            ),
            instance=instance,
            tags=tags,
        ) as result,
    ):
        assert result.success
        [step] = result.get_step_success_events()
        assert step.pid != os.getpid()  # the step ran in a process of its own
    output, _ = cli.communicate(timeout=180)
    assert cli.returncode == 0, output[-3000:]

    assert_same_tables(rollup_rows(root), rollup_rows(whole_month))
    monthly = dg.materialize(
        [*all_assets],
        selection=dg.AssetSelection.all() - ROLLUP,
        partition_key=MONTH,
        resources={"chargeback": chargeback},
    )
    assert monthly.success
    assert_same_tables(monthly_tables(root), monthly_tables(whole_month))


def test_rows_without_a_readable_timestamp_count_once_in_the_month_of_their_file(tmp_path):
    # a file with samples on Oct 31 and Nov 1 and a row without a timestamp: it counts in the
    # day of the file's first readable sample (Oct 31), so in October's data quality only
    build_tiny_month(tmp_path)
    telemetry = tmp_path / "landing/telemetry/tiny"
    con = duckdb.connect()
    con.execute(
        f"copy (select * from read_parquet('{telemetry}/a.parquet') "
        "where ts < '2026-11-01 01:00' union all "
        "select 'n1', 1, null, 50, 0, 0 order by ts nulls last, node, gpu_index) "
        "to '" + str(telemetry / "c.parquet") + "'"
    )
    con.close()
    assert materialize_month(tmp_path, "2026-10-01").success
    assert materialize_month(tmp_path, MONTH).success
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "select billing_month::varchar, subject, rows_read, rows_rejected from data_quality "
            "where subject = 'telemetry/tiny/c.parquet' order by 1"
        ).fetchall()
        rejects = con.execute(
            "select billing_month::varchar, file, line, reason from rejects "
            "where file = 'telemetry/tiny/c.parquet'"
        ).fetchall()
    finally:
        con.close()
    # Oct 31 23:00-23:50 (6) + the unreadable row; Nov 1 00:00-00:50, both GPUs (12)
    assert rows == [
        ("2026-10-01", "telemetry/tiny/c.parquet", 7, 1),
        ("2026-11-01", "telemetry/tiny/c.parquet", 12, 0),
    ]
    assert rejects == [
        ("2026-10-01", "telemetry/tiny/c.parquet", 19, "field ts: missing or not a timestamp")
    ]
