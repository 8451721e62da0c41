"""Reproducible to the byte (DESIGN.md): the small demo month generated and run again in a
second, fresh and differently named set of folders, with DuckDB's default threads, gives the
same reports byte for byte, the same manifest but for the run's id and times, and the same
marts row for row."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import duckdb
import pytest

from simulator.demo import generate_demo
from tests.conftest import materialize_month

pytestmark = pytest.mark.slow

MONTH = "2026-11-01"
LABEL = "2026-11"
# every mart a report reads, and the facts the utilisation figures are summed from
TABLES = (
    "job_sample_time", "job_time_buckets", "job_usage", "charge_lines", "tenant_month",
    "capacity_buckets", "utilization_daily", "quota_compliance", "queue_stats",
    "capacity_evidence", "failure_stats", "data_quality", "telemetry_label_checks",
)  # fmt: skip


@pytest.fixture(scope="module")
def two_runs(demo_month, tmp_path_factory) -> tuple[Path, Path]:
    """The session's demo month and the same month run again in other folders."""
    first, _ = demo_month
    second = tmp_path_factory.mktemp("rerun")
    generate_demo(second, month=LABEL, seed=7, small=True)
    assert materialize_month(second, MONTH).success
    assert first.name != second.name
    return first, second


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def _differences(name: str, first: bytes, second: bytes) -> list[str]:
    """`name`, or for a workbook the parts of it that differ (content or zip entry date)."""
    if not name.endswith(".xlsx"):
        return [name]
    parts = []
    with zipfile.ZipFile(io.BytesIO(first)) as a, zipfile.ZipFile(io.BytesIO(second)) as b:
        entries_a, entries_b = a.infolist(), b.infolist()
        if [e.filename for e in entries_a] != [e.filename for e in entries_b]:
            return [f"{name}: zip entries"]
        for ea, eb in zip(entries_a, entries_b, strict=True):
            if a.read(ea) != b.read(eb) or ea.date_time != eb.date_time:
                parts.append(f"{name}:{ea.filename}")
    return parts or [f"{name}: zip container"]


def test_report_files_are_byte_identical(two_runs):
    """The finance workbook, every department file and the FOCUS CSV."""
    first, second = (_files(root / "reports" / LABEL) for root in two_runs)
    first.pop("manifest.json")
    second.pop("manifest.json")
    assert sorted(first) == sorted(second)
    assert {f"chargeback-{LABEL}.xlsx", f"focus-{LABEL}.csv"} <= first.keys()
    assert any(name.startswith("departments/") for name in first)
    differing = [
        part
        for name in sorted(first)
        if first[name] != second[name]
        for part in _differences(name, first[name], second[name])
    ]
    assert differing == [], "differ: " + ", ".join(differing)


def _manifest(root: Path) -> dict:
    """The month's manifest without what belongs to the run: its Dagster run id and any time
    of it (a key ending in `_at`, the house name for a timestamp; none today)."""
    manifest = json.loads((root / "reports" / LABEL / "manifest.json").read_text())
    return {
        key: value
        for key, value in manifest.items()
        if key != "dagster_run_id" and not key.endswith("_at")
    }


def test_manifest_is_equal_but_for_run_id_and_times(two_runs):
    first, second = (_manifest(root) for root in two_runs)
    assert first["outputs"] and first["inputs"]
    assert first == second


def _rows(root: Path, table: str) -> list[tuple]:
    con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute(
            f"select * from {table} where billing_month = ? order by all", [MONTH]
        ).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("table", TABLES)
def test_marts_are_identical_row_for_row(two_runs, table):
    first, second = (_rows(root, table) for root in two_runs)
    assert first
    assert first == second
