"""Reports: the business owners' pages (and their PDFs) and workbook of each department and
billing month, and the organisation page over every department."""

import dagster as dg

from pipelines.defs.monthly import MonthRun, materialize_months
from pipelines.defs.reports.assets import report_asset, staged_report
from pipelines.defs.resources import ChargebackResource
from pipelines.reports.department_reports import (
    MonthPages,
    write_department_reports,
    write_organisation_page,
)
from pipelines.reports.exports import report_parameters
from pipelines.reports.pdf import CHROMIUM_ENV, find_chromium

PAGE_TABLES = [
    "charge_lines", "charge_line_coverage", "tenant_month", "job_usage", "cost_views",
    "quota_compliance", "utilization_daily", "telemetry_coverage", "user_efficiency",
]  # fmt: skip


def _chromium(context: dg.AssetExecutionContext, run: MonthRun) -> str | None:
    """The Chromium that prints the month's pages to PDF, None for no PDFs (said in the log)."""
    if not run.catalog.settings.page_pdfs:
        context.log.info(f"{run.month.label}: no PDFs of the pages: settings.yaml page_pdfs false")
        return None
    chromium = find_chromium()
    if chromium is None:
        context.log.warning(
            f"no PDFs of the pages: no Chromium on this machine (install Debian's chromium, or "
            f"name one in {CHROMIUM_ENV})"
        )
    return chromium


def _month_pages(context: dg.AssetExecutionContext, run: MonthRun) -> MonthPages:
    """The month's pages, on the settings' paper, printed by `_chromium`."""
    parameters = report_parameters(run.month, run.catalog)
    page_size = run.catalog.settings.page_size
    return MonthPages(run.con, run.month, parameters, page_size, _chromium(context, run))


@report_asset(deps=PAGE_TABLES, kinds={"html", "pdf", "excel"})
def department_reports(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """One page and one workbook per department and billing month, for its business owner:
    `<reports>/YYYY-MM/departments/<slug>.html` (self-contained: spend vs budget, waste by
    bucket, daily allocated GPU-hours, tenants, top idle/zombie jobs, definitions), its PDF
    `<slug>.pdf` (headless Chromium, settings.yaml page_size) and `<slug>.xlsx` (Summary,
    Charges, Job lines, Definitions of that department's tenants). Written into the run's
    staging folder of the month, published with the others."""

    def step(run: MonthRun) -> dict[str, int]:
        folder = staged_report(context, run, "departments")
        counts = write_department_reports(_month_pages(context, run), folder)
        published = run.folders.reports / run.month.label / "departments"
        context.add_output_metadata(
            {f"path_{run.month.label}": dg.MetadataValue.path(str(published))}
        )
        return counts

    return materialize_months(context, chargeback, step)


@report_asset(deps=PAGE_TABLES, kinds={"html", "pdf"})
def organisation_page(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """`<reports>/YYYY-MM/chargeback-YYYY-MM.html` (and `.pdf`): the department page over every
    department, summary first, with a table of the departments linking to their pages."""

    def step(run: MonthRun) -> dict[str, int]:
        name = f"chargeback-{run.month.label}.html"
        html_path = staged_report(context, run, name)
        written = write_organisation_page(_month_pages(context, run), html_path)
        published = run.folders.reports / run.month.label / name
        context.add_output_metadata(
            {f"path_{run.month.label}": dg.MetadataValue.path(str(published))}
        )
        return {"pdfs": sum(n.endswith(".pdf") for n in written)}

    return materialize_months(context, chargeback, step)
