"""The shape every monthly asset shares: open the warehouse, loop over the run's months."""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dagster as dg
import duckdb

from pipelines.catalog import Catalog
from pipelines.checkpoints import checkpoint
from pipelines.defs.partitions import monthly_partition, single_run, window_months
from pipelines.defs.resources import ChargebackResource, Folders
from pipelines.months import BillingMonth, MonthParams
from pipelines.progress import progress
from pipelines.sql import replace_month, sql_text


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
    name = context.asset_key.to_user_string()
    with chargeback.connect() as con:
        timezone = catalog.settings.billing_timezone
        for month in window_months(context.partition_time_window, timezone):
            started = time.perf_counter()
            run = MonthRun(
                con, month, month.params(catalog.settings), catalog, chargeback.folders,
                context.run.run_id,
            )  # fmt: skip
            per_month[month.label] = step(run)
            rows = ", ".join(f"{k} {v:,}" for k, v in per_month[month.label].items())
            progress(
                context,
                f"{month.label} {name}: {rows or 'done'} ({time.perf_counter() - started:.1f} s)",
            )
    # between two steps: the warehouse is closed, the run holds only its run lock
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


def sql_description(sql_name: str) -> str:
    """The header comment of a SQL file: what one row is, and the parameters."""
    lines = []
    for line in sql_text(sql_name).splitlines():
        if not line.startswith("--"):
            break
        lines.append(line.removeprefix("--").strip())
    return " ".join(lines)


def monthly_sql_asset(
    table: str, sql_name: str, deps: Sequence[str | dg.AssetsDefinition], group_name: str
) -> dg.AssetsDefinition:
    """An asset that rebuilds one month of `table` from `sql/<sql_name>.sql` per run month."""

    @dg.asset(
        name=table,
        deps=deps,
        partitions_def=monthly_partition,
        backfill_policy=single_run,
        group_name=group_name,
        description=sql_description(sql_name),
        kinds={"duckdb", "sql"},
    )
    def _asset(
        context: dg.AssetExecutionContext, chargeback: ChargebackResource
    ) -> dg.MaterializeResult:
        def step(run: MonthRun) -> dict[str, int]:
            return {table: replace_month(run.con, table, sql_name, run.params)}

        return materialize_months(context, chargeback, step)

    return _asset
