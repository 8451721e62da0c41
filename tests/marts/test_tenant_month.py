"""tenant_month: one row per billing month × tenant: usage and waste, the charge, the budget and
its status, the quota flags.

Given: the mart's input tables directly (job_usage, job_time_buckets, charge_lines,
quota_compliance, catalog_tenants, catalog_budgets), with the columns and types its SQL reads:
the mart only sums and compares them, and the figures are easiest to follow as given hours
and amounts. GPU time is given in GPU units (1/420 GPU-ms) as job_time_buckets holds it.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import duckdb
import pytest

from pipelines.catalog import Settings
from pipelines.defs.resources import prepare_connection
from pipelines.sql import replace_month
from tests.marts.conftest import given, month_params, pick, records, units

NOV, OCT = dt.date(2026, 11, 1), dt.date(2026, 10, 1)
D = Decimal


# the tenant of each job's days (job_day_tenants): no reorganisation here
JOB_TENANTS = {"j0": "alpha", "j1": "alpha", "j2": "alpha", "j3": "beta", "j5": "unmapped"}


def bucket_row(month, job_id, model, allocated, measured, util_pct, productive=0.0, idle=0.0,
               zombie=0.0, failed_job=0.0, failed_infra=0.0, unmeasured=0.0):  # fmt: skip
    """A job_time_buckets row from hours; util_weighted_units = measured units × util %."""
    weighted = None if util_pct is None else D(units(measured)) * D(util_pct)
    return (month, "c1", job_id, model, JOB_TENANTS[job_id], units(allocated), units(measured),
            weighted, units(failed_infra), units(failed_job), units(productive), units(idle),
            units(zombie), units(unmeasured))  # fmt: skip


@pytest.fixture(scope="module")
def rows():
    con = prepare_connection(duckdb.connect())
    given(con, "catalog_tenants",
          "tenant_id varchar, name varchar, department varchar, cost_center varchar, "
          "owner varchar", [
              ("alpha", "Alpha Lab", "Physics", "CC-1", "a@example.com"),
              ("beta", "Beta Lab", "Physics", "CC-2", None),
              ("delta", "Delta Lab", "Biology", "CC-4", None),
              ("epsilon", "Epsilon Lab", "Biology", "CC-5", None),
              ("gamma", "Gamma Lab", "Biology", "CC-3", None),
          ])  # fmt: skip
    given(con, "catalog_budgets", "tenant_id varchar, month varchar, amount decimal(18, 2)", [
        ("alpha", "2026-11", D("100.00")),
        ("alpha", "2026-10", D("1.00")),  # another month's budget
        ("beta", "2026-11", D("50.00")),
        ("gamma", "2026-11", D("10.00")),
        ("epsilon", "2026-11", D("10.00")),
    ])  # fmt: skip
    given(con, "job_usage",
          "billing_month date, cluster varchar, job_id varchar, tenant_id varchar", [
              (NOV, "c1", "j1", "alpha"),
              (NOV, "c1", "j2", "alpha"),
              (NOV, "c1", "j3", "beta"),
              (NOV, "c1", "j4", "gamma"),  # never started: no job time
              (NOV, "c1", "j5", "unmapped"),
              (OCT, "c1", "j0", "alpha"),  # another month
          ])  # fmt: skip
    given(con, "job_time_buckets",
          "billing_month date, cluster varchar, job_id varchar, gpu_model varchar, "
          "tenant_id varchar, allocated_units bigint, measured_units hugeint, "
          "util_weighted_units decimal(38, 3), failed_infra_units bigint, "
          "failed_job_units bigint, productive_units hugeint, idle_units hugeint, "
          "zombie_units hugeint, unmeasured_units hugeint", [
              # j1 on two GPU models: 4 h (3 h measured at 50 %) and 2 h FAILED (at 20 %)
              bucket_row(NOV, "j1", "A100", 4, 3, 50, productive=2, idle=0.5, zombie=0.5,
                         unmeasured=1),
              bucket_row(NOV, "j1", "H100", 2, 2, 20, failed_job=2),
              bucket_row(NOV, "j2", "A100", 1, 0, None, failed_infra=1),
              bucket_row(NOV, "j3", "A100", 1.5, 1.5, 10, productive=1.5),
              bucket_row(NOV, "j5", "A100", 0.25, 0, None, unmeasured=0.25),
              bucket_row(OCT, "j0", "A100", 100, 100, 99, productive=100),
          ])  # fmt: skip
    given(con, "charge_lines",
          "billing_month date, tenant_id varchar, amount decimal(19, 2)", [
              (NOV, "alpha", D("80.00")),
              (NOV, "alpha", D("-0.01")),  # a credit
              (NOV, "beta", D("40.00")),
              (NOV, "gamma", D("10.00")),
              (NOV, "epsilon", D("10.01")),
              (NOV, "unmapped", D("0.50")),
              (NOV, "platform", D("12.34")),  # full_recovery's unrecovered capacity cost
              (OCT, "alpha", D("500.00")),
          ])  # fmt: skip
    given(con, "quota_compliance",
          "billing_month date, tenant_id varchar, pool varchar, breach boolean, "
          "idle_quota boolean, chronic_borrowing boolean", [
              (NOV, "alpha", "H100", False, True, False),
              (NOV, "alpha", "A100", True, False, False),
              (NOV, "beta", "A100", False, False, True),
              (NOV, "gamma", "A100", False, False, False),
              (OCT, "delta", "A100", True, True, True),
          ])  # fmt: skip
    params = month_params(Settings(currency="EUR"))
    replace_month(con, "tenant_month", "marts/tenant_month", params)
    yield records(con.execute("select * from tenant_month where billing_month = ?", [NOV]))
    con.close()


def test_usage_and_waste_per_tenant(rows):
    columns = ("tenant_id", "jobs", "allocated_gpu_hours", "measured_gpu_hours",
               "productive_gpu_hours", "idle_gpu_hours", "zombie_gpu_hours",
               "failed_job_gpu_hours", "failed_infra_gpu_hours", "unmeasured_gpu_hours",
               "mean_util_pct")  # fmt: skip
    assert pick(rows, *columns) == [
        # j1 + j2: 4 + 2 + 1 = 7 h allocated, 3 + 2 = 5 measured; utilisation weighted by
        # measured time: (3 h x 50 + 2 h x 20) / 5 h = 38
        ("alpha", 2, 7.0, 5.0, 2.0, 0.5, 0.5, 2.0, 1.0, 1.0, 38.0),
        ("beta", 1, 1.5, 1.5, 1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 10.0),
        # every catalog tenant has a row, used or not
        ("delta", 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None),
        ("epsilon", 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None),
        # a job that never started counts as a job with no time
        ("gamma", 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None),
        ("platform", 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None),
        ("unmapped", 1, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25, None),
    ]


def test_amount_budget_and_status(rows):
    columns = ("tenant_id", "amount", "currency", "budget", "budget_used_pct", "budget_status")
    assert pick(rows, *columns) == [
        # 80.00 - 0.01 = 79.99 of 100.00: 79.99 %, under the 80 % warning
        ("alpha", D("79.99"), "EUR", D("100.00"), 79.99, "ok"),
        # 40.00 of 50.00 = exactly 80 %: warn
        ("beta", D("40.00"), "EUR", D("50.00"), 80.0, "warn"),
        ("delta", D("0.00"), "EUR", None, None, "no budget"),
        # 10.01 of 10.00: over
        ("epsilon", D("10.01"), "EUR", D("10.00"), 100.1, "over"),
        # 10.00 of 10.00 = 100 %: still warn, over is above the budget
        ("gamma", D("10.00"), "EUR", D("10.00"), 100.0, "warn"),
        ("platform", D("12.34"), "EUR", None, None, "no budget"),
        ("unmapped", D("0.50"), "EUR", None, None, "no budget"),
    ]
    # every November charge line lands on its tenant: 79.99 + 40.00 + 10.01 + 10.00 + 12.34
    # + 0.50
    assert sum(row["amount"] for row in rows) == D("152.84")


def test_tenant_fields_and_quota_flags(rows):
    columns = ("tenant_id", "tenant_name", "department", "cost_center", "owner", "quota_flags")
    assert pick(rows, *columns) == [
        ("alpha", "Alpha Lab", "Physics", "CC-1", "a@example.com",
         "breach (A100), idle_quota (H100)"),
        ("beta", "Beta Lab", "Physics", "CC-2", None, "chronic_borrowing (A100)"),
        # delta's flags are October's
        ("delta", "Delta Lab", "Biology", "CC-4", None, ""),
        ("epsilon", "Epsilon Lab", "Biology", "CC-5", None, ""),
        ("gamma", "Gamma Lab", "Biology", "CC-3", None, ""),
        # not in the catalog: named by the mart
        ("platform", "Platform (unrecovered)", "Platform", None, None, ""),
        ("unmapped", "Unmapped accounts", "Unmapped", None, None, ""),
    ]  # fmt: skip
    assert {row["billing_month"] for row in rows} == {NOV}
