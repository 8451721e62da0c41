"""Data quality: every input row set aside, with its reason, and the month's quality figures
per file and source; the checks that nothing was lost; which telemetry each cluster's figures
rest on."""

from pipelines.defs.warehouse import Check, sql_table

GROUP = "quality"

rejects = sql_table(
    "rejects", "marts", GROUP,
    ["stg_job_records", "stg_allocation_records", "stg_quota_configs", "sample_rejects"],
)  # fmt: skip
data_quality = sql_table(
    "data_quality", "marts", GROUP,
    ["rejects", "stg_scheduler_files", "stg_job_records", "stg_allocation_records",
     "stg_quota_configs", "stg_telemetry_files", "sample_file_counts", "job_usage",
     "job_time_buckets", "gpu_capacity", "telemetry_label_checks"],
    # for every input file, rows read = loaded + rejected, and none lost more than half its
    # rows (misread as a whole): both block the reports
    checks=[Check("rows_reconcile"), Check("no_file_mostly_rejected")],
)  # fmt: skip

# per cluster: the utilisation metric(s) of its telemetry, the sampling interval observed and
# the measured share of its allocated GPU time
telemetry_coverage = sql_table(
    "telemetry_coverage", "marts", GROUP, ["sample_series", "job_time_buckets"]
)

STEPS = [rejects, data_quality, telemetry_coverage]
