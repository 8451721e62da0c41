"""The department workbook `<reports>/YYYY-MM/departments/<slug>.xlsx` for a business owner:
Summary, Charges, Job lines and Definitions of the department's tenants (membership:
`pipelines.reports.departments`), with the finance workbook's shared sheets. Reproducible: the
same tables give the same bytes.
"""

from __future__ import annotations

import hashlib
import pathlib
from decimal import Decimal
from typing import Any

import duckdb
from openpyxl import Workbook

from pipelines.months import BillingMonth
from pipelines.reports import queries, shared_sheets
from pipelines.reports.definitions import workbook_definitions
from pipelines.reports.departments import (
    Department,
    department_quota,
    department_tenants,
    quota_flags,
)
from pipelines.reports.files import write_atomically
from pipelines.reports.package import workbook_bytes
from pipelines.reports.period import month_name, period_end
from pipelines.reports.sheets import Column, add_named_styles, set_print_setup

WORKBOOK_SHEETS = ("Summary", "Charges", "Job lines", "Definitions")


def write_department_workbook(
    con: duckdb.DuckDBPyConnection,
    month: BillingMonth,
    department: Department,
    parameters: dict[str, str],
    out_path: pathlib.Path,
) -> dict[str, Any]:
    """Write the department workbook (Summary, Charges, Job lines, Definitions), atomically.

    Returns `total_amount` (Decimal, the department's charge lines), `tenants`,
    `charge_lines`, `job_lines`, `currency`, `path` and the file's `sha256`.
    """
    key = {"billing_month": month.first_day, "department": department.name}
    currency = queries.report_currency(con, month.first_day, parameters)
    charges = queries.fetch(con, "charge_lines", **key)
    jobs = queries.rows_query(con, "job_lines", shared_sheets.JOB_LINES_ORDER, **key)
    tenants = department_tenants(con, month.first_day, department)
    flags = quota_flags(tenants, department_quota(con, month.first_day, department))

    wb = Workbook()
    add_named_styles(wb)
    summary = wb.active
    summary.title = WORKBOOK_SHEETS[0]
    sheets = {name: wb.create_sheet(name) for name in WORKBOOK_SHEETS[1:]}
    charges_total_cell = shared_sheets.write_charges(sheets["Charges"], charges, currency)
    shared_sheets.write_summary(
        summary, _summary(month, department, currency, tenants, flags), charges_total_cell
    )
    job_lines = shared_sheets.write_job_lines(sheets["Job lines"], jobs, currency)
    shared_sheets.write_definitions(
        sheets["Definitions"],
        {"department": department.label, **parameters},
        workbook_definitions(),
    )
    set_print_setup(
        wb,
        f"GPU chargeback — {department.label} — {month_name(month.first_day)} ({month.label})",
    )
    wb.calculation.fullCalcOnLoad = True
    wb.properties.creator = "gpu-chargeback"
    wb.properties.title = f"GPU chargeback {month.label}: {department.label}"

    package = workbook_bytes(wb, period_end(month.first_day), [job_lines])
    write_atomically(package, pathlib.Path(out_path))
    return {
        "total_amount": sum((c.amount for c in charges), Decimal("0.00")),
        "tenants": len(tenants),
        "charge_lines": len(charges),
        "job_lines": job_lines.count,
        "currency": currency,
        "path": str(out_path),
        "sha256": hashlib.sha256(package).hexdigest(),
    }


def _summary(
    month: BillingMonth,
    department: Department,
    currency: str,
    tenants: list[Any],
    flags: dict[str, list[str]],
) -> shared_sheets.Summary:
    return shared_sheets.Summary(
        title=(
            f"GPU chargeback — {department.label} — {month_name(month.first_day)} "
            f"({month.label}), amounts in {currency}"
        ),
        subtitle=(
            f"Billing period [{month.first_day:%Y-%m-%d}, {period_end(month.first_day):%Y-%m-%d})"
            "; this department's tenants only; figures are defined on the Definitions sheet."
        ),
        currency=currency,
        identity_cols=[
            Column("Tenant"),
            Column("Tenant ID"),
            Column("Cost center"),
            Column("Owner"),
        ],
        tenants=[
            shared_sheets.SummaryTenant(
                identity=(t.tenant_name, t.tenant_id, t.cost_center, t.owner),
                allocated_gpu_hours=t.allocated_gpu_hours,
                productive_gpu_hours=t.productive_gpu_hours,
                amount=t.amount,
                budget=t.budget,
                budget_status=t.budget_status,
                extra=(
                    t.productive_gpu_hours / t.allocated_gpu_hours
                    if t.allocated_gpu_hours
                    else None,
                    t.zombie_gpu_hours,
                    ", ".join(flags.get(t.tenant_id, [])) or None,
                ),
            )
            for t in tenants
        ],
        total_charge=sum((t.amount for t in tenants), Decimal("0.00")),
        extra_cols=[
            Column("Productive share", "share"),
            Column("Zombie GPU-hours", "hours"),
            Column("Quota flags"),
        ],
    )
