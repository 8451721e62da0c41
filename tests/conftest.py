"""Shared helpers: run the real assets on a landing folder and catalog under tmp_path."""

from __future__ import annotations

import os

# Partitions are defined when pipelines.definitions is imported: let the tests reach back to
# the reference logs of 2016 (set before the import below).
os.environ["CHARGEBACK_FIRST_MONTH"] = "2016-01"

import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

import dagster as dg  # noqa: E402
import duckdb  # noqa: E402
import pytest  # noqa: E402

from pipelines.definitions import all_assets  # noqa: E402
from pipelines.defs.checks import checks  # noqa: E402
from pipelines.defs.resources import ChargebackResource  # noqa: E402


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


def materialize_month(root: Path, partition_key: str, raise_on_error: bool = True):
    """Materialise every asset (and run every check) of one month, in process."""
    return dg.materialize(
        [*all_assets, *checks],
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


@pytest.fixture
def project_dirs(tmp_path: Path) -> Path:
    return tmp_path
