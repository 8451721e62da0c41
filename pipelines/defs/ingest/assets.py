"""Ingest: the catalog, the scheduler exports and the GPU telemetry of each billing month."""

import datetime as dt

import dagster as dg

from pipelines.defs.ingest.catalog_tables import write_catalog_tables
from pipelines.defs.ingest.loading import build_month_jobs, load_scheduler_exports
from pipelines.defs.ingest.telemetry import load_month_telemetry, roll_up_days
from pipelines.defs.monthly import MonthRun, materialize_months
from pipelines.defs.partitions import daily_partition, monthly_partition, single_run
from pipelines.defs.resources import ChargebackResource
from pipelines.progress import progress

GROUP = "ingest"


@dg.asset(partitions_def=monthly_partition, backfill_policy=single_run, group_name=GROUP,
          kinds={"duckdb", "yaml"})  # fmt: skip
def catalog(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """The catalog folder validated and written as `catalog_*` tables (one row per tenant, rate,
    quota, budget, node, outage window per node). Refreshed whole by every run."""

    def step(run: MonthRun) -> dict[str, int]:
        return write_catalog_tables(run.con, run.catalog)

    return materialize_months(context, chargeback, step)


@dg.asset(deps=[catalog], partitions_def=monthly_partition, backfill_policy=single_run,
          group_name=GROUP, kinds={"duckdb", "sql"})  # fmt: skip
def stg_jobs(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """One row per job that held GPUs in the billing month or was submitted in it (latest
    record of the job wins); with `job_gpus`, one row per GPU each started job held.
    Every export row is in stg_job_records / stg_allocation_records, rejected or not."""
    loaded: dict[str, int] = {}

    def step(run: MonthRun) -> dict[str, int]:
        if not loaded:  # the exports are read once per run, whatever the number of months
            loaded.update(load_scheduler_exports(run.con, run.folders.landing, run.catalog))
        return {**loaded, **build_month_jobs(run.con, run.params)}

    return materialize_months(context, chargeback, step)


@dg.asset(
    # a day reads the catalog of its month (cluster settings, billing timezone, idle threshold);
    # the current month is no partition yet, and its days still run
    deps=[
        dg.AssetDep(
            catalog,
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
    attached; sql/staging/gpu_sample_rollup.sql) in `<telemetry>/cluster=<c>/day=<d>/`, and the
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


@dg.asset(deps=[catalog, gpu_sample_rollup], partitions_def=monthly_partition,
          backfill_policy=single_run, group_name=GROUP, kinds={"duckdb", "parquet"})  # fmt: skip
def gpu_samples(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """The billing month's GPU samples: the daily rollups of the UTC days it overlaps (read in
    place by attribution; the run stops if one is missing), their rejected rows loaded into
    sample_rejects and counts per file into sample_file_counts; sample_sources lists every
    canonical samples file."""

    def step(run: MonthRun) -> dict[str, int]:
        return load_month_telemetry(
            run.con,
            run.folders.landing,
            run.folders.telemetry,
            run.month,
            run.params,
            run.catalog,
        )

    return materialize_months(context, chargeback, step)
