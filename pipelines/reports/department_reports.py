"""Every department's page and workbook of a billing month, in one folder:
`<slug>.html` (`department_page`), its PDF `<slug>.pdf` (`pdf`, when the machine has Chromium)
and `<slug>.xlsx` (`department_workbook`), each written to a temporary name and renamed; and the
organisation page `chargeback-YYYY-MM.html` (and PDF) over every department.
"""

from __future__ import annotations

import contextlib
import pathlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import duckdb

from pipelines.months import BillingMonth
from pipelines.reports.department_page import render_department_page
from pipelines.reports.department_workbook import write_department_workbook
from pipelines.reports.departments import ORGANISATION, Department, departments
from pipelines.reports.files import write_atomically
from pipelines.reports.pdf import PagePrinter
from pipelines.reports.period import period_end


@dataclass(frozen=True)
class MonthPages:
    """What a month's pages are rendered from and how they are printed: the warehouse (`con`),
    the month, the Definitions' `parameters`, the paper (`page_size`: A4, Letter) and the
    Chromium that prints each page to PDF (None: no PDFs)."""

    con: duckdb.DuckDBPyConnection
    month: BillingMonth
    parameters: dict[str, str]
    page_size: str = "A4"
    chromium: str | None = None


def write_department_reports(pages: MonthPages, folder: pathlib.Path) -> dict[str, int]:
    """Write the page, its PDF (with `pages.chromium`) and the workbook of every department of
    `pages.month` into `folder`.

    Files of departments that no longer exist in the month are removed, so the folder always
    matches the tables. Returns counts for run metadata: `departments`, `tenants`,
    `charge_lines`, `job_lines`, `pdfs`.
    """
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()
    counts = {"departments": 0, "tenants": 0, "charge_lines": 0, "job_lines": 0, "pdfs": 0}
    stamp = period_end(pages.month.first_day)
    # Each page is printed while the next workbooks are written: a print is mostly Chromium's
    # work, on one core, a workbook is Python on the other. One browser, a page at a time.
    browser = contextlib.nullcontext() if pages.chromium is None else PagePrinter(pages.chromium)
    # (the pool closes first: the browser stays up until every print has finished)
    with browser as printer, ThreadPoolExecutor(max_workers=1) as pool:
        printing: list[Future[pathlib.Path]] = []
        for department in departments(pages.con, pages.month.first_day):
            html_path = folder / f"{department.slug}.html"
            page = _write_page(pages, department, html_path)
            written.add(html_path.name)
            if printer is not None:
                pdf_path = html_path.with_suffix(".pdf")
                printing.append(pool.submit(printer.print_pdf, page, pdf_path, stamp))
            xlsx_path = folder / f"{department.slug}.xlsx"
            summary = write_department_workbook(
                pages.con, pages.month, department, pages.parameters, xlsx_path
            )
            written.add(xlsx_path.name)
            counts["departments"] += 1
            counts["pdfs"] += int(printer is not None)
            counts["tenants"] += summary["tenants"]
            counts["charge_lines"] += summary["charge_lines"]
            counts["job_lines"] += summary["job_lines"]
        # the first page that failed, in the departments' order, stops the run
        written |= {future.result().name for future in printing}
    # (a PDF of an earlier run when this one has no Chromium too: it would not match its page)
    for stale in sorted(folder.iterdir()):
        if (
            stale.suffix in (".html", ".pdf", ".xlsx")
            and stale.is_file()
            and (stale.name not in written)
        ):
            stale.unlink()
    return counts


def write_organisation_page(pages: MonthPages, html_path: pathlib.Path) -> list[str]:
    """The organisation page at `html_path` (its departments link to `departments/<slug>.html`
    beside it) and its PDF with `pages.chromium`; returns the names written."""
    page = _write_page(pages, ORGANISATION, html_path)
    if pages.chromium is None:
        return [html_path.name]
    stamp = period_end(pages.month.first_day)
    with PagePrinter(pages.chromium) as printer:
        pdf = printer.print_pdf(page, html_path.with_suffix(".pdf"), stamp)
    return sorted([html_path.name, pdf.name])


def _write_page(pages: MonthPages, department: Department, html_path: pathlib.Path) -> str:
    """The page of `department` written at `html_path`; returns its HTML (to print)."""
    page = render_department_page(
        pages.con, pages.month, department, pages.parameters, pages.page_size
    )
    write_atomically(page.encode("utf-8"), html_path)
    return page
