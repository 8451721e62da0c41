"""Finance workbook `chargeback-YYYY-MM.xlsx`, built from the warehouse marts of one month.

Its queries are `sql/reports/*.sql` (small selects on the public marts, always with the month
bound); the tables that show a query's rows as they come are laid out in
`reports/workbook_tables.yaml` (`table_layouts`); the sheets it shares with the department
workbook are in `shared_sheets`. The file is
reproducible: the same tables give the same bytes, because every timestamp in the package is
derived from the billing month.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import pathlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb
from openpyxl import Workbook
from openpyxl.chart import BarChart, LineChart
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from pipelines.reports import queries
from pipelines.reports.definitions import governance_definitions, workbook_definitions
from pipelines.reports.files import write_atomically
from pipelines.reports.package import workbook_bytes
from pipelines.reports.period import month_name, period_end
from pipelines.reports.shared_sheets import (
    BUCKET_HOURS_COLUMNS,
    JOB_LINES_ORDER,
    Summary,
    SummaryTenant,
    write_charges,
    write_figure_definitions,
    write_job_lines,
    write_parameters,
    write_summary,
)
from pipelines.reports.sheets import (
    OVER_FILL,
    TOP,
    Column,
    add_named_styles,
    add_table_chart,
    apply_widths,
    current_widths,
    fill_status_rows,
    fit_widths,
    not_available,
    register_table,
    section_below,
    section_below_chart,
    section_title,
    set_print_setup,
    set_text,
    share_of,
    style_chart,
    write_main_table,
    write_table,
    write_total_row,
)
from pipelines.reports.streamed_sheet import RowsQuery, StreamedRows
from pipelines.reports.table_layouts import table_layout
from pipelines.reports.telemetry import ClusterTelemetry, cluster_telemetry

# A table that grows with the catalog or the landing (tenants, pools, nodes, days, files) is
# its sheet's last or only one, so that its printed pages repeat its header: DESIGN's "Waste"
# and "Quota & Budget" are each spread over sheets of their own tables.
SHEET_NAMES = (
    "Summary", "Charges", "Job lines", "Waste", "Waste by model", "Waste by tenant",
    "Cost views", "Users", "Quota", "Budget", "Quota drift", "Queue & Service", "Submissions",
    "Failures", "Reliability", "Incidents", "Capacity", "Capacity by day", "Capacity by pool",
    "Trends", "Data quality", "Rejected rows", "Definitions", "Audit",
)  # fmt: skip
TOP_NODES_SHOWN = 20
REJECTS_SHOWN_MAX = 10_000
DEFINITIONS = workbook_definitions()
GOVERNANCE_DEFINITIONS = governance_definitions()

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

# Row counts on the Audit sheet, in data-flow order.
AUDIT_TABLES = (
    "stg_jobs", "job_gpu_hours", "job_usage", "capacity_buckets", "charge_lines",
    "tenant_month", "quota_compliance", "quota_drift", "queue_stats", "submission_stats",
    "failure_stats", "incidents", "availability", "capacity_evidence",
    "utilization_daily", "rejects", "data_quality", "telemetry_coverage",
)  # fmt: skip
TELEMETRY_TITLE = (
    "Telemetry per cluster: utilisation metric, observed sampling interval, measured share"
)


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
    for the month, and the governance marts (quota_compliance, quota_drift, queue_stats,
    failure_stats, availability, incidents, capacity_evidence, utilization_daily) and
    telemetry_coverage where the warehouse has them.
    `inputs` are the landing files as `{file, cluster, format, sha256}` (file = the
    data_quality subject) and `catalog_version` the hash of the catalog, both shown on the
    Audit sheet.

    Returns figures for run metadata: `total_amount` (Decimal, sum of the charge lines),
    `charge_lines`, `job_lines`, `tenants`, `tenant_total_amount`,
    `rejects`/`rejects_shown`, `currency`, `path` and the file's `sha256`.
    """
    if billing_month.day != 1:
        raise ValueError(f"billing_month must be the first day of a month, got {billing_month}")
    out_path = pathlib.Path(out_path)
    month = {"billing_month": billing_month}
    quality = queries.fetch(con, "data_quality", **month)
    data = _Month(
        charges=queries.fetch(con, "charge_lines", **month, department=None),
        tenants=queries.fetch(con, "tenants", **month),
        jobs=queries.rows_query(con, "job_lines", JOB_LINES_ORDER, **month, department=None),
        buckets=queries.fetch(con, "capacity_buckets", **month, bucket_order=list(BUCKET_ORDER)),
        quality=quality,
        rejects=queries.fetch(con, "rejects", **month, limit=REJECTS_SHOWN_MAX),
        rejects_total=queries.month_rows(con, "rejects", billing_month),
        quota=queries.fetch_if_table(con, "quota_compliance", "quota_compliance", **month),
        drift=queries.fetch_if_table(con, "quota_drift", "quota_drift", **month),
        queue=queries.fetch_if_table(con, "queue_stats", "queue_stats", **month),
        submissions=queries.fetch_if_table(con, "submission_stats", "submission_stats", **month),
        failures=queries.fetch_if_table(con, "failure_stats", "failure_stats", **month),
        availability=queries.fetch_if_table(con, "availability", "availability", **month),
        incidents=queries.fetch_if_table(con, "incidents", "incidents", **month),
        capacity=queries.fetch_if_table(con, "capacity_evidence", "capacity_evidence", **month),
        daily=queries.fetch_if_table(con, "utilization_daily", "daily_capacity", **month),
        cost_views=queries.fetch_if_table(
            con, "cost_views", "cost_views", **month, department=None
        ),
        users=queries.fetch_if_table(con, "user_efficiency", "users", **month, department=None),
        trends=queries.fetch_if_table(con, "month_trends", "month_trends", **month),
        forecast=queries.fetch_if_table(con, "demand_forecast", "demand_forecast", **month),
        telemetry=cluster_telemetry(con, billing_month),
        reconciliation=_reconciliation(con, billing_month, parameters),
        audit=_Audit(
            inputs=_audit_inputs(inputs, quality),
            catalog_version=catalog_version,
            table_rows=_table_rows(con, billing_month),
        ),
    )
    currency = queries.report_currency(con, billing_month, parameters)

    wb, job_lines = _build_workbook(billing_month, parameters, currency, data)
    package = workbook_bytes(wb, period_end(billing_month), [job_lines])
    write_atomically(package, out_path)

    tenant_amounts = (t.amount for t in data.tenants if t.amount is not None)
    return {
        "total_amount": sum((c.amount for c in data.charges), Decimal("0.00")),
        "tenant_total_amount": sum(tenant_amounts, Decimal("0.00")),
        "charge_lines": len(data.charges),
        "job_lines": job_lines.count,
        "tenants": len(data.tenants),
        "rejects": int(data.rejects_total),
        "rejects_shown": len(data.rejects),
        "currency": currency,
        "path": str(out_path),
        "sha256": hashlib.sha256(package).hexdigest(),
    }


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


@dataclass(frozen=True)
class _Audit:
    inputs: list[tuple]  # file, cluster, format, sha256, read, loaded, rejected, folded
    catalog_version: str | None
    table_rows: list[tuple[str, int | None]]  # None: the table does not exist


@dataclass(frozen=True)
class _Month:
    """The rows of one month the workbook shows (named rows of sql/reports/*.sql); the
    governance marts' are None where the warehouse has no such table."""

    charges: list[Any]
    tenants: list[Any]
    jobs: RowsQuery
    buckets: list[Any]
    quality: list[Any]
    rejects: list[Any]
    rejects_total: int
    reconciliation: _Reconciliation
    audit: _Audit
    quota: list[Any] | None = None
    drift: list[Any] | None = None
    queue: list[Any] | None = None
    submissions: list[Any] | None = None
    failures: list[Any] | None = None
    availability: list[Any] | None = None
    incidents: list[Any] | None = None
    capacity: list[Any] | None = None
    daily: list[Any] | None = None
    cost_views: list[Any] | None = None
    users: list[Any] | None = None
    trends: list[Any] | None = None
    forecast: list[Any] | None = None
    telemetry: list[ClusterTelemetry] | None = None


def _reconciliation(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date, parameters: Mapping[str, str]
) -> _Reconciliation:
    amounts = {
        (r.cluster, r.charge_type): r.amount
        for r in queries.fetch(con, "amount_by_charge_type", billing_month=billing_month)
    }
    pools = queries.fetch_if_table(con, "cost_pools", "cluster_cost", billing_month=billing_month)
    costs = {r.cluster: r.amount for r in pools or []}
    full = bool(costs) or parameters.get("cost_mode") == "full_recovery"
    return _Reconciliation(full_recovery=full, amounts=amounts, costs=costs)


def _table_rows(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date
) -> list[tuple[str, int | None]]:
    return [
        (
            table,
            queries.month_rows(con, table, billing_month)
            if queries.table_exists(con, table)
            else None,
        )
        for table in AUDIT_TABLES
    ]


def _audit_inputs(inputs: Sequence[Mapping[str, Any]], quality: list[Any]) -> list[tuple]:
    """The landing files with their checksums, joined to the data_quality counts by name.

    A file counted in data_quality but not passed in is listed without a checksum, and the
    other way round without counts: the sheet never hides either side.
    """
    counts = {
        q.subject: (q.cluster, q.rows_read, q.rows_loaded, q.rows_rejected, q.duplicates_folded)
        for q in quality
        if q.category == "file"
    }
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


# --------------------------------------------------------------------------------------------
# Workbook layout
# --------------------------------------------------------------------------------------------


def _build_workbook(
    billing_month: dt.date, parameters: dict[str, str], currency: str, data: _Month
) -> tuple[Workbook, StreamedRows]:
    """The workbook, and its job lines to stream into the package (`workbook_bytes`)."""
    wb = Workbook()
    add_named_styles(wb)
    summary = wb.active
    summary.title = SHEET_NAMES[0]
    sheets = {name: wb.create_sheet(name) for name in SHEET_NAMES[1:]}

    charges_total_cell = write_charges(sheets["Charges"], data.charges, currency)
    _write_summary(summary, billing_month, parameters, currency, data, charges_total_cell)
    job_lines = write_job_lines(sheets["Job lines"], data.jobs, currency)
    _write_waste(sheets["Waste"], data.buckets, currency)
    _write_waste_by_model(sheets["Waste by model"], data.buckets)
    _write_waste_by_tenant(sheets["Waste by tenant"], data.tenants)
    _write_cost_views(sheets["Cost views"], data.cost_views, currency)
    _write_users(sheets["Users"], data.users)
    _write_quota(sheets["Quota"], data.quota)
    _write_budget(sheets["Budget"], data.tenants, currency)
    _write_quota_drift(sheets["Quota drift"], data.drift)
    _write_queue(sheets["Queue & Service"], data.queue)
    _write_submissions(sheets["Submissions"], data.submissions)
    _write_failures(sheets["Failures"], data.failures)
    _write_reliability(sheets["Reliability"], data.availability)
    _write_incidents(sheets["Incidents"], data.incidents)
    _write_capacity(sheets["Capacity"], data.capacity)
    _write_capacity_by_day(sheets["Capacity by day"], data.daily)
    _write_capacity_by_pool(sheets["Capacity by pool"], data.daily)
    _write_trends(sheets["Trends"], data.trends, data.forecast, currency)
    _write_data_quality(sheets["Data quality"], data.quality, data.telemetry)
    _write_rejects(sheets["Rejected rows"], data.rejects, data.rejects_total)
    _write_definitions(sheets["Definitions"], parameters, data.telemetry)
    _write_audit(sheets["Audit"], billing_month, parameters, data.audit)

    set_print_setup(wb, f"GPU chargeback — {month_name(billing_month)} ({billing_month:%Y-%m})")
    # openpyxl stores formulas without cached results: ask Excel/LibreOffice to compute them.
    wb.calculation.fullCalcOnLoad = True
    wb.properties.creator = "gpu-chargeback"
    wb.properties.title = f"GPU chargeback {billing_month:%Y-%m}"
    return wb, job_lines


def _write_summary(
    ws: Worksheet,
    billing_month: dt.date,
    parameters: Mapping[str, str],
    currency: str,
    data: _Month,
    charges_total_cell: str,
) -> None:
    charges = data.charges
    timezone = parameters.get("billing_timezone") or "UTC"
    capacity_rows = [b for b in data.buckets if b.bucket == "capacity"]

    def sections_above_the_tenants(ws: Worksheet, last: int) -> int:
        # the tenants come last (as many rows as the catalog has tenants); these, each from a
        # new printed page, above them
        last = _write_charge_type_reconciliation(ws, last, data.reconciliation, charges_total_cell)
        return _write_waste_in_money(ws, last, data.buckets)

    reconciled = write_summary(
        ws,
        Summary(
            title=(
                f"GPU chargeback — {month_name(billing_month)} ({billing_month:%Y-%m}), "
                f"amounts in {currency}"
            ),
            subtitle=(
                f"Billing period [{billing_month:%Y-%m-%d}, {period_end(billing_month):%Y-%m-%d})"
                f" in {timezone}; figures are defined on the Definitions sheet, below the "
                "run's parameters."
            ),
            currency=currency,
            identity_cols=[Column("Tenant"), Column("Department"), Column("Cost center")],
            tenants=[
                SummaryTenant(
                    identity=(t.tenant_name or t.tenant_id, t.department, t.cost_center),
                    allocated_gpu_hours=t.allocated_gpu_hours,
                    productive_gpu_hours=t.productive_gpu_hours,
                    amount=t.amount,
                    budget=t.budget,
                    budget_status=t.budget_status,
                )
                for t in data.tenants
            ],
            total_charge=sum((c.amount for c in charges), Decimal("0.00")),
            shows_capacity=True,
            capacity_gpu_hours=(sum(b.gpu_hours for b in capacity_rows) if capacity_rows else None),
        ),
        charges_total_cell,
        sections_above_the_tenants,
    )
    # a closed month re-run: what was issued, the corrections since, and the net billed now
    issued = sum((c.amount for c in charges if c.charge_class != "Correction"), Decimal("0.00"))
    corrections = sum(
        (c.amount for c in charges if c.charge_class == "Correction"), Decimal("0.00")
    )
    issued_row = reconciled.difference + 1
    corrections_row, net_row = issued_row + 1, issued_row + 2
    set_text(ws.cell(row=issued_row, column=1), "Issued lines (charge class empty)")
    ws.cell(row=issued_row, column=5, value=issued).style = "cb money"
    set_text(ws.cell(row=corrections_row, column=1), "Corrections (charge class Correction)")
    ws.cell(row=corrections_row, column=5, value=corrections).style = "cb money"
    set_text(ws.cell(row=net_row, column=1), "Net (issued + corrections)")
    net = ws.cell(row=net_row, column=5, value=f"=E{issued_row}+E{corrections_row}")
    net.style = "cb total money"


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
    ws: Worksheet, last_row: int, reconciliation: _Reconciliation, charges_total_cell: str
) -> int:
    """Below `last_row`, the month's charges by charge type, all clusters in column E (a SUM
    over the cluster columns F...) and one column per cluster; their total ties to the Charges
    TOTAL (`charges_total_cell`) and, in full_recovery, to each cluster's capacity cost.
    Returns the last row used."""
    clusters = reconciliation.clusters
    header_row = section_below(ws, last_row, "Reconciliation by charge type")
    # laid out cell by cell, printed like a table: from a new page
    register_table(ws, header_row)
    set_text(ws.cell(row=header_row, column=1), "Figure").style = "cb header"
    set_text(ws.cell(row=header_row, column=5), "All clusters").style = "cb header"
    for offset, cluster in enumerate(clusters):
        set_text(ws.cell(row=header_row, column=6 + offset), cluster).style = "cb header"
    last_letter = get_column_letter(5 + len(clusters))

    def figure_row(row: int, label: str, values: dict[str, Decimal]) -> None:
        set_text(ws.cell(row=row, column=1), label)
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
    set_text(ws.cell(row=total_row, column=1), "Total by charge type").style = "cb bold"
    for column in range(5, 6 + len(clusters)):
        letter = get_column_letter(column)
        formula = f"=SUM({letter}{first}:{letter}{total_row - 1})"
        ws.cell(row=total_row, column=column, value=formula).style = "cb total money"
    diff_row = total_row + 1
    set_text(ws.cell(row=diff_row, column=1), "Difference (total − Charges TOTAL, must be 0)")
    diff = ws.cell(row=diff_row, column=5, value=f"=E{total_row}-{charges_total_cell}")
    diff.style = "cb total money"
    if cost_row is None:
        return diff_row
    cost_diff_row = diff_row + 1
    set_text(ws.cell(row=cost_diff_row, column=1), "Difference (total − capacity cost, must be 0)")
    for column in range(5, 6 + len(clusters)):
        letter = get_column_letter(column)
        formula = f"={letter}{total_row}-{letter}{cost_row}"
        ws.cell(row=cost_diff_row, column=column, value=formula).style = "cb total money"
    return cost_diff_row


# The buckets of capacity not used productively, in the taxonomy order (BUCKET_ORDER)
WASTE_BUCKETS = tuple(b for b in BUCKET_ORDER if b not in ("capacity", "productive"))


def _write_waste_in_money(ws: Worksheet, last_row: int, buckets: list[Any]) -> int:
    """Below `last_row`, a table per currency of the month's waste buckets in GPU-hours and
    money, each summed over the clusters and GPU models (capacity_buckets' amount: at the
    pool's charged rate, or its cost in full_recovery), and their TOTAL; returns the last row
    used."""
    totals: dict[str | None, dict[str, list[Any]]] = {}  # currency -> bucket -> [hours, amount]
    for b in buckets:
        if b.bucket in ("capacity", "productive"):
            continue
        hours, amount = totals.setdefault(b.currency, {}).setdefault(b.bucket, [0.0, None])
        totals[b.currency][b.bucket] = [
            hours + (b.gpu_hours or 0.0),
            amount if b.amount is None else (amount or Decimal("0.00")) + b.amount,
        ]
    last = last_row
    currencies = sorted(totals, key=lambda c: (c is None, c or ""))
    for index, currency in enumerate(currencies, start=1):
        by_bucket = totals[currency]
        order = [b for b in WASTE_BUCKETS if b in by_bucket] + sorted(
            set(by_bucket) - set(WASTE_BUCKETS)
        )
        label = currency or "no currency"
        header_row = section_below(ws, last, f"Waste in money ({label}), all clusters")
        cols = [
            Column("Bucket"),
            Column("GPU-hours", "hours"),
            Column(f"Amount ({label})", "money"),
        ]
        rows = [(b, *by_bucket[b]) for b in order]
        name = "WasteInMoney" if index == 1 else f"WasteInMoney{index}"
        last = write_table(ws, header_row, cols, rows, table_name=name)
        write_total_row(ws, last + 1, header_row + 1, last, {2: "hours", 3: "money"}, "Waste total")
        last += 1
    return last


def _write_waste(ws: Worksheet, buckets: list[Any], currency: str) -> None:
    """Each cluster × GPU model's capacity row, then its buckets with their share of it."""
    cols = [
        Column("Cluster"),
        Column("GPU model"),
        Column("Bucket"),
        Column("GPU-hours", "hours"),
        Column("Share of capacity", "share"),
        # the bucket's GPU-hours in money (capacity_buckets.amount: at the pool's charged
        # rate, or its cost in full_recovery)
        Column(f"Amount ({currency})", "money"),
    ]
    # the sheet row and the hours of each cluster × GPU model block's capacity row
    capacity_of = {
        (b.cluster, b.gpu_model): (row, b.gpu_hours)
        for row, b in enumerate(buckets, start=2)
        if b.bucket == "capacity"
    }
    rows = []
    for row, b in enumerate(buckets, start=2):
        capacity_row, capacity = capacity_of.get((b.cluster, b.gpu_model), (None, None))
        share = f"=D{row}/D{capacity_row}" if capacity and b.gpu_hours is not None else None
        rows.append((b.cluster, b.gpu_model, b.bucket, b.gpu_hours, share, b.amount))
    _write_mart_sheet(ws, "capacity_buckets", cols, rows)


def _write_waste_by_tenant(ws: Worksheet, tenants: list[Any]) -> None:
    cols = [
        Column("Tenant ID"),
        Column("Tenant"),
        Column("Department"),
        Column("Allocated GPU-hours", "hours"),
        *BUCKET_HOURS_COLUMNS,
        Column("Productive share of allocated", "share"),
    ]
    rows = []
    for r, t in enumerate(sorted(tenants, key=lambda t: t.tenant_id), start=2):
        rows.append((
            t.tenant_id, t.tenant_name, t.department, t.allocated_gpu_hours,
            t.productive_gpu_hours, t.idle_gpu_hours, t.zombie_gpu_hours,
            t.failed_job_gpu_hours, t.failed_infra_gpu_hours, t.unmeasured_gpu_hours,
            f"=E{r}/D{r}" if t.allocated_gpu_hours else None,
        ))  # fmt: skip
    _write_mart_sheet(ws, "tenant_month", cols, rows)


def _write_waste_by_model(ws: Worksheet, buckets: list[Any]) -> None:
    """The buckets' stacked chart on top, then its data: a cluster × GPU model matrix."""
    shown = BUCKET_ORDER[1:]  # capacity is the sum of the others, not a slice of the bar
    hours: dict[tuple[str, str], dict[str, float]] = {}
    for b in buckets:
        hours.setdefault((b.cluster, b.gpu_model), {})[b.bucket] = b.gpu_hours
    cols = [Column("Cluster × GPU model"), *(Column(b, "hours") for b in shown)]
    rows = [
        (f"{cluster} × {model}", *(by_bucket.get(b) for b in shown))
        for (cluster, model), by_bucket in hours.items()
    ]
    header_row = section_below_chart(ws, "Waste by cluster × GPU model (GPU-hours)", bool(rows))
    chart = BarChart()
    chart.type = "col"
    chart.grouping = "stacked"
    chart.overlap = 100
    style_chart(chart, "Waste by bucket", "GPU-hours")
    _write_charted_table(ws, header_row, cols, rows, "WasteByModel", chart, series=(2, len(cols)))


def _write_cost_views(ws: Worksheet, views: list[Any] | None, currency: str) -> None:
    """Per tenant, its jobs' allocation-based charge beside the utilisation-based one (a
    showback: the bill is the Charges sheet); the difference is their idle and zombie time.
    Last, what its failed runs cost it (their time stays in both views)."""
    _write_laid_out_sheet(ws, "cost_views", views, currency=currency)


def _write_users(ws: Worksheet, users: list[Any] | None) -> None:
    """Per tenant and user, the GPU time of the user's jobs, its waste, memory use and energy
    (user_efficiency: the energy of the power-measured GPU-hours, empty where none), the most
    idle + zombie GPU-hours first; Notice says who is in the month's notices CSV."""
    _write_laid_out_sheet(ws, "user_efficiency", users)


def _write_quota(ws: Worksheet, quota: list[Any] | None) -> None:
    """Quota compliance per tenant × pool, a breach in red."""
    _write_laid_out_sheet(ws, "quota_compliance", quota)
    breach_column = table_layout("quota_compliance").column_of("breach")
    for row, q in enumerate(quota or [], start=2):
        if q.breach:
            ws.cell(row=row, column=breach_column).fill = OVER_FILL


def _write_budget(ws: Worksheet, tenants: list[Any], currency: str) -> None:
    """The spend vs budget chart on top, then its data: each tenant's amount beside its
    budget, filled by its budget status."""
    cols = [
        Column("Tenant ID"),
        Column("Tenant"),
        Column(f"Amount ({currency})", "money"),
        Column(f"Budget ({currency})", "money"),
        Column("Budget used", "share"),
        Column("Budget status"),
    ]
    header_row = section_below_chart(ws, f"Budget vs actual ({currency})", bool(tenants))
    rows = []
    for r, t in enumerate(tenants, start=header_row + 1):
        used = f"=C{r}/D{r}" if t.amount is not None and t.budget else None
        rows.append((t.tenant_id, t.tenant_name or t.tenant_id, t.amount, t.budget, used,
                     t.budget_status))  # fmt: skip
    chart = BarChart()
    chart.type = "col"
    chart.grouping = "clustered"
    style_chart(chart, "Spend vs budget", currency or "amount")
    _write_charted_table(
        ws, header_row, cols, rows, "BudgetVsActual", chart, series=(3, 4), categories=2
    )
    fill_status_rows(ws, header_row + 1, [t.budget_status for t in tenants], len(cols))


def _write_charted_table(
    ws: Worksheet,
    header_row: int,
    cols: list[Column],
    rows: list[tuple],
    table_name: str,
    chart: BarChart | LineChart,
    series: tuple[int, int],
    categories: int = 1,
) -> None:
    """The table of a sheet headed by its chart: `rows` under `cols` from `header_row`
    (section_below_chart), the sheet's widths fitted to it, and `chart` (styled) at the top
    plotting its columns `series` over column `categories` (add_table_chart); no chart when
    the table has no rows."""
    last = write_table(ws, header_row, cols, rows, table_name=table_name)
    apply_widths(ws, fit_widths({}, cols, rows))
    if rows:
        add_table_chart(ws, chart, 1, header_row, last, series=series, categories=categories)


def _write_mart_sheet(
    ws: Worksheet,
    table: str,
    cols: list[Column],
    rows: list[Any] | None,
    title: str | None = None,
    totals: Mapping[int, str] | None = None,
) -> int:
    """The sheet's one table: `rows` of the warehouse table `table` under `cols` (the header
    frozen and filtered, repeated on printed pages), below `title` if given, with a TOTAL row
    summing the `totals` columns (write_total_row); or "not available" when the warehouse has
    no `table` (rows None). Returns the table's last row: its header's when it has no rows,
    the "not available" row when there is no table."""
    header_row = 1 if title is None else section_below(ws, TOP, title)
    if rows is None:
        return not_available(ws, header_row, table)
    last = write_main_table(ws, cols, rows, header_row=header_row)
    if totals is not None:
        write_total_row(ws, last + 1, header_row + 1, last, totals)
    apply_widths(ws, fit_widths({}, cols, rows))
    return last


def _write_laid_out_sheet(
    ws: Worksheet,
    layout_name: str,
    records: list[Any] | None,
    title: str | None = None,
    currency: str = "",
) -> int:
    """The sheet's one table (_write_mart_sheet): the named rows `records` as the layout
    `layout_name` of reports/workbook_tables.yaml shows them (None: the warehouse has no such
    table). Returns the table's last row."""
    layout = table_layout(layout_name)
    rows = None if records is None else layout.rows(records)
    cols = layout.header(currency=currency)
    return _write_mart_sheet(ws, layout.table, cols, rows, title, layout.totals())


def _write_quota_drift(ws: Worksheet, drift: list[Any] | None) -> None:
    """Each disagreement between a scheduler's configured quota and the catalog's."""
    title = "Quota drift: scheduler configuration vs catalog quotas"
    last = _write_laid_out_sheet(ws, "quota_drift", drift, title)
    if drift == []:
        set_text(
            ws.cell(row=last + 1, column=1),
            "none: every configured quota agrees with the catalog",
        )


def _write_queue(ws: Worksheet, queue: list[Any] | None) -> None:
    _write_laid_out_sheet(ws, "queue_stats", queue)


def _write_submissions(ws: Worksheet, submissions: list[Any] | None) -> None:
    """What became of the jobs submitted this month, per cluster, tenant and queue (a sheet of
    its own: as long as tenants times queues, its header repeats on each printed page)."""
    title = "Submissions: what became of the jobs submitted this month"
    _write_laid_out_sheet(ws, "submission_stats", submissions, title)


_FAILURE_SECTIONS = (
    ("node", "Node", "Top nodes by failure rank", "FailuresNode"),
    ("fault_domain", "Fault domain", "Fault domains", "FailuresFaultDomain"),
    ("driver_version", "Driver version", "Driver versions", "FailuresDriver"),
    ("exit_code", "Exit code", "Exit codes (by jobs)", "FailuresExitCode"),
)


def _write_failures(ws: Worksheet, failures: list[Any] | None) -> None:
    if failures is None:
        not_available(ws, 1, "failure_stats")
        return
    layout = table_layout("failure_stats")
    widths: dict[int, int] = {}
    row = 1
    for dimension, label, title, table_name in _FAILURE_SECTIONS:
        rows = layout.rows(f for f in failures if f.dimension == dimension)
        if dimension == "node" and len(rows) > TOP_NODES_SHOWN:
            title = f"{title} (the first {TOP_NODES_SHOWN} of {len(rows)})"
            rows = rows[:TOP_NODES_SHOWN]
        section_title(ws, row, title)
        cols = layout.header(label=label)
        if row == 1:
            last = write_main_table(ws, cols, rows, header_row=2)
        else:
            last = write_table(ws, row + 1, cols, rows, table_name=table_name)
            last = max(last, row + 2)  # "(none)" under an empty header
        widths = fit_widths(widths, cols, rows)
        row = last + 3
    apply_widths(ws, widths)


def _write_reliability(ws: Worksheet, availability: list[Any] | None) -> None:
    """Availability, MTTR and MTBF per cluster, GPU model and node with incidents."""
    _write_laid_out_sheet(ws, "availability", availability)


def _write_incidents(ws: Worksheet, incidents: list[Any] | None) -> None:
    """The month's incidents one by one: outages, node failures, telemetry silences."""
    title = "Incidents: outages, node failures, telemetry silences"
    _write_laid_out_sheet(ws, "incidents", incidents, title)


def _write_capacity(ws: Worksheet, capacity: list[Any] | None) -> None:
    """Each pool's capacity verdict, the rule that gave it and the evidence behind it."""
    last = _write_laid_out_sheet(ws, "capacity_evidence", capacity)
    # the verdict and its reason are what the reader came for
    layout = table_layout("capacity_evidence")
    verdict, rule = layout.column_of("verdict"), layout.column_of("verdict_rule")
    for r in range(2, last + 1):
        ws.cell(row=r, column=verdict).font = Font(bold=True, size=12)
        ws.cell(row=r, column=rule).font = Font(bold=True)


def _write_capacity_by_day(ws: Worksheet, daily: list[Any] | None) -> None:
    """The chart of each day's allocation vs capacity, all pools together, then its data."""
    title = "Daily allocation vs capacity (all clusters and GPU models)"
    if daily is None:
        not_available(ws, section_below(ws, TOP, title), "utilization_daily")
        return
    allocated_of: dict[dt.date, float] = {}
    capacity_of: dict[dt.date, float | None] = {}  # None: no capacity known that day
    for d in daily:
        allocated_of[d.day] = allocated_of.get(d.day, 0.0) + (d.allocated_gpu_hours or 0.0)
        capacity_of.setdefault(d.day, None)
        if d.capacity_gpu_hours is not None:
            capacity_of[d.day] = (capacity_of[d.day] or 0.0) + d.capacity_gpu_hours
    cols = [
        Column("Day", "date"),
        Column("Allocated GPU-hours", "hours"),
        Column("Capacity GPU-hours", "hours"),
        Column("Allocation rate", "share"),
    ]
    header_row = section_below_chart(ws, title, bool(allocated_of))
    rows = []
    for r, (day, allocated) in enumerate(allocated_of.items(), start=header_row + 1):
        cap = capacity_of[day]
        rows.append((day, allocated, cap, f"=B{r}/C{r}" if cap else None))
    chart = LineChart()
    style_chart(chart, "Daily allocation vs capacity", "GPU-hours")
    _write_charted_table(ws, header_row, cols, rows, "DailyCapacity", chart, series=(2, 3))


def _write_capacity_by_pool(ws: Worksheet, daily: list[Any] | None) -> None:
    """Each pool's (cluster × GPU model's) allocation and capacity of each day."""
    title = "Daily allocation and capacity by cluster × GPU model"
    _write_laid_out_sheet(ws, "utilization_daily", daily, title)


def _write_trends(
    ws: Worksheet, trends: list[Any] | None, forecast: list[Any] | None, currency: str
) -> None:
    """The demand forecast, then the months side by side: allocation rate per cluster × GPU
    model and spend per tenant, each a table of months with a line chart."""
    if forecast is None or trends is None:
        not_available(ws, 1, "demand_forecast" if forecast is None else "month_trends")
        return
    layout = table_layout("demand_forecast")
    cols, rows = layout.header(), layout.rows(forecast)
    last = write_main_table(ws, cols, rows)
    widths = fit_widths({}, cols, rows)
    models = [t for t in trends if t.level == "cluster_gpu_model"]
    tenants = [t for t in trends if t.level == "tenant"]
    last = _months_by_series(
        ws, last, "Allocation rate by month (cluster × GPU model)",
        {(t.billing_month, f"{t.cluster} {t.gpu_model}"): share_of(t.allocation_rate_pct)
         for t in models},
        "share", "TrendsAllocation", "Allocation", widths,
    )  # fmt: skip
    _months_by_series(
        ws, last, f"Spend by tenant and month ({currency})",
        {(t.billing_month, t.tenant_id): t.amount for t in tenants},
        "money", "TrendsSpend", currency, widths,
    )  # fmt: skip
    apply_widths(ws, widths)


def _months_by_series(
    ws: Worksheet,
    last: int,
    title: str,
    values: dict[tuple[dt.date, str], Any],
    kind: str,
    table_name: str,
    y_title: str,
    widths: dict[int, int],
) -> int:
    """A section below row `last`: one row per month, one column per series (`values` by
    (month, series)), and its line chart below it; returns the last row it takes."""
    months = sorted({month for month, _ in values})
    series = sorted({name for _, name in values})
    cols = [Column("Month", "date"), *(Column(name, kind) for name in series)]
    rows = [(month, *(values.get((month, name)) for name in series)) for month in months]
    header_row = section_below(ws, last, title)
    last = write_table(ws, header_row, cols, rows, table_name=table_name)
    fit_widths(widths, cols, rows)  # widens the sheet's widths in place
    if not rows:
        return max(last, header_row + 1)  # "(none)" under the header
    chart = LineChart()
    style_chart(chart, title, y_title)
    return add_table_chart(ws, chart, last + 2, header_row, last, series=(2, len(cols)))


def _write_data_quality(
    ws: Worksheet, quality: list[Any], telemetry: list[ClusterTelemetry] | None
) -> None:
    """What each cluster's figures rest on (telemetry_coverage), then every data-quality
    check: last, since it is as long as the landing (its header repeats on printed pages)."""
    last, widths = _write_telemetry(ws, TOP, telemetry, {}, detailed=True)
    header_row = section_below(ws, last, "Checks: rows read, loaded and rejected per input")
    cols = [
        Column("Category"),
        Column("Cluster"),
        Column("Subject"),
        Column("Rows read", "count"),
        Column("Rows loaded", "count"),
        Column("Rows rejected", "count"),
        Column("Duplicates folded", "count"),
        Column("Value", "number"),
        Column("Detail"),
        Column("Read − loaded − rejected", "count"),
    ]
    rows = []
    for r, q in enumerate(quality, start=header_row + 1):
        # Every input row is loaded or rejected: this column shows 0 when the counts reconcile.
        counted = None not in (q.rows_read, q.rows_loaded, q.rows_rejected)
        rows.append((*q, f"=D{r}-E{r}-F{r}" if counted else None))
    last = write_table(ws, header_row, cols, rows, table_name="DataQuality")
    if any(q.category == "telemetry_labels" for q in quality):
        note = (
            "telemetry_labels: Value = GPU-hours of samples whose DCGM hpc_job / pod / "
            "namespace labels agree with the scheduler (agrees) or not (the other kinds); per "
            "GPU and label in the warehouse table telemetry_label_checks."
        )
        set_text(ws.cell(row=max(last, header_row + 1) + 2, column=1), note)
    apply_widths(ws, fit_widths(widths, cols, rows))


def _write_rejects(ws: Worksheet, rejects: list[Any], rejects_total: int) -> None:
    """The rows set aside, with file, line, reason and the raw text (a sheet of its own: up
    to REJECTS_SHOWN_MAX rows, under its header on each printed page)."""
    if rejects_total > len(rejects):
        title = (
            f"Rejected rows: showing the first {len(rejects):,} of {rejects_total:,} "
            "(capped; the full list is in the warehouse table rejects)"
        )
    else:
        title = f"Rejected rows: {rejects_total:,}"
    last = _write_laid_out_sheet(ws, "rejects", rejects, title)
    if not rejects:
        set_text(ws.cell(row=last + 1, column=1), "(none)")


def _write_definitions(
    ws: Worksheet, parameters: Mapping[str, str], telemetry: list[ClusterTelemetry] | None
) -> None:
    """The run's parameters, what the figures rest on per cluster, then every figure's
    meaning (last: it runs over several printed pages, under its header on each)."""
    last = write_parameters(ws, parameters)
    last, widths = _write_telemetry(ws, last, telemetry, current_widths(ws, 4), detailed=False)
    apply_widths(ws, widths)
    write_figure_definitions(ws, last, DEFINITIONS + GOVERNANCE_DEFINITIONS)


def _write_telemetry(
    ws: Worksheet,
    last: int,
    telemetry: list[ClusterTelemetry] | None,
    widths: dict[int, int],
    detailed: bool,
) -> tuple[int, dict[int, int]]:
    """The telemetry_coverage section below row `last`: per cluster its utilisation metric(s),
    the observed sampling interval and the measured share (`detailed`: with the allocated and
    measured GPU-hours too); returns the last row it takes and the widths widened to fit."""
    header_row = section_below(ws, last, TELEMETRY_TITLE)
    if telemetry is None:
        return not_available(ws, header_row, "telemetry_coverage"), widths
    hours = [Column("Allocated GPU-hours", "hours"), Column("Measured GPU-hours", "hours")]
    cols = [
        Column("Cluster"),
        Column("Utilisation metric(s)"),
        Column("Observed interval"),
        *(hours if detailed else []),
        Column("Measured share", "share"),
    ]
    rows = [
        (t.cluster, t.metrics, t.interval,
         *((t.allocated_gpu_hours, t.measured_gpu_hours) if detailed else ()), t.measured_share)
        for t in telemetry
    ]  # fmt: skip
    table_name = "TelemetryCoverage" if detailed else "TelemetryPerCluster"
    last = write_table(ws, header_row, cols, rows, table_name=table_name)
    return max(last, header_row + 1), fit_widths(widths, cols, rows)


def _write_audit(
    ws: Worksheet, billing_month: dt.date, parameters: Mapping[str, str], audit: _Audit
) -> None:
    """The run's identity, then the month's rows of each warehouse table, then the input files
    with their checksums and counts."""
    item_cols = [Column("Item"), Column("Value")]
    input_cols = [
        Column("File"),
        Column("Cluster"),
        Column("Format"),
        Column("SHA-256", width=66),
        Column("Rows read", "count"),
        Column("Rows loaded", "count"),
        Column("Rows rejected", "count"),
        Column("Duplicates folded", "count"),
    ]
    table_cols = [Column("Table"), Column("Rows", "count")]
    items = [
        ("Billing month", f"{billing_month:%Y-%m}"),
        ("Code version", parameters.get("code_version") or "unknown"),
        ("Catalog version (sha256 over the catalog files)", audit.catalog_version or "unknown"),
        # by name: the same inputs in other folders give the same workbook
        ("Catalog folder (name)", parameters.get("catalog_dir") or ""),
        ("Landing folder (name)", parameters.get("landing_dir") or ""),
    ]
    table_rows = [(t, "not available" if n is None else n) for t, n in audit.table_rows]

    tables_row = section_below(
        ws,
        write_main_table(ws, item_cols, items),
        f"Warehouse tables: rows of {billing_month:%Y-%m}",
    )
    tables_last = write_table(ws, tables_row, table_cols, table_rows, table_name="TableRows")
    # last: the one table as long as the landing is (its header repeats on its pages)
    inputs_row = section_below(ws, max(tables_last, tables_row + 1), "Input files")
    write_table(ws, inputs_row, input_cols, audit.inputs, "InputFiles")
    widths = fit_widths({}, item_cols, items)
    widths = fit_widths(widths, input_cols, audit.inputs)
    apply_widths(ws, fit_widths(widths, table_cols, table_rows))
