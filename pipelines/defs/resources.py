"""Where everything lives, decided in one place: the environment variables of DESIGN.md."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import dagster as dg
import duckdb

from pipelines.catalog import Catalog, load_catalog
from pipelines.sql import run

MACROS = (
    "macros/known",
    "macros/to_utc",
    "macros/normal_state",
    "macros/gpu_hours",
    "macros/gpu_units",
    "macros/util_milli_pct",
    "macros/cents_half_up",
    "macros/money",
    "macros/charge_type_order",
    "macros/series_key",
)


def prepare_connection(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """UTC session time and the project's SQL macros: what every SQL file expects."""
    con.execute("set TimeZone = 'UTC'")
    for macro in MACROS:
        run(con, macro)
    return con


@dataclass(frozen=True)
class BillingMonth:
    """One calendar month in the billing timezone, as naive UTC bounds `[start, end)`."""

    first_day: dt.date
    start: dt.datetime
    end: dt.datetime

    @classmethod
    def of(cls, first_day: dt.date, billing_timezone: str) -> BillingMonth:
        zone = ZoneInfo(billing_timezone)
        next_month = (first_day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)

        def utc(day: dt.date) -> dt.datetime:
            local = dt.datetime(day.year, day.month, day.day, tzinfo=zone)
            return local.astimezone(dt.UTC).replace(tzinfo=None)

        return cls(first_day=first_day, start=utc(first_day), end=utc(next_month))

    @classmethod
    def containing(cls, instant: dt.datetime, billing_timezone: str) -> BillingMonth:
        """The billing month a naive UTC instant falls in."""
        local = instant.replace(tzinfo=dt.UTC).astimezone(ZoneInfo(billing_timezone))
        return cls.of(local.date().replace(day=1), billing_timezone)

    @property
    def label(self) -> str:
        return self.first_day.strftime("%Y-%m")

    def utc_days(self) -> list[dt.date]:
        """The UTC days the month overlaps (one more at an edge outside UTC): the telemetry
        rollup partitions its figures are read from."""
        last = (self.end - dt.timedelta(microseconds=1)).date()
        days, day = [], self.start.date()
        while day <= last:
            days.append(day)
            day += dt.timedelta(days=1)
        return days

    def params(self, catalog: Catalog) -> dict[str, Any]:
        """The bound parameters every monthly SQL file may use."""
        settings = catalog.settings
        return {
            "billing_month": self.first_day,
            "budget_month": self.label,
            "month_start": self.start,
            "month_end": self.end,
            "currency": settings.currency,
            "idle_threshold_pct": float(settings.idle_threshold_pct),
            "zombie_min_ms": int(settings.zombie_min_hours * 3_600_000),
        }


class ChargebackResource(dg.ConfigurableResource):
    """Paths of the landing folder, catalog, warehouse and reports, and DuckDB settings."""

    landing_dir: str
    catalog_dir: str
    warehouse: str
    reports_dir: str
    # Under the 2 GiB a run may use: DuckDB spills to disk past it, and Python, Arrow and
    # Dagster need the rest.
    duckdb_memory_limit: str = "1.5GB"

    @classmethod
    def from_env(cls) -> ChargebackResource:
        env = os.environ.get
        return cls(
            landing_dir=env("CHARGEBACK_LANDING_DIR", "data/landing"),
            catalog_dir=env("CHARGEBACK_CATALOG_DIR", "data/catalog"),
            warehouse=env("CHARGEBACK_WAREHOUSE", "data/warehouse.duckdb"),
            reports_dir=env("CHARGEBACK_REPORTS_DIR", "data/reports"),
            duckdb_memory_limit=env("CHARGEBACK_DUCKDB_MEMORY_LIMIT", "1.5GB"),
        )

    @property
    def telemetry_dir(self) -> Path:
        """Daily Parquet rollups of the telemetry, beside the warehouse file."""
        warehouse = Path(self.warehouse)
        return warehouse.parent / f"{warehouse.stem}_telemetry"

    def catalog(self) -> Catalog:
        return load_catalog(Path(self.catalog_dir))

    def months(self, window: dg.TimeWindow, catalog: Catalog) -> list[BillingMonth]:
        """The billing months of a partition window (one, or several in a backfill run)."""
        months = []
        day = window.start.date().replace(day=1)
        while day < window.end.date():
            months.append(BillingMonth.of(day, catalog.settings.billing_timezone))
            day = (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        return months

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the warehouse with UTC session time and the project's macros."""
        Path(self.warehouse).parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(self.warehouse)
        try:
            con.execute("set memory_limit = $limit", {"limit": self.duckdb_memory_limit})
            prepare_connection(con)
            yield con
        finally:
            con.close()

    @contextmanager
    def scratch(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB (not the warehouse: several processes may run at once) that
        spills to its own folder under the telemetry folder; row order is not kept unless a
        statement orders, which lets large copies stream."""
        spill = self.telemetry_dir / ".spill" / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # DuckDB creates its temp directory when it first spills, but not the parents
        spill.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect()
        try:
            con.execute("set memory_limit = $limit", {"limit": self.duckdb_memory_limit})
            con.execute("set temp_directory = $dir", {"dir": str(spill)})
            con.execute("set preserve_insertion_order = false")
            prepare_connection(con)
            yield con
        finally:
            con.close()
            shutil.rmtree(spill, ignore_errors=True)
