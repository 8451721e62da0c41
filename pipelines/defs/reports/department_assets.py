"""Reports: the business owners' page and workbook of each department and billing month."""

import dagster as dg

from pipelines.defs.monthly import MonthRun, materialize_months
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.reports.assets import staged_report
from pipelines.defs.resources import ChargebackResource
from pipelines.reports.department_reports import write_department_reports
from pipelines.reports.exports import report_parameters

GROUP = "reports"


@dg.asset(
    deps=["charge_lines", "tenant_month", "job_usage", "quota_compliance", "utilization_daily"],
    partitions_def=monthly_partition,
    backfill_policy=single_run,
    group_name=GROUP,
    kinds={"html", "excel"},
)
def department_reports(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """One page and one workbook per department and billing month, for its business owner:
    `<reports>/YYYY-MM/departments/<slug>.html` (self-contained: spend vs budget, waste by
    bucket, daily allocated GPU-hours, tenants, top idle/zombie jobs, definitions) and
    `<slug>.xlsx` (Summary, Charges, Job lines, Definitions of that department's tenants).
    Written into the run's staging folder of the month, published with the others."""

    def step(run: MonthRun) -> dict[str, int]:
        parameters = report_parameters(run.month, run.catalog)
        folder = staged_report(context, run, "departments")
        counts = write_department_reports(run.con, run.month, parameters, folder)
        published = run.folders.reports / run.month.label / "departments"
        context.add_output_metadata(
            {f"path_{run.month.label}": dg.MetadataValue.path(str(published))}
        )
        return counts

    return materialize_months(context, chargeback, step)
