"""Attribution: job time per GPU and hour, telemetry matched to it, the waste buckets."""

from pipelines.defs.ingest.telemetry import (
    check_rollup_columns,
    month_hour_files,
    month_sample_files,
    stop_on_old_rollups,
)
from pipelines.defs.monthly import MonthRun
from pipelines.defs.warehouse import Check, sql_table

GROUP = "attribution"

job_gpu_hours = sql_table("job_gpu_hours", "facts", GROUP)


def checked_rollup_files(run: MonthRun) -> dict[str, list[str]]:
    """The month's daily rollup files, after checking they were written as this release
    reads them."""
    files = month_sample_files(run.folders.telemetry, run.month)
    hour_files = month_hour_files(run.folders.telemetry, run.month)
    _check_rollup_format(run.con, files, run.month.label)
    _check_hours_columns(run.con, hour_files, run.month.label)
    _check_exact_hour_sums(run.con, hour_files, run.month.label)
    _check_idle_threshold(run.con, hour_files, run.params.idle_threshold_pct, run.month.label)
    return {"sample_files": files, "hour_files": hour_files}


# the samples of the month's UTC days, read in place from the daily rollups (after
# sample_quality, which has checked that each day is rolled up)
job_sample_time = sql_table(
    "job_sample_time", "facts", GROUP,
    prepare=checked_rollup_files,
    also_reads=["gpu_sample_rollup", "sample_file_counts"],
)  # fmt: skip
# the tenant of each job on each billing day: the tenants' usage, waste and quota figures split
# a job running across a reorganisation by it
job_day_tenants = sql_table("job_day_tenants", "facts", GROUP)
job_time_buckets = sql_table("job_time_buckets", "facts", GROUP)


# The rollup columns attribution reads that earlier releases did not write
ROLLUP_COLUMNS_ADDED = ("series_key", "hour", "run")


def _check_rollup_format(con, files: list[str], label: str) -> None:
    """Days rolled up by an earlier release lack columns attribution reads (the join keys
    series_key and hour, the idle-run label run) and the sums per series-hour: name them,
    instead of a DuckDB binder error."""
    why = f"without the columns {', '.join(ROLLUP_COLUMNS_ADDED)}"
    check_rollup_columns(con, files, ROLLUP_COLUMNS_ADDED, label, why)


# The sums per series-hour of memory and power (user_efficiency's memory use and energy) that
# releases before them did not write, and the idle threshold, which was on the samples before
HOURS_COLUMNS_ADDED = (
    "mem_cover_ms", "mem_mib_ms", "peak_mem_mib", "power_mw_ms", "last_mem_mib", "last_power_mw",
    "idle_threshold_pct",
)  # fmt: skip


def _check_hours_columns(con, hour_files: list[str], label: str) -> None:
    """Days rolled up before the hours files carried memory and power sums would leave the
    whole hours of their jobs without memory or energy (too little, silently), and days whose
    hours files lack the idle threshold cannot be checked against the catalog's: name them."""
    why = "without the sums of memory and power or the idle threshold per hour"
    check_rollup_columns(con, hour_files, HOURS_COLUMNS_ADDED, label, why)


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
        stop_on_old_rollups(label, old, "utilisation summed as a double")


def _check_idle_threshold(con, hour_files: list[str], threshold: float, label: str) -> None:
    """The rollups number idle runs with the catalog's idle threshold of their day (on their
    hours files): stop when a day was rolled up with another one (the catalog changed since)
    instead of mixing them."""
    used = [t for (t,) in con.execute(
        "select distinct idle_threshold_pct from read_parquet($files) order by 1",
        {"files": hour_files},
    ).fetchall()]  # fmt: skip
    if used and used != [threshold]:
        raise ValueError(
            f"telemetry of {label}: days rolled up with idle_threshold_pct {used}, the catalog "
            f"says {threshold}: materialise gpu_sample_rollup for the month's days again"
        )


gpu_capacity = sql_table(
    "gpu_capacity", "facts", GROUP,
    # the GPUs where undeclared overlap happens are listed (their excess also breaks
    # capacity_buckets_sum_to_capacity, which blocks the reports)
    checks=[Check("gpus_never_oversubscribed", blocking=False)],
)  # fmt: skip
# priced at the pools' charges or costs: built in the costing stage, after job_gpu_charges
capacity_buckets = sql_table(
    "capacity_buckets", "marts", GROUP, checks=[Check("capacity_buckets_sum_to_capacity")]
)

STEPS = [job_gpu_hours, job_sample_time, job_day_tenants, job_time_buckets, gpu_capacity]
