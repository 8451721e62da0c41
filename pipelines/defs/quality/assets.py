"""Data quality: every input row set aside, with its reason, and the month's quality figures
per file and source; the checks that nothing was lost; which telemetry each cluster's figures
rest on."""

from pipelines.defs.warehouse import Check, sql_table

GROUP = "quality"

rejects = sql_table("rejects", "marts", GROUP)
data_quality = sql_table(
    "data_quality", "marts", GROUP,
    # for every input file, rows read = loaded + rejected, and none lost more than half its
    # rows (misread as a whole): both block the reports
    checks=[Check("rows_reconcile"), Check("no_file_mostly_rejected")],
)  # fmt: skip

# per cluster: the utilisation metric(s) of its telemetry, the sampling interval observed and
# the measured share of its allocated GPU time
telemetry_coverage = sql_table("telemetry_coverage", "marts", GROUP)

STEPS = [rejects, data_quality, telemetry_coverage]
