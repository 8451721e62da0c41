"""Ingest: the catalog, the scheduler exports and the GPU telemetry of each billing month."""

from pathlib import Path

import dagster as dg

from pipelines.defs.ingest.catalog_tables import write_catalog_tables
from pipelines.defs.ingest.loading import (
    build_month_jobs,
    load_month_telemetry,
    load_scheduler_exports,
)
from pipelines.defs.monthly import run_months
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.resources import ChargebackResource

GROUP = "ingest"


@dg.asset(partitions_def=monthly_partition, backfill_policy=single_run, group_name=GROUP,
          kinds={"duckdb", "yaml"})  # fmt: skip
def catalog(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """The catalog folder validated and written as `catalog_*` tables (one row per tenant, rate,
    quota, budget, node, outage window per node). Refreshed whole by every run."""

    def step(con, month, params, chargeback, catalog):
        return write_catalog_tables(con, catalog)

    return run_months(context, chargeback, step)


@dg.asset(deps=[catalog], partitions_def=monthly_partition, backfill_policy=single_run,
          group_name=GROUP, kinds={"duckdb", "sql"})  # fmt: skip
def stg_jobs(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """One row per job that held GPUs in the billing month or was submitted in it (latest
    record of the job wins); with `job_gpus`, one row per GPU each started job held.
    Every export row is in stg_job_records / stg_allocation_records, rejected or not."""
    loaded: dict[str, int] = {}

    def step(con, month, params, chargeback, catalog):
        if not loaded:  # the exports are read once per run, whatever the number of months
            loaded.update(load_scheduler_exports(con, Path(chargeback.landing_dir), catalog))
        return {**loaded, **build_month_jobs(con, params)}

    return run_months(context, chargeback, step)


@dg.asset(deps=[catalog], partitions_def=monthly_partition, backfill_policy=single_run,
          group_name=GROUP, kinds={"duckdb", "parquet"})  # fmt: skip
def gpu_samples(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """One row per GPU sample of the billing month (duplicates folded, covered time attached),
    stored as Parquet partitioned by cluster and day beside the warehouse; rejected rows in
    sample_rejects, counts per file in sample_file_counts."""

    def step(con, month, params, chargeback, catalog):
        return load_month_telemetry(
            con, Path(chargeback.landing_dir), chargeback.telemetry_dir, params, catalog
        )

    return run_months(context, chargeback, step)
