"""The department page `<reports>/YYYY-MM/departments/<slug>.html` for a business owner: a
self-contained page (inline CSS and SVG, no script, no external reference) readable on a phone
and printable to PDF, rendered from `reports/templates/department.html`. Membership:
`pipelines.reports.departments`. Reproducible: the same tables give the same bytes.

The organisation page `<reports>/YYYY-MM/chargeback-YYYY-MM.html` is the same page over every
department (`departments.ORGANISATION`), with a table of the departments linking to theirs.

The governance marts are optional: without `utilization_daily` the daily chart counts each
job's allocated GPU-hours of the month on the day it started (see `DAILY_FALLBACK`); without
`quota_compliance` the quota flags are those of `tenant_month` and the quota section is left out.
"""

from __future__ import annotations

import datetime as dt
import math
import pathlib
import re
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from typing import Any

import duckdb
import jinja2

from pipelines.months import BillingMonth
from pipelines.reports import queries
from pipelines.reports.definitions import note, page_definitions
from pipelines.reports.departments import (
    QUOTA_FLAGS,
    Department,
    department_quota,
    department_tenants,
    departments,
    quota_flags,
)
from pipelines.reports.period import month_name, period_end
from pipelines.reports.telemetry import cluster_telemetry

TEMPLATES_DIR = pathlib.Path(__file__).resolve().parents[2] / "reports" / "templates"
TEMPLATE_NAME = "department.html"
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
DAILY_FROM_MART = note("daily_from_mart")
DAILY_FALLBACK = note("daily_fallback")

# SVG geometry, in viewBox units; the page scales the charts to its width.
_CHART_WIDTH = 400
_BAR_LABEL_GAP = 14
_BAR_HEIGHT = 12


def render_department_page(
    con: duckdb.DuckDBPyConnection,
    month: BillingMonth,
    department: Department,
    parameters: dict[str, str],
    page_size: str = "A4",
) -> str:
    """The HTML page of one department (or of ORGANISATION) and month (a str; the caller
    writes it); `page_size` (A4, Letter) is the page it prints on."""
    key = {"billing_month": month.first_day, "department": department.name}
    currency = queries.report_currency(con, month.first_day, parameters)
    tenants = department_tenants(con, month.first_day, department)
    top_jobs = queries.fetch(con, "department_top_jobs", **key, top_jobs=TOP_JOBS)
    quota = department_quota(con, month.first_day, department)
    has_quota = quota is not None
    sources = ["tenant_month", "charge_lines", "job_usage"]
    if queries.has_month(con, "utilization_daily", month.first_day):
        daily_rows = queries.fetch(con, "department_daily", **key)
        daily_source = DAILY_FROM_MART
        sources.append("utilization_daily")
    else:
        daily_rows = queries.fetch(
            con, "department_daily_from_jobs", **key, period_start=month.start
        )
        daily_source = DAILY_FALLBACK

    cost_views = (
        queries.fetch(con, "cost_views", **key) if queries.table_exists(con, "cost_views") else None
    )
    # the clusters the department's jobs ran on (every cluster on the organisation page)
    telemetry = cluster_telemetry(con, month.first_day, department.name)
    if telemetry is not None:
        sources.append("telemetry_coverage")
    users = queries.fetch_if_table(con, "user_efficiency", "users", **key)
    close = queries.fetch_if_table(
        con, "closed_months", "month_close", billing_month=month.first_day
    )
    flags = quota_flags(tenants, quota)
    total_amount = sum((t.amount for t in tenants), Decimal("0.00"))
    budgets = [t.budget for t in tenants if t.budget is not None]
    allocated = sum(t.allocated_gpu_hours for t in tenants)
    productive = sum(t.productive_gpu_hours for t in tenants)
    bucket_totals = {b: sum(_bucket_hours(t, b) for t in tenants) for b in BUCKETS}
    days = _days_of(month, daily_rows)

    organisation = department.name is None
    context = {
        "department": department.label,
        "scope": "any department" if organisation else "this department",
        "scope_tenants": "every department's tenants"
        if organisation
        else "this department's tenants",
        "page_size": page_size,
        "departments": _department_rows(con, month, tenants) if organisation else [],
        "month_label": month.label,
        "month_name": month_name(month.first_day),
        "period_start": f"{month.first_day:%Y-%m-%d}",
        "period_end": f"{period_end(month.first_day):%Y-%m-%d}",
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
        "tenants": [_tenant_view(t, flags.get(t.tenant_id, [])) for t in tenants],
        "close": _close_view(close[0], tenants, total_amount) if close else None,
        "total": {
            "amount": _money(total_amount),
            "budget": _money(sum(budgets, Decimal("0.00"))) if budgets else "",
            "allocated": _hours(allocated),
            "productive_share": _share(productive / allocated if allocated else None),
            "zombie": _hours(bucket_totals["zombie"]),
            "buckets": [_hours(bucket_totals[b]) for b in BUCKETS],
        },
        "buckets": list(BUCKETS),
        "spend_legend": [
            *(_swatch(f"spend, {s}", c) for s, c in STATUS_COLOURS.items()),
            _swatch("spend, no budget", NO_STATUS_COLOUR),
            {"label": "budget", "outline": True},
        ],
        "waste_legend": [_swatch(b, BUCKET_COLOURS[b]) for b in BUCKETS],
        "spend_chart": _spend_chart(tenants),
        "waste_chart": _waste_chart(tenants, bucket_totals),
        "daily_chart": _daily_chart(days),
        "daily": [{"day": f"{d:%Y-%m-%d}", "hours": _hours(h)} for d, h in days],
        "daily_source": daily_source,
        # rows as the queries give them: the template formats their figures (the filters)
        "top_jobs": top_jobs,
        "cost_views": cost_views,
        "telemetry": telemetry,
        "users": users,
        "notice_threshold": parameters.get("notice_idle_gpu_hours") or "24",
        "has_quota": has_quota,
        "sources": [*sources, *(["quota_compliance"] if has_quota else [])],
        "quota": [_quota_view(q) for q in quota or []],
        "definitions": page_definitions(
            {
                "zombie_min_hours": parameters.get("zombie_min_hours") or "2",
                "idle_threshold_pct": parameters.get("idle_threshold_pct") or "5",
                "top_jobs": str(TOP_JOBS),
                "daily_source": daily_source,
                "quota_flags_source": "" if has_quota else note("quota_from_tenant_month"),
            }
        ),  # fmt: skip
    }
    return _environment().get_template(TEMPLATE_NAME).render(context)


# --------------------------------------------------------------------------------------------
# Page pieces: figures formatted here by the same functions the template's filters are (FILTERS).
# --------------------------------------------------------------------------------------------


@cache
def _environment() -> jinja2.Environment:
    # autoescape=True for every template: a tenant name is data, never markup.
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters.update(FILTERS)
    return environment


def _swatch(label: str, colour: str) -> dict[str, Any]:
    """A legend entry: a swatch of `colour` and its label (the template's `legend`)."""
    return {"label": label, "colour": colour, "outline": False}


def _bucket_hours(tenant: Any, bucket: str) -> float:
    """A department tenant's GPU-hours in `bucket` (its `<bucket>_gpu_hours` column)."""
    return getattr(tenant, f"{bucket}_gpu_hours")


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


def _integer(value: int) -> str:
    return f"{value:,}"


def _percent_of(pct: float | None) -> str:
    """A mart's percentage (0-100) as the page shows shares."""
    return _share(None if pct is None else pct / 100)


# The template's filters: a row's figures as the page prints them (`{{ j.idle_gpu_hours|hours }}`).
FILTERS = {
    "money": _money,
    "hours": _hours,
    "number": _number,
    "integer": _integer,
    "share": _share,
    "percent_of": _percent_of,
    "timestamp": _timestamp,
}


def _close_view(close: Any, tenants: Sequence[Any], total: Decimal) -> dict[str, Any]:
    """A closed month (month_close.sql): when and by whom, and what the page's tenants were
    issued, what a run since corrected and the net they are charged now (`total`, the page's
    amount); the tenants with corrections."""
    corrections = sum((t.correction_amount for t in tenants), Decimal("0.00"))
    return {
        "closed_at": _timestamp(close.closed_at),
        "closed_by": close.closed_by,
        "issued": _money(total - corrections),
        "corrections": _money(corrections),
        "net": _money(total),
        "tenants": [
            {
                "name": t.tenant_name,
                "issued": _money(t.amount - t.correction_amount),
                "corrections": _money(t.correction_amount),
                "net": _money(t.amount),
            }
            for t in tenants
            if t.correction_amount
        ],
    }


def _tenant_view(t: Any, flags: list[str]) -> dict[str, Any]:
    allocated = t.allocated_gpu_hours or 0.0
    return {
        "id": t.tenant_id,
        "name": t.tenant_name,
        "cost_center": t.cost_center or "",
        "owner": t.owner or "",
        "amount": _money(t.amount),
        "budget": _money(t.budget) if t.budget is not None else "",
        "budget_used": _percent(t.amount, t.budget),
        "status": t.budget_status,
        "status_class": "status-" + re.sub(r"[^a-z]+", "-", t.budget_status),
        "allocated": _hours(t.allocated_gpu_hours),
        "productive_share": _share(t.productive_gpu_hours / allocated if allocated else None),
        "zombie": _hours(t.zombie_gpu_hours),
        "buckets": [_hours(_bucket_hours(t, b)) for b in BUCKETS],
        "flags": flags,
    }


def _department_rows(
    con: duckdb.DuckDBPyConnection, month: BillingMonth, tenants: list[Any]
) -> list[dict[str, str]]:
    """The organisation page's departments: their tenants' totals, each linking to its page
    (`departments/<slug>.html`, beside the organisation page)."""
    rows = []
    for department in departments(con, month.first_day):
        members = [t for t in tenants if t.department == department.name]
        amount = sum((t.amount for t in members), Decimal("0.00"))
        budgets = [t.budget for t in members if t.budget is not None]
        budget = sum(budgets, Decimal("0.00")) if budgets else None
        allocated = sum(t.allocated_gpu_hours for t in members)
        productive = sum(t.productive_gpu_hours for t in members)
        rows.append({
            "name": department.label,
            "href": f"departments/{department.slug}.html",
            "tenants": str(len(members)),
            "amount": _money(amount),
            "budget": _money(budget) if budget is not None else "",
            "budget_used": _percent(amount, budget),
            "allocated": _hours(allocated),
            "productive_share": _share(productive / allocated if allocated else None),
            "idle_zombie": _hours(sum(t.idle_gpu_hours + t.zombie_gpu_hours for t in members)),
        })  # fmt: skip
    return rows


def _quota_view(q: Any) -> dict[str, Any]:
    return {
        "tenant": q.tenant_name or q.tenant_id,
        "pool": q.pool,
        "guaranteed": _number(q.guaranteed_gpus, 2) if q.has_quota else "none",
        "limit": _number(q.limit_gpus, 2) if q.limit_gpus is not None else "none",
        "mean": _number(q.mean_gpus, 2),
        "peak": _number(q.peak_gpus, 2),
        "use": _number(q.quota_use_pct) + (" %" if q.quota_use_pct is not None else ""),
        "borrowed": _hours(q.borrowed_gpu_hours),
        "above_limit": _number(q.minutes_above_limit),
        "flags": [f for f in QUOTA_FLAGS if getattr(q, f)],
    }


def _days_of(month: BillingMonth, rows: list[Any]) -> list[tuple[dt.date, float]]:
    """Every day of the period (zero when nothing ran) plus any day the rows name."""
    hours = {row.day: row.allocated_gpu_hours or 0.0 for row in rows}
    length = round((month.end - month.start).total_seconds() / 86400)
    for offset in range(length):
        hours.setdefault(month.first_day + dt.timedelta(days=offset), 0.0)
    return sorted(hours.items())


def _f(value: float) -> str:
    """SVG coordinates with fixed decimals: the same figures give the same bytes."""
    return f"{value:.2f}"


def _truncate(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _spend_chart(tenants: list[Any]) -> dict[str, Any]:
    """Per tenant: a label, the spend bar (coloured by budget status) and the budget bar."""
    scale = max(
        [float(max(t.amount, Decimal(0))) for t in tenants]
        + [float(t.budget) for t in tenants if t.budget is not None]
        + [0.0]
    )
    rows, y = [], 0.0
    for t in tenants:
        amount = float(max(t.amount, Decimal(0)))
        budget = None if t.budget is None else float(t.budget)
        rows.append({
            "label": _truncate(t.tenant_name),
            "title": t.tenant_name,
            "caption": f"{_money(t.amount)}"
            + (f" of {_money(t.budget)}" if budget is not None else ", no budget"),
            "label_y": _f(y + 11),
            "spend_y": _f(y + _BAR_LABEL_GAP + 2),
            "spend_w": _f(_CHART_WIDTH * amount / scale if scale else 0),
            "budget_y": _f(y + _BAR_LABEL_GAP + 2 + _BAR_HEIGHT + 2),
            # drawn as an outline: inset by half the stroke so it stays inside the chart
            "budget_w": _f(max(_CHART_WIDTH * budget / scale - 1.5, 0) if scale and budget else 0),
            "has_budget": budget is not None,
            "colour": STATUS_COLOURS.get(t.budget_status, NO_STATUS_COLOUR),
        })  # fmt: skip
        y += _BAR_LABEL_GAP + 2 * _BAR_HEIGHT + 16
    return {"width": _CHART_WIDTH, "height": _f(max(y, 20)), "rows": rows, "bar": _BAR_HEIGHT}


def _waste_chart(tenants: list[Any], totals: dict[str, float]) -> dict[str, Any]:
    """One stacked bar of allocated GPU-hours by bucket per tenant, the department first."""
    entries = [("Department total", totals)] + [
        (t.tenant_name, {b: _bucket_hours(t, b) for b in BUCKETS}) for t in tenants
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
