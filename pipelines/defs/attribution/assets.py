"""Attribution: job time per GPU and hour, telemetry matched to it, the waste buckets."""

import dagster as dg

from pipelines.defs.ingest.assets import gpu_samples, stg_jobs
from pipelines.defs.ingest.loading import month_sample_files
from pipelines.defs.monthly import monthly_sql_asset, run_months, sql_description
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.resources import ChargebackResource
from pipelines.sql import replace_month

GROUP = "attribution"

job_gpu_hours = monthly_sql_asset("job_gpu_hours", "facts/job_gpu_hours", [stg_jobs], GROUP)


@dg.asset(
    deps=[job_gpu_hours, gpu_samples],
    partitions_def=monthly_partition,
    backfill_policy=single_run,
    group_name=GROUP,
    description=sql_description("facts/job_time_buckets"),
    kinds={"duckdb", "sql"},
)
def job_time_buckets(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    def step(con, month, params, chargeback, catalog):
        sample_params = {
            **params,
            "sample_files": month_sample_files(chargeback.telemetry_dir, params),
        }
        return {
            "job_sample_time": replace_month(
                con, "job_sample_time", "facts/job_sample_time", sample_params
            ),
            "job_time_buckets": replace_month(
                con, "job_time_buckets", "facts/job_time_buckets", params
            ),
        }

    return run_months(context, chargeback, step)


gpu_capacity = monthly_sql_asset("gpu_capacity", "facts/gpu_capacity", [job_gpu_hours], GROUP)
capacity_buckets = monthly_sql_asset(
    "capacity_buckets", "marts/capacity_buckets", [job_time_buckets, gpu_capacity], GROUP
)
