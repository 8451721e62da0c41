"""Attribution: job time per GPU and hour, telemetry matched to it, the waste buckets."""

import dagster as dg

from pipelines.defs.ingest.assets import gpu_samples, stg_jobs
from pipelines.defs.ingest.telemetry import month_hour_files, month_sample_files
from pipelines.defs.monthly import MonthRun, materialize_months, monthly_sql_asset, sql_description
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
    def step(run: MonthRun) -> dict[str, int]:
        files = month_sample_files(run.folders.telemetry, run.month)
        hour_files = month_hour_files(run.folders.telemetry, run.month)
        _check_rollup_format(run.con, files, run.month.label)
        _check_exact_hour_sums(run.con, hour_files, run.month.label)
        _check_idle_threshold(run.con, files, run.params.idle_threshold_pct, run.month.label)
        sample_params = {**run.params.sql(), "sample_files": files, "hour_files": hour_files}
        return {
            "job_sample_time": replace_month(
                run.con, "job_sample_time", "facts/job_sample_time", sample_params
            ),
            "job_time_buckets": replace_month(
                run.con, "job_time_buckets", "facts/job_time_buckets", run.params
            ),
        }

    return materialize_months(context, chargeback, step)


# The rollup columns attribution reads that earlier releases did not write
ROLLUP_COLUMNS_ADDED = ("series_key", "hour", "run")


def _check_rollup_format(con, files: list[str], label: str) -> None:
    """Days rolled up by an earlier release lack columns attribution reads (the join keys
    series_key and hour, the idle-run label run) and the sums per series-hour: name them,
    instead of a DuckDB binder error."""
    old = [path for (path,) in con.execute(
        "select file_name from parquet_schema($files) group by file_name "
        "having count(*) filter (list_contains($columns, name)) < len($columns) order by 1",
        {"files": files, "columns": list(ROLLUP_COLUMNS_ADDED)},
    ).fetchall()]  # fmt: skip
    if old:
        days = ", ".join(
            sorted({part for path in old for part in path.split("/") if part.startswith("day=")})
        )
        raise ValueError(
            f"telemetry of {label}: {days} rolled up by an earlier release (without the columns "
            f"{', '.join(ROLLUP_COLUMNS_ADDED)}): materialise gpu_sample_rollup for these days "
            "again"
        )


def _check_exact_hour_sums(con, hour_files: list[str], label: str) -> None:
    """Days rolled up before the sums per series-hour became exact (utilisation-weighted time
    as a DECIMAL, not a DOUBLE whose sums depend on the order of rows) would make the month's
    figures differ in the last digits from run to run: name them."""
    old = [path for (path,) in con.execute(
        "select distinct file_name from parquet_schema($files) "
        "where name = 'util_weighted_ms' and type = 'DOUBLE' order by 1",
        {"files": hour_files},
    ).fetchall()]  # fmt: skip
    if old:
        days = ", ".join(
            sorted({part for path in old for part in path.split("/") if part.startswith("day=")})
        )
        raise ValueError(
            f"telemetry of {label}: {days} rolled up by an earlier release (utilisation summed "
            "as a double): materialise gpu_sample_rollup for these days again"
        )


def _check_idle_threshold(con, files: list[str], threshold: float, label: str) -> None:
    """The rollups number idle runs with the catalog's idle threshold of their day: stop when
    a day was rolled up with another one (the catalog changed since) instead of mixing them."""
    used = [t for (t,) in con.execute(
        "select distinct idle_threshold_pct from read_parquet($files) order by 1", {"files": files}
    ).fetchall()]  # fmt: skip
    if used and used != [threshold]:
        raise ValueError(
            f"telemetry of {label}: days rolled up with idle_threshold_pct {used}, the catalog "
            f"says {threshold}: materialise gpu_sample_rollup for the month's days again"
        )


gpu_capacity = monthly_sql_asset("gpu_capacity", "facts/gpu_capacity", [job_gpu_hours], GROUP)
capacity_buckets = monthly_sql_asset(
    "capacity_buckets", "marts/capacity_buckets", [job_time_buckets, gpu_capacity], GROUP
)
