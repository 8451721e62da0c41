"""cost_views: each job's allocation-based charge beside a utilisation-based one.

Given: the jobs, samples and catalog of test_job_usage.py (real ingest and SQL steps), whose
buckets that file computes by hand; A100 at 2.50 and T4 at 0.05 USD per GPU-hour.
"""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from tests.marts.conftest import pick
from tests.marts.test_job_usage import JOBS, NODES, RATES, SAMPLES, SETTINGS, TENANTS


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    module_month.catalog(settings=SETTINGS, tenants=TENANTS, rates=RATES, nodes=NODES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    return module_month.build("cost_views")


def test_the_utilisation_view_is_the_allocation_view_less_idle_and_zombie_time(rows):
    columns = (
        "job_id", "tenant_id", "idle_zombie_gpu_hours", "allocation_amount",
        "idle_zombie_amount", "utilisation_amount",
    )  # fmt: skip
    assert pick(rows, *columns) == [
        # j1: 4.5 h x 2.50 = 11.25, of which 2 h zombie = 5.00
        ("j1", "chaff", 2.0, D("11.25"), D("5.00"), D("6.25")),
        # j2: 6 GPU-h x 2.50 = 15.00, 2.5 h idle = 6.25
        ("j2", "chaff", 2.5, D("15.00"), D("6.25"), D("8.75")),
        # j3 FAILED and j4 NODE_FAIL hold no idle time: failed time stays in both views (j4's
        # 1.5 h = 3.75 is credited back: 0.00 in both)
        ("j3", "chaff", 0.0, D("2.50"), D("0.00"), D("2.50")),
        ("j4", "chaff", 0.0, D("0.00"), D("0.00"), D("0.00")),
        # j5 and j7: unmeasured time is never assumed idle
        ("j5", "unmapped", 0.0, D("0.01"), D("0.00"), D("0.01")),
        ("j7", "chaff", 0.0, D("0.05"), D("0.00"), D("0.05")),
    ]
    assert {row["currency"] for row in rows} == {"USD"}


def test_failed_runs_are_priced_beside_the_two_views(rows):
    columns = ("job_id", "failed_job_gpu_hours", "failed_job_units", "failed_job_amount")
    assert pick(rows, *columns) == [
        ("j1", 0.0, 0, D("0.00")),
        ("j2", 0.0, 0, D("0.00")),
        # j3 FAILED: its whole hour at 2.50, which its tenant pays
        ("j3", 1.0, 1_512_000_000, D("2.50")),
        # j4 NODE_FAIL: failed_infra, credited back, so no failed-job money
        ("j4", 0.0, 0, D("0.00")),
        ("j5", 0.0, 0, D("0.00")),
        ("j7", 0.0, 0, D("0.00")),
    ]
