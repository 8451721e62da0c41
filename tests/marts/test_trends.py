"""month_trends and demand_forecast: the months side by side, and the trend extended 3 months.

Given: capacity_evidence and tenant_month rows of September to November directly (the columns
month_trends reads, as those marts build them): the trend marts only line the months up and fit
a line, so the figures below are computed by hand.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest

from pipelines.sql import run, sql_text
from tests.marts.conftest import given, pick, records

SEP, OCT, NOV = dt.date(2026, 9, 1), dt.date(2026, 10, 1), dt.date(2026, 11, 1)
EVIDENCE = (
    "billing_month date, cluster varchar, gpu_model varchar, capacity_gpu_hours double, "
    "allocated_gpu_hours double, allocation_rate_pct double, productive_share_pct double, "
    "waste_share_pct double, wait_p95_s double, pending_gpu_hours double"
)
TENANT_MONTH = (
    "billing_month date, tenant_id varchar, allocated_gpu_hours double, "
    "productive_gpu_hours double, idle_gpu_hours double, zombie_gpu_hours double, "
    "failed_job_gpu_hours double, amount decimal(18, 2), currency varchar, "
    "budget decimal(18, 2), budget_used_pct double"
)

AVAILABILITY = (
    "billing_month date, level varchar, cluster varchar, gpu_model varchar, "
    "availability_pct double, incidents bigint, mttr_hours double"
)


def evidence(month, model, capacity, allocated):
    rate = 100.0 * allocated / capacity
    return (month, "c1", model, capacity, allocated, rate, 60.0, 20.0, 3600.0, 10.0)


@pytest.fixture
def trends(con):
    given(con, "capacity_evidence", EVIDENCE, [
        # A100: 500, 600, 700 of 1,000 GPU-hours: a straight line, 100 more a month
        evidence(SEP, "A100", 1000.0, 500.0),
        evidence(OCT, "A100", 1000.0, 600.0),
        evidence(NOV, "A100", 1000.0, 700.0),
        # H100: 100, 300, 200 of 720: rising 50 a month, with scatter
        evidence(SEP, "H100", 720.0, 100.0),
        evidence(OCT, "H100", 720.0, 300.0),
        evidence(NOV, "H100", 720.0, 200.0),
        # L4: new in November
        evidence(NOV, "L4", 720.0, 72.0),
    ])  # fmt: skip
    given(con, "tenant_month", TENANT_MONTH, [
        (OCT, "alpha", 400.0, 300.0, 60.0, 20.0, 20.0, Decimal("840.00"), "USD",
         Decimal("1000.00"), 84.0),
        (NOV, "alpha", 0.0, 0.0, 0.0, 0.0, 0.0, Decimal("0.00"), "USD", None, None),
    ])  # fmt: skip
    given(con, "availability", AVAILABILITY, [
        (NOV, "gpu_model", "c1", "A100", 99.5, 2, 6.0),
        # the cluster's and a node's rows are not the model's
        (NOV, "cluster", "c1", None, 50.0, 9, 1.0),
        (NOV, "node", "c1", "A100", 50.0, 9, 1.0),
    ])  # fmt: skip
    con.execute("create table month_trends as " + sql_text("marts/month_trends"))
    return con


def test_month_trends_lines_up_every_month_of_each_level(trends):
    rows = records(trends.execute("select * from month_trends"))
    assert len(rows) == 9
    assert pick(rows[:3], "billing_month", "level", "cluster", "gpu_model", "tenant_id",
                "allocated_gpu_hours", "allocation_rate_pct", "amount") == [
        (SEP, "cluster_gpu_model", "c1", "A100", None, 500.0, 50.0, None),
        (SEP, "cluster_gpu_model", "c1", "H100", None, 100.0, 100.0 * 100 / 720, None),
        (OCT, "cluster_gpu_model", "c1", "A100", None, 600.0, 60.0, None),
    ]  # fmt: skip
    # a model's availability, incidents and MTTR of the month, where availability has them
    november = [row for row in rows if row["billing_month"] == NOV and row["gpu_model"]]
    assert pick(november, "gpu_model", "availability_pct", "incidents", "mttr_hours") == [
        ("A100", 99.5, 2, 6.0),
        ("H100", None, None, None),
        ("L4", None, None, None),
    ]
    tenants = [row for row in rows if row["level"] == "tenant"]
    # waste = idle + zombie + failed_job = 100 of 400 allocated; a month without use: NULL
    assert pick(tenants, "billing_month", "tenant_id", "productive_share_pct",
                "waste_share_pct", "amount", "budget", "budget_used_pct") == [
        (OCT, "alpha", 75.0, 25.0, Decimal("840.00"), Decimal("1000.00"), 84.0),
        (NOV, "alpha", None, None, Decimal("0.00"), None, None),
    ]  # fmt: skip


def forecast(con, month=NOV) -> list[dict]:
    return records(run(con, "marts/demand_forecast", {"billing_month": month}))


def test_a_straight_line_is_extended_and_its_threshold_month_named(trends):
    rows = [row for row in forecast(trends) if row["gpu_model"] == "A100"]
    assert pick(rows, "forecast_month", "history_months", "forecast_gpu_hours",
                "low_gpu_hours", "high_gpu_hours", "forecast_allocation_rate_pct",
                "threshold_month") == [
        (dt.date(2026, 12, 1), 3, 800.0, 800.0, 800.0, 80.0, dt.date(2026, 12, 1)),
        (dt.date(2027, 1, 1), 3, 900.0, 900.0, 900.0, 90.0, dt.date(2026, 12, 1)),
        (dt.date(2027, 2, 1), 3, 1000.0, 1000.0, 1000.0, 100.0, dt.date(2026, 12, 1)),
    ]  # fmt: skip
    assert rows[0]["method"] == "least-squares line through 3 months of allocated GPU-hours"
    assert rows[0]["trend_verdict"] == (
        "allocation 70.0%, rising 100 GPU-hours a month: 80% reached in 2026-12 at this trend"
    )


def test_scatter_widens_the_band(trends):
    rows = [row for row in forecast(trends) if row["gpu_model"] == "H100"]
    # x = -2, -1, 0 and y = 100, 300, 200: slope 50, intercept 250; residuals -50, 100, -50:
    # SSE 15,000, residual standard error √(15,000 / 1); mean x -1, Σ(x - x̄)² = 2
    se = math.sqrt(15_000)
    for row, h in zip(rows, (1, 2, 3), strict=True):
        trend = 250 + 50 * h
        band = 1.96 * se * math.sqrt(1 + 1 / 3 + (h + 1) ** 2 / 2)
        assert row["forecast_gpu_hours"] == pytest.approx(trend, abs=1e-9)
        assert row["low_gpu_hours"] == pytest.approx(max(trend - band, 0), abs=1e-9)
        assert row["high_gpu_hours"] == pytest.approx(trend + band, abs=1e-9)
    # 80 % of 720 = 576 GPU-hours: (576 - 250) / 50 = 6.52 months ahead, so the 7th: 2027-06
    assert {row["threshold_month"] for row in rows} == {dt.date(2027, 6, 1)}
    assert rows[0]["trend_verdict"] == (
        "allocation 27.8%, rising 50 GPU-hours a month: 80% reached in 2027-06 at this trend"
    )


def test_one_month_of_history_gives_no_forecast(trends):
    rows = [row for row in forecast(trends) if row["gpu_model"] == "L4"]
    assert pick(rows, "history_months", "method", "forecast_gpu_hours", "threshold_month",
                "trend_verdict") == [
        (1, "too little history (1 month)", None, None, "no trend yet: one month of history")
    ] * 3  # fmt: skip


def test_a_falling_or_full_model_names_no_threshold_month(trends):
    # forecast from October: A100 had 2 months (500, 600), H100 (100, 300); from September
    # nothing had more than one month
    october = forecast(trends, OCT)
    assert {(row["gpu_model"], row["threshold_month"]) for row in october} == {
        ("A100", dt.date(2026, 12, 1)),  # (800 - 600) / 100 = 2 months ahead
        ("H100", dt.date(2026, 12, 1)),  # (576 - 300) / 200 = 1.38: the 2nd month
    }
    assert {row["low_gpu_hours"] is None for row in october} == {True}  # no band from 2 months
    trends.execute("update month_trends set allocated_gpu_hours = 900, allocation_rate_pct = 90 "
                   "where gpu_model = 'A100' and billing_month = '2026-11-01'")  # fmt: skip
    trends.execute("update month_trends set allocated_gpu_hours = 50, allocation_rate_pct = 6.9 "
                   "where gpu_model = 'H100' and billing_month = '2026-11-01'")  # fmt: skip
    verdicts = {row["gpu_model"]: row["trend_verdict"] for row in forecast(trends)}
    assert verdicts["A100"] == "allocation 90.0% is at or above 80% already"
    assert verdicts["H100"] == "allocation 6.9%, not rising: no crossing of 80% at this trend"
