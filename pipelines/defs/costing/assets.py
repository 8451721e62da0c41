"""Costing: priced job time, the charge lines and the per-tenant month."""

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo

import dagster as dg
import duckdb

from pipelines.catalog import Catalog, CatalogError
from pipelines.defs.attribution.assets import gpu_capacity, job_gpu_hours, job_time_buckets
from pipelines.defs.monthly import MonthRun, materialize_months, monthly_sql_asset, sql_description
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.resources import ChargebackResource
from pipelines.months import MonthParams
from pipelines.sql import replace_month
from pipelines.sql import run as run_sql

GROUP = "costing"


@dg.asset(
    deps=[job_gpu_hours, gpu_capacity],
    partitions_def=monthly_partition,
    backfill_policy=single_run,
    group_name=GROUP,
    description=sql_description("facts/job_gpu_charges"),
    kinds={"duckdb", "sql"},
)
def job_gpu_charges(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    def step(run: MonthRun) -> dict[str, int]:
        # cost_pools first (empty in rate_card): in full_recovery it holds the derived rates
        settings = run.catalog.settings
        pool_params = {
            **run.params.sql(),
            "cost_mode": settings.cost_mode,
            "idle_sharing": settings.idle_sharing,
        }
        pools = replace_month(run.con, "cost_pools", "facts/cost_pools", pool_params)
        stop_on_unpriced_job_time(run.con, run.params, run.catalog)
        return {
            "cost_pools": pools,
            "job_gpu_charges": replace_month(
                run.con, "job_gpu_charges", "facts/job_gpu_charges", run.params
            ),
        }

    return materialize_months(context, chargeback, step)


job_usage = monthly_sql_asset(
    "job_usage", "marts/job_usage", [job_time_buckets, job_gpu_charges], GROUP
)
# the concurrency timeline of tenants on pools: reserved quotas are charged from it here, and
# quota_compliance (governance) reports on it
quota_steps = monthly_sql_asset("quota_steps", "facts/quota_steps", [job_usage], GROUP)


@dg.asset(
    deps=[job_gpu_charges, job_usage, quota_steps],
    partitions_def=monthly_partition,
    backfill_policy=single_run,
    group_name=GROUP,
    description=sql_description("marts/charge_lines"),
    kinds={"duckdb", "sql"},
)
def charge_lines(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    def step(run: MonthRun) -> dict[str, int]:
        reserved = replace_month(
            run.con, "reserved_quota_unused", "facts/reserved_quota_unused", run.params
        )
        stop_on_unpriced_reservations(run.con, run.month.label, run.params, run.catalog)
        computed = replace_month(
            run.con, "computed_charge_lines", "marts/computed_charge_lines", run.params
        )
        run_sql(run.con, "ddl/closed_months")
        run_sql(run.con, "ddl/issued_charge_lines")
        lines = replace_month(run.con, "charge_lines", "marts/charge_lines", run.params)
        return {
            "reserved_quota_unused": reserved,
            "computed_charge_lines": computed,
            "charge_lines": lines,
        }

    return materialize_months(context, chargeback, step)


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


# quota_compliance (governance) is named by key: it depends on job_usage, defined here
tenant_month = monthly_sql_asset(
    "tenant_month",
    "marts/tenant_month",
    [job_usage, job_time_buckets, charge_lines, "quota_compliance"],
    GROUP,
)
