"""The shape every monthly asset shares: open the warehouse, loop over the run's months."""

import time
from collections.abc import Callable
from dataclasses import dataclass

import dagster as dg
import duckdb

from pipelines.catalog import Catalog
from pipelines.checkpoints import checkpoint
from pipelines.defs.partitions import window_months
from pipelines.defs.resources import ChargebackResource, Folders
from pipelines.months import BillingMonth, MonthParams
from pipelines.progress import progress


@dataclass(frozen=True)
class MonthRun:
    """What one monthly step works with: the run's warehouse, the month and its parameters,
    the catalog and the folders."""

    con: duckdb.DuckDBPyConnection
    month: BillingMonth
    params: MonthParams
    catalog: Catalog
    folders: Folders
    run_id: str


MonthStep = Callable[[MonthRun], dict[str, int]]  # noqa: UP040 - plain alias keeps it readable


def run_months(
    context: dg.AssetExecutionContext, chargeback: ChargebackResource, step: MonthStep
) -> dict[str, dict[str, int]]:
    """Run `step` for each billing month of the run's partition window, in order; returns the
    counts of each month (by label)."""
    catalog = chargeback.catalog()
    per_month: dict[str, dict[str, int]] = {}
    name = context.op_def.name  # the asset's, or the step's of several tables
    with chargeback.connect() as con:
        timezone = catalog.settings.billing_timezone
        for month in window_months(context.partition_time_window, timezone):
            started = time.perf_counter()
            run = MonthRun(
                con, month, month.params(catalog.settings), catalog, chargeback.folders,
                context.run.run_id,
            )  # fmt: skip
            per_month[month.label] = step(run)
            counts = per_month[month.label]
            rows = (
                f"{counts[name]:,} rows"
                if list(counts) == [name]
                else ", ".join(f"{k} {v:,}" for k, v in counts.items())
            )
            progress(
                context,
                f"{month.label} {name}: {rows or 'done'} ({time.perf_counter() - started:.1f} s)",
            )
    # between two steps: no statement runs, the run holds its lock and its own connection
    checkpoint(f"after_{name}")
    return per_month


def materialize_months(
    context: dg.AssetExecutionContext, chargeback: ChargebackResource, step: MonthStep
) -> dg.MaterializeResult:
    """Run `step` for each billing month of the run; metadata holds this run's row counts."""
    per_month = run_months(context, chargeback, step)
    totals: dict[str, int] = {}
    for counts in per_month.values():
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + value
    return dg.MaterializeResult(
        metadata={**{f"rows_{k}": v for k, v in totals.items()}, "months": list(per_month)}
    )
