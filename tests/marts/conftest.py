"""Given/expect tests of the public marts: a handful of rows in, the mart's exact rows out.

Two ways of giving a mart its inputs, chosen per mart (each test module says which):

- `given(con, table, columns, rows)`: the mart's input tables created directly, with exactly
  the columns and types its SQL reads. For marts over a few simple tables (tenant_month,
  focus_charges).
- `GivenMonth`: for marts whose rules live in the steps before them (job_usage,
  capacity_buckets, charge_lines, rejects, data_quality). A few export rows (canonical jobs
  and samples CSV in a landing folder under tmp_path) and a catalog (its YAML files, loaded
  and validated by the real loader) go through the real steps of every table up to the mart
  (pipelines/definitions.py TABLE_STEPS, in the order a run builds them), in an in-memory
  DuckDB. Faking the facts
  in between (GPU units of 1/420 GPU-ms, charge numerators in millionths) would be harder to
  read than the export rows, and would not test the rules that compute them.
"""

from __future__ import annotations

import datetime as dt
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipelines.catalog import load_catalog
from pipelines.definitions import TABLE_STEPS
from pipelines.defs.ingest.telemetry import roll_up_days
from pipelines.defs.resources import ChargebackResource, prepare_connection
from pipelines.months import BillingMonth, MonthParams
from tests.conftest import month_run

MONTH = "2026-11"
# GPU units: 1/420 GPU-millisecond (sql/macros/gpu_hours.sql); 1,512,000,000 per GPU-hour
UNITS_PER_GPU_HOUR = 1_512_000_000


# Catalog pieces several marts' months share (YAML, as GivenMonth.catalog takes them)
IDLE_RULES = """
    idle_threshold_pct: 5
    zombie_min_hours: 2
    telemetry: {step_s: 600}
"""
CHAFF_TENANT = """
    tenants:
      - {id: chaff, name: Chaffinch Lab, department: Biology, cost_center: CC-1,
         accounts: [chaff]}
"""
ALPHA_TENANT = """
    tenants:
      - {id: alpha, name: Alpha Lab, department: Physics, cost_center: CC-1, accounts: [alpha]}
"""
ONE_RATE = """
    rates:
      - {gpu_model: "*", price_per_gpu_hour: 1.00}
"""


def units(gpu_hours: float) -> int:
    """GPU-hours as whole GPU units (exact for the hours and fractions the tests use)."""
    return round(gpu_hours * UNITS_PER_GPU_HOUR)


@pytest.fixture
def con():
    """An in-memory DuckDB prepared as the pipeline prepares the warehouse (UTC, macros)."""
    con = prepare_connection(duckdb.connect())
    yield con
    con.close()


def given(con: duckdb.DuckDBPyConnection, table: str, columns: str, rows: Iterable[Sequence]):
    """Create `table` with `columns` (`"name type, ..."`) and insert `rows`."""
    con.execute(f"create table {table} ({columns})")
    rows = list(rows)
    if rows:
        marks = ", ".join("?" * len(rows[0]))
        con.executemany(f"insert into {table} values ({marks})", [list(row) for row in rows])


def records(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The rows of an executed statement as dicts by column name."""
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def pick(rows: list[dict[str, Any]], *columns: str) -> list[tuple]:
    """`columns` of each row, in the mart's row order."""
    return [tuple(row[column] for column in columns) for row in rows]


def month_params(settings: Any, month: str = MONTH) -> MonthParams:
    """The month's SQL parameters, as every monthly asset binds them."""
    return BillingMonth.parse(month, settings.billing_timezone).params(settings)


def text(block: str) -> str:
    return textwrap.dedent(block).lstrip("\n")


class GivenMonth:
    """A billing month built from export files and a catalog under `root`, by the real ingest
    functions and SQL files, in an in-memory DuckDB of its own (`con`; `close()` it)."""

    def __init__(self, root: Path, month: str = MONTH):
        self.root = root
        self.con = prepare_connection(duckdb.connect())
        self.month = month
        self.resource = ChargebackResource(
            landing_dir=str(root / "landing"),
            catalog_dir=str(root / "catalog"),
            warehouse=str(root / "warehouse.duckdb"),
            reports_dir=str(root / "reports"),
        )

    def file(self, relative: str, content: str) -> Path:
        """Write a landing or catalog file (`landing/scheduler/c1/jobs.csv`, `catalog/...`)."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text(content), encoding="utf-8")
        return path

    def catalog(self, **files: str) -> None:
        """The catalog's files by stem: `settings=`, `tenants=`, `rates=`, `quotas=`,
        `budgets=`, `outages=` (YAML) and `nodes=` (CSV)."""
        for stem, content in files.items():
            suffix = "csv" if stem == "nodes" else "yaml"
            self.file(f"catalog/{stem}.{suffix}", content)

    def build(self, target: str, roll_up: bool = True) -> list[dict[str, Any]]:
        """Roll up the month's telemetry days (unless not `roll_up`: a month run from the UI on
        the days rolled up before) and build every warehouse table up to `target`, in the order
        a run does (pipelines/definitions.py TABLE_STEPS); returns `target`'s rows of the
        month, in the mart's order."""
        catalog = load_catalog(self.root / "catalog")
        month = month_run(self.con, self.root, self.month, catalog)
        if roll_up:
            roll_up_days(self.resource, catalog, month.month.utc_days())
        for step in TABLE_STEPS:
            step.build(month)
            if target in {table.name for table in step.tables}:
                return records(self.con.execute(
                    f"select * from {target} where billing_month = $month",
                    {"month": month.month.first_day},
                ))  # fmt: skip
        raise KeyError(target)

    def close(self) -> None:
        self.con.close()


@pytest.fixture
def given_month(tmp_path: Path):
    month = GivenMonth(tmp_path)
    yield month
    month.close()


@pytest.fixture(scope="module")
def module_month(tmp_path_factory):
    """A GivenMonth shared by a module's tests: built once, read by each (never changed)."""
    month = GivenMonth(tmp_path_factory.mktemp("month"))
    yield month
    month.close()


JOBS_HEADER = (
    "job_id,account,user,queue,qos,gpu_model,gpus,nodes,submit_time,start_time,end_time,"
    "state,exit_code"
)


def samples(node: str, gpu: int, first: str, count: int, util: float, every_min: int = 10):
    """Canonical samples CSV lines: `count` samples `every_min` minutes apart from `first`."""
    start = dt.datetime.fromisoformat(first)
    return [
        f"{start + dt.timedelta(minutes=every_min * i):%Y-%m-%d %H:%M:%S},{node},{gpu},{util}"
        for i in range(count)
    ]


def samples_csv(*runs: list[str]) -> str:
    return "\n".join(["ts,node,gpu_index,util_pct", *(line for run in runs for line in run)])
