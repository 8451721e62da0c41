"""Every department's page and workbook of a billing month, in one folder:
`<slug>.html` (`department_page`) and `<slug>.xlsx` (`department_workbook`), each written to a
temporary name and renamed.
"""

from __future__ import annotations

import pathlib

import duckdb

from pipelines.months import BillingMonth
from pipelines.reports.department_page import render_department_page
from pipelines.reports.department_workbook import write_department_workbook
from pipelines.reports.departments import departments
from pipelines.reports.files import write_atomically


def write_department_reports(
    con: duckdb.DuckDBPyConnection,
    month: BillingMonth,
    parameters: dict[str, str],
    folder: pathlib.Path,
) -> dict[str, int]:
    """Write the page and the workbook of every department of `month` into `folder`.

    Files of departments that no longer exist in the month are removed, so the folder always
    matches the tables. Returns counts for run metadata: `departments`, `tenants`,
    `charge_lines`, `job_lines`.
    """
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()
    counts = {"departments": 0, "tenants": 0, "charge_lines": 0, "job_lines": 0}
    for department in departments(con, month.first_day):
        page = render_department_page(con, month, department, parameters)
        html_path = folder / f"{department.slug}.html"
        write_atomically(page.encode("utf-8"), html_path)
        xlsx_path = folder / f"{department.slug}.xlsx"
        summary = write_department_workbook(con, month, department, parameters, xlsx_path)
        written |= {html_path.name, xlsx_path.name}
        counts["departments"] += 1
        counts["tenants"] += summary["tenants"]
        counts["charge_lines"] += summary["charge_lines"]
        counts["job_lines"] += summary["job_lines"]
    for stale in sorted(folder.iterdir()):
        if stale.suffix in (".html", ".xlsx") and stale.is_file() and stale.name not in written:
            stale.unlink()
    return counts
