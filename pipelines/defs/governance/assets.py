"""Governance evidence: quota compliance, the configured quotas' drift from the catalog, queue
and service, failures, capacity verdict, and the telemetry labels checked against the
scheduler."""

from pipelines.defs.attribution.assets import checked_rollup_files
from pipelines.defs.ingest.telemetry import (
    check_rollup_columns,
    month_sample_files,
    readable_sample_files,
)
from pipelines.defs.monthly import MonthRun
from pipelines.defs.warehouse import Check, sql_table

GROUP = "governance"

quota_compliance = sql_table(
    "quota_compliance", "marts", GROUP, checks=[Check("quota_compliance_ties_out")]
)
queue_stats = sql_table("queue_stats", "marts", GROUP)
failure_stats = sql_table("failure_stats", "marts", GROUP)
# how long each Kueue Workload of the month waited for admission, or still waits
kueue_workload_waits = sql_table("kueue_workload_waits", "facts", GROUP)
submission_stats = sql_table("submission_stats", "marts", GROUP)
# the GPU quotas configured in the schedulers (sacctmgr, Kueue) against the catalog's
quota_drift = sql_table("quota_drift", "marts", GROUP)


def _sample_files(run: MonthRun) -> dict[str, list[str]]:
    """The month's daily rollup samples files."""
    files = month_sample_files(run.folders.telemetry, run.month)
    _check_silence_marks(run.con, files, run.month.label)
    return {"sample_files": files}


def _check_silence_marks(con, sample_files: list[str], label: str) -> None:
    """Days rolled up before the samples marked the stretches they leave uncovered
    (silent_until) would hide their silences from incidents: name them."""
    why = "without the marks of uncovered stretches"
    check_rollup_columns(con, sample_files, ("silent_until",), label, why)


# incidents of the month (outage windows, node failures, telemetry silences) and what they
# did to availability
node_service = sql_table("node_service", "facts", GROUP)
incidents = sql_table(
    "incidents", "marts", GROUP,
    prepare=_sample_files,
    also_reads=["gpu_sample_rollup"],  # the rollup's samples: when each node reported
)  # fmt: skip
availability = sql_table("availability", "marts", GROUP)
capacity_evidence = sql_table("capacity_evidence", "marts", GROUP)
# per job, then per user: waste, memory use and energy (issue 18 item 6, Jobstats-style)
job_efficiency = sql_table("job_efficiency", "facts", GROUP)
user_efficiency = sql_table("user_efficiency", "marts", GROUP)
# jobs holding GPUs they did not use while their others worked (a diagnostic view), judged on
# the rollup's sums per series-hour
over_allocation = sql_table(
    "over_allocation",
    "marts",
    GROUP,
    prepare=checked_rollup_files,
    also_reads=["gpu_sample_rollup"],
)
utilization_daily = sql_table(
    "utilization_daily", "marts", GROUP, checks=[Check("utilization_daily_ties_out")]
)


def _label_files(run: MonthRun) -> dict[str, list[str]]:
    """The canonical samples files of the landing folder (sample_sources lists them) that may
    have a labelled sample: a job_id, pod or namespace column whose Parquet statistics do not
    say it is NULL throughout. The others cannot add a row; reading them all took 9 s of the
    10,000-GPU month's monthly run, whose exports have no labels."""
    paths = [path for (path,) in run.con.execute(
        "select path from sample_sources order by path"
    ).fetchall()]  # fmt: skip
    labelled = set()
    if paths:
        labelled = {path for (path,) in run.con.execute(
            "select distinct file_name from parquet_metadata($paths) "
            "where lower(path_in_schema) in ('job_id', 'pod', 'namespace') "
            "and (stats_null_count is null or stats_null_count < num_values)",
            {"paths": paths},
        ).fetchall()}  # fmt: skip
    return {"files": readable_sample_files(
        run.folders.telemetry, [path for path in paths if path in labelled]
    )}  # fmt: skip


def _hours_by_kind(found: list[dict]) -> dict[str, dict[str, float]]:
    hours: dict[str, float] = {}
    for row in found:
        hours[row["kind"]] = hours.get(row["kind"], 0.0) + row["gpu_hours"]
    return {"gpu_hours_by_kind": {kind: round(value, 6) for kind, value in sorted(hours.items())}}


# Do DCGM's hpc_job / pod / namespace labels name the job the scheduler says held each GPU?
telemetry_label_checks = sql_table(
    "telemetry_label_checks", "marts", GROUP,
    # a warning: attribution follows the scheduler; the labels are evidence that its GPU
    # placement may be wrong
    checks=[Check("telemetry_labels_agree_with_scheduler", warn=True, summary=_hours_by_kind)],
    prepare=_label_files,
)  # fmt: skip

STEPS = [
    quota_compliance, kueue_workload_waits, queue_stats, failure_stats, submission_stats,
    quota_drift, node_service, incidents, availability, capacity_evidence, job_efficiency,
    user_efficiency, over_allocation,
    utilization_daily, telemetry_label_checks,
]  # fmt: skip
