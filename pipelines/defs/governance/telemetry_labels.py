"""Telemetry labels against the scheduler: do DCGM's `hpc_job` / `pod` / `namespace` labels
name the job the scheduler says held each GPU?"""

import dagster as dg

from pipelines.defs.attribution.assets import job_gpu_hours
from pipelines.defs.ingest.assets import gpu_samples, stg_jobs
from pipelines.defs.ingest.telemetry import readable_sample_files
from pipelines.defs.monthly import MonthRun, materialize_months, sql_description
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.resources import ChargebackResource
from pipelines.sql import replace_month

SQL_NAME = "marts/telemetry_label_checks"


@dg.asset(
    deps=[gpu_samples, stg_jobs, job_gpu_hours],
    partitions_def=monthly_partition,
    backfill_policy=single_run,
    group_name="governance",
    description=sql_description(SQL_NAME),
    kinds={"duckdb", "sql"},
)
def telemetry_label_checks(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """One row per month × cluster × node × GPU × telemetry label × kind (agrees, or why not),
    with its samples and GPU-hours (sql/marts/telemetry_label_checks.sql)."""

    def step(run: MonthRun) -> dict[str, int]:
        # every canonical samples file of the landing folder (gpu_samples lists them)
        paths = [path for (path,) in run.con.execute(
            "select path from sample_sources order by path"
        ).fetchall()]  # fmt: skip
        files = readable_sample_files(run.folders.telemetry, paths)
        return {
            "telemetry_label_checks": replace_month(
                run.con, "telemetry_label_checks", SQL_NAME, {**run.params.sql(), "files": files}
            )
        }

    return materialize_months(context, chargeback, step)
