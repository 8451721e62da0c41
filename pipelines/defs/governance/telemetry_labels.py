"""Telemetry labels against the scheduler: do DCGM's `hpc_job` / `pod` / `namespace` labels
name the job the scheduler says held each GPU?"""

import hashlib
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.defs.attribution.assets import job_gpu_hours
from pipelines.defs.ingest.assets import gpu_samples, stg_jobs
from pipelines.defs.monthly import run_months, sql_description
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.resources import ChargebackResource
from pipelines.sql import replace_month

SQL_NAME = "marts/telemetry_label_checks"

# The sample columns the checks read: one empty file with all of them joins the read, so that
# a samples file without labels (canonical Parquet, nvidia-smi) still reads them as NULL.
LABEL_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us")), ("node", pa.string()), ("gpu_index", pa.int32()),
    ("job_id", pa.string()), ("pod", pa.string()), ("namespace", pa.string()),
    ("gpu_instance", pa.string()), ("gpu_instance_slices", pa.int32()),
])  # fmt: skip


def label_schema_file(telemetry_dir: Path) -> Path:
    """The empty Parquet file with LABEL_SCHEMA, named after the schema."""
    digest = hashlib.sha256(LABEL_SCHEMA.to_string().encode()).hexdigest()[:12]
    path = telemetry_dir / "schema" / f"labels-{digest}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        pq.write_table(LABEL_SCHEMA.empty_table(), partial)
        partial.replace(path)
    return path


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

    def step(con, month, params, chargeback, catalog):
        # every canonical samples file of the landing folder (gpu_samples lists them)
        files = [path for (path,) in con.execute(
            "select path from sample_sources order by path"
        ).fetchall()]  # fmt: skip
        files.append(str(label_schema_file(chargeback.telemetry_dir)))
        return {
            "telemetry_label_checks": replace_month(
                con, "telemetry_label_checks", SQL_NAME, {**params, "files": files}
            )
        }

    return run_months(context, chargeback, step)
