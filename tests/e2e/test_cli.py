"""The dagster command lines a developer runs, as subprocesses from the repository root.

`dagster asset materialize` has no `-w` option in Dagster 1.13 (only `-m`/`-f`/...), so the
materialisations use `-m pipelines.definitions`; they run in-process and need no daemon.
A run holds one partitioning: the telemetry days first (`--select gpu_sample_rollup`), then
the months (`--select 'not key:gpu_sample_rollup'`), as `make demo` does.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pytest

from tests.conftest import query
from tests.e2e.test_tiny_month import build_tiny_month

REPO = Path(__file__).resolve().parents[2]
DAGSTER = REPO / ".venv" / "bin" / "dagster"
CHARGES_BY_MONTH = """
select billing_month::varchar, charge_category, sum(amount), count(*)
from charge_lines group by all order by 1, 2
"""
TOTAL_BY_MONTH = (
    "select billing_month::varchar, sum(amount) from charge_lines group by 1 order by 1"
)
MATERIALIZE = [str(DAGSTER), "asset", "materialize", "-m", "pipelines.definitions"]
DAYS = [*MATERIALIZE, "--select", "gpu_sample_rollup"]
MONTHS = [*MATERIALIZE, "--select", "not key:gpu_sample_rollup"]


def cli_env(root: Path, dagster_home: Path, **overrides: str) -> dict[str, str]:
    """The environment of one CLI call: its own DAGSTER_HOME and dataset under tmp_path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARGEBACK_", "DAGSTER_"))}
    env.update(
        DAGSTER_HOME=str(dagster_home),
        CHARGEBACK_FIRST_MONTH="2026-09",
        CHARGEBACK_LANDING_DIR=str(root / "landing"),
        CHARGEBACK_CATALOG_DIR=str(root / "catalog"),
        CHARGEBACK_WAREHOUSE=str(root / "warehouse.duckdb"),
        CHARGEBACK_REPORTS_DIR=str(root / "reports"),
        CHARGEBACK_DUCKDB_MEMORY_LIMIT="1GB",
    )
    env.update(overrides)
    return env


def dagster_cli(args: list[str], env: dict[str, str], timeout: int = 180):
    return subprocess.run(
        args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def output_tail(result: subprocess.CompletedProcess, lines: int = 50) -> str:
    """The command and its last log lines, without DEBUG events and traceback frames."""

    def last(text: str) -> str:
        kept = [
            line
            for line in text.splitlines()
            if line.strip() and " - DEBUG - " not in line and not line.startswith((" ", "\t"))
        ]
        return "\n".join(kept[-lines:])

    return (
        f"exit {result.returncode}: {' '.join(result.args)}\n"
        f"--- stdout ---\n{last(result.stdout)}\n--- stderr ---\n{last(result.stderr)}"
    )


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> tuple[Path, Path]:
    """The hand-computed dataset (jobs in Oct and Nov 2026) and an empty DAGSTER_HOME."""
    data = tmp_path / "data"
    build_tiny_month(data)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return data, home


def test_definitions_validate_with_the_workspace(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    cmd = [str(DAGSTER), "definitions", "validate", "-w", "workspace.yaml"]
    result = dagster_cli(cmd, cli_env(tmp_path, home))
    assert result.returncode == 0, output_tail(result)
    assert "Validation successful for code location gpu_chargeback" in result.stdout + result.stderr

    # the same command notices a location that does not load (a bad first month)
    broken = dagster_cli(cmd, cli_env(tmp_path, home, CHARGEBACK_FIRST_MONTH="not-a-month"))
    assert broken.returncode == 1, output_tail(broken)
    expected = "CHARGEBACK_FIRST_MONTH not-a-month: not a month (YYYY-MM, e.g. 2026-11)"
    assert expected in broken.stdout + broken.stderr


@pytest.mark.slow
def test_partition_range_materialises_both_months_in_one_run(tiny_dataset, monkeypatch):
    data, home = tiny_dataset
    days = dagster_cli([*DAYS, "--partition-range", "2026-10-01...2026-11-30"], cli_env(data, home))
    assert days.returncode == 0, output_tail(days)
    result = dagster_cli(
        [*MONTHS, "--partition-range", "2026-10-01...2026-11-01"], cli_env(data, home)
    )
    assert result.returncode == 0, output_tail(result)

    assert query(data, CHARGES_BY_MONTH) == [
        ("2026-10-01", "Usage", Decimal("4.03"), 1),
        ("2026-11-01", "Credit", Decimal("-3.51"), 2),
        ("2026-11-01", "Usage", Decimal("23.14"), 4),
    ]
    assert query(data, TOTAL_BY_MONTH) == [
        ("2026-10-01", Decimal("4.03")),
        ("2026-11-01", Decimal("19.63")),
    ]
    # J2 runs Oct 31 22:00 - Nov 1 02:00: two hours in each month
    assert query(
        data,
        "select billing_month::varchar, allocated_gpu_hours from job_usage "
        "where job_id = 'J2' order by 1",
    ) == [("2026-10-01", 2.0), ("2026-11-01", 2.0)]
    assert query(
        data,
        """
        select billing_month::varchar, gpu_model,
               sum(gpu_hours) filter (where bucket = 'capacity'),
               sum(gpu_hours) filter (where bucket <> 'capacity')
        from capacity_buckets group by all order by 1, 2
        """,
    ) == [
        ("2026-10-01", "A100", 1488.0, 1488.0),
        ("2026-11-01", "A100", 1440.0, 1440.0),
        ("2026-11-01", "H100", 360.0, 360.0),
    ]

    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        runs = [record.dagster_run for record in instance.get_run_records()]
        materialised = {
            record.partition_key
            for record in instance.fetch_materializations(
                dg.AssetKey("charge_lines"), limit=10
            ).records
        }
    # one run of the 61 days, one of the two months (runs are listed newest first)
    assert [(r.status, r.tags["dagster/asset_partition_range_start"],
             r.tags["dagster/asset_partition_range_end"]) for r in runs] == [
        (dg.DagsterRunStatus.SUCCESS, "2026-10-01", "2026-11-01"),
        (dg.DagsterRunStatus.SUCCESS, "2026-10-01", "2026-11-30"),
    ]  # fmt: skip
    assert materialised == {"2026-10-01", "2026-11-01"}


@pytest.mark.slow
def test_single_partition_materialises_november(tiny_dataset):
    data, home = tiny_dataset
    days = dagster_cli([*DAYS, "--partition-range", "2026-11-01...2026-11-30"], cli_env(data, home))
    assert days.returncode == 0, output_tail(days)
    result = dagster_cli([*MONTHS, "--partition", "2026-11-01"], cli_env(data, home))
    assert result.returncode == 0, output_tail(result)

    # usage 23.14 (the hand-computed month) less 3.51 of failed_infra credits
    assert query(data, CHARGES_BY_MONTH) == [
        ("2026-11-01", "Credit", Decimal("-3.51"), 2),
        ("2026-11-01", "Usage", Decimal("23.14"), 4),
    ]
    assert query(data, TOTAL_BY_MONTH) == [("2026-11-01", Decimal("19.63"))]
    assert query(
        data,
        "select distinct billing_month from job_usage union select billing_month "
        "from tenant_month union select billing_month from capacity_buckets",
    ) == [(dt.date(2026, 11, 1),)]
    assert (data / "reports" / "2026-11" / "chargeback-2026-11.xlsx").is_file()
