"""Costing: priced job time, the charge lines and the per-tenant month."""

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb

from pipelines.catalog import Catalog, CatalogError
from pipelines.defs.attribution.assets import capacity_buckets
from pipelines.defs.monthly import MonthRun
from pipelines.defs.warehouse import Check, sql_table
from pipelines.months import MonthParams
from pipelines.sql import run as run_sql

GROUP = "costing"

# in full_recovery the rates derived from each pool's cost (empty in rate_card)
cost_pools = sql_table("cost_pools", "facts", GROUP)


def _priced_job_time(run: MonthRun) -> None:
    stop_on_unpriced_job_time(run.con, run.params, run.catalog)


job_gpu_charges = sql_table("job_gpu_charges", "facts", GROUP, prepare=_priced_job_time)


def _ledger_tables(run: MonthRun) -> None:
    """The tables of issued charges (`chargeback close` fills them), empty until a close."""
    run_sql(run.con, "marts/closed_months")
    run_sql(run.con, "marts/issued_charge_lines")


# each usage and credit line's cents, split over its jobs (job_usage, computed_charge_lines);
# a closed month's lines priced as issued keep their issued cents. The first step to read the
# ledger (closed_months, issued_charge_lines) makes sure it exists: computed_charge_lines and
# charge_lines, which read it too, are built from this.
job_line_cents = sql_table("job_line_cents", "facts", GROUP, prepare=_ledger_tables)


def _unmapped_accounts(found: list[dict]) -> dict[str, str]:
    return {"unmapped_accounts": ", ".join(sorted({str(row["account"]) for row in found}))}


job_usage = sql_table(
    "job_usage", "marts", GROUP,
    # a warning: the usage of an unmapped account is billed to the 'unmapped' tenant
    checks=[Check("every_account_mapped", warn=True, summary=_unmapped_accounts)],
)  # fmt: skip
# the concurrency timeline of tenants on pools: reserved quotas are charged from it here, and
# quota_compliance (governance) reports on it
quota_steps = sql_table("quota_steps", "facts", GROUP)
reserved_quota_unused = sql_table("reserved_quota_unused", "facts", GROUP)


def _priced_reservations(run: MonthRun) -> None:
    stop_on_unpriced_reservations(run.con, run.month.label, run.params, run.catalog)


computed_charge_lines = sql_table(
    "computed_charge_lines", "marts", GROUP, prepare=_priced_reservations
)


# a closed month keeps its issued lines; a re-run adds corrections (the ledger: job_line_cents)
charge_lines = sql_table("charge_lines", "marts", GROUP, checks=[Check("cluster_cost_recovered")])


def stop_on_unpriced_job_time(
    con: duckdb.DuckDBPyConnection, params: MonthParams, catalog: Catalog
) -> None:
    """GPU time no rate prices would be charged NULL: stop the run, naming the GPU model,
    cluster and period (in the billing timezone), before a charge or report is written."""
    unpriced = run_sql(con, "checks/job_time_has_a_rate", params).fetchall()
    if not unpriced:
        return
    zone = ZoneInfo(catalog.settings.billing_timezone)

    def local(moment: dt.datetime) -> str:
        return moment.replace(tzinfo=dt.UTC).astimezone(zone).strftime("%Y-%m-%d %H:%M")

    cluster, model, start, end, gpu_hours = unpriced[0]
    others = ", ".join(f"{m} on {c}" for c, m, *_ in unpriced[1:])
    raise CatalogError(
        f"{_rates_file(catalog)}: no rate in force for GPU model '{model}' on cluster "
        f"'{cluster}' from {local(start)} to {local(end)} {zone.key} ({gpu_hours:g} GPU-hours "
        "of jobs): add a rate for the model or a '*' fallback"
        + (f" (also unpriced: {others})" if others else "")
    )


def stop_on_unpriced_reservations(
    con: duckdb.DuckDBPyConnection, label: str, params: MonthParams, catalog: Catalog
) -> None:
    """An unused reserved quota no rate prices would be charged NULL: stop the run."""
    unpriced = run_sql(con, "checks/reserved_quotas_have_a_rate", params).fetchall()
    if not unpriced:
        return
    reservation, cluster, model, _ = unpriced[0]
    where = "any cluster" if cluster == "*" else f"cluster '{cluster}'"
    raise CatalogError(
        f"{_rates_file(catalog)}: no rate in force for GPU model '{model}' on {where} in "
        f"{label}, which prices reserved quota {reservation}: add a rate for the model or a "
        "'*' fallback"
        + (f" ({len(unpriced) - 1} more reserved quota parts unpriced)" if unpriced[1:] else "")
    )


def _rates_file(catalog: Catalog) -> Path:
    return Path(catalog.source or ".") / "rates.yaml"


tenant_month = sql_table("tenant_month", "marts", GROUP, checks=[Check("charges_tie_out")])

# what share of each line's GPU time rests on telemetry (the Charges sheet, FOCUS)
charge_line_coverage = sql_table("charge_line_coverage", "marts", GROUP)

# the allocation-based charge of each job beside a utilisation-based one (a showback)
cost_views = sql_table("cost_views", "marts", GROUP)

STEPS = [
    cost_pools, job_gpu_charges, job_line_cents, capacity_buckets, job_usage, cost_views,
    quota_steps,
    reserved_quota_unused, computed_charge_lines, charge_lines, charge_line_coverage,
]  # fmt: skip
# tenant_month reads quota_compliance (governance): it comes after that
LAST_STEPS = [tenant_month]
