"""A month stops when one of its days was rolled up before a telemetry export of it landed,
changed or left (otherwise that export's rows are in no figure and no count of the month), or
by a catalog that judged it otherwise than the catalog now (a declared step here; the inventory
in tests/marts/test_sample_inventory_rejects.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.catalog import load_catalog
from pipelines.defs.ingest.telemetry import (
    roll_up_days,
    stop_on_days_behind_landing,
    stop_on_days_rolled_up_by_another_catalog,
    write_sample_sources,
)
from pipelines.defs.resources import ChargebackResource
from pipelines.months import BillingMonth
from pipelines.sql import create_table
from tests.conftest import resource_for
from tests.ingest.test_catalog_and_landing import catalog_dir

NOVEMBER = BillingMonth.parse("2026-11", "UTC")
NOV1, NOV2 = dt.date(2026, 11, 1), dt.date(2026, 11, 2)


def land(root: Path, name: str, stamps: list[str]) -> Path:
    """A canonical samples export of cluster c1 (read in place): n1's GPU 0 at `stamps`."""
    path = root / "landing/telemetry/c1" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    times = [dt.datetime.fromisoformat(stamp) for stamp in stamps]
    columns = {
        "ts": pa.array(times, pa.timestamp("us")),
        "node": ["n1"] * len(times),
        "gpu_index": [0] * len(times),
        "util_pct": [50.0] * len(times),
    }
    pq.write_table(pa.table(columns), path)
    return path


def roll_up(chargeback: ChargebackResource, *days: dt.date) -> None:
    roll_up_days(chargeback, load_catalog(catalog_dir(chargeback_root(chargeback))), list(days))


def chargeback_root(chargeback: ChargebackResource) -> Path:
    return Path(chargeback.landing_dir).parent


def behind(chargeback: ChargebackResource) -> str | None:
    """What the month stops with (None: it goes on), against the landing folder as it is now."""
    root = chargeback_root(chargeback)
    con = duckdb.connect()
    try:
        # sample_sources as the month's telemetry_files step leaves it
        write_sample_sources(
            con, root / "landing", chargeback.telemetry_dir, load_catalog(root / "catalog")
        )
        create_table(con, "sample_sources", "staging/sample_sources")
        # the days rolled up (the month's step stops first when one is not: not tested here)
        count_files = sorted(
            str(path)
            for path in chargeback.telemetry_dir.glob("quality/day=*/sample_file_counts.parquet")
        )
        stop_on_days_behind_landing(
            con, root / "landing", chargeback.telemetry_dir, NOVEMBER, count_files
        )
    except ValueError as stop:
        return str(stop)
    finally:
        con.close()
    return None


@pytest.fixture
def rolled_up(tmp_path, monkeypatch) -> ChargebackResource:
    """November 1st and 2nd rolled up, an export with samples on both landed before."""
    catalog_dir(tmp_path)
    land(tmp_path, "a.parquet", ["2026-11-01 10:00", "2026-11-01 10:10", "2026-11-02 10:00"])
    chargeback = resource_for(tmp_path)
    roll_up(chargeback, NOV1, NOV2)
    return chargeback


def test_days_rolled_up_after_their_exports_landed_go_on(rolled_up):
    assert behind(rolled_up) is None


def test_an_export_that_lands_after_its_day_was_rolled_up_stops_the_month(rolled_up, tmp_path):
    land(tmp_path, "b-late.parquet", ["2026-11-02 11:00", "2026-11-02 11:10"])
    assert behind(rolled_up) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-02 rolled up before their telemetry landed "
        "or changed (telemetry/c1/b-late.parquet: 2 rows in 2026-11-02 now, 0 when rolled "
        "up): materialise gpu_sample_rollup for these days again"
    )
    roll_up(rolled_up, NOV2)  # the day again: the month goes on
    assert behind(rolled_up) is None


def test_an_export_rewritten_with_other_rows_or_removed_stops_the_month(rolled_up, tmp_path):
    land(tmp_path, "a.parquet", ["2026-11-01 10:00", "2026-11-02 10:00", "2026-11-02 10:10"])
    assert behind(rolled_up) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-01, 2026-11-02 rolled up before their "
        "telemetry landed or changed (telemetry/c1/a.parquet: 1 row in 2026-11-01 now, 2 "
        "when rolled up; telemetry/c1/a.parquet: 2 rows in 2026-11-02 now, 1 when rolled "
        "up): materialise gpu_sample_rollup for these days again"
    )
    (tmp_path / "landing/telemetry/c1/a.parquet").unlink()
    assert behind(rolled_up) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-01, 2026-11-02 rolled up before their "
        "telemetry landed or changed (telemetry/c1/a.parquet: 0 rows in 2026-11-01 now, 2 "
        "when rolled up; telemetry/c1/a.parquet: 0 rows in 2026-11-02 now, 1 when rolled "
        "up): materialise gpu_sample_rollup for these days again"
    )


def test_an_export_that_grows_day_by_day_leaves_the_days_before_standing(tmp_path):
    # an nvidia-smi log appended to: each day rolled up the morning after, before the log grew
    catalog_dir(tmp_path)
    chargeback = resource_for(tmp_path)
    stamps = ["2026-11-01 10:00", "2026-11-01 23:59"]
    for day in NOVEMBER.utc_days()[:4]:
        if day > NOV1:
            stamps.append(f"{day} 10:00")
        land(tmp_path, "log.parquet", stamps)
        roll_up(chargeback, day)
    assert behind(chargeback) is None


def test_unreadable_rows_count_in_the_day_that_owns_them(rolled_up, tmp_path):
    # the day of the file's first plausible sample rejects its row stamped in 2030 (more than
    # 365 days from the file's median day)
    land(tmp_path, "c.parquet", ["2026-11-02 12:00", "2026-11-02 12:10", "2030-01-01 00:00"])
    assert behind(rolled_up) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-02 rolled up before their telemetry landed "
        "or changed (telemetry/c1/c.parquet: 3 rows in 2026-11-02 now, 0 when rolled up): "
        "materialise gpu_sample_rollup for these days again"
    )
    roll_up(rolled_up, NOV2)
    assert behind(rolled_up) is None


def test_a_stop_names_five_exports_and_counts_the_rest(rolled_up, tmp_path):
    roll_up(rolled_up, *(dt.date(2026, 11, 10 + n) for n in range(7)))
    for n in range(7):
        land(tmp_path, f"late-{n}.parquet", [f"2026-11-{10 + n} 10:00"])
    stop = behind(rolled_up)
    assert stop is not None
    assert stop.startswith(
        "telemetry of 2026-11: UTC day(s) 2026-11-10, 2026-11-11, 2026-11-12, 2026-11-13, "
        "2026-11-14, 2026-11-15, 2026-11-16 rolled up before their telemetry landed or changed "
        "(telemetry/c1/late-0.parquet: 1 row in 2026-11-10 now, 0 when rolled up; "
    )
    assert stop.endswith(
        "telemetry/c1/late-4.parquet: 1 row in 2026-11-14 now, 0 when rolled up; 2 more): "
        "materialise gpu_sample_rollup for these days again"
    )


def judged_otherwise(chargeback: ChargebackResource) -> str | None:
    """What the month stops with for the catalog now (None: it goes on)."""
    root = chargeback_root(chargeback)
    node_files = sorted(
        str(path) for path in chargeback.telemetry_dir.glob("quality/day=*/sample_nodes.parquet")
    )
    try:
        stop_on_days_rolled_up_by_another_catalog(
            duckdb.connect(), NOVEMBER, node_files, load_catalog(root / "catalog")
        )
    except ValueError as stop:
        return str(stop)
    return None


def test_a_declared_step_changed_since_a_day_was_rolled_up_stops_the_month(rolled_up, tmp_path):
    assert judged_otherwise(rolled_up) is None
    settings = tmp_path / "catalog/settings.yaml"
    settings.write_text("telemetry: {step_s: 600}\n", encoding="utf-8")
    assert judged_otherwise(rolled_up) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-01, 2026-11-02 rolled up by another catalog "
        "(cluster c1: telemetry step not declared when rolled up, 600 s now): materialise "
        "gpu_sample_rollup for these days again"
    )
    roll_up(rolled_up, NOV1, NOV2)
    assert judged_otherwise(rolled_up) is None
    settings.write_text("telemetry: {step_s: 0.5}\n", encoding="utf-8")
    assert judged_otherwise(rolled_up) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-01, 2026-11-02 rolled up by another catalog "
        "(cluster c1: telemetry step 600 s declared when rolled up, 0.5 s now): materialise "
        "gpu_sample_rollup for these days again"
    )
    settings.unlink()
    assert judged_otherwise(rolled_up) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-01, 2026-11-02 rolled up by another catalog "
        "(cluster c1: telemetry step 600 s declared when rolled up, not declared now): "
        "materialise gpu_sample_rollup for these days again"
    )
