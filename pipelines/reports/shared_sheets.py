"""The sheets the finance and the department workbooks share: Summary (headline figures, the
tenants with their budgets, and the reconciliation with the Charges sheet), Charges, Job lines
(streamed: a 1,000-GPU month has 200k job lines) and Definitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple

from openpyxl.utils import get_column_letter, quote_sheetname
from openpyxl.worksheet.worksheet import Worksheet

from pipelines.reports.sheets import (
    STYLE_OF_KIND,
    TOP,
    Column,
    apply_widths,
    current_widths,
    fill_status_rows,
    fit_widths,
    fit_widths_to,
    ref,
    section_below,
    set_text,
    share_of,
    write_main_table,
    write_table,
    write_total_row,
)
from pipelines.reports.streamed_sheet import RowsQuery, StreamedRows

# the complete order of the job lines (job ids are unique per cluster)
JOB_LINES_ORDER = "tenant_id, cluster, job_id"
# allocated time by waste bucket, in the taxonomy order of DESIGN.md (jobs and tenants)
BUCKET_HOURS_COLUMNS = (
    Column("Productive GPU-hours", "hours"),
    Column("Idle GPU-hours", "hours"),
    Column("Zombie GPU-hours", "hours"),
    Column("Failed (job) GPU-hours", "hours"),
    Column("Failed (infra) GPU-hours", "hours"),
    Column("Unmeasured GPU-hours", "hours"),
)


@dataclass(frozen=True)
class SummaryTenant:
    """A tenant's row of the Summary: the values of its identity columns, its figures, and
    the values of the extra columns."""

    identity: tuple[Any, ...]
    allocated_gpu_hours: float | None
    productive_gpu_hours: float | None
    amount: Decimal | None
    budget: Decimal | None
    budget_status: str | None
    extra: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Summary:
    """What a Summary sheet shows: a title and a subtitle; headline figures from row 4 (the
    capacity ones where the workbook has its own capacity); a table of tenants, each row
    filled by its budget status, with a TOTAL row; and the reconciliation of the TOTAL amount
    with the Charges sheet's. The tenants come last, below any sections a workbook adds: as
    many rows as tenants, their header repeats on each printed page (sheets.set_print_setup)."""

    title: str
    subtitle: str
    currency: str
    identity_cols: Sequence[Column]  # who a row is: the tenant's name, ids, ...
    tenants: Sequence[SummaryTenant]
    total_charge: Decimal  # the charge lines' sum
    extra_cols: Sequence[Column] = ()
    shows_capacity: bool = False
    capacity_gpu_hours: float | None = None  # None: unknown (no node inventory)


class SummaryRows(NamedTuple):
    """Where the Summary's reconciliation is: the Charges TOTAL, then the Difference (its last
    row, below which a workbook may add its own reconciliation)."""

    charges_total: int
    difference: int


# A workbook's own sections between the headline and the tenants: it takes the sheet and the
# last row used, writes below it and returns its own last row.
SummarySections = Callable[[Worksheet, int], int]


def write_summary(
    ws: Worksheet,
    summary: Summary,
    charges_total_cell: str,
    sections: SummarySections | None = None,
) -> SummaryRows:
    """Write `summary` on `ws`, with `sections` between its headline and its tenants; the
    Difference of its TOTAL and the Charges TOTAL must be 0."""
    set_text(ws["A1"], summary.title).style = "cb title"
    set_text(ws["A2"], summary.subtitle)
    row = 4
    for label, value, kind in _headline(summary):
        set_text(ws.cell(row=row, column=1), label)
        cell = ws.cell(row=row, column=2)
        if isinstance(value, str):
            set_text(cell, value)
        else:
            cell.value = value
            cell.style = STYLE_OF_KIND[kind]
        row += 1

    last = row - 1 if sections is None else sections(ws, row - 1)
    header_row = section_below(ws, last, "Tenants")
    currency, identity = summary.currency, len(summary.identity_cols)
    cols = [
        *summary.identity_cols,
        Column("Allocated GPU-hours", "hours"),
        Column(f"Amount ({currency})", "money"),
        Column(f"Budget ({currency})", "money"),
        Column("Budget used", "share"),
        Column("Budget status"),
        *summary.extra_cols,
    ]
    rows = [
        (*t.identity, t.allocated_gpu_hours, t.amount, t.budget,
         float(t.amount / t.budget) if t.amount is not None and t.budget else None,
         t.budget_status, *t.extra)
        for t in summary.tenants
    ]  # fmt: skip
    last = write_table(ws, header_row, cols, rows, table_name="Tenants")
    fill_status_rows(ws, header_row + 1, [t.budget_status for t in summary.tenants], len(cols))
    total_row = max(last, header_row + 1) + 1  # below "(none)" when there is no tenant
    amount_column = identity + 2
    write_total_row(
        ws, total_row, header_row + 1, last, {amount_column - 1: "hours", amount_column: "money"}
    )

    set_text(ws.cell(row=total_row + 2, column=1), "Reconciliation").style = "cb bold"
    charges_row, diff_row = total_row + 3, total_row + 4
    letter = get_column_letter(amount_column)
    set_text(ws.cell(row=charges_row, column=1), "Total of Charges sheet")
    charges = ws.cell(row=charges_row, column=amount_column, value=f"={charges_total_cell}")
    charges.style = "cb total money"
    set_text(ws.cell(row=diff_row, column=1), "Difference (TOTAL above − Charges, must be 0)")
    diff = ws.cell(
        row=diff_row, column=amount_column, value=f"={letter}{total_row}-{letter}{charges_row}"
    )
    diff.style = "cb total money"

    widths = fit_widths({}, cols, rows)
    widths[1] = max(widths.get(1, 0), 30)  # headline labels live in column A too
    widths[2] = max(widths.get(2, 0), 16)
    apply_widths(ws, widths)
    return SummaryRows(charges_row, diff_row)


def _headline(summary: Summary) -> list[tuple[str, Any, str]]:
    """(label, value, kind) of each headline figure; a text value is shown as text."""
    tenants = summary.tenants
    allocated = sum(t.allocated_gpu_hours or 0.0 for t in tenants)
    productive = sum(t.productive_gpu_hours or 0.0 for t in tenants)
    capacity = summary.capacity_gpu_hours
    return [
        *(
            [("Capacity GPU-hours", capacity if capacity is not None else "unknown", "hours")]
            if summary.shows_capacity
            else []
        ),
        ("Allocated GPU-hours", allocated, "hours"),
        *(
            [
                (
                    "Allocated share of capacity",
                    allocated / capacity if capacity else "unknown",
                    "share",
                )
            ]
            if summary.shows_capacity
            else []
        ),
        ("Productive share of allocated", productive / allocated if allocated else "n/a", "share"),
        (f"Total charge ({summary.currency})", summary.total_charge, "money"),
    ]


def write_charges(ws: Worksheet, charges: Sequence[Sequence[Any]], currency: str) -> str:
    """One row per charge line (sql/reports/charge_lines.sql) and their TOTAL; returns the
    absolute reference of the amount TOTAL cell, e.g. `Charges!$L$9`."""
    cols = [
        Column("Tenant ID"),
        Column("Tenant"),
        Column("Department"),
        Column("Cost center"),
        Column("Cluster"),
        Column("GPU model"),
        Column("Charge category"),
        Column("Charge class"),
        Column("Description"),
        Column("GPU-hours", "hours"),
        Column(f"Unit price ({currency} per GPU-hour)", "price"),
        Column(f"Amount ({currency})", "money"),
        Column("Currency"),
        # of a usage or credit line's GPU time, the share telemetry measured
        Column("Measured share", "share"),
    ]
    rows = [(*line[:-1], share_of(line[-1])) for line in charges]
    last = write_main_table(ws, cols, rows)
    total_row = last + 1
    write_total_row(ws, total_row, 2, last, {10: "hours", 12: "money"})
    apply_widths(ws, fit_widths({}, cols, rows))
    return f"{quote_sheetname(ws.title)}!$L${total_row}"


def write_job_lines(ws: Worksheet, jobs: RowsQuery, currency: str) -> StreamedRows:
    """The header and the sheet's layout; the rows (sql/reports/job_lines.sql) are streamed
    into the package (`pipelines.reports.package.workbook_bytes`)."""
    cols = [
        Column("Tenant ID"),
        Column("Cluster"),
        Column("Job ID"),
        Column("Account"),
        Column("User"),
        Column("Queue"),
        Column("GPU model"),
        Column("State"),
        Column("GPUs (GPU-eq)", "hours"),
        Column("Submit (UTC)", "timestamp"),
        Column("Start (UTC)", "timestamp"),
        Column("End (UTC)", "timestamp"),
        Column("Allocated GPU-hours", "hours"),
        Column("Measured GPU-hours", "hours"),
        Column("Mean utilization (%)", "util"),
        *BUCKET_HOURS_COLUMNS,
        Column(f"Amount ({currency})", "money"),
        Column("Currency"),
        Column("Billing month", "date"),
    ]
    write_table(ws, 1, cols, [])
    rows = StreamedRows.below_header(ws, cols, jobs)
    # the header row and the job's identity (tenant, cluster, job id) stay in view, on screen
    # and on every printed page (sheets.set_print_setup repeats the frozen panes)
    ws.freeze_panes = "D2"
    ws.auto_filter.ref = ref(1, 1, rows.last_row, len(cols))
    apply_widths(ws, fit_widths_to(cols, rows.width_values))
    return rows


def write_definitions(
    ws: Worksheet, parameters: Mapping[str, str], definitions: Sequence[tuple[str, str]]
) -> None:
    """The run's parameters, then every figure's meaning (write_figure_definitions)."""
    write_figure_definitions(ws, write_parameters(ws, parameters), definitions)


def write_parameters(ws: Worksheet, parameters: Mapping[str, str]) -> int:
    """The run's parameters at the top of the sheet; returns the last row used."""
    header_row = section_below(ws, TOP, "Parameters of this run")
    cols = [Column("Parameter"), Column("Value", "wrap", width=100)]
    rows = [(str(k), "" if v is None else str(v)) for k, v in parameters.items()]
    last = write_table(ws, header_row, cols, rows, table_name="Parameters")
    apply_widths(ws, fit_widths(current_widths(ws, len(cols)), cols, rows))
    return max(last, header_row + 1)


def write_figure_definitions(
    ws: Worksheet, last_row: int, definitions: Sequence[tuple[str, str]]
) -> None:
    """Every figure's meaning (pipelines.reports.definitions) below `last_row`: the sheet's
    last table, since it runs over several printed pages and its header repeats on each."""
    header_row = section_below(ws, last_row, "Definitions of the figures")
    cols = [Column("Figure"), Column("Meaning", "wrap", width=100)]
    write_table(ws, header_row, cols, definitions, table_name="FigureDefinitions")
    apply_widths(ws, fit_widths(current_widths(ws, len(cols)), cols, definitions))
