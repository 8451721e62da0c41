"""A reorganisation mid-month (tenants.yaml account mappings with valid_from / valid_to): a job
running across it is charged to each tenant for its hours, and counts in each tenant's usage,
waste, quota and daily figures for its days with that tenant, so the tenants' figures agree
with their charges. Given: GivenMonth (canonical jobs CSV, the real steps)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tests.marts.conftest import JOBS_HEADER, GivenMonth, pick, records

TENANTS = """
    tenants:
      - {id: alpha, name: Alpha Lab, department: Physics, cost_center: CC-1,
         accounts: [{account: proj, valid_to: 2026-11-15}]}
      - {id: beta, name: Beta Lab, department: Biology, cost_center: CC-2,
         accounts: [{account: proj, valid_from: 2026-11-15}]}
"""
QUOTAS = """
    quotas:
      - {tenant: alpha, pool: A100, guaranteed_gpus: 1, limit_gpus: 1}
      - {tenant: beta, pool: A100, guaranteed_gpus: 1, limit_gpus: 1}
"""


@pytest.fixture(scope="module")
def month(module_month: GivenMonth) -> GivenMonth:
    module_month.catalog(
        tenants=TENANTS,
        rates="rates:\n  - {gpu_model: A100, price_per_gpu_hour: 1.00}\n",
        quotas=QUOTAS,
        nodes="node,cluster,gpu_model,gpus\nn1,c1,A100,4\n",
    )
    # one GPU from the 10th to the 21st: 5 days (120 h) with alpha, 6 days (144 h) with beta
    module_month.file(
        "landing/scheduler/c1/jobs.csv",
        f"""
        {JOBS_HEADER}
        j1,proj,ann,batch,normal,A100,1,n1,2026-11-10T00:00:00,2026-11-10T00:00:00,2026-11-21T00:00:00,COMPLETED,0
        """,
    )
    module_month.build("tenant_month")
    return module_month


def test_each_tenant_is_charged_its_hours(month):
    rows = records(month.con.execute(
        "select tenant_id, gpu_hours, amount from charge_lines order by tenant_id"
    ))  # fmt: skip
    assert pick(rows, "tenant_id", "gpu_hours", "amount") == [
        ("alpha", 120.0, Decimal("120.00")),
        ("beta", 144.0, Decimal("144.00")),
    ]


def test_each_tenants_usage_is_its_days_of_the_job(month):
    rows = records(month.con.execute(
        "select tenant_id, jobs, allocated_gpu_hours, unmeasured_gpu_hours, amount "
        "from tenant_month order by tenant_id"
    ))  # fmt: skip
    # the job is named for beta (most of its time) in job_usage, and counted once, there
    assert pick(rows, "tenant_id", "jobs", "allocated_gpu_hours", "unmeasured_gpu_hours",
                "amount") == [
        ("alpha", 0, 120.0, 120.0, Decimal("120.00")),
        ("beta", 1, 144.0, 144.0, Decimal("144.00")),
    ]  # fmt: skip
    [(tenant, amount)] = month.con.execute("select tenant_id, amount from job_usage").fetchall()
    assert (tenant, amount) == ("beta", Decimal("264.00"))


def test_each_tenants_quota_use_is_its_days_of_the_job(month):
    month.build("quota_compliance")
    rows = records(month.con.execute(
        "select tenant_id, pool, used_gpu_hours, peak_gpus from quota_compliance "
        "where pool = 'A100' order by tenant_id"
    ))  # fmt: skip
    assert pick(rows, "tenant_id", "pool", "used_gpu_hours", "peak_gpus") == [
        ("alpha", "A100", 120.0, 1.0),
        ("beta", "A100", 144.0, 1.0),
    ]


def test_each_day_counts_for_the_tenant_of_that_day(month):
    month.build("utilization_daily")
    rows = month.con.execute(
        "select day, tenant_id, allocated_gpu_hours from utilization_daily "
        "where level = 'tenant' and day between '2026-11-14' and '2026-11-15' order by day"
    ).fetchall()
    assert rows == [(dt.date(2026, 11, 14), "alpha", 24.0), (dt.date(2026, 11, 15), "beta", 24.0)]
