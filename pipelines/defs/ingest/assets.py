"""Ingest: the catalog, the scheduler exports and the GPU telemetry of each billing month.

Every table here is `sql/staging/<table>.sql`; what Python reads first (the catalog's YAML,
the exports' lines, the landing folder's telemetry files) it writes as temporary tables
those files select from.
"""

import datetime as dt

import dagster as dg

from pipelines.defs.ingest.catalog_tables import write_catalog_rows
from pipelines.defs.ingest.loading import (
    read_scheduler_exports,
    write_account_tenants,
    write_month_job_gpus,
)
from pipelines.defs.ingest.telemetry import (
    check_rollup_columns,
    month_quality_files,
    roll_up_days,
    stop_on_days_behind_landing,
    stop_on_days_rolled_up_by_another_catalog,
    write_sample_sources,
)
from pipelines.defs.monthly import MonthRun
from pipelines.defs.partitions import daily_partition, single_run
from pipelines.defs.resources import ChargebackResource
from pipelines.defs.warehouse import Table, TableStep, sql_table
from pipelines.progress import progress

GROUP = "ingest"

CATALOG_TABLES = (
    "catalog_tenants", "catalog_rates", "catalog_price_tiers", "catalog_budgets", "catalog_quotas",
    "catalog_clusters", "catalog_gpu_models", "catalog_nodes", "catalog_outage_windows",
)  # fmt: skip


def _catalog_rows(run: MonthRun) -> None:
    write_catalog_rows(run.con, run.catalog)


# The catalog folder, validated, as tables; refreshed whole by every run.
catalog = TableStep(
    "catalog",
    GROUP,
    [Table(name, "staging", whole=True) for name in CATALOG_TABLES],
    _catalog_rows,
)


def _export_rows(run: MonthRun) -> None:
    read_scheduler_exports(run.con, run.folders.landing, run.catalog)


# Every row of every scheduler export, loaded or set aside with its reason (all months: a job
# record counts in the month its latest record says); read once per run.
scheduler_exports = TableStep(
    "scheduler_exports",
    GROUP,
    [
        Table("stg_scheduler_files", "staging", whole=True),
        Table("stg_job_records", "staging", whole=True),
        Table("stg_allocation_records", "staging", whole=True),
        Table("stg_quota_configs", "staging", whole=True),
    ],
    _export_rows,
)


def _account_rows(run: MonthRun) -> None:
    write_account_tenants(run.con, run.catalog)


catalog_account_tenants = TableStep(
    "catalog_account_tenants",
    GROUP,
    [
        Table(
            "catalog_account_tenants",
            "staging",
            whole=True,
            # the accounts and namespaces seen, mapped in Python
            also_reads=["stg_job_records", "stg_quota_configs"],
        )
    ],
    _account_rows,
)

stg_jobs = sql_table("stg_jobs", "staging", GROUP)


def _month_job_gpus(run: MonthRun) -> None:
    write_month_job_gpus(run.con, run.params)


job_gpus = sql_table(
    "job_gpus", "staging", GROUP,
    prepare=_month_job_gpus,
    # exported_job_gpus.sql and the GPU index assignment (loading.py)
    also_reads=["stg_allocation_records", "catalog_nodes"],
)  # fmt: skip


@dg.asset(
    # a day reads the catalog's settings of its month (cluster settings, billing timezone, idle
    # threshold); the current month is no partition yet, and its days still run
    deps=[
        dg.AssetDep(
            "catalog_clusters",
            partition_mapping=dg.TimeWindowPartitionMapping(
                allow_nonexistent_upstream_partitions=True
            ),
        )
    ],
    partitions_def=daily_partition,
    backfill_policy=single_run,
    group_name=GROUP,
    kinds={"parquet"},
)
def gpu_sample_rollup(
    context: dg.AssetExecutionContext, chargeback: ChargebackResource
) -> dg.MaterializeResult:
    """One row per GPU sample of a UTC day (duplicates folded, covered time and idle-run number
    attached; sql/rollup/gpu_sample_rollup.sql) in `<telemetry>/cluster=<c>/day=<d>/`, and the
    day's rejected rows and counts per file in `<telemetry>/quality/day=<d>/`. Parquet only, no
    warehouse: days run in parallel processes, and a day that lands late re-runs alone (then
    re-run its month's assets)."""
    window = context.partition_time_window
    days = [
        window.start.date() + dt.timedelta(days=n)
        for n in range((window.end.date() - window.start.date()).days)
    ]

    def on_day(k: int, day: dt.date, counts: dict[str, int], seconds: float) -> None:
        rate = f"{counts['samples'] / seconds:,.0f} rows/s" if seconds > 0 else ""
        progress(
            context,
            f"telemetry day {k} of {len(days)} ({day}): {counts['samples']:,} samples, "
            f"{counts['rejected']:,} rejected, {seconds:.1f} s, {rate}",
        )

    per_day = roll_up_days(chargeback, chargeback.catalog(), days, on_day)
    return dg.MaterializeResult(
        metadata={
            "rows_samples": sum(counts["samples"] for counts in per_day.values()),
            "rows_rejected": sum(counts["rejected"] for counts in per_day.values()),
            "days": list(per_day),
        }
    )


def _sample_files(run: MonthRun) -> dict[str, list[str]]:
    files = write_sample_sources(run.con, run.folders.landing, run.folders.telemetry, run.catalog)
    return {"files": files}


# Every telemetry export (all months) as the canonical samples file attribution reads.
telemetry_files = TableStep(
    "telemetry_files",
    GROUP,
    [
        # a cluster's settings convert its telemetry
        Table("sample_sources", "staging", whole=True, also_reads=["catalog_clusters"]),
        Table("stg_telemetry_files", "staging", whole=True),
    ],
    _sample_files,
)


# The columns of the daily series files (day_sample_series.sql) that earlier releases did not
# write: where each series' days begin and end, which incidents.sql finds silences from
SERIES_COLUMNS_ADDED = ("first_ts", "covered_until")


def _quality_files(run: MonthRun) -> dict[str, list[str]]:
    files = month_quality_files(run.folders.telemetry, run.month)
    _check_series_columns(run.con, files["series_files"], run.month.label)
    stop_on_days_behind_landing(
        run.con, run.folders.landing, run.folders.telemetry, run.month, files["count_files"]
    )
    stop_on_days_rolled_up_by_another_catalog(run.con, run.month, files["node_files"], run.catalog)
    return files


def _check_series_columns(con, series_files: list[str], label: str) -> None:
    """Days rolled up before the series files said where each series' days begin and end
    leave incidents without them: name them, instead of a DuckDB binder error."""
    why = "without each series' first and last covered time"
    check_rollup_columns(con, series_files, SERIES_COLUMNS_ADDED, label, why)


# The month's share of what the daily rollups set aside and counted, and of their series'
# metrics and steps; the run stops here when one of the month's UTC days is not rolled up, was
# rolled up before an export of it landed or changed (sample_sources: the landing's), or by a
# catalog that judged it otherwise than the catalog now.
# After the catalog: its settings say which UTC days are the month's (a catalog error stops
# the run at the catalog, once).
sample_quality = TableStep(
    "sample_quality",
    GROUP,
    [
        Table(
            name, "staging", also_reads=["gpu_sample_rollup", "catalog_clusters", "sample_sources"]
        )
        for name in ("sample_rejects", "sample_file_counts", "sample_series")
    ],
    _quality_files,
)

STEPS = [
    catalog, scheduler_exports, catalog_account_tenants, stg_jobs, job_gpus, telemetry_files,
    sample_quality,
]  # fmt: skip
