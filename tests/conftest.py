"""Shared helpers: run the real assets on a landing folder and catalog under tmp_path."""

from __future__ import annotations

import os

# Partitions are defined when pipelines.definitions is imported: let the tests reach back to
# the reference logs of 2016 (set before the import below).
os.environ["CHARGEBACK_FIRST_MONTH"] = "2016-01"

import datetime as dt  # noqa: E402
import shutil  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import NoReturn  # noqa: E402

import dagster as dg  # noqa: E402
import duckdb  # noqa: E402
import pytest  # noqa: E402

from pipelines.catalog import Catalog, CatalogError, load_catalog  # noqa: E402
from pipelines.definitions import all_assets  # noqa: E402
from pipelines.defs.monthly import MonthRun  # noqa: E402
from pipelines.defs.resources import ChargebackResource  # noqa: E402
from pipelines.defs.schedules import ROLLUP  # noqa: E402
from pipelines.months import BillingMonth  # noqa: E402


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def resource_for(root: Path) -> ChargebackResource:
    return ChargebackResource(
        landing_dir=str(root / "landing"),
        catalog_dir=str(root / "catalog"),
        warehouse=str(root / "warehouse.duckdb"),
        reports_dir=str(root / "reports"),
        duckdb_memory_limit="1GB",
    )


def month_run(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    month: str = "2026-11",
    catalog: Catalog | None = None,
) -> MonthRun:
    """What a warehouse step gets in a run, for the month `month` (YYYY-MM) of the landing
    folder and catalog under `root`, on `con`: `step.build(month_run(...))` builds the
    step's tables there, outside Dagster."""
    resource = resource_for(root)
    catalog = catalog or load_catalog(root / "catalog")
    billing_month = BillingMonth.parse(month, catalog.settings.billing_timezone)
    return MonthRun(
        con, billing_month, billing_month.params(catalog.settings), catalog, resource.folders,
        run_id="tests",
    )  # fmt: skip


def month_days(root: Path, partition_key: str) -> list[dt.date]:
    """The UTC days the billing month overlaps (per the catalog's billing timezone)."""
    try:
        timezone = resource_for(root).catalog().settings.billing_timezone
    except CatalogError:  # the month's run reports it, at its catalog step
        timezone = "UTC"
    return BillingMonth.parse(partition_key, timezone).utc_days()


def materialize_days(root: Path, days: list[dt.date], raise_on_error: bool = True, **kwargs):
    """Roll up the telemetry of the UTC days `days[0]`..`days[-1]` in one run, in process."""
    return dg.materialize(
        all_assets,
        selection=ROLLUP,
        tags={
            "dagster/asset_partition_range_start": days[0].isoformat(),
            "dagster/asset_partition_range_end": days[-1].isoformat(),
        },
        resources={"chargeback": resource_for(root)},
        raise_on_error=raise_on_error,
        **kwargs,
    )


def materialize_month(root: Path, partition_key: str, raise_on_error: bool = True):
    """Roll up the month's telemetry days (one run), then materialise every monthly asset and
    run every check of the month (a second run: a run holds one partitioning), in process.
    Returns the monthly run's result."""
    materialize_days(root, month_days(root, partition_key), raise_on_error)
    return materialize_monthly(root, partition_key, raise_on_error)


def materialize_monthly(root: Path, partition_key: str, raise_on_error: bool = True):
    """Every monthly asset and check of the month, on the days already rolled up."""
    return dg.materialize(
        all_assets,
        selection=dg.AssetSelection.all() - ROLLUP,
        partition_key=partition_key,
        resources={"chargeback": resource_for(root)},
        raise_on_error=raise_on_error,
    )


def query(root: Path, sql: str, params=None) -> list[tuple]:
    con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def named_samples(root: Path, cluster: str = "*") -> str:
    """The daily rollup's samples of `cluster` (all: `*`) with their series' node and GPU
    index from the days' series files (a sample names its series by series_key only), as a
    subquery for a connection with the project's macros (prepare_connection)."""
    telemetry = root / "warehouse_telemetry"
    samples = telemetry / f"cluster={cluster}" / "day=*" / "samples_*.parquet"
    series = telemetry / "quality" / "day=*" / "sample_series.parquet"
    return f"""(
        select n.node, n.gpu_index, s.*
        from read_parquet('{samples}', hive_partitioning = true) as s
        join (
            select distinct cluster, node, gpu_index,
                series_key(cluster, node, gpu_index) as series_key
            from read_parquet('{series}')
        ) as n using (cluster, series_key)
    )"""


@pytest.fixture
def project_dirs(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="session")
def demo_month(tmp_path_factory) -> tuple[Path, object]:
    """The small demo month (seed 7, November 2026, rate card), materialised once for every
    test module that reads it; tests must not change it (copy it first)."""
    from simulator.demo import generate_demo

    root = tmp_path_factory.mktemp("demo")
    generate_demo(root, month="2026-11", seed=7, small=True)
    result = materialize_month(root, "2026-11-01")
    assert result.success
    return root, result


def under_ci() -> bool:
    """Whether the tests run under CI: `CI` set to anything but empty, 0, false or no (CI
    services set CI=true, and so does .ci/run)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_tool(name: str, package: str) -> str:
    """The path of the external program `name` (on PATH) a test needs, e.g.
    `require_tool("chromium", "chromium")`. When it is missing the test fails under CI, which
    installs the tools (.ci/run), so a check never goes missing silently there; elsewhere it
    is skipped, naming the Debian package to install."""
    found = shutil.which(name)
    if found is not None:
        return found
    tool_missing(f"{name} is not installed (Debian package '{package}')")


def tool_missing(message: str) -> NoReturn:
    """A tool a test needs is missing (`message` says which and how to get it): fail under CI,
    which prepares the tools (.ci/run), skip elsewhere."""
    if under_ci():
        pytest.fail(f"{message}: CI must run this test, install it", pytrace=False)
    pytest.skip(message)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with slow tests (servers, subprocess runs) first: under xdist they then overlap
    the rest of the suite instead of running alone at its end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
