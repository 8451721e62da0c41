"""Department reports: one HTML page and one workbook per department for its business owner.

`<reports>/YYYY-MM/departments/<slug>.html` is a self-contained page (inline CSS and SVG, no
script, no external reference) readable on a phone and printable to PDF;
`<reports>/YYYY-MM/departments/<slug>.xlsx` holds the department's Summary, Charges, Job lines
and Definitions, built with the finance workbook's pieces. Both are reproducible: the same
tables give the same bytes, and both are written to a temporary name and renamed.

Membership: a charge line belongs to the department it carries (issued lines keep the
department they were issued under); a tenant and its jobs belong to the department of the
tenant in `tenant_month`. A tenant's amount is the sum of the department's charge lines of that
tenant, so the page and the workbook tie out to the department's charge lines to the cent.

The governance marts are optional: without `utilization_daily` the daily chart counts each
job's allocated GPU-hours of the month on the day it started (see `DAILY_FALLBACK`); without
`quota_compliance` the quota flags are those of `tenant_month` and the quota section is left out.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import pathlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from typing import Any

import duckdb
import jinja2
from openpyxl import Workbook
from openpyxl.worksheet.worksheet import Worksheet

from pipelines.defs.reports.workbook import (
    _MONTH_NAMES,
    _OVER_FILL,
    _WARN_FILL,
    DEFINITIONS,
    JOB_LINES_ORDER,
    RowsQuery,
    _add_named_styles,
    _apply_widths,
    _Col,
    _fit_widths,
    _fixed_timestamp,
    _ref,
    _serialise,
    _set_text,
    _workbook_currency,
    _write_atomically,
    _write_charges,
    _write_definitions,
    _write_job_lines,
    _write_table,
    _write_total_row,
)
from pipelines.months import BillingMonth

TEMPLATES_DIR = pathlib.Path(__file__).resolve().parents[3] / "reports" / "templates"
TEMPLATE_NAME = "department.html"
WORKBOOK_SHEETS = ("Summary", "Charges", "Job lines", "Definitions")
NO_DEPARTMENT = "(no department)"
TOP_JOBS = 10
# Waste buckets of a tenant's allocated time, in the taxonomy order of DESIGN.md.
BUCKETS = ("productive", "idle", "zombie", "failed_job", "failed_infra", "unmeasured")
BUCKET_COLOURS = {
    "productive": "#2e7d32",
    "idle": "#f9a825",
    "zombie": "#c62828",
    "failed_job": "#6a1b9a",
    "failed_infra": "#1565c0",
    "unmeasured": "#9e9e9e",
}
STATUS_COLOURS = {"ok": "#2e7d32", "warn": "#f9a825", "over": "#c62828"}
NO_STATUS_COLOUR = "#757575"
QUOTA_FLAGS = ("breach", "idle_quota", "chronic_borrowing")
DAILY_FROM_MART = (
    "Allocated GPU-hours of the department's tenants per day, from utilization_daily: exact "
    "GPU time split at day boundaries (24-hour days from the start of the billing period)."
)
DAILY_FALLBACK = (
    "utilization_daily was not available for the month: each job's allocated GPU-hours in "
    "the month are counted on the day the job started (on the first day for jobs started "
    "before the month), so long jobs show as one tall bar rather than spread over the days "
    "they ran."
)

# SVG geometry, in viewBox units; the page scales the charts to its width.
_CHART_WIDTH = 400
_BAR_LABEL_GAP = 14
_BAR_HEIGHT = 12


@dataclass(frozen=True)
class Department:
    """A department of the month: `name` as in the marts ('' when none), its file slug."""

    name: str
    slug: str

    @property
    def label(self) -> str:
        return self.name or NO_DEPARTMENT


# --------------------------------------------------------------------------------------------
# Report queries: small selects on the public marts, month and department always bound.
# --------------------------------------------------------------------------------------------

_DEPARTMENTS_SQL = """
select coalesce(department, '') as department from tenant_month where billing_month = $1
union
select coalesce(department, '') from charge_lines where billing_month = $1
order by department
"""

_CHARGES_SQL = """
select tenant_id, tenant_name, department, cost_center, cluster, gpu_model, charge_category,
       charge_class, charge_description, gpu_hours, unit_price, amount, currency
from charge_lines
where billing_month = $1 and coalesce(department, '') = $2
order by tenant_id, cluster, gpu_model, charge_category, charge_class nulls first,
         charge_description, unit_price, amount, gpu_hours
"""

# Tenants of the department (tenant_month) plus any tenant only its charge lines name.
_TENANTS_SQL = """
with charged as (
    select tenant_id, any_value(tenant_name order by tenant_name) as tenant_name,
           any_value(cost_center order by cost_center) as cost_center,
           sum(amount) as amount
    from charge_lines
    where billing_month = $1 and coalesce(department, '') = $2
    group by tenant_id
),

members as (
    select * from tenant_month where billing_month = $1 and coalesce(department, '') = $2
),

final as (
    select
        coalesce(m.tenant_id, c.tenant_id) as tenant_id,
        coalesce(m.tenant_name, c.tenant_name, coalesce(m.tenant_id, c.tenant_id)) as tenant_name,
        coalesce(m.cost_center, c.cost_center) as cost_center,
        m.owner,
        coalesce(m.jobs, 0) as jobs,
        coalesce(m.allocated_gpu_hours, 0) as allocated_gpu_hours,
        coalesce(m.productive_gpu_hours, 0) as productive_gpu_hours,
        coalesce(m.idle_gpu_hours, 0) as idle_gpu_hours,
        coalesce(m.zombie_gpu_hours, 0) as zombie_gpu_hours,
        coalesce(m.failed_job_gpu_hours, 0) as failed_job_gpu_hours,
        coalesce(m.failed_infra_gpu_hours, 0) as failed_infra_gpu_hours,
        coalesce(m.unmeasured_gpu_hours, 0) as unmeasured_gpu_hours,
        m.mean_util_pct,
        coalesce(c.amount, 0)::decimal(18, 2) as amount,
        m.budget,
        coalesce(m.budget_status, 'no budget') as budget_status,
        coalesce(m.quota_flags, '') as quota_flags
    from members as m
    full join charged as c using (tenant_id)
)

select * from final
order by amount desc, tenant_id
"""

_JOBS_SQL = """
select j.tenant_id, j.cluster, j.job_id, j.account, j."user", j.queue, j.gpu_model, j.state,
       j.gpus, j.submit_at, j.start_at, j.end_at, j.allocated_gpu_hours, j.measured_gpu_hours,
       j.mean_util_pct, j.productive_gpu_hours, j.idle_gpu_hours, j.zombie_gpu_hours,
       j.failed_job_gpu_hours, j.failed_infra_gpu_hours, j.unmeasured_gpu_hours, j.amount,
       j.currency, j.billing_month
from job_usage as j
join tenant_month as t on t.billing_month = j.billing_month and t.tenant_id = j.tenant_id
where j.billing_month = $1 and coalesce(t.department, '') = $2
"""

_TOP_JOBS_SQL = """
select j.tenant_id, t.tenant_name, j.cluster, j.job_id, j."user", j.gpu_model, j.state, j.gpus,
       j.start_at, j.end_at, j.allocated_gpu_hours, j.mean_util_pct, j.idle_gpu_hours,
       j.zombie_gpu_hours, coalesce(j.idle_gpu_hours, 0) + coalesce(j.zombie_gpu_hours, 0)
           as wasted_gpu_hours
from job_usage as j
join tenant_month as t on t.billing_month = j.billing_month and t.tenant_id = j.tenant_id
where j.billing_month = $1 and coalesce(t.department, '') = $2
    and coalesce(j.idle_gpu_hours, 0) + coalesce(j.zombie_gpu_hours, 0) > 0
order by wasted_gpu_hours desc, j.tenant_id, j.cluster, j.job_id
limit $3
"""

# The daily hours are summed as whole GPU units (1/420 GPU-ms, 1,512,000,000 an hour; as the
# gpu_units macro does): a sum of integers is exact whatever order threads add the rows in, a sum
# of doubles is not, and the same month must give the same page.
_DAILY_FROM_MART_SQL = """
select u.day,
       sum(round(u.allocated_gpu_hours * 1512000000)::hugeint) / 1512000000.0
           as allocated_gpu_hours
from utilization_daily as u
join tenant_month as t on t.billing_month = u.billing_month and t.tenant_id = u.tenant_id
where u.billing_month = $1 and u.level = 'tenant' and coalesce(t.department, '') = $2
group by u.day
order by u.day
"""

# Same day convention as utilization_daily: 24-hour days from the start of the period.
_DAILY_FROM_JOBS_SQL = """
select
    $1::date + ((epoch_ms(greatest(j.start_at, $3::timestamp)) - epoch_ms($3::timestamp))
                // 86400000)::int as day,
    sum(round(j.allocated_gpu_hours * 1512000000)::hugeint) / 1512000000.0 as allocated_gpu_hours
from job_usage as j
join tenant_month as t on t.billing_month = j.billing_month and t.tenant_id = j.tenant_id
where j.billing_month = $1 and coalesce(t.department, '') = $2 and j.start_at is not null
    and j.allocated_gpu_hours > 0
group by all
order by day
"""

_QUOTA_SQL = """
select q.tenant_id, t.tenant_name, q.pool, q.has_quota, q.guaranteed_gpus, q.limit_gpus,
       q.mean_gpus, q.peak_gpus, q.used_gpu_hours, q.borrowed_gpu_hours,
       q.minutes_above_limit, q.quota_use_pct, q.breach, q.idle_quota, q.chronic_borrowing
from quota_compliance as q
join tenant_month as t on t.billing_month = q.billing_month and t.tenant_id = q.tenant_id
where q.billing_month = $1 and coalesce(t.department, '') = $2
order by q.tenant_id, q.pool
"""

_TABLE_EXISTS_SQL = """
select count(*) > 0 from duckdb_tables()
where table_name = ? and schema_name = current_schema() and database_name = current_database()
"""


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


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
        _write_atomically(page.encode("utf-8"), html_path)
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


def departments(con: duckdb.DuckDBPyConnection, billing_month: dt.date) -> list[Department]:
    """The departments of the month's tenants and charge lines, each with a unique slug."""
    names = [row[0] for row in con.execute(_DEPARTMENTS_SQL, [billing_month]).fetchall()]
    slugs = department_slugs(names)
    return [Department(name, slugs[name]) for name in names]


def slugify(name: str) -> str:
    """A file name stem: ASCII letters and digits joined by '-', at most 60 characters."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")[:60].strip("-")
    return slug or "department"


def department_slugs(names: Sequence[str]) -> dict[str, str]:
    """Slug of each department name; names whose slugs collide get a hash of the name."""
    base = {name: slugify(name or "no-department") for name in names}
    taken: dict[str, int] = {}
    for slug in base.values():
        taken[slug] = taken.get(slug, 0) + 1
    return {
        name: slug
        if taken[slug] == 1
        else f"{slug}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"
        for name, slug in base.items()
    }


def render_department_page(
    con: duckdb.DuckDBPyConnection,
    month: BillingMonth,
    department: Department,
    parameters: dict[str, str],
) -> str:
    """The HTML page of one department and month (a str; the caller writes it)."""
    key = [month.first_day, department.name]
    currency = _workbook_currency(con, month.first_day, parameters)
    tenants = _fetch_dicts(con, _TENANTS_SQL, key)
    top_jobs = _fetch_dicts(con, _TOP_JOBS_SQL, [*key, TOP_JOBS])
    has_quota = _has_month(con, "quota_compliance", month.first_day)
    quota_rows = _fetch_dicts(con, _QUOTA_SQL, key) if has_quota else []
    sources = ["tenant_month", "charge_lines", "job_usage"]
    if _has_month(con, "utilization_daily", month.first_day):
        daily_rows = con.execute(_DAILY_FROM_MART_SQL, key).fetchall()
        daily_source = DAILY_FROM_MART
        sources.append("utilization_daily")
    else:
        daily_rows = con.execute(_DAILY_FROM_JOBS_SQL, [*key, month.start]).fetchall()
        daily_source = DAILY_FALLBACK

    flags_of = _quota_flags(quota_rows) if has_quota else None
    for t in tenants:
        allocated = t["allocated_gpu_hours"] or 0.0
        t["productive_share"] = t["productive_gpu_hours"] / allocated if allocated else None
        t["wasted_gpu_hours"] = (t["idle_gpu_hours"] or 0.0) + (t["zombie_gpu_hours"] or 0.0)
        if flags_of is not None:
            t["flags"] = flags_of.get(t["tenant_id"], [])
        else:
            t["flags"] = [f.strip() for f in t["quota_flags"].split(",") if f.strip()]

    total_amount = sum((t["amount"] for t in tenants), Decimal("0.00"))
    budgets = [t["budget"] for t in tenants if t["budget"] is not None]
    allocated = sum(t["allocated_gpu_hours"] for t in tenants)
    productive = sum(t["productive_gpu_hours"] for t in tenants)
    bucket_totals = {b: sum(t[f"{b}_gpu_hours"] for t in tenants) for b in BUCKETS}
    days = _days_of(month, daily_rows)

    context = {
        "department": department.label,
        "month_label": month.label,
        "month_name": f"{_MONTH_NAMES[month.first_day.month - 1]} {month.first_day.year}",
        "period_start": f"{month.first_day:%Y-%m-%d}",
        "period_end": f"{_fixed_timestamp(month.first_day):%Y-%m-%d}",
        "timezone": parameters.get("billing_timezone") or "UTC",
        "currency": currency,
        "code_version": parameters.get("code_version", ""),
        "kpis": [
            (f"Total charge ({currency})", _money(total_amount)),
            (
                f"Budget ({currency})",
                _money(sum(budgets, Decimal("0.00"))) if budgets else "no budget",
            ),
            ("Allocated GPU-hours", _hours(allocated)),
            ("Productive share", _share(productive / allocated if allocated else None)),
            (
                "Idle + zombie GPU-hours",
                _hours(bucket_totals["idle"] + bucket_totals["zombie"]),
            ),
            ("Tenants", str(len(tenants))),
        ],
        "tenants": [_tenant_view(t) for t in tenants],
        "total": {
            "amount": _money(total_amount),
            "budget": _money(sum(budgets, Decimal("0.00"))) if budgets else "",
            "allocated": _hours(allocated),
            "productive_share": _share(productive / allocated if allocated else None),
            "zombie": _hours(bucket_totals["zombie"]),
            "buckets": [_hours(bucket_totals[b]) for b in BUCKETS],
        },
        "buckets": [{"name": b, "colour": BUCKET_COLOURS[b]} for b in BUCKETS],
        "statuses": [{"name": s, "colour": c} for s, c in STATUS_COLOURS.items()],
        "no_status_colour": NO_STATUS_COLOUR,
        "spend_chart": _spend_chart(tenants),
        "waste_chart": _waste_chart(tenants, bucket_totals),
        "daily_chart": _daily_chart(days),
        "daily": [{"day": f"{d:%Y-%m-%d}", "hours": _hours(h)} for d, h in days],
        "daily_source": daily_source,
        "top_jobs": [_job_view(j) for j in top_jobs],
        "has_quota": has_quota,
        "sources": [*sources, *(["quota_compliance"] if has_quota else [])],
        "quota": [_quota_view(q) for q in quota_rows],
        "definitions": _page_definitions(parameters, has_quota, daily_source),
    }
    return _environment().get_template(TEMPLATE_NAME).render(context)


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
    key = [month.first_day, department.name]
    currency = _workbook_currency(con, month.first_day, parameters)
    charges = con.execute(_CHARGES_SQL, key).fetchall()
    jobs = RowsQuery(con, _JOBS_SQL, key, JOB_LINES_ORDER)
    tenants = _fetch_dicts(con, _TENANTS_SQL, key)
    quota_flags = (
        _quota_flags(_fetch_dicts(con, _QUOTA_SQL, key))
        if _has_month(con, "quota_compliance", month.first_day)
        else None
    )

    wb = Workbook()
    _add_named_styles(wb)
    summary = wb.active
    summary.title = WORKBOOK_SHEETS[0]
    sheets = {name: wb.create_sheet(name) for name in WORKBOOK_SHEETS[1:]}
    charges_total_cell = _write_charges(sheets["Charges"], charges, currency)
    _write_department_summary(
        summary, month, department, currency, tenants, quota_flags, charges_total_cell
    )
    job_lines = _write_job_lines(sheets["Job lines"], jobs, currency)
    _write_definitions(sheets["Definitions"], {"department": department.label, **parameters})
    wb.calculation.fullCalcOnLoad = True
    wb.properties.creator = "gpu-chargeback"
    wb.properties.title = f"GPU chargeback {month.label}: {department.label}"

    data = _serialise(wb, _fixed_timestamp(month.first_day), [job_lines])
    _write_atomically(data, pathlib.Path(out_path))
    return {
        "total_amount": sum((row[11] for row in charges), Decimal("0.00")),
        "tenants": len(tenants),
        "charge_lines": len(charges),
        "job_lines": job_lines.count,
        "currency": currency,
        "path": str(out_path),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


# --------------------------------------------------------------------------------------------
# Workbook Summary sheet
# --------------------------------------------------------------------------------------------


def _write_department_summary(
    ws: Worksheet,
    month: BillingMonth,
    department: Department,
    currency: str,
    tenants: list[dict],
    quota_flags: dict[str, list[str]] | None,
    charges_total_cell: str,
) -> None:
    month_name = f"{_MONTH_NAMES[month.first_day.month - 1]} {month.first_day.year}"
    _set_text(
        ws["A1"],
        f"GPU chargeback — {department.label} — {month_name} ({month.label}), "
        f"amounts in {currency}",
    ).style = "cb title"
    _set_text(
        ws["A2"],
        f"Billing period [{month.first_day:%Y-%m-%d}, "
        f"{_fixed_timestamp(month.first_day):%Y-%m-%d}); this department's tenants only; "
        "figures are defined on the Definitions sheet.",
    )
    allocated = sum(t["allocated_gpu_hours"] for t in tenants)
    productive = sum(t["productive_gpu_hours"] for t in tenants)
    headline: list[tuple[str, Any, str]] = [
        ("Allocated GPU-hours", allocated, "cb hours"),
        (
            "Productive share of allocated",
            productive / allocated if allocated else "n/a",
            "cb share",
        ),
        (
            f"Total charge ({currency})",
            sum((t["amount"] for t in tenants), Decimal("0.00")),
            "cb money",
        ),
    ]
    row = 4
    for label, value, style in headline:
        _set_text(ws.cell(row=row, column=1), label)
        cell = ws.cell(row=row, column=2)
        if isinstance(value, str):
            _set_text(cell, value)
        else:
            cell.value = value
            cell.style = style
        row += 1

    header_row = row + 1
    cols = [
        _Col("Tenant"),
        _Col("Tenant ID"),
        _Col("Cost center"),
        _Col("Owner"),
        _Col("Allocated GPU-hours", "hours"),
        _Col(f"Amount ({currency})", "money"),
        _Col(f"Budget ({currency})", "money"),
        _Col("Budget used", "share"),
        _Col("Budget status"),
        _Col("Productive share", "share"),
        _Col("Zombie GPU-hours", "hours"),
        _Col("Quota flags"),
    ]
    rows = []
    for t in tenants:
        amount, budget = t["amount"], t["budget"]
        used = float(amount / budget) if budget else None
        share = (
            t["productive_gpu_hours"] / t["allocated_gpu_hours"]
            if t["allocated_gpu_hours"]
            else None
        )
        flags = (
            quota_flags.get(t["tenant_id"], [])
            if quota_flags is not None
            else [f.strip() for f in t["quota_flags"].split(",") if f.strip()]
        )
        rows.append((
            t["tenant_name"], t["tenant_id"], t["cost_center"], t["owner"],
            t["allocated_gpu_hours"], amount, budget, used, t["budget_status"], share,
            t["zombie_gpu_hours"], ", ".join(flags) or None,
        ))  # fmt: skip
    last = _write_table(ws, header_row, cols, rows)
    for offset, t in enumerate(tenants, start=1):
        fill = {"over": _OVER_FILL, "warn": _WARN_FILL}.get(t["budget_status"])
        if fill is not None:
            for column in range(1, len(cols) + 1):
                ws.cell(row=header_row + offset, column=column).fill = fill
    total_row = last + 1
    _write_total_row(ws, total_row, header_row + 1, last, {5: "hours", 6: "money"})

    _set_text(ws.cell(row=total_row + 2, column=1), "Reconciliation").style = "cb bold"
    charges_row, diff_row = total_row + 3, total_row + 4
    _set_text(ws.cell(row=charges_row, column=1), "Total of Charges sheet")
    ws.cell(row=charges_row, column=6, value=f"={charges_total_cell}").style = "cb total money"
    _set_text(ws.cell(row=diff_row, column=1), "Difference (TOTAL above − Charges, must be 0)")
    ws.cell(row=diff_row, column=6, value=f"=F{total_row}-F{charges_row}").style = "cb total money"

    ws.freeze_panes = ws.cell(row=header_row + 1, column=1).coordinate
    ws.auto_filter.ref = _ref(header_row, 1, last, len(cols))
    widths = _fit_widths({}, cols, rows)
    widths[1] = max(widths.get(1, 0), 30)  # headline labels live in column A too
    widths[2] = max(widths.get(2, 0), 16)
    _apply_widths(ws, widths)


# --------------------------------------------------------------------------------------------
# Page pieces: figures formatted once here, so the template only places text.
# --------------------------------------------------------------------------------------------


@cache
def _environment() -> jinja2.Environment:
    # autoescape=True for every template: a tenant name is data, never markup.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _fetch_dicts(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> list[dict]:
    cursor = con.execute(sql, params)
    names = [c[0] for c in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _has_month(con: duckdb.DuckDBPyConnection, table: str, billing_month: dt.date) -> bool:
    """Whether an optional mart exists and was built for the month."""
    if not con.execute(_TABLE_EXISTS_SQL, [table]).fetchone()[0]:
        return False
    # the table name is one of this module's constants, never data
    sql = f"select count(*) > 0 from {table} where billing_month = ?"
    return bool(con.execute(sql, [billing_month]).fetchone()[0])


def _quota_flags(rows: list[dict]) -> dict[str, list[str]]:
    """`flag (pool)` per tenant from quota_compliance, in flag order then pool order."""
    flags: dict[str, list[str]] = {}
    for flag in QUOTA_FLAGS:
        for q in rows:
            if q[flag]:
                flags.setdefault(q["tenant_id"], []).append(f"{flag} ({q['pool']})")
    return flags


def _money(value: Decimal | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


def _hours(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


def _number(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def _percent(part: Decimal, whole: Decimal | None) -> str:
    """Money over money in decimal arithmetic: 123.45 of 100.00 is 123.5 %, never 123.4 %."""
    if not whole:
        return "—"
    return f"{(100 * part / whole).quantize(Decimal('0.1'), ROUND_HALF_UP)} %"


def _timestamp(value: dt.datetime | None) -> str:
    return "—" if value is None else f"{value:%Y-%m-%d %H:%M}"


def _tenant_view(t: dict) -> dict[str, Any]:
    budget = t["budget"]
    return {
        "id": t["tenant_id"],
        "name": t["tenant_name"],
        "cost_center": t["cost_center"] or "",
        "owner": t["owner"] or "",
        "amount": _money(t["amount"]),
        "budget": _money(budget) if budget is not None else "",
        "budget_used": _percent(t["amount"], budget),
        "status": t["budget_status"],
        "status_class": "status-" + re.sub(r"[^a-z]+", "-", t["budget_status"]),
        "allocated": _hours(t["allocated_gpu_hours"]),
        "productive_share": _share(t["productive_share"]),
        "zombie": _hours(t["zombie_gpu_hours"]),
        "buckets": [_hours(t[f"{b}_gpu_hours"]) for b in BUCKETS],
        "flags": t["flags"],
    }


def _job_view(j: dict) -> dict[str, str]:
    return {
        "tenant": j["tenant_name"] or j["tenant_id"],
        "cluster": j["cluster"],
        "job_id": j["job_id"],
        "user": j["user"] or "",
        "gpu_model": j["gpu_model"] or "",
        "state": j["state"] or "",
        "gpus": _number(j["gpus"], 2),
        "start": _timestamp(j["start_at"]),
        "end": _timestamp(j["end_at"]),
        "allocated": _hours(j["allocated_gpu_hours"]),
        "mean_util": _number(j["mean_util_pct"]),
        "idle": _hours(j["idle_gpu_hours"]),
        "zombie": _hours(j["zombie_gpu_hours"]),
        "wasted": _hours(j["wasted_gpu_hours"]),
    }


def _quota_view(q: dict) -> dict[str, Any]:
    return {
        "tenant": q["tenant_name"] or q["tenant_id"],
        "pool": q["pool"],
        "guaranteed": _number(q["guaranteed_gpus"], 2) if q["has_quota"] else "none",
        "limit": _number(q["limit_gpus"], 2) if q["limit_gpus"] is not None else "none",
        "mean": _number(q["mean_gpus"], 2),
        "peak": _number(q["peak_gpus"], 2),
        "use": _number(q["quota_use_pct"]) + (" %" if q["quota_use_pct"] is not None else ""),
        "borrowed": _hours(q["borrowed_gpu_hours"]),
        "above_limit": _number(q["minutes_above_limit"]),
        "flags": [f for f in QUOTA_FLAGS if q[f]],
    }


def _days_of(month: BillingMonth, rows: list[tuple]) -> list[tuple[dt.date, float]]:
    """Every day of the period (zero when nothing ran) plus any day the rows name."""
    hours = {day: value or 0.0 for day, value in rows}
    length = round((month.end - month.start).total_seconds() / 86400)
    for offset in range(length):
        hours.setdefault(month.first_day + dt.timedelta(days=offset), 0.0)
    return sorted(hours.items())


def _f(value: float) -> str:
    """SVG coordinates with fixed decimals: the same figures give the same bytes."""
    return f"{value:.2f}"


def _truncate(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _spend_chart(tenants: list[dict]) -> dict[str, Any]:
    """Per tenant: a label, the spend bar (coloured by budget status) and the budget bar."""
    scale = max(
        [float(max(t["amount"], Decimal(0))) for t in tenants]
        + [float(t["budget"]) for t in tenants if t["budget"] is not None]
        + [0.0]
    )
    rows, y = [], 0.0
    for t in tenants:
        amount = float(max(t["amount"], Decimal(0)))
        budget = None if t["budget"] is None else float(t["budget"])
        rows.append({
            "label": _truncate(t["tenant_name"]),
            "title": t["tenant_name"],
            "caption": f"{_money(t['amount'])}"
            + (f" of {_money(t['budget'])}" if budget is not None else ", no budget"),
            "label_y": _f(y + 11),
            "spend_y": _f(y + _BAR_LABEL_GAP + 2),
            "spend_w": _f(_CHART_WIDTH * amount / scale if scale else 0),
            "budget_y": _f(y + _BAR_LABEL_GAP + 2 + _BAR_HEIGHT + 2),
            # drawn as an outline: inset by half the stroke so it stays inside the chart
            "budget_w": _f(max(_CHART_WIDTH * budget / scale - 1.5, 0) if scale and budget else 0),
            "has_budget": budget is not None,
            "colour": STATUS_COLOURS.get(t["budget_status"], NO_STATUS_COLOUR),
        })  # fmt: skip
        y += _BAR_LABEL_GAP + 2 * _BAR_HEIGHT + 16
    return {"width": _CHART_WIDTH, "height": _f(max(y, 20)), "rows": rows, "bar": _BAR_HEIGHT}


def _waste_chart(tenants: list[dict], totals: dict[str, float]) -> dict[str, Any]:
    """One stacked bar of allocated GPU-hours by bucket per tenant, the department first."""
    entries = [("Department total", totals)] + [
        (t["tenant_name"], {b: t[f"{b}_gpu_hours"] for b in BUCKETS}) for t in tenants
    ]
    scale = max([sum(v.values()) for _, v in entries] + [0.0])
    rows, y = [], 0.0
    for name, values in entries:
        x, segments = 0.0, []
        for b in BUCKETS:
            width = _CHART_WIDTH * values[b] / scale if scale else 0.0
            if width > 0:
                segments.append({
                    "x": _f(x), "w": _f(width), "colour": BUCKET_COLOURS[b],
                    "title": f"{b}: {_hours(values[b])} GPU-hours",
                })  # fmt: skip
            x += width
        rows.append({
            "label": _truncate(name),
            "title": name,
            "caption": f"{_hours(sum(values.values()))} GPU-hours",
            "label_y": _f(y + 11),
            "bar_y": _f(y + _BAR_LABEL_GAP + 2),
            "segments": segments,
        })  # fmt: skip
        y += _BAR_LABEL_GAP + _BAR_HEIGHT + 14
    return {"width": _CHART_WIDTH, "height": _f(y), "rows": rows, "bar": _BAR_HEIGHT}


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above `value` (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value * (1 - 1e-12):
            return step * power
    return 10 * power


def _daily_chart(days: list[tuple[dt.date, float]]) -> dict[str, Any]:
    left, top, plot_w, plot_h = 44.0, 8.0, _CHART_WIDTH - 48.0, 150.0
    ceiling = _nice_ceiling(max([h for _, h in days] + [0.0]))
    slot = plot_w / max(len(days), 1)
    bars, labels = [], []
    for index, (day, hours) in enumerate(days):
        height = plot_h * hours / ceiling
        bars.append({
            "x": _f(left + index * slot + slot * 0.1),
            "y": _f(top + plot_h - height),
            "w": _f(slot * 0.8),
            "h": _f(height),
            "title": f"{day:%Y-%m-%d}: {_hours(hours)} GPU-hours",
        })  # fmt: skip
        if index % 7 == 0:
            labels.append({"x": _f(left + (index + 0.5) * slot), "text": f"{day:%b} {day.day}"})
    values = [ceiling * part for part in (0.0, 0.5, 1.0)]
    digits = next(d for d in (0, 1, 2) if all(round(v, d) == v for v in values) or d == 2)
    ticks = [
        {"y": _f(top + plot_h - plot_h * part), "text": f"{value:,.{digits}f}"}
        for part, value in zip((0.0, 0.5, 1.0), values, strict=True)
    ]
    return {
        "width": _CHART_WIDTH,
        "height": _f(top + plot_h + 24),
        "left": _f(left),
        "tick_x": _f(left - 4),
        "right": _f(left + plot_w),
        "axis_y": _f(top + plot_h),
        "label_y": _f(top + plot_h + 16),
        "bars": bars,
        "labels": labels,
        "ticks": ticks,
    }


def _page_definitions(
    parameters: dict[str, str], has_quota: bool, daily_source: str
) -> list[tuple[str, str]]:
    shared = dict(DEFINITIONS)
    idle = parameters.get("idle_threshold_pct") or "5"
    zombie = parameters.get("zombie_min_hours") or "2"
    items = [
        ("Billing period", shared["Billing period"].replace("this workbook", "this page")),
        ("Allocated GPU-hours", shared["Allocated GPU-hours"]),
        (
            "Amount",
            "The tenant's charge lines in this department for the month (usage less credits, "
            "plus corrections of a closed month), rounded to cents at the line level; the "
            "department total is their sum. Amounts are in the catalog currency.",
        ),
        ("Budget", shared["Budget"]),
        ("Budget used", shared["Budget used"]),
        ("Budget status", shared["Budget status"]),
        ("Productive share", shared["Productive share of allocated"]),
        ("Waste buckets", shared["Waste taxonomy (buckets)"]),
        ("failed_infra", shared["failed_infra"]),
        ("failed_job", shared["failed_job"]),
        ("zombie", shared["zombie"] + f" This month's minimum: {zombie} hours."),
        ("idle", shared["idle"] + f" This month's threshold: {idle} %."),
        ("productive", shared["productive"]),
        ("unmeasured", shared["unmeasured"]),
        ("Daily allocated GPU-hours", daily_source),
        (
            "Top idle and zombie jobs",
            f"The department's {TOP_JOBS} jobs with the most idle + zombie GPU-hours in the "
            "month (ties by tenant, cluster, job id). Mean utilization is the sample-weighted "
            "mean of util_pct over the job's samples.",
        ),
        (
            "Quota flags",
            "Per tenant and pool (a GPU model or a queue): breach = minutes above the limit; "
            "idle_quota = quota use (used ÷ guaranteed GPU-hours) below 30 %; "
            "chronic_borrowing = above the guarantee on more than half of the month's days."
            + (
                ""
                if has_quota
                else " quota_compliance was not available: flags as recorded in tenant_month."
            ),
        ),
    ]
    return items
