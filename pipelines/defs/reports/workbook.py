"""Finance workbook `chargeback-YYYY-MM.xlsx`, built from the warehouse marts of one month.

The layout lives here, next to the report queries it needs (small selects on the public
marts, always with the month bound). The file is reproducible: the same tables give the same
bytes, because every timestamp in the package is derived from the billing month.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
import pathlib
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb
from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE, Cell
from openpyxl.styles import Alignment, Font, NamedStyle, PatternFill
from openpyxl.utils import get_column_letter, quote_sheetname
from openpyxl.worksheet.table import Table, TableStyleInfo
from openpyxl.worksheet.worksheet import Worksheet
from openpyxl.writer.excel import ExcelWriter

SHEET_NAMES = ("Summary", "Charges", "Job lines", "Waste", "Data quality", "Definitions")
REJECTS_SHOWN_MAX = 10_000

MONEY_FORMAT = "#,##0.00"
HOURS_FORMAT = "#,##0.00"
SHARE_FORMAT = "0.0%"
TIMESTAMP_FORMAT = "yyyy-mm-dd hh:mm"
# Unit prices are DECIMAL(18,6): show cents always, and the extra digits only when present.
PRICE_FORMAT = "#,##0.00####"
COUNT_FORMAT = "#,##0"
UTIL_FORMAT = "0.0"
DATE_FORMAT = "yyyy-mm-dd"

# Excel's own "light red fill" and "yellow fill" conditional-format colours.
OVER_BUDGET_RGB = "FFC7CE"
WARN_BUDGET_RGB = "FFEB9C"
_OVER_FILL = PatternFill(fill_type="solid", fgColor=OVER_BUDGET_RGB, bgColor=OVER_BUDGET_RGB)
_WARN_FILL = PatternFill(fill_type="solid", fgColor=WARN_BUDGET_RGB, bgColor=WARN_BUDGET_RGB)

# Taxonomy order of DESIGN.md; the capacity row heads each cluster x GPU model block.
BUCKET_ORDER = (
    "capacity",
    "productive",
    "idle",
    "zombie",
    "failed_job",
    "failed_infra",
    "unmeasured",
    "down",
    "unallocated",
)

_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip

# kind of a column -> named style registered in every workbook by _add_named_styles
_STYLE_OF_KIND = {
    "money": "cb money",
    "hours": "cb hours",
    "share": "cb share",
    "timestamp": "cb timestamp",
    "price": "cb price",
    "count": "cb count",
    "util": "cb util",
    "date": "cb date",
    "number": "cb number",
    "wrap": "cb wrap",
}
_TOTAL_STYLE_OF_KIND = {"money": "cb total money", "hours": "cb total hours"}

_MAX_CELL_CHARS = 32_767
_MIN_WIDTH, _MAX_WIDTH = 8, 60


@dataclass(frozen=True)
class _Col:
    header: str
    kind: str = "text"  # text | one of _STYLE_OF_KIND
    width: int | None = None  # fixed width instead of fitting to content


# --------------------------------------------------------------------------------------------
# Report queries: one small select per table, month always bound.
# --------------------------------------------------------------------------------------------

_CHARGES_SQL = """
select tenant_id, tenant_name, department, cost_center, cluster, gpu_model, charge_category,
       charge_class, charge_description, gpu_hours, unit_price, amount, currency
from charge_lines
where billing_month = ?
order by tenant_id, cluster, gpu_model, charge_category, charge_class nulls first,
         charge_description, unit_price, amount, gpu_hours
"""

_TENANTS_SQL = """
select tenant_id, tenant_name, department, cost_center, allocated_gpu_hours,
       productive_gpu_hours, idle_gpu_hours, zombie_gpu_hours, failed_job_gpu_hours,
       failed_infra_gpu_hours, unmeasured_gpu_hours, amount, budget, budget_status, currency
from tenant_month
where billing_month = ?
order by amount desc nulls last, tenant_id
"""

_JOBS_SQL = """
select tenant_id, cluster, job_id, account, "user", queue, gpu_model, state, gpus,
       submit_at, start_at, end_at, allocated_gpu_hours, measured_gpu_hours, mean_util_pct,
       productive_gpu_hours, idle_gpu_hours, zombie_gpu_hours, failed_job_gpu_hours,
       failed_infra_gpu_hours, unmeasured_gpu_hours, amount, currency, billing_month
from job_usage
where billing_month = ?
order by tenant_id, cluster, job_id
"""

_BUCKETS_SQL = """
select cluster, gpu_model, bucket, gpu_hours
from capacity_buckets
where billing_month = ?
order by cluster, gpu_model,
         coalesce(list_position(['capacity', 'productive', 'idle', 'zombie', 'failed_job',
                                 'failed_infra', 'unmeasured', 'down', 'unallocated'], bucket),
                  100),
         bucket
"""

_DATA_QUALITY_SQL = """
select category, cluster, subject, rows_read, rows_loaded, rows_rejected, duplicates_folded,
       value, detail
from data_quality
where billing_month = ?
order by category <> 'file', category, cluster nulls first, subject nulls first, detail
"""

_REJECTS_COUNT_SQL = "select count(*) from rejects where billing_month = ?"

_REJECTS_SQL = """
select file, line, reason, raw
from rejects
where billing_month = ?
order by file, line, reason, raw
limit ?
"""

_CURRENCIES_SQL = """
select distinct currency from charge_lines where billing_month = $1 and currency is not null
union
select distinct currency from tenant_month where billing_month = $1 and currency is not null
union
select distinct currency from job_usage where billing_month = $1 and currency is not null
order by currency
"""


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


def write_chargeback_workbook(
    con: duckdb.DuckDBPyConnection,
    billing_month: dt.date,
    parameters: dict[str, str],
    out_path: pathlib.Path,
) -> dict:
    """Write the finance workbook of `billing_month` to `out_path`, atomically.

    Reads charge_lines, tenant_month, job_usage, capacity_buckets, data_quality and rejects
    for the month. Returns figures for run metadata: `total_amount` (Decimal, sum of the
    charge lines), `charge_lines`, `job_lines`, `tenants`, `tenant_total_amount`,
    `rejects`/`rejects_shown`, `currency`, `path` and the file's `sha256`.
    """
    if billing_month.day != 1:
        raise ValueError(f"billing_month must be the first day of a month, got {billing_month}")
    out_path = pathlib.Path(out_path)
    month = [billing_month]

    charges = con.execute(_CHARGES_SQL, month).fetchall()
    tenants = con.execute(_TENANTS_SQL, month).fetchall()
    jobs = con.execute(_JOBS_SQL, month).fetchall()
    buckets = con.execute(_BUCKETS_SQL, month).fetchall()
    quality = con.execute(_DATA_QUALITY_SQL, month).fetchall()
    (rejects_total,) = con.execute(_REJECTS_COUNT_SQL, month).fetchone()
    rejects = con.execute(_REJECTS_SQL, [billing_month, REJECTS_SHOWN_MAX]).fetchall()
    currency = _workbook_currency(con, billing_month, parameters)

    wb = _build_workbook(
        billing_month, parameters, currency, charges, tenants, jobs, buckets, quality,
        rejects, rejects_total,
    )  # fmt: skip
    data = _serialise(wb, _fixed_timestamp(billing_month))
    _write_atomically(data, out_path)

    total_amount = sum((row[11] for row in charges), Decimal("0.00"))
    tenant_total = sum((row[11] for row in tenants if row[11] is not None), Decimal("0.00"))
    return {
        "total_amount": total_amount,
        "tenant_total_amount": tenant_total,
        "charge_lines": len(charges),
        "job_lines": len(jobs),
        "tenants": len(tenants),
        "rejects": int(rejects_total),
        "rejects_shown": len(rejects),
        "currency": currency,
        "path": str(out_path),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _workbook_currency(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date, parameters: dict[str, str]
) -> str:
    """One currency per workbook: SUM over mixed currencies would be a wrong total."""
    found = [row[0] for row in con.execute(_CURRENCIES_SQL, [billing_month]).fetchall()]
    currency = parameters.get("currency") or (found[0] if found else "")
    others = [c for c in found if c != currency]
    if others:
        raise ValueError(
            f"{billing_month:%Y-%m}: the marts hold amounts in {', '.join(found)}, "
            f"the workbook currency is {currency!r}; refusing to add up mixed currencies"
        )
    return currency


def _fixed_timestamp(billing_month: dt.date) -> dt.datetime:
    """The end of the billing period: stands in for 'now' so the bytes depend on data only."""
    year, month0 = divmod(billing_month.year * 12 + billing_month.month, 12)
    return dt.datetime(year, month0 + 1, 1)


# --------------------------------------------------------------------------------------------
# Workbook layout
# --------------------------------------------------------------------------------------------


def _build_workbook(
    billing_month: dt.date,
    parameters: dict[str, str],
    currency: str,
    charges: list[tuple],
    tenants: list[tuple],
    jobs: list[tuple],
    buckets: list[tuple],
    quality: list[tuple],
    rejects: list[tuple],
    rejects_total: int,
) -> Workbook:
    wb = Workbook()
    _add_named_styles(wb)
    summary = wb.active
    summary.title = SHEET_NAMES[0]
    sheets = {name: wb.create_sheet(name) for name in SHEET_NAMES[1:]}

    charges_total_cell = _write_charges(sheets["Charges"], charges, currency)
    _write_summary(
        summary, billing_month, parameters, currency, tenants, buckets, charges,
        charges_total_cell,
    )  # fmt: skip
    _write_job_lines(sheets["Job lines"], jobs, currency)
    _write_waste(sheets["Waste"], buckets, tenants)
    _write_data_quality(sheets["Data quality"], quality, rejects, rejects_total)
    _write_definitions(sheets["Definitions"], parameters)

    fit_pages_to_width(wb)
    # openpyxl stores formulas without cached results: ask Excel/LibreOffice to compute them.
    wb.calculation.fullCalcOnLoad = True
    wb.properties.creator = "gpu-chargeback"
    wb.properties.title = f"GPU chargeback {billing_month:%Y-%m}"
    return wb


def fit_pages_to_width(wb: Workbook) -> None:
    """Print (and PDF-export) every sheet landscape, one page wide, header row repeated."""
    for ws in wb.worksheets:
        ws.page_setup.orientation = "landscape"
        ws.page_setup.paperSize = ws.PAPERSIZE_A4
        ws.sheet_properties.pageSetUpPr.fitToPage = True
        ws.page_setup.fitToWidth = 1
        ws.page_setup.fitToHeight = 0
        if ws.freeze_panes:
            ws.print_title_rows = f"1:{ws[ws.freeze_panes].row - 1}"


def _write_summary(
    ws: Worksheet,
    billing_month: dt.date,
    parameters: dict[str, str],
    currency: str,
    tenants: list[tuple],
    buckets: list[tuple],
    charges: list[tuple],
    charges_total_cell: str,
) -> None:
    month_name = f"{_MONTH_NAMES[billing_month.month - 1]} {billing_month.year}"
    ws["A1"] = f"GPU chargeback — {month_name} ({billing_month:%Y-%m}), amounts in {currency}"
    ws["A1"].style = "cb title"
    timezone = parameters.get("billing_timezone") or "UTC"
    period_end = _fixed_timestamp(billing_month)
    _set_text(
        ws["A2"],
        f"Billing period [{billing_month:%Y-%m-%d}, {period_end:%Y-%m-%d}) in {timezone}; "
        "figures are defined on the Definitions sheet, parameters of the run below them.",
    )

    capacity_rows = [row for row in buckets if row[2] == "capacity"]
    capacity = sum(row[3] for row in capacity_rows) if capacity_rows else None
    allocated = sum(row[4] or 0.0 for row in tenants)
    productive = sum(row[5] or 0.0 for row in tenants)
    total_charge = sum((row[11] for row in charges), Decimal("0.00"))
    headline: list[tuple[str, Any, str]] = [
        ("Capacity GPU-hours", capacity if capacity is not None else "unknown", "hours"),
        ("Allocated GPU-hours", allocated, "hours"),
        (
            "Allocated share of capacity",
            allocated / capacity if capacity else "unknown",
            "share",
        ),
        (
            "Productive share of allocated",
            productive / allocated if allocated else "n/a",
            "share",
        ),
        (f"Total charge ({currency})", total_charge, "money"),
    ]
    row = 4
    for label, value, kind in headline:
        _set_text(ws.cell(row=row, column=1), label)
        cell = ws.cell(row=row, column=2)
        if isinstance(value, str):
            _set_text(cell, value)
        else:
            cell.value = value
            cell.style = _STYLE_OF_KIND[kind]
        row += 1

    header_row = row + 1
    cols = [
        _Col("Tenant"),
        _Col("Department"),
        _Col("Cost center"),
        _Col("Allocated GPU-hours", "hours"),
        _Col(f"Amount ({currency})", "money"),
        _Col(f"Budget ({currency})", "money"),
        _Col("Budget used", "share"),
        _Col("Budget status"),
    ]
    rows = []
    for t in tenants:
        amount, budget = t[11], t[12]
        used = float(amount / budget) if amount is not None and budget else None
        rows.append((t[1] or t[0], t[2], t[3], t[4], amount, budget, used, t[13]))
    last = _write_table(ws, header_row, cols, rows)
    for offset, t in enumerate(tenants, start=1):
        fill = {"over": _OVER_FILL, "warn": _WARN_FILL}.get(t[13])
        if fill is not None:
            for column in range(1, len(cols) + 1):
                ws.cell(row=header_row + offset, column=column).fill = fill

    total_row = last + 1
    _write_total_row(ws, total_row, header_row + 1, last, {4: "hours", 5: "money"})

    _set_text(ws.cell(row=total_row + 2, column=1), "Reconciliation").style = "cb bold"
    charges_row, diff_row = total_row + 3, total_row + 4
    _set_text(ws.cell(row=charges_row, column=1), "Total of Charges sheet")
    ws.cell(row=charges_row, column=5, value=f"={charges_total_cell}").style = "cb total money"
    _set_text(ws.cell(row=diff_row, column=1), "Difference (TOTAL above − Charges, must be 0)")
    diff = ws.cell(row=diff_row, column=5, value=f"=E{total_row}-E{charges_row}")
    diff.style = "cb total money"
    # a closed month re-run: what was issued, the corrections since, and the net billed now
    issued = sum((c[11] for c in charges if c[7] != "Correction"), Decimal("0.00"))
    corrections = sum((c[11] for c in charges if c[7] == "Correction"), Decimal("0.00"))
    issued_row, corrections_row, net_row = diff_row + 1, diff_row + 2, diff_row + 3
    _set_text(ws.cell(row=issued_row, column=1), "Issued lines (charge class empty)")
    ws.cell(row=issued_row, column=5, value=issued).style = "cb money"
    _set_text(ws.cell(row=corrections_row, column=1), "Corrections (charge class Correction)")
    ws.cell(row=corrections_row, column=5, value=corrections).style = "cb money"
    _set_text(ws.cell(row=net_row, column=1), "Net (issued + corrections)")
    net = ws.cell(row=net_row, column=5, value=f"=E{issued_row}+E{corrections_row}")
    net.style = "cb total money"

    ws.freeze_panes = ws.cell(row=header_row + 1, column=1).coordinate
    ws.auto_filter.ref = _ref(header_row, 1, last, len(cols))
    widths = _fit_widths({}, cols, rows)
    widths[1] = max(widths.get(1, 0), 30)  # headline labels live in column A too
    widths[2] = max(widths.get(2, 0), 16)
    _apply_widths(ws, widths)


def _write_charges(ws: Worksheet, charges: list[tuple], currency: str) -> str:
    """Returns the absolute reference of the amount TOTAL cell, e.g. `Charges!$L$9`."""
    cols = [
        _Col("Tenant ID"),
        _Col("Tenant"),
        _Col("Department"),
        _Col("Cost center"),
        _Col("Cluster"),
        _Col("GPU model"),
        _Col("Charge category"),
        _Col("Charge class"),
        _Col("Description"),
        _Col("GPU-hours", "hours"),
        _Col(f"Unit price ({currency} per GPU-hour)", "price"),
        _Col(f"Amount ({currency})", "money"),
        _Col("Currency"),
    ]
    last = _write_table(ws, 1, cols, charges)
    total_row = last + 1
    _write_total_row(ws, total_row, 2, last, {10: "hours", 12: "money"})
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = _ref(1, 1, last, len(cols))
    _apply_widths(ws, _fit_widths({}, cols, charges))
    return f"{quote_sheetname(ws.title)}!$L${total_row}"


def _write_job_lines(ws: Worksheet, jobs: list[tuple], currency: str) -> None:
    cols = [
        _Col("Tenant ID"),
        _Col("Cluster"),
        _Col("Job ID"),
        _Col("Account"),
        _Col("User"),
        _Col("Queue"),
        _Col("GPU model"),
        _Col("State"),
        _Col("GPUs (GPU-eq)", "hours"),
        _Col("Submit (UTC)", "timestamp"),
        _Col("Start (UTC)", "timestamp"),
        _Col("End (UTC)", "timestamp"),
        _Col("Allocated GPU-hours", "hours"),
        _Col("Measured GPU-hours", "hours"),
        _Col("Mean utilization (%)", "util"),
        _Col("Productive GPU-hours", "hours"),
        _Col("Idle GPU-hours", "hours"),
        _Col("Zombie GPU-hours", "hours"),
        _Col("Failed (job) GPU-hours", "hours"),
        _Col("Failed (infra) GPU-hours", "hours"),
        _Col("Unmeasured GPU-hours", "hours"),
        _Col(f"Amount ({currency}, informational)", "money"),
        _Col("Currency"),
        _Col("Billing month", "date"),
    ]
    last = _write_table(ws, 1, cols, jobs)
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = _ref(1, 1, last, len(cols))
    _apply_widths(ws, _fit_widths({}, cols, jobs))


def _write_waste(ws: Worksheet, buckets: list[tuple], tenants: list[tuple]) -> None:
    cols = [
        _Col("Cluster"),
        _Col("GPU model"),
        _Col("Bucket"),
        _Col("GPU-hours", "hours"),
        _Col("Share of capacity", "share"),
    ]
    capacity_row_of: dict[tuple[str, str], tuple[int, float]] = {}
    for index, (cluster, model, bucket, hours) in enumerate(buckets):
        if bucket == "capacity":
            capacity_row_of[(cluster, model)] = (index + 2, hours)
    rows = []
    for index, (cluster, model, bucket, hours) in enumerate(buckets):
        capacity = capacity_row_of.get((cluster, model))
        share = None
        if capacity is not None and capacity[1] and hours is not None:
            share = f"=D{index + 2}/D{capacity[0]}"
        rows.append((cluster, model, bucket, hours, share))
    last = _write_table(ws, 1, cols, rows)
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = _ref(1, 1, last, len(cols))
    widths = _fit_widths({}, cols, rows)

    title_row = last + 3
    _set_text(ws.cell(row=title_row, column=1), "Waste by tenant").style = "cb bold"
    tenant_cols = [
        _Col("Tenant ID"),
        _Col("Tenant"),
        _Col("Department"),
        _Col("Allocated GPU-hours", "hours"),
        _Col("Productive GPU-hours", "hours"),
        _Col("Idle GPU-hours", "hours"),
        _Col("Zombie GPU-hours", "hours"),
        _Col("Failed (job) GPU-hours", "hours"),
        _Col("Failed (infra) GPU-hours", "hours"),
        _Col("Unmeasured GPU-hours", "hours"),
        _Col("Productive share of allocated", "share"),
    ]
    header_row = title_row + 1
    tenant_rows = []
    for offset, t in enumerate(sorted(tenants, key=lambda t: t[0]), start=1):
        r = header_row + offset
        share = f"=E{r}/D{r}" if t[4] else None
        tenant_rows.append((t[0], t[1], t[2], *t[4:11], share))
    _write_table(ws, header_row, tenant_cols, tenant_rows, table_name="WasteByTenant")
    _apply_widths(ws, _fit_widths(widths, tenant_cols, tenant_rows))


def _write_data_quality(
    ws: Worksheet, quality: list[tuple], rejects: list[tuple], rejects_total: int
) -> None:
    cols = [
        _Col("Category"),
        _Col("Cluster"),
        _Col("Subject"),
        _Col("Rows read", "count"),
        _Col("Rows loaded", "count"),
        _Col("Rows rejected", "count"),
        _Col("Duplicates folded", "count"),
        _Col("Value", "number"),
        _Col("Detail"),
        _Col("Read − loaded − rejected", "count"),
    ]
    rows = []
    for index, q in enumerate(quality):
        r = index + 2
        # Every input row is loaded or rejected: this column shows 0 when the counts reconcile.
        check = f"=D{r}-E{r}-F{r}" if None not in (q[3], q[4], q[5]) else None
        rows.append((*q, check))
    last = _write_table(ws, 1, cols, rows)
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = _ref(1, 1, last, len(cols))
    widths = _fit_widths({}, cols, rows)

    title_row = last + 3
    if rejects_total > len(rejects):
        title = (
            f"Rejected rows: showing the first {len(rejects):,} of {rejects_total:,} "
            "(capped; the full list is in the warehouse table rejects)"
        )
    else:
        title = f"Rejected rows: {rejects_total:,}"
    _set_text(ws.cell(row=title_row, column=1), title).style = "cb bold"
    reject_cols = [_Col("File"), _Col("Line", "count"), _Col("Reason"), _Col("Raw", width=80)]
    _write_table(ws, title_row + 1, reject_cols, rejects, table_name="Rejects")
    _apply_widths(ws, _fit_widths(widths, reject_cols, rejects))


def _write_definitions(ws: Worksheet, parameters: dict[str, str]) -> None:
    cols = [_Col("Figure"), _Col("Meaning", "wrap", width=100)]
    last = _write_table(ws, 1, cols, DEFINITIONS)
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = _ref(1, 1, last, len(cols))

    title_row = last + 3
    _set_text(ws.cell(row=title_row, column=1), "Parameters of this run").style = "cb bold"
    param_cols = [_Col("Parameter"), _Col("Value", "wrap", width=100)]
    param_rows = [(str(k), "" if v is None else str(v)) for k, v in parameters.items()]
    _write_table(ws, title_row + 1, param_cols, param_rows, table_name="Parameters")
    widths = _fit_widths({}, cols, DEFINITIONS)
    _apply_widths(ws, _fit_widths(widths, param_cols, param_rows))


# Wording from DESIGN.md "Definitions"; keep the two in step.
DEFINITIONS: tuple[tuple[str, str], ...] = (
    (
        "Billing period",
        "A calendar month in the billing timezone (catalog setting, default UTC), half-open "
        "[start, end). Anything spanning a boundary is prorated by overlap (XDMoD rule: clip "
        "each job to the period). Timestamps in this workbook are UTC.",
    ),
    (
        "GPU-equivalents (GPU-eq)",
        "A whole GPU = 1; MIG/fractional per the rates profile table (default compute slices: "
        "1g = 1/7 of the parent GPU). 'GPUs' on Job lines is in GPU-eq.",
    ),
    (
        "Allocated GPU-hours",
        "Of a job in a period = GPU-eq × hours of [start, end) inside the period. Jobs that "
        "never started allocate nothing. Running jobs are clipped at the export time.",
    ),
    (
        "Capacity GPU-hours",
        "Σ inventory GPUs × in-service hours in the period. Two jobs holding the same GPU at "
        "the same time is a data-quality error (reported, never silently summed). 'unknown' "
        "when the catalog has no node inventory (nodes.csv).",
    ),
    ("Allocated share of capacity", "Allocated GPU-hours ÷ capacity GPU-hours."),
    ("Productive share of allocated", "Productive GPU-hours ÷ allocated GPU-hours."),
    (
        "Telemetry sample attribution",
        "A telemetry sample at time t from a series with step s stands for s seconds and is "
        "attributed to the allocation that holds that GPU at t (start <= t < end). s is the "
        "series' median sample spacing. Allocated time with no sample is unmeasured, never "
        "idle.",
    ),
    (
        "Measured GPU-hours",
        "Allocated GPU-hours covered by attributed telemetry samples.",
    ),
    (
        "Utilization (mean utilization %)",
        "Of a job = sample-weighted mean of util_pct over its attributed samples; empty when "
        "the job has no sample.",
    ),
    (
        "Waste taxonomy (buckets)",
        "Every capacity GPU-second lands in exactly one bucket, so the buckets sum to capacity "
        "exactly (checked every run). A GPU-second held by a job is tested in the order "
        "failed_infra, failed_job, then by the sample covering it: zombie, idle, productive, "
        "unmeasured. A GPU-second held by no job is down or unallocated.",
    ),
    (
        "failed_infra",
        "GPU-seconds of a job that ended NODE_FAIL (all of its time), or lying in an outage "
        "window of its node. Not the tenant's fault: credited.",
    ),
    (
        "failed_job",
        "Otherwise, GPU-seconds of a job that ended FAILED or OUT_OF_MEMORY (all of its time).",
    ),
    (
        "zombie",
        "Otherwise, a GPU-second whose sample lies inside a run of idle samples lasting "
        ">= zombie_min_hours (default 2).",
    ),
    (
        "idle",
        "Otherwise, a GPU-second whose sample has util_pct < idle_threshold_pct (default 5).",
    ),
    ("productive", "Otherwise, a GPU-second whose sample is at or above the idle threshold."),
    ("unmeasured", "Otherwise, a GPU-second held by a job with no sample covering it."),
    ("down", "A GPU-second held by no job, inside an outage window."),
    ("unallocated", "A GPU-second held by no job, outside any outage window."),
    (
        "TIMEOUT, CANCELLED, PREEMPTED jobs",
        "Classified by their samples (their work may have been checkpointed) and reported "
        "apart. Over-allocation (GPUs of a job idle for its whole run) is a diagnostic view, "
        "not a bucket.",
    ),
    (
        "Share of capacity",
        "GPU-hours of a bucket ÷ capacity GPU-hours of the same cluster and GPU model.",
    ),
    (
        "Cost mode rate_card",
        "Charge = allocated GPU-hours × rate in force at that time; unallocated and down "
        "capacity are reported, not charged.",
    ),
    (
        "Cost mode full_recovery",
        "Total cluster cost for the month (inventory monthly_cost + overheads) is fully "
        "distributed: usage at a derived rate, then unreserved idle capacity shared by policy "
        "(weighted by allocated GPU-hours, even, reserved_quota_first, or platform tenant).",
    ),
    (
        "Reserved quota",
        "The unused part of a reserved guarantee is charged to its tenant (FOCUS "
        "CapacityReservationStatus=Unused).",
    ),
    (
        "Credits",
        "failed_infra GPU-hours and outage overlap are credited back to the tenant.",
    ),
    (
        "Rounding (largest remainder)",
        "Money is exact: decimal arithmetic, rounded to cents once, at the line level, with "
        "the largest-remainder method so that lines sum exactly to tenant totals and tenant "
        "totals sum exactly to the period total (and, in full_recovery, to the cluster cost).",
    ),
    (
        "Charge line",
        "One row per tenant × cluster × GPU model × charge category (Charges sheet). Charge "
        "class is empty for regular lines; Correction marks a restatement of a closed month.",
    ),
    ("Unit price", "Price per GPU-hour applied to the line, in the workbook currency."),
    (
        "Amount",
        "Charge in the workbook currency, rounded as above. The Charges sheet is the charge; "
        "amounts on Job lines are informational.",
    ),
    (
        "TOTAL and Difference",
        "TOTAL cells are SUM formulas over the rows above them. Summary 'Difference' = "
        "Summary TOTAL − Charges TOTAL and must be 0.",
    ),
    ("Budget", "Budget of the tenant for the month, in the catalog currency."),
    ("Budget used", "Net charge ÷ budget."),
    (
        "Budget status",
        "ok below 80 % of budget; warn (≥ 80 %, amber); over (net charge above the budget, "
        "red); 'no budget' when the tenant has none.",
    ),
    (
        "Unmapped tenant",
        "Accounts that map to no tenant go to the 'unmapped' tenant and fail a visible check; "
        "they are listed on the Data quality sheet.",
    ),
    (
        "Rows read / loaded / rejected",
        "Nothing is silently dropped: every input row is either loaded or set aside in the "
        "rejects table with file, line and reason; read = loaded + rejected.",
    ),
    (
        "Duplicates folded",
        "A job (cluster + job id) counts once — its latest, most complete record wins — and a "
        "telemetry sample (cluster, node, GPU, metric, timestamp) counts once; this counts the "
        "records folded away.",
    ),
)


# --------------------------------------------------------------------------------------------
# Cell-level helpers
# --------------------------------------------------------------------------------------------


def _add_named_styles(wb: Workbook) -> None:
    bold = Font(bold=True)
    formats = {
        "money": MONEY_FORMAT,
        "hours": HOURS_FORMAT,
        "share": SHARE_FORMAT,
        "timestamp": TIMESTAMP_FORMAT,
        "price": PRICE_FORMAT,
        "count": COUNT_FORMAT,
        "util": UTIL_FORMAT,
        "date": DATE_FORMAT,
        "number": "General",
    }
    for kind, number_format in formats.items():
        wb.add_named_style(NamedStyle(name=_STYLE_OF_KIND[kind], number_format=number_format))
    wb.add_named_style(
        NamedStyle(name="cb wrap", alignment=Alignment(wrap_text=True, vertical="top"))
    )
    wb.add_named_style(
        NamedStyle(
            name="cb header",
            font=bold,
            fill=PatternFill(fill_type="solid", fgColor="D9D9D9", bgColor="D9D9D9"),
        )
    )
    wb.add_named_style(NamedStyle(name="cb bold", font=bold))
    wb.add_named_style(NamedStyle(name="cb title", font=Font(bold=True, size=14)))
    wb.add_named_style(NamedStyle(name="cb total money", font=bold, number_format=MONEY_FORMAT))
    wb.add_named_style(NamedStyle(name="cb total hours", font=bold, number_format=HOURS_FORMAT))


def _set_text(cell: Cell, value: Any) -> Cell:
    """Write data as text: never a formula or error code, whatever the string starts with."""
    text = ILLEGAL_CHARACTERS_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))
    if len(text) > _MAX_CELL_CHARS:
        text = text[: _MAX_CELL_CHARS - 14] + " [truncated]"
    cell.value = text
    cell.data_type = "s"
    return cell


def _write_table(
    ws: Worksheet,
    header_row: int,
    cols: Sequence[_Col],
    rows: Iterable[Sequence[Any]],
    table_name: str | None = None,
) -> int:
    """Header plus rows from column A; returns the last row used (the header if no rows).

    A sheet has one autofilter, which the caller puts on the sheet's first table; a second
    table on the same sheet gets its own filter as an Excel table (`table_name`).
    """
    for column, col in enumerate(cols, start=1):
        _set_text(ws.cell(row=header_row, column=column), col.header).style = "cb header"
    styles = [_STYLE_OF_KIND.get(col.kind) for col in cols]
    r = header_row
    for values in rows:
        r += 1
        for column, (style, value) in enumerate(zip(styles, values, strict=True), start=1):
            if value is None:
                continue
            cell = ws.cell(row=r, column=column)
            if style is None or style == "cb wrap":
                _set_text(cell, value)
                if style is not None:
                    cell.style = style
            else:
                # Numbers, datetimes, and formulas built by this module (never data text).
                cell.value = value
                cell.style = style
    if table_name is not None:
        if r == header_row:
            _set_text(ws.cell(row=r + 1, column=1), "(none)")
        else:
            table = Table(displayName=table_name, ref=_ref(header_row, 1, r, len(cols)))
            table.tableStyleInfo = TableStyleInfo(name="TableStyleLight1", showRowStripes=False)
            ws.add_table(table)
    return r


def _write_total_row(
    ws: Worksheet, row: int, first: int, last: int, summed: dict[int, str]
) -> None:
    """TOTAL label plus `=SUM()` over rows first..last in the given columns (0 if no rows)."""
    _set_text(ws.cell(row=row, column=1), "TOTAL").style = "cb bold"
    for column, kind in summed.items():
        letter = get_column_letter(column)
        value: Any = f"=SUM({letter}{first}:{letter}{last})" if last >= first else 0
        ws.cell(row=row, column=column, value=value).style = _TOTAL_STYLE_OF_KIND[kind]


def _ref(top: int, left: int, bottom: int, right: int) -> str:
    return f"{get_column_letter(left)}{top}:{get_column_letter(right)}{bottom}"


def _display_len(value: Any, kind: str) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        if kind != "text" and value.startswith("="):
            return 10  # a formula shows its result, not its text
        return max((len(line) for line in value.splitlines()), default=0)
    fixed = {"timestamp": 16, "date": 10, "share": 7}
    if kind in fixed:
        return fixed[kind]
    if isinstance(value, int | float | Decimal):
        return len(f"{value:,.2f}")
    return len(str(value))


def _fit_widths(
    widths: dict[int, int], cols: Sequence[_Col], rows: Sequence[Sequence[Any]]
) -> dict[int, int]:
    for column, col in enumerate(cols, start=1):
        if col.width is not None:
            width = col.width
        else:
            longest = max((_display_len(row[column - 1], col.kind) for row in rows), default=0)
            width = min(max(len(col.header), longest) + 2, _MAX_WIDTH)
        widths[column] = max(widths.get(column, _MIN_WIDTH), width)
    return widths


def _apply_widths(ws: Worksheet, widths: dict[int, int]) -> None:
    for column, width in sorted(widths.items()):
        ws.column_dimensions[get_column_letter(column)].width = width


# --------------------------------------------------------------------------------------------
# Reproducible bytes, atomic replace
# --------------------------------------------------------------------------------------------


def _serialise(wb: Workbook, stamp: dt.datetime) -> bytes:
    """The xlsx package with every timestamp (document properties, zip entries) = `stamp`.

    `openpyxl.Workbook.save` stamps 'now' into docProps/core.xml and zipfile stamps the clock
    into every entry, so the package is written with ExcelWriter and then re-zipped.
    """
    wb.properties.created = stamp
    wb.properties.modified = stamp
    first_pass = io.BytesIO()
    with zipfile.ZipFile(first_pass, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        ExcelWriter(wb, archive).save()
    out = io.BytesIO()
    date_time = stamp.timetuple()[:6]
    with (
        zipfile.ZipFile(first_pass) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as target,
    ):
        for info in source.infolist():
            entry = zipfile.ZipInfo(info.filename, date_time=date_time)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            target.writestr(entry, source.read(info.filename))
    return out.getvalue()


def _write_atomically(data: bytes, out_path: pathlib.Path) -> None:
    """Temporary file in the same folder, then rename: a failure leaves the old report."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
