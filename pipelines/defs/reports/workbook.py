"""Finance workbook `chargeback-YYYY-MM.xlsx`, built from the warehouse marts of one month.

The layout lives here, next to the report queries it needs (small selects on the public
marts, always with the month bound). The file is reproducible: the same tables give the same
bytes, because every timestamp in the package is derived from the billing month.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import io
import os
import pathlib
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from copy import copy
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb
from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE, Cell
from openpyxl.chart import BarChart, LineChart, Reference
from openpyxl.styles import Alignment, Font, NamedStyle, PatternFill
from openpyxl.utils import get_column_letter, quote_sheetname
from openpyxl.utils.cell import coordinate_from_string
from openpyxl.worksheet.table import Table, TableStyleInfo
from openpyxl.worksheet.worksheet import Worksheet
from openpyxl.writer.excel import ExcelWriter

from pipelines.checkpoints import checkpoint

SHEET_NAMES = (
    "Summary", "Charges", "Job lines", "Waste", "Quota & Budget", "Queue & Service", "Failures",
    "Capacity", "Data quality", "Definitions", "Audit",
)  # fmt: skip
TOP_NODES_SHOWN = 20
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
# column kinds whose values are written as text (never as a number, date or formula)
_TEXT_KINDS = ("text", "wrap")

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

# the job lines: streamed into the sheet by DuckDB (_StreamedRows), in JOB_LINES_ORDER
_JOBS_SQL = """
select tenant_id, cluster, job_id, account, "user", queue, gpu_model, state, gpus,
       submit_at, start_at, end_at, allocated_gpu_hours, measured_gpu_hours, mean_util_pct,
       productive_gpu_hours, idle_gpu_hours, zombie_gpu_hours, failed_job_gpu_hours,
       failed_infra_gpu_hours, unmeasured_gpu_hours, amount, currency, billing_month
from job_usage
where billing_month = $1
"""
JOB_LINES_ORDER = "tenant_id, cluster, job_id"

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


# Governance marts: newer than the warehouse of some closed months, so each may be missing.
_QUOTA_SQL = """
select tenant_id, pool, has_quota, guaranteed_gpus, limit_gpus, reserved, used_gpu_hours,
       mean_gpus, peak_gpus, peak_at, guaranteed_gpu_hours, borrowed_gpu_hours,
       unused_guaranteed_gpu_hours, minutes_above_limit, quota_use_pct, borrowing_days, days,
       breach, idle_quota, chronic_borrowing
from quota_compliance
where billing_month = ?
order by tenant_id, pool
"""

_QUEUE_SQL = """
select grouping_set, cluster, tenant_id, queue, gpu_model, jobs, jobs_started, wait_p50_s,
       wait_p90_s, wait_p95_s, wait_mean_s, wait_max_s, pending_gpu_hours, jobs_ended,
       completed_jobs, failed_jobs, timeout_jobs, out_of_memory_jobs, node_fail_jobs,
       cancelled_jobs, preempted_jobs, success_rate_pct
from queue_stats
where billing_month = ?
order by coalesce(list_position(['cluster', 'tenant', 'queue', 'gpu_model',
                                 'tenant_queue_gpu_model'], grouping_set), 100),
         grouping_set, cluster, tenant_id, queue, gpu_model
"""

_FAILURES_SQL = """
select dimension, failure_rank, cluster, value, jobs, completed_jobs, failed_jobs,
       out_of_memory_jobs, timeout_jobs, node_fail_jobs, cancelled_jobs, preempted_jobs,
       infra_failure_rate_pct, job_failure_rate_pct, allocated_gpu_hours,
       failed_infra_gpu_hours, failed_job_gpu_hours
from failure_stats
where billing_month = ?
order by dimension, failure_rank nulls last, jobs desc, cluster, value
"""

_CAPACITY_SQL = """
select cluster, gpu_model, verdict, verdict_rule, capacity_gpu_hours, allocated_gpu_hours,
       allocation_rate_pct, productive_share_pct, waste_share_pct, unmeasured_share_pct,
       wait_p95_s, pending_gpu_hours, pending_share_pct, guaranteed_gpu_hours,
       idle_quota_share_pct
from capacity_evidence
where billing_month = ?
order by cluster, gpu_model
"""

_DAILY_SQL = """
select day, cluster, gpu_model, allocated_gpu_hours, capacity_gpu_hours
from utilization_daily
where billing_month = ? and level = 'gpu_model'
order by day, cluster, gpu_model
"""

# The Summary reconciliation: amounts by cluster and charge type (charge_lines.charge_type),
# and the full_recovery cost of each cluster (cost_pools).
_AMOUNT_BY_TYPE_SQL = """
select cluster, charge_type, sum(amount)
from charge_lines
where billing_month = ?
group by all
order by all
"""

_CLUSTER_COST_SQL = """
select cluster, sum(amount)
from cost_pools
where billing_month = ?
group by all
order by all
"""

_TABLE_EXISTS_SQL = """
select count(*) from information_schema.tables
where table_name = ? and table_schema = current_schema()
"""

# Row counts on the Audit sheet, in data-flow order; table names are constants, never data.
AUDIT_TABLES = (
    "stg_jobs", "job_gpu_hours", "job_usage", "capacity_buckets", "charge_lines",
    "tenant_month", "quota_compliance", "queue_stats", "failure_stats", "capacity_evidence",
    "utilization_daily", "rejects", "data_quality",
)  # fmt: skip


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


def write_chargeback_workbook(
    con: duckdb.DuckDBPyConnection,
    billing_month: dt.date,
    parameters: dict[str, str],
    out_path: pathlib.Path,
    *,
    inputs: Sequence[Mapping[str, Any]] = (),
    catalog_version: str | None = None,
) -> dict:
    """Write the finance workbook of `billing_month` to `out_path`, atomically.

    Reads charge_lines, tenant_month, job_usage, capacity_buckets, data_quality and rejects
    for the month, and the governance marts (quota_compliance, queue_stats, failure_stats,
    capacity_evidence, utilization_daily) where the warehouse has them. `inputs` are the
    landing files as `{file, cluster, format, sha256}` (file = the data_quality subject) and
    `catalog_version` the hash of the catalog, both shown on the Audit sheet.

    Returns figures for run metadata: `total_amount` (Decimal, sum of the charge lines),
    `charge_lines`, `job_lines`, `tenants`, `tenant_total_amount`,
    `rejects`/`rejects_shown`, `currency`, `path` and the file's `sha256`.
    """
    if billing_month.day != 1:
        raise ValueError(f"billing_month must be the first day of a month, got {billing_month}")
    out_path = pathlib.Path(out_path)
    month = [billing_month]

    charges = con.execute(_CHARGES_SQL, month).fetchall()
    tenants = con.execute(_TENANTS_SQL, month).fetchall()
    jobs = RowsQuery(con, _JOBS_SQL, month, JOB_LINES_ORDER)
    buckets = con.execute(_BUCKETS_SQL, month).fetchall()
    quality = con.execute(_DATA_QUALITY_SQL, month).fetchall()
    (rejects_total,) = con.execute(_REJECTS_COUNT_SQL, month).fetchone()
    rejects = con.execute(_REJECTS_SQL, [billing_month, REJECTS_SHOWN_MAX]).fetchall()
    currency = _workbook_currency(con, billing_month, parameters)
    governance = _Governance(
        quota=_fetch_if_exists(con, "quota_compliance", _QUOTA_SQL, month),
        queue=_fetch_if_exists(con, "queue_stats", _QUEUE_SQL, month),
        failures=_fetch_if_exists(con, "failure_stats", _FAILURES_SQL, month),
        capacity=_fetch_if_exists(con, "capacity_evidence", _CAPACITY_SQL, month),
        daily=_fetch_if_exists(con, "utilization_daily", _DAILY_SQL, month),
    )
    reconciliation = _reconciliation(con, billing_month, parameters)
    audit = _Audit(
        inputs=_audit_inputs(inputs, quality),
        catalog_version=catalog_version,
        table_rows=_table_rows(con, billing_month),
    )

    wb, job_lines = _build_workbook(
        billing_month, parameters, currency, charges, tenants, jobs, buckets, quality,
        rejects, rejects_total, governance, audit, reconciliation,
    )  # fmt: skip
    data = _serialise(wb, _fixed_timestamp(billing_month), [job_lines])
    _write_atomically(data, out_path)

    total_amount = sum((row[11] for row in charges), Decimal("0.00"))
    tenant_total = sum((row[11] for row in tenants if row[11] is not None), Decimal("0.00"))
    return {
        "total_amount": total_amount,
        "tenant_total_amount": tenant_total,
        "charge_lines": len(charges),
        "job_lines": job_lines.count,
        "tenants": len(tenants),
        "rejects": int(rejects_total),
        "rejects_shown": len(rejects),
        "currency": currency,
        "path": str(out_path),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


@dataclass(frozen=True)
class _Governance:
    """Rows of the governance marts for the month; None where the table does not exist."""

    quota: list[tuple] | None = None
    queue: list[tuple] | None = None
    failures: list[tuple] | None = None
    capacity: list[tuple] | None = None
    daily: list[tuple] | None = None


@dataclass(frozen=True)
class _Audit:
    inputs: list[tuple]  # file, cluster, format, sha256, read, loaded, rejected, folded
    catalog_version: str | None
    table_rows: list[tuple[str, int | None]]  # None: the table does not exist


@dataclass(frozen=True)
class _Reconciliation:
    """Amounts of the month by cluster and charge type, and (full_recovery) each cluster's
    cost: the Summary shows that they tie."""

    full_recovery: bool
    amounts: dict[tuple[str, str], Decimal]  # (cluster, charge_type) -> net amount
    costs: dict[str, Decimal]  # cluster -> cost (full_recovery only)

    @property
    def clusters(self) -> list[str]:
        return sorted({cluster for cluster, _ in self.amounts} | set(self.costs))


def _reconciliation(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date, parameters: dict[str, str]
) -> _Reconciliation:
    month = [billing_month]
    amounts = {
        (cluster, kind): amount
        for cluster, kind, amount in con.execute(_AMOUNT_BY_TYPE_SQL, month).fetchall()
    }
    costs = dict(_fetch_if_exists(con, "cost_pools", _CLUSTER_COST_SQL, month) or [])
    full = bool(costs) or parameters.get("cost_mode") == "full_recovery"
    return _Reconciliation(full_recovery=full, amounts=amounts, costs=costs)


def _table_exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return con.execute(_TABLE_EXISTS_SQL, [table]).fetchone()[0] > 0


def _fetch_if_exists(
    con: duckdb.DuckDBPyConnection, table: str, sql: str, params: list
) -> list[tuple] | None:
    return con.execute(sql, params).fetchall() if _table_exists(con, table) else None


def _table_rows(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date
) -> list[tuple[str, int | None]]:
    rows: list[tuple[str, int | None]] = []
    for table in AUDIT_TABLES:
        count = None
        if _table_exists(con, table):
            sql = f"select count(*) from {table} where billing_month = ?"
            (count,) = con.execute(sql, [billing_month]).fetchone()
        rows.append((table, count))
    return rows


def _audit_inputs(inputs: Sequence[Mapping[str, Any]], quality: list[tuple]) -> list[tuple]:
    """The landing files with their checksums, joined to the data_quality counts by name.

    A file counted in data_quality but not passed in is listed without a checksum, and the
    other way round without counts: the sheet never hides either side.
    """
    counts = {q[2]: (q[1], q[3], q[4], q[5], q[6]) for q in quality if q[0] == "file"}
    given = {str(i["file"]): i for i in inputs}
    rows = []
    for name in sorted(set(counts) | set(given)):
        item = given.get(name, {})
        cluster, read, loaded, rejected, folded = counts.get(name, (None,) * 5)
        rows.append((
            name, item.get("cluster") or cluster, item.get("format"),
            item.get("sha256") or "not computed", read, loaded, rejected, folded,
        ))  # fmt: skip
    return rows


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
    jobs: RowsQuery,
    buckets: list[tuple],
    quality: list[tuple],
    rejects: list[tuple],
    rejects_total: int,
    governance: _Governance | None = None,
    audit: _Audit | None = None,
    reconciliation: _Reconciliation | None = None,
) -> tuple[Workbook, _StreamedRows]:
    """The workbook, and its job lines to stream into the package (`_serialise`)."""
    governance = governance or _Governance()
    audit = audit or _Audit(inputs=[], catalog_version=None, table_rows=[])
    wb = Workbook()
    _add_named_styles(wb)
    summary = wb.active
    summary.title = SHEET_NAMES[0]
    sheets = {name: wb.create_sheet(name) for name in SHEET_NAMES[1:]}

    charges_total_cell = _write_charges(sheets["Charges"], charges, currency)
    _write_summary(
        summary, billing_month, parameters, currency, tenants, buckets, charges,
        charges_total_cell, reconciliation,
    )  # fmt: skip
    job_lines = _write_job_lines(sheets["Job lines"], jobs, currency)
    _write_waste(sheets["Waste"], buckets, tenants)
    _write_waste_chart(sheets["Waste"], buckets)
    _write_quota_budget(sheets["Quota & Budget"], governance.quota, tenants, currency)
    _write_queue(sheets["Queue & Service"], governance.queue)
    _write_failures(sheets["Failures"], governance.failures)
    _write_capacity(sheets["Capacity"], governance.capacity, governance.daily)
    _write_data_quality(sheets["Data quality"], quality, rejects, rejects_total)
    _write_definitions(sheets["Definitions"], parameters, DEFINITIONS + GOVERNANCE_DEFINITIONS)
    _write_audit(sheets["Audit"], billing_month, parameters, audit)

    fit_pages_to_width(wb)
    # openpyxl stores formulas without cached results: ask Excel/LibreOffice to compute them.
    wb.calculation.fullCalcOnLoad = True
    wb.properties.creator = "gpu-chargeback"
    wb.properties.title = f"GPU chargeback {billing_month:%Y-%m}"
    return wb, job_lines


def fit_pages_to_width(wb: Workbook) -> None:
    """Print (and PDF-export) every sheet landscape, one page wide, header row repeated."""
    for ws in wb.worksheets:
        ws.page_setup.orientation = "landscape"
        ws.page_setup.paperSize = ws.PAPERSIZE_A4
        ws.sheet_properties.pageSetUpPr.fitToPage = True
        ws.page_setup.fitToWidth = 1
        ws.page_setup.fitToHeight = 0
        if ws.freeze_panes:
            # (not ws[...]: that would create the cell)
            _, first_unfrozen_row = coordinate_from_string(ws.freeze_panes)
            ws.print_title_rows = f"1:{first_unfrozen_row - 1}"


def _write_summary(
    ws: Worksheet,
    billing_month: dt.date,
    parameters: dict[str, str],
    currency: str,
    tenants: list[tuple],
    buckets: list[tuple],
    charges: list[tuple],
    charges_total_cell: str,
    reconciliation: _Reconciliation | None = None,
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
    if reconciliation is not None:
        _write_charge_type_reconciliation(ws, net_row + 2, reconciliation, charges_row)

    ws.freeze_panes = ws.cell(row=header_row + 1, column=1).coordinate
    ws.auto_filter.ref = _ref(header_row, 1, last, len(cols))
    widths = _fit_widths({}, cols, rows)
    widths[1] = max(widths.get(1, 0), 30)  # headline labels live in column A too
    widths[2] = max(widths.get(2, 0), 16)
    _apply_widths(ws, widths)


# Summary rows of the reconciliation by charge type: label, charge_type, and whether the row
# exists in full_recovery only (rate_card shares no idle capacity).
_CHARGE_TYPE_ROWS = (
    ("Usage charged", "usage", False),
    ("Credited", "credit", False),
    ("Reserved capacity unused", "reserved_unused", False),
    ("Shared idle capacity", "idle_share", True),
    ("Platform (unrecovered)", "platform", True),
)


def _write_charge_type_reconciliation(
    ws: Worksheet, title_row: int, reconciliation: _Reconciliation, charges_row: int
) -> None:
    """The month's charges by charge type, all clusters in column E (a SUM over the cluster
    columns F...) and one column per cluster; their total ties to the Charges TOTAL and, in
    full_recovery, to each cluster's capacity cost."""
    clusters = reconciliation.clusters
    _set_text(ws.cell(row=title_row, column=1), "Reconciliation by charge type").style = "cb bold"
    header_row = title_row + 1
    _set_text(ws.cell(row=header_row, column=1), "Figure").style = "cb header"
    _set_text(ws.cell(row=header_row, column=5), "All clusters").style = "cb header"
    for offset, cluster in enumerate(clusters):
        _set_text(ws.cell(row=header_row, column=6 + offset), cluster).style = "cb header"
    last_letter = get_column_letter(5 + len(clusters))

    def figure_row(row: int, label: str, values: dict[str, Decimal]) -> None:
        _set_text(ws.cell(row=row, column=1), label)
        for offset, cluster in enumerate(clusters):
            cell = ws.cell(row=row, column=6 + offset, value=values.get(cluster, Decimal("0.00")))
            cell.style = "cb money"
        total = f"=SUM(F{row}:{last_letter}{row})" if clusters else 0
        ws.cell(row=row, column=5, value=total).style = "cb total money"

    row = header_row + 1
    cost_row = None
    if reconciliation.full_recovery:
        cost_row = row
        figure_row(row, "Capacity cost (full_recovery)", reconciliation.costs)
        row += 1
    first = row
    for label, kind, full_recovery_only in _CHARGE_TYPE_ROWS:
        if full_recovery_only and not reconciliation.full_recovery:
            continue
        values = {c: a for (c, k), a in reconciliation.amounts.items() if k == kind}
        figure_row(row, label, values)
        row += 1
    total_row = row
    _set_text(ws.cell(row=total_row, column=1), "Total by charge type").style = "cb bold"
    for column in range(5, 6 + len(clusters)):
        letter = get_column_letter(column)
        formula = f"=SUM({letter}{first}:{letter}{total_row - 1})"
        ws.cell(row=total_row, column=column, value=formula).style = "cb total money"
    diff_row = total_row + 1
    _set_text(ws.cell(row=diff_row, column=1), "Difference (total − Charges TOTAL, must be 0)")
    diff = ws.cell(row=diff_row, column=5, value=f"=E{total_row}-E{charges_row}")
    diff.style = "cb total money"
    if cost_row is not None:
        cost_diff_row = diff_row + 1
        _set_text(
            ws.cell(row=cost_diff_row, column=1), "Difference (total − capacity cost, must be 0)"
        )
        for column in range(5, 6 + len(clusters)):
            letter = get_column_letter(column)
            formula = f"={letter}{total_row}-{letter}{cost_row}"
            ws.cell(row=cost_diff_row, column=column, value=formula).style = "cb total money"


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


def _write_job_lines(ws: Worksheet, jobs: RowsQuery, currency: str) -> _StreamedRows:
    """The header and the sheet's layout; the rows are streamed into the package by
    `_serialise` (a 1,000-GPU month has 200k job lines)."""
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
    _write_table(ws, 1, cols, [])
    rows = _StreamedRows.below_header(ws, cols, jobs)
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = _ref(1, 1, rows.last_row, len(cols))
    _apply_widths(ws, _fit_widths_to(cols, rows.width_values))
    return rows


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
    if any(q[0] == "telemetry_labels" for q in quality):
        note = (
            "telemetry_labels: Value = GPU-hours of samples whose DCGM hpc_job / pod / "
            "namespace labels agree with the scheduler (agrees) or not (the other kinds); per "
            "GPU and label in the warehouse table telemetry_label_checks."
        )
        _set_text(ws.cell(row=last + 2, column=1), note)
        title_row += 1
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


def _share(pct: float | None) -> float | None:
    """Marts hold percentages (0-100); the sheets show them as shares in a % format."""
    return None if pct is None else pct / 100


def _hours_of(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 3600


def _yes_no(flag: bool | None) -> str | None:
    return None if flag is None else ("yes" if flag else "no")


def _not_available(ws: Worksheet, row: int, table: str) -> int:
    _set_text(
        ws.cell(row=row, column=1),
        f"not available: this warehouse has no table {table} (built before it existed)",
    )
    return row


def _section_title(ws: Worksheet, row: int, text: str) -> None:
    _set_text(ws.cell(row=row, column=1), text).style = "cb bold"


def _style_chart(chart: BarChart | LineChart, title: str, y_title: str) -> None:
    chart.title = title
    chart.y_axis.title = y_title
    chart.width, chart.height = 24, 10
    # openpyxl >= 3.1 marks axes deleted unless told otherwise: the chart would have none.
    chart.x_axis.delete = False
    chart.y_axis.delete = False
    chart.legend.position = "b"


def _write_waste_chart(ws: Worksheet, buckets: list[tuple]) -> None:
    """A cluster × GPU model matrix of the buckets below the Waste tables, and its chart."""
    shown = BUCKET_ORDER[1:]  # capacity is the sum of the others, not a slice of the bar
    hours: dict[tuple[str, str], dict[str, float]] = {}
    for cluster, model, bucket, value in buckets:
        hours.setdefault((cluster, model), {})[bucket] = value
    title_row = ws.max_row + 3
    _section_title(ws, title_row, "Waste by cluster × GPU model (GPU-hours)")
    cols = [_Col("Cluster × GPU model"), *(_Col(b, "hours") for b in shown)]
    rows = [
        (f"{cluster} × {model}", *(by_bucket.get(b) for b in shown))
        for (cluster, model), by_bucket in hours.items()
    ]
    header_row = title_row + 1
    last = _write_table(ws, header_row, cols, rows, table_name="WasteByModel")
    label_width = _fit_widths({}, cols[:1], [r[:1] for r in rows])[1]
    if label_width > (ws.column_dimensions["A"].width or 0):
        ws.column_dimensions["A"].width = label_width
    if not rows:
        return
    chart = BarChart()
    chart.type = "col"
    chart.grouping = "stacked"
    chart.overlap = 100
    _style_chart(chart, "Waste by bucket", "GPU-hours")
    data = Reference(ws, min_col=2, max_col=len(cols), min_row=header_row, max_row=last)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=header_row + 1, max_row=last))
    ws.add_chart(chart, f"A{last + 3}")


def _write_quota_budget(
    ws: Worksheet, quota: list[tuple] | None, tenants: list[tuple], currency: str
) -> None:
    cols = [
        _Col("Tenant ID"),
        _Col("Pool"),
        _Col("Has quota"),
        _Col("Guaranteed GPUs", "hours"),
        _Col("Limit GPUs", "hours"),
        _Col("Reserved"),
        _Col("Used GPU-hours", "hours"),
        _Col("Mean GPUs", "hours"),
        _Col("Peak GPUs", "hours"),
        _Col("Peak at (UTC)", "timestamp"),
        _Col("Guaranteed GPU-hours", "hours"),
        _Col("Borrowed GPU-hours", "hours"),
        _Col("Unused guaranteed GPU-hours", "hours"),
        _Col("Minutes above limit", "hours"),
        _Col("Quota use", "share"),
        _Col("Borrowing days", "count"),
        _Col("Days", "count"),
        _Col("Breach"),
        _Col("Idle quota"),
        _Col("Chronic borrowing"),
    ]
    widths: dict[int, int] = {}
    if quota is None:
        last = _not_available(ws, 1, "quota_compliance")
    else:
        rows = [
            (*q[:2], _yes_no(q[2]), q[3], q[4], _yes_no(q[5]), *q[6:14], _share(q[14]),
             q[15], q[16], _yes_no(q[17]), _yes_no(q[18]), _yes_no(q[19]))
            for q in quota
        ]  # fmt: skip
        last = _write_table(ws, 1, cols, rows)
        ws.freeze_panes = "A2"
        ws.auto_filter.ref = _ref(1, 1, last, len(cols))
        for offset, q in enumerate(quota, start=2):
            if q[17]:
                ws.cell(row=offset, column=18).fill = _OVER_FILL
        widths = _fit_widths(widths, cols, rows)

    title_row = last + 3
    _section_title(ws, title_row, f"Budget vs actual ({currency})")
    budget_cols = [
        _Col("Tenant ID"),
        _Col("Tenant"),
        _Col(f"Amount ({currency})", "money"),
        _Col(f"Budget ({currency})", "money"),
        _Col("Budget used", "share"),
        _Col("Budget status"),
    ]
    header_row = title_row + 1
    budget_rows = []
    for offset, t in enumerate(tenants, start=1):
        r = header_row + offset
        used = f"=C{r}/D{r}" if t[11] is not None and t[12] else None
        budget_rows.append((t[0], t[1] or t[0], t[11], t[12], used, t[13]))
    budget_last = _write_table(
        ws, header_row, budget_cols, budget_rows, table_name="BudgetVsActual"
    )
    for offset, t in enumerate(tenants, start=1):
        fill = {"over": _OVER_FILL, "warn": _WARN_FILL}.get(t[13])
        if fill is not None:
            for column in range(1, len(budget_cols) + 1):
                ws.cell(row=header_row + offset, column=column).fill = fill
    _apply_widths(ws, _fit_widths(widths, budget_cols, budget_rows))
    if not budget_rows:
        return
    chart = BarChart()
    chart.type = "col"
    chart.grouping = "clustered"
    _style_chart(chart, "Spend vs budget", currency or "amount")
    data = Reference(ws, min_col=3, max_col=4, min_row=header_row, max_row=budget_last)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=2, min_row=header_row + 1, max_row=budget_last))
    ws.add_chart(chart, f"A{budget_last + 3}")


def _write_queue(ws: Worksheet, queue: list[tuple] | None) -> None:
    if queue is None:
        _not_available(ws, 1, "queue_stats")
        return
    cols = [
        _Col("Grouping set"),
        _Col("Cluster"),
        _Col("Tenant"),
        _Col("Queue"),
        _Col("GPU model"),
        _Col("Jobs", "count"),
        _Col("Jobs started", "count"),
        _Col("Wait p50 (h)", "hours"),
        _Col("Wait p90 (h)", "hours"),
        _Col("Wait p95 (h)", "hours"),
        _Col("Wait mean (h)", "hours"),
        _Col("Wait max (h)", "hours"),
        _Col("Pending GPU-hours", "hours"),
        _Col("Jobs ended", "count"),
        _Col("Completed", "count"),
        _Col("Failed", "count"),
        _Col("Timeout", "count"),
        _Col("Out of memory", "count"),
        _Col("Node fail", "count"),
        _Col("Cancelled", "count"),
        _Col("Preempted", "count"),
        _Col("Success rate", "share"),
    ]
    rows = [(*q[:7], *(_hours_of(s) for s in q[7:12]), *q[12:21], _share(q[21])) for q in queue]
    last = _write_table(ws, 1, cols, rows)
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = _ref(1, 1, last, len(cols))
    _apply_widths(ws, _fit_widths({}, cols, rows))


_FAILURE_SECTIONS = (
    ("node", "Node", "Top nodes by failure rank", "FailuresNode"),
    ("fault_domain", "Fault domain", "Fault domains", "FailuresFaultDomain"),
    ("driver_version", "Driver version", "Driver versions", "FailuresDriver"),
    ("exit_code", "Exit code", "Exit codes (by jobs)", "FailuresExitCode"),
)


def _write_failures(ws: Worksheet, failures: list[tuple] | None) -> None:
    if failures is None:
        _not_available(ws, 1, "failure_stats")
        return
    widths: dict[int, int] = {}
    row = 1
    for dimension, label, title, table_name in _FAILURE_SECTIONS:
        found = [f[1:] for f in failures if f[0] == dimension]
        rows = [(*f[:11], _share(f[11]), _share(f[12]), *f[13:]) for f in found]
        if dimension == "node" and len(rows) > TOP_NODES_SHOWN:
            title = f"{title} (the first {TOP_NODES_SHOWN} of {len(rows)})"
            rows = rows[:TOP_NODES_SHOWN]
        _section_title(ws, row, title)
        cols = [
            _Col("Rank", "count"),
            _Col("Cluster"),
            _Col(label),
            _Col("Jobs", "count"),
            _Col("Completed", "count"),
            _Col("Failed", "count"),
            _Col("Out of memory", "count"),
            _Col("Timeout", "count"),
            _Col("Node fail", "count"),
            _Col("Cancelled", "count"),
            _Col("Preempted", "count"),
            _Col("Infra failure rate", "share"),
            _Col("Job failure rate", "share"),
            _Col("Allocated GPU-hours", "hours"),
            _Col("Failed (infra) GPU-hours", "hours"),
            _Col("Failed (job) GPU-hours", "hours"),
        ]
        if row == 1:
            last = _write_table(ws, 2, cols, rows)
            ws.freeze_panes = "A3"
            ws.auto_filter.ref = _ref(2, 1, last, len(cols))
        else:
            last = _write_table(ws, row + 1, cols, rows, table_name=table_name)
            last = max(last, row + 2)  # "(none)" under an empty header
        widths = _fit_widths(widths, cols, rows)
        row = last + 3
    _apply_widths(ws, widths)


def _write_capacity(ws: Worksheet, capacity: list[tuple] | None, daily: list[tuple] | None) -> None:
    cols = [
        _Col("Cluster"),
        _Col("GPU model"),
        _Col("Verdict"),
        _Col("Verdict rule", "wrap", width=60),
        _Col("Capacity GPU-hours", "hours"),
        _Col("Allocated GPU-hours", "hours"),
        _Col("Allocation rate", "share"),
        _Col("Productive share", "share"),
        _Col("Waste share", "share"),
        _Col("Unmeasured share", "share"),
        _Col("Wait p95 (h)", "hours"),
        _Col("Pending GPU-hours", "hours"),
        _Col("Pending share", "share"),
        _Col("Guaranteed GPU-hours", "hours"),
        _Col("Idle-quota share", "share"),
    ]
    widths: dict[int, int] = {}
    if capacity is None:
        last = _not_available(ws, 1, "capacity_evidence")
    else:
        rows = [
            (*c[:6], *(_share(p) for p in c[6:10]), _hours_of(c[10]), c[11], _share(c[12]),
             c[13], _share(c[14]))
            for c in capacity
        ]  # fmt: skip
        last = _write_table(ws, 1, cols, rows)
        ws.freeze_panes = "A2"
        ws.auto_filter.ref = _ref(1, 1, last, len(cols))
        # the verdict and its reason are what the reader came for
        for r in range(2, last + 1):
            ws.cell(row=r, column=3).font = Font(bold=True, size=12)
            ws.cell(row=r, column=4).font = Font(bold=True)
        widths = _fit_widths(widths, cols, rows)

    title_row = last + 3
    _section_title(ws, title_row, "Daily allocation vs capacity (all clusters and GPU models)")
    if daily is None:
        _not_available(ws, title_row + 1, "utilization_daily")
        _apply_widths(ws, widths)
        return
    totals: dict[dt.date, list[float | None]] = {}
    for day, _cluster, _model, allocated, cap in daily:
        total = totals.setdefault(day, [0.0, None])
        total[0] += allocated or 0.0
        if cap is not None:
            total[1] = (total[1] or 0.0) + cap
    header_row = title_row + 1
    daily_cols = [
        _Col("Day", "date"),
        _Col("Allocated GPU-hours", "hours"),
        _Col("Capacity GPU-hours", "hours"),
        _Col("Allocation rate", "share"),
    ]
    daily_rows = []
    for offset, (day, (allocated, cap)) in enumerate(totals.items(), start=1):
        r = header_row + offset
        daily_rows.append((day, allocated, cap, f"=B{r}/C{r}" if cap else None))
    daily_last = _write_table(ws, header_row, daily_cols, daily_rows, table_name="DailyCapacity")
    widths = _fit_widths(widths, daily_cols, daily_rows)
    if daily_rows:
        chart = LineChart()
        _style_chart(chart, "Daily allocation vs capacity", "GPU-hours")
        data = Reference(ws, min_col=2, max_col=3, min_row=header_row, max_row=daily_last)
        chart.add_data(data, titles_from_data=True)
        chart.set_categories(Reference(ws, min_col=1, min_row=header_row + 1, max_row=daily_last))
        ws.add_chart(chart, f"F{header_row}")

    detail_title = max(daily_last, header_row + 1) + 3
    _section_title(ws, detail_title, "Daily allocation and capacity by cluster × GPU model")
    detail_cols = [
        _Col("Day", "date"),
        _Col("Cluster"),
        _Col("GPU model"),
        _Col("Allocated GPU-hours", "hours"),
        _Col("Capacity GPU-hours", "hours"),
    ]
    _write_table(ws, detail_title + 1, detail_cols, daily, table_name="DailyByModel")
    _apply_widths(ws, _fit_widths(widths, detail_cols, daily))


def _write_audit(
    ws: Worksheet, billing_month: dt.date, parameters: dict[str, str], audit: _Audit
) -> None:
    cols = [_Col("Item"), _Col("Value")]
    rows = [
        ("Billing month", f"{billing_month:%Y-%m}"),
        ("Code version", parameters.get("code_version") or "unknown"),
        ("Catalog version (sha256 over the catalog files)", audit.catalog_version or "unknown"),
        # by name: the same inputs in other folders give the same workbook
        ("Catalog folder (name)", parameters.get("catalog_dir") or ""),
        ("Landing folder (name)", parameters.get("landing_dir") or ""),
    ]
    last = _write_table(ws, 1, cols, rows)
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = _ref(1, 1, last, len(cols))
    widths = _fit_widths({}, cols, rows)

    title_row = last + 3
    _section_title(ws, title_row, "Input files")
    input_cols = [
        _Col("File"),
        _Col("Cluster"),
        _Col("Format"),
        _Col("SHA-256", width=66),
        _Col("Rows read", "count"),
        _Col("Rows loaded", "count"),
        _Col("Rows rejected", "count"),
        _Col("Duplicates folded", "count"),
    ]
    inputs_last = _write_table(ws, title_row + 1, input_cols, audit.inputs, "InputFiles")
    widths = _fit_widths(widths, input_cols, audit.inputs)

    title_row = max(inputs_last, title_row + 2) + 3
    _section_title(ws, title_row, f"Warehouse tables: rows of {billing_month:%Y-%m}")
    table_cols = [_Col("Table"), _Col("Rows", "count")]
    table_rows = [(t, "not available" if n is None else n) for t, n in audit.table_rows]
    _write_table(ws, title_row + 1, table_cols, table_rows, table_name="TableRows")
    _apply_widths(ws, _fit_widths(widths, table_cols, table_rows))


def _write_definitions(
    ws: Worksheet,
    parameters: dict[str, str],
    definitions: Sequence[tuple[str, str]] | None = None,
) -> None:
    definitions = DEFINITIONS if definitions is None else definitions
    cols = [_Col("Figure"), _Col("Meaning", "wrap", width=100)]
    last = _write_table(ws, 1, cols, definitions)
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = _ref(1, 1, last, len(cols))

    title_row = last + 3
    _set_text(ws.cell(row=title_row, column=1), "Parameters of this run").style = "cb bold"
    param_cols = [_Col("Parameter"), _Col("Value", "wrap", width=100)]
    param_rows = [(str(k), "" if v is None else str(v)) for k, v in parameters.items()]
    _write_table(ws, title_row + 1, param_cols, param_rows, table_name="Parameters")
    widths = _fit_widths({}, cols, definitions)
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
        "attributed to the allocation that holds that GPU at t (start <= t < end), never past "
        "the next sample. s is the step the catalog declares (telemetry_step_s), else the "
        "series' typical spacing that day: the lower median of its spacings when it has at "
        "least 10, else its cluster's typical spacing that day, else 60 s, so a series with "
        "few samples never gets a step from one long gap. Allocated time with no sample is "
        "unmeasured, never idle.",
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
        "(weighted by allocated GPU-hours, even, reserved_quota_first, or platform tenant). "
        "Cost pool per cluster × GPU model = Σ nodes.csv monthly_cost of its nodes × their "
        "in-service hours in the month ÷ the month's hours, + the cluster's monthly_overhead "
        "(settings) spread over its GPU models in proportion to capacity GPU-hours; the "
        "cluster's cost is rounded to the cent once and its pools get whole cents by largest "
        "remainder, so they add up to it exactly. Derived rate = pool cost ÷ capacity "
        "GPU-hours, rounded to 6 decimals (the unit price of its usage, credit and "
        "reserved-unused lines).",
    ),
    (
        "Idle share (full_recovery)",
        "What a pool still has to recover after usage − credits + reserved unused (each "
        "rounded as below) is shared in whole cents by largest remainder: weighted = by the "
        "tenants' allocated GPU-hours in the pool; even = equally among the tenants that used "
        "the pool; reserved_quota_first = by the guaranteed GPU-hours of the reserved quotas on "
        "the pool, as weighted when it has none; platform = not shared. One line per tenant "
        "and pool (charge type idle_share); its GPU-hours are the same share of the pool's idle "
        "capacity (capacity − allocated − reserved unused).",
    ),
    (
        "Platform (unrecovered)",
        "full_recovery: one line per pool (tenant 'platform', charge type platform) with what "
        "no tenant is charged: all of the rest when nobody used the pool or the policy is "
        "platform; a negative amount when usage at the rounded rate or oversold reservations "
        "charged more than the pool costs (tenants pay the published rate; the excess is "
        "returned here). So each cluster's lines add up to its cost to the cent (checked: "
        "cluster_cost_recovered).",
    ),
    (
        "Reserved quota",
        "The unused part of a reserved guarantee is charged to its tenant (FOCUS "
        "CapacityReservationStatus=Unused, CapacityReservationId = tenant/pool), in both cost "
        "modes, as its own line (charge type reserved_unused, category Usage): the integral, "
        "while the reserved quota is in force (effective-dated), of max(0, guaranteed GPUs − "
        "GPU-equivalents the tenant holds in the pool at that moment). A pool that is a GPU "
        "model is priced as that model; a pool that is a queue as the GPU model that carried "
        "most of the queue's time in the month. Priced at the rate in force at each moment "
        "(rate_card) or the pool's derived rate (full_recovery). A quota spans clusters: its "
        "unused hours are split over the clusters holding that GPU model in proportion to "
        "their capacity GPU-hours.",
    ),
    (
        "Charge type",
        "usage, credit, reserved_unused, idle_share, platform: what a charge line charges "
        "(Summary 'Reconciliation by charge type' adds them up per cluster).",
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
        "One row per tenant × cluster × GPU model × charge category × charge type (Charges "
        "sheet; the description names the charge type). Charge class is empty for regular "
        "lines; Correction marks a restatement of a closed month.",
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


# The governance figures of DESIGN.md "Definitions", shown on the finance workbook only.
GOVERNANCE_DEFINITIONS: tuple[tuple[str, str], ...] = (
    (
        "Quota compliance",
        "Per tenant × pool (a GPU model or a queue): time-weighted mean and peak concurrent "
        "GPUs, GPU-hours above guaranteed (borrowed), minutes above limit (breach), quota use "
        "= used ÷ (guaranteed × hours); flags breach, idle_quota (use < 30 %), "
        "chronic_borrowing (borrowing on more than half of the month's days).",
    ),
    (
        "Queue wait",
        "Start − submit, shown in hours; p50/p90/p95/mean by tenant, queue, GPU model and "
        "cluster. Pending GPU-hours = Σ wait × GPUs inside the month.",
    ),
    (
        "Success rate",
        "COMPLETED ÷ (COMPLETED + FAILED + TIMEOUT + OUT_OF_MEMORY + NODE_FAIL); cancellations "
        "and preemptions are reported apart.",
    ),
    (
        "Failure rates",
        "Infra failure rate = NODE_FAIL jobs ÷ jobs; job failure rate = (FAILED + "
        "OUT_OF_MEMORY) jobs ÷ jobs; by node, fault domain, driver version and exit code. "
        "Rank 1 is the worst value of its dimension. Jobs are those that ended in the month; "
        "exit code 'unknown': the export has none, 'running': GPU-hours of jobs still running "
        "at the month's end (no outcome yet).",
    ),
    (
        "Capacity verdict",
        "Per cluster × GPU model, first rule that holds: 'govern first' (waste share ≥ 25 % or "
        "idle-quota share ≥ 20 %), 'expansion justified' (allocation rate ≥ 80 %, p95 wait "
        "≥ 4 h, waste share < 15 %, unmeasured share ≤ 20 %), else 'hold'. The verdict rule "
        "column states the rule with the row's numbers.",
    ),
    (
        "Waste share",
        "(idle + zombie + failed_job) GPU-hours ÷ allocated GPU-hours: the allocated time "
        "governance can win back (failed_infra and unmeasured are not waste).",
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
    cell.value = _cell_text(value)
    cell.data_type = "s"
    return cell


def _cell_text(value: Any) -> str:
    """`value` as a cell's text: characters XML cannot hold spelled out, cut at Excel's limit."""
    text = ILLEGAL_CHARACTERS_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))
    if len(text) > _MAX_CELL_CHARS:
        text = text[: _MAX_CELL_CHARS - 14] + " [truncated]"
    return text


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
    is_text = [col.kind in _TEXT_KINDS for col in cols]
    styles = [
        _styled_template(ws, _STYLE_OF_KIND[col.kind])._style if col.kind in _STYLE_OF_KIND
        else None
        for col in cols
    ]  # fmt: skip
    r = header_row
    for values in rows:
        r += 1
        for column, (text, style, value) in enumerate(
            zip(is_text, styles, values, strict=True), start=1
        ):
            if value is None:
                continue
            cell = ws.cell(row=r, column=column)
            if text:
                _set_text(cell, value)
            else:
                # Numbers, datetimes, and formulas built by this module (never data text).
                cell.value = value
            if style is not None:
                cell._style = copy(style)
    if table_name is not None:
        if r == header_row:
            _set_text(ws.cell(row=r + 1, column=1), "(none)")
        else:
            table = Table(displayName=table_name, ref=_ref(header_row, 1, r, len(cols)))
            table.tableStyleInfo = TableStyleInfo(name="TableStyleLight1", showRowStripes=False)
            ws.add_table(table)
    return r


def _styled_template(ws: Worksheet, name: str) -> Cell:
    """A cell of `ws`, not placed on the sheet, with the named style `name`.

    Assigning a named style by name looks it up in the workbook's list every time: that was
    ~40 % of writing a 200k-row sheet. A table resolves each column's style once on a template
    and gives its cells copies of the template's style array (what the assignment stores); the
    streamed rows use the template's style id.
    """
    template = Cell(ws)
    template.style = name
    return template


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


def _longest_display(values: list[Any], kind: str) -> int:
    """max(_display_len(v, kind) for v in values), without formatting every number: the
    width of f"{v:,.2f}" grows with |v| (and a minus sign), so the largest and the smallest
    number are the widest. A 200k-row sheet formatted 2.4 M numbers for its widths."""
    distinct = set(values)
    numbers = [v for v in distinct if isinstance(v, int | float | Decimal)]
    if numbers and kind not in ("timestamp", "date", "share"):
        distinct.difference_update(numbers)
        distinct.update((min(numbers), max(numbers)))
    return max((_display_len(value, kind) for value in distinct), default=0)


def _fit_widths(
    widths: dict[int, int], cols: Sequence[_Col], rows: Sequence[Sequence[Any]]
) -> dict[int, int]:
    columns = [[row[column] for row in rows] for column in range(len(cols))]
    return _fit_widths_to(cols, columns, widths)


def _fit_widths_to(
    cols: Sequence[_Col], columns: Sequence[list[Any]], widths: dict[int, int] | None = None
) -> dict[int, int]:
    """Column widths from each column's values (or the values that decide its width)."""
    widths = {} if widths is None else widths
    for column, (col, values) in enumerate(zip(cols, columns, strict=True), start=1):
        if col.width is not None:
            width = col.width
        else:
            longest = _longest_display(values, col.kind)
            width = min(max(len(col.header), longest) + 2, _MAX_WIDTH)
        widths[column] = max(widths.get(column, _MIN_WIDTH), width)
    return widths


def _apply_widths(ws: Worksheet, widths: dict[int, int]) -> None:
    for column, width in sorted(widths.items()):
        ws.column_dimensions[get_column_letter(column)].width = width


# --------------------------------------------------------------------------------------------
# Reproducible bytes, atomic replace
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowsQuery:
    """A select whose rows a sheet's table streams (`sql` without ORDER BY; `order_by` orders
    them, and must order them completely: the workbook's bytes follow it)."""

    con: duckdb.DuckDBPyConnection
    sql: str
    params: Sequence[Any]
    order_by: str


@dataclass(frozen=True)
class _StreamedRows:
    """Rows of a sheet's table written straight into the sheet's XML by `_serialise`.

    openpyxl builds an object per cell and serialises it on its own (~13 µs a cell): the
    200k job lines of a 1,000-GPU month took over two minutes a workbook, and formatting them
    cell by cell in Python still took most of the workbook's time. DuckDB writes each row's
    XML instead (`_row_xml_sql`), as openpyxl writes cells: inline strings, numbers as
    "%.16g", dates as Excel serial numbers, each column with its table style. The rows go
    after the rows openpyxl wrote, which must end above them.
    """

    sheet: str  # its title
    first_row: int
    count: int
    width_values: list[list[Any]]  # per column, the values that decide its width
    query: RowsQuery
    row_xml_sql: str  # one <row> element per row, in order

    @classmethod
    def below_header(cls, ws: Worksheet, cols: Sequence[_Col], query: RowsQuery) -> _StreamedRows:
        relation = query.con.sql(query.sql, params=list(query.params))
        types = [str(t) for t in relation.types]
        if len(types) != len(cols):
            raise ValueError(f"{ws.title}: {len(cols)} columns, the query has {len(types)}")
        columns = []
        for column, (col, name, sql_type) in enumerate(
            zip(cols, relation.columns, types, strict=True), start=1
        ):
            style = _STYLE_OF_KIND.get(col.kind)
            style_id = _styled_template(ws, style).style_id if style is not None else None
            columns.append((name, sql_type, get_column_letter(column), col.kind, style_id))
        first_row = ws.max_row + 1
        row_xml = _row_xml_sql(query, columns, first_row)  # checks the columns' types
        count, width_values = _count_and_width_values(query, columns)
        return cls(ws.title, first_row, count, width_values, query, row_xml)

    @property
    def last_row(self) -> int:
        return self.first_row + self.count - 1

    def xml_chunks(self, rows_per_chunk: int = 2000) -> Iterator[str]:
        rows = self.query.con.sql(self.row_xml_sql, params=list(self.query.params))
        for batch in rows.to_arrow_reader(rows_per_chunk):
            yield "".join(batch.column(0).to_pylist())


# The characters str.strip() removes that _cell_text leaves in a text: a text that starts or
# ends with one is marked xml:space="preserve" (Excel drops outer whitespace otherwise)
_STRIPPED = "".join(
    c for c in map(chr, range(0x3001)) if c.isspace() and not ILLEGAL_CHARACTERS_RE.match(c)
)
# openpyxl's ILLEGAL_CHARACTERS_RE: its characters, and as an RE2 class for DuckDB
_ILLEGAL_CODES = [code for code in range(0x20) if ILLEGAL_CHARACTERS_RE.match(chr(code))]
_ILLEGAL_RE2 = "[" + "".join(f"\\x{code:02x}" for code in _ILLEGAL_CODES) + "]"
_NUMBER_TYPES = re.compile(
    r"(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT"
    r"|FLOAT|DOUBLE|DECIMAL\(\d+,\d+\))"
)


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _sql_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _row_xml_sql(
    query: RowsQuery, columns: Sequence[tuple[str, str, str, str, int | None]], first_row: int
) -> str:
    """The select of each row's XML, in order: each cell as _cell_text, xml_escape and
    openpyxl's writer make it (tests/reports/test_streamed_rows.py compares the two). Each
    value is made ready once (its cell text, or its number as a double), then written."""
    ready, cells, texts = [], [], []
    for index, (name, sql_type, letter, kind, style_id) in enumerate(columns):
        value, ready_value = _sql_name(name), f"v{index}"
        style = "" if style_id is None else f' s="{style_id}"'
        cell = functools.partial(_cell_sql, letter, style)
        if kind in _TEXT_KINDS:
            if sql_type != "VARCHAR":
                raise TypeError(f"column {letter} ({kind}): {sql_type} is not text")
            texts.append(value)
            ready.append(f"{_cell_text_sql(value)} as {ready_value}")
            cells.append(_text_cell_sql(ready_value, cell))
        else:
            ready.append(f"{_number_sql(value, sql_type, letter, kind)} as {ready_value}")
            # not-finite numbers: openpyxl writes an empty value
            number = f"case when isfinite({ready_value}) then printf('%.16g', {ready_value}) end"
            written = cell(' t="n"><v>', number, _sql_text("</v></c>"))
            cells.append(f"case when {ready_value} is null then '' else {written} end")
    # one pattern match per row tells the (rare) rows with characters to spell out
    has_control = (
        f"regexp_matches(concat({', '.join(texts)}), '{_ILLEGAL_RE2}')" if texts else "false"
    )
    return (
        f"select concat('<row r=\"', _r, '\">', {', '.join(cells)}, '</row>') as xml "
        f"from (select _r, {', '.join(ready)} from ("
        f"select *, {first_row - 1} + row_number() over (order by {query.order_by}) as _r, "
        f"{has_control} as _has_control from ({query.sql}))) order by _r"
    )


def _cell_sql(letter: str, style: str, type_and_value: str, *pieces: str) -> str:
    """A cell of column `letter` in row _r: its head, `type_and_value` (XML text), then
    `pieces` (SQL), in one concat(): a chain of || copies the text so far at every step,
    and the rows' XML took twice as long."""
    head = [_sql_text(f'<c r="{letter}'), "_r", _sql_text(f'"{style}{type_and_value}')]
    return f"concat({', '.join(head + list(pieces))})"


def _cell_text_sql(value: str) -> str:
    """_cell_text of a VARCHAR `value`: the characters XML cannot hold spelled out (\\x01),
    then cut at Excel's limit. `_has_control`: the row has such characters somewhere."""
    spelled = value
    for code in _ILLEGAL_CODES:
        spelled = f"replace({spelled}, chr({code}), '\\x{code:02x}')"
    cleaned = (
        f"(case when _has_control and regexp_matches({value}, '{_ILLEGAL_RE2}') "
        f"then {spelled} else {value} end)"
    )
    return (
        f"case when length({cleaned}) > {_MAX_CELL_CHARS} "
        f"then left({cleaned}, {_MAX_CELL_CHARS - 14}) || ' [truncated]' else {cleaned} end"
    )


def _text_cell_sql(text: str, cell: Callable[..., str]) -> str:
    """An inline-string cell of `text` (a _cell_text), as openpyxl writes it."""
    escaped = f"replace(replace(replace({text}, '&', '&amp;'), '<', '&lt;'), '>', '&gt;')"
    # a text that str.strip() would change (it is not empty here): its first or last character
    stripped = _sql_text(_STRIPPED)
    space = (
        f"case when contains({stripped}, left({text}, 1)) "
        f"or contains({stripped}, right({text}, 1)) then ' xml:space=\"preserve\"' else '' end"
    )
    empty = cell(' t="inlineStr"/>')
    written = cell(' t="inlineStr"><is><t', space, "'>'", escaped, "'</t></is></c>'")
    return f"case when {text} is null then '' when {text} = '' then {empty} else {written} end"


def _number_sql(value: str, sql_type: str, letter: str, kind: str) -> str:
    """The double a number or date column's cell holds, as openpyxl computes it."""
    if sql_type in ("DATE", "TIMESTAMP"):
        # openpyxl's to_excel: days since 1899-12-30 (one less up to 1900-02-28, Excel's 1900
        # leap day) + the time of day as (seconds + µs / 10^6) / 86400, in that order
        days = f"date_diff('day', DATE '1899-12-30', {value}::date)"
        seconds = (
            f"(hour({value}) * 3600 + minute({value}) * 60 + second({value}))::double"
            f" + (microsecond({value}) % 1000000)::double / 1000000.0"
        )
        return (
            f"({days} - case when {days} > 0 and {days} <= 60 then 1 else 0 end)::double"
            f" + ({seconds}) / 86400.0"
        )
    if _NUMBER_TYPES.fullmatch(sql_type):
        # "%.16g" of the double: openpyxl formats a Decimal as the float it converts to
        return f"{value}::double"
    raise TypeError(f"column {letter} ({kind}): {sql_type} is not a number or date")


# The characters str.splitlines() breaks lines at, as an RE2 class
_LINE_BREAKS_RE2 = r"[\n\r\x0b\x0c\x1c\x1d\x1e\x{85}\x{2028}\x{2029}]"


def _count_and_width_values(
    query: RowsQuery, columns: Sequence[tuple[str, str, str, str, int | None]]
) -> tuple[int, list[list[Any]]]:
    """The query's row count and, per column, the values that decide its width
    (`_longest_display`): of the texts, the longest one-line text (its display length is its
    length: DuckDB's length() counts code points, as len() does) and every text with a line
    break or a leading '=' (displayed otherwise); the smallest and largest finite number; any
    one date. One pass over the rows, and no 200k job ids sent to Python."""
    picks = ["count(*)"]
    for name, sql_type, _, kind, _ in columns:
        value = _sql_name(name)
        if kind in _TEXT_KINDS:
            special = (
                f"(regexp_matches({value}, '{_LINE_BREAKS_RE2}') or starts_with({value}, '='))"
            )
            picks.append(
                f"list_prepend(arg_max({value}, length({value})) filter (not {special}), "
                f"coalesce(list(distinct {value}) filter ({special}), []))"
            )
        else:
            finite = f"isfinite({value})" if sql_type in ("FLOAT", "DOUBLE") else "true"
            picks.append(f"[min({value}) filter ({finite}), max({value}) filter ({finite})]")
    [(count, *per_column)] = query.con.execute(
        f"select {', '.join(picks)} from ({query.sql})", list(query.params)
    ).fetchall()
    return count, [[v for v in values if v is not None] if values else [] for values in per_column]


def _serialise(wb: Workbook, stamp: dt.datetime, streamed: Sequence[_StreamedRows] = ()) -> bytes:
    """The xlsx package with every timestamp (document properties, zip entries) = `stamp`.

    `openpyxl.Workbook.save` stamps 'now' into docProps/core.xml and zipfile stamps the clock
    into every entry, so the package is written with ExcelWriter and then re-zipped.
    """
    wb.properties.created = stamp
    wb.properties.modified = stamp
    first_pass = io.BytesIO()
    # stored, not deflated: the entries are compressed once, in the second pass
    with zipfile.ZipFile(first_pass, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        ExcelWriter(wb, archive).save()
    # the package path of a sheet is known once ExcelWriter has numbered the sheets
    rows_of = {wb[rows.sheet].path.lstrip("/"): rows for rows in streamed}
    out = io.BytesIO()
    date_time = stamp.timetuple()[:6]
    with (
        zipfile.ZipFile(first_pass) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as target,
    ):
        for info in source.infolist():
            entry = zipfile.ZipInfo(info.filename, date_time=date_time)
            entry.compress_type = zipfile.ZIP_DEFLATED
            # zlib level 1, not 6: the 1,000-GPU month's job lines are 237 MB of XML, deflated
            # in 0.7 s instead of 2.9 s, for a 34 MB workbook instead of 26 MB
            # (ZipInfo.open has no level argument; ZipFile's compresslevel is for names only)
            entry._compresslevel = 1
            entry.external_attr = 0o644 << 16
            content = source.read(info.filename)
            if info.filename in rows_of:
                with target.open(entry, "w", force_zip64=True) as sheet:
                    for chunk in _sheet_with_rows(content.decode(), rows_of.pop(info.filename)):
                        sheet.write(chunk.encode())
            else:
                target.writestr(entry, content)
    return out.getvalue()


def _sheet_with_rows(sheet_xml: str, rows: _StreamedRows) -> Iterator[str]:
    """The sheet's XML with `rows` after the rows openpyxl wrote and its dimension widened."""
    if not rows.count:
        yield sheet_xml
        return
    end = sheet_xml.index("</sheetData>")
    last_written = [int(r) for r in re.findall(r'<row r="(\d+)"', sheet_xml[:end])]
    if last_written and max(last_written) >= rows.first_row:
        raise ValueError(f"{rows.sheet}: streamed rows overlap row {max(last_written)}")
    head = re.sub(
        r'<dimension ref="([A-Z]+)(\d+)(?::([A-Z]+)\d+)?"',
        lambda m: f'<dimension ref="{m[1]}{m[2]}:{m[3] or m[1]}{rows.last_row}"',
        sheet_xml[:end],
        count=1,
    )
    yield head
    yield from rows.xml_chunks()
    yield sheet_xml[end:]


def _write_atomically(data: bytes, out_path: pathlib.Path) -> None:
    """Temporary file in the same folder, then rename: a failure leaves the old report."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            half = memoryview(data)[: len(data) // 2]
            fh.write(half)
            fh.flush()
            checkpoint("workbook_half_written")  # the kill tests stop here
            fh.write(memoryview(data)[len(half) :])
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
