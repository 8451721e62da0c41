"""job_usage: one row per job × billing month, its allocated hours split into the waste buckets.

Given: canonical jobs and samples CSV and a catalog, built through the real ingest and SQL
steps (tests/marts/conftest.py, GivenMonth): the buckets come from the telemetry rollup,
job_sample_time and job_time_buckets, so the rules are tested where they are computed.

Catalog: node n1 holds 4 A100 (2.50 USD/GPU-hour), n2 one T4 (0.05). Idle threshold 5 %,
zombie after 2 h, samples declared 10 minutes apart (each stands for 600 s).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tests.marts.conftest import (
    CHAFF_TENANT,
    IDLE_RULES,
    JOBS_HEADER,
    UNITS_PER_GPU_HOUR,
    pick,
    samples,
    samples_csv,
)

SETTINGS, TENANTS = IDLE_RULES, CHAFF_TENANT
RATES = """
    rates:
      - {gpu_model: A100, price_per_gpu_hour: 2.50}
      - {gpu_model: T4, price_per_gpu_hour: 0.05}
"""
NODES = """
    node,cluster,gpu_model,gpus
    n1,c1,A100,4
    n2,c1,T4,1
"""
JOBS = f"""
    {JOBS_HEADER}
    j1,chaff,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T04:30:00,COMPLETED,0
    j2,chaff,ann,batch,normal,A100,2,n1,2026-11-03T00:00:00,2026-11-03T00:00:00,2026-11-03T03:00:00,COMPLETED,0
    j3,chaff,ann,batch,normal,A100,1,n1,2026-11-04T10:00:00,2026-11-04T10:00:00,2026-11-04T11:00:00,FAILED,1
    j4,chaff,ann,batch,normal,A100,1,n1,2026-11-04T12:00:00,2026-11-04T12:00:00,2026-11-04T13:30:00,NODE_FAIL,
    j5,ghost,gus,batch,normal,T4,1,n2,2026-11-05T00:00:00,2026-11-05T00:00:00,2026-11-05T00:06:00,COMPLETED,0
    j6,chaff,ann,batch,normal,A100,1,,2026-11-06T00:00:00,,,PENDING,
    j7,chaff,ann,batch,normal,T4,1,n2,2026-10-31T22:00:00,2026-10-31T23:00:00,2026-11-01T01:00:00,COMPLETED,0
"""
SAMPLES = samples_csv(
    # j1 (GPU n1/0): util at the threshold is busy; then an idle run of exactly 2 h; busy
    samples("n1", 0, "2026-11-02 00:00", 6, 5.0),
    samples("n1", 0, "2026-11-02 01:00", 12, 2.0),
    samples("n1", 0, "2026-11-02 03:00", 6, 81.0),
    # j2 (GPUs n1/0 and n1/1, assigned lowest free first): 1.5 h idle, 30 min busy, 1 h idle
    # on its first GPU; nothing on its second
    samples("n1", 0, "2026-11-03 00:00", 9, 3.0),
    samples("n1", 0, "2026-11-03 01:30", 3, 60.0),
    samples("n1", 0, "2026-11-03 02:00", 6, 3.0),
    # j3 (FAILED) ran busy
    samples("n1", 0, "2026-11-04 10:00", 6, 90.0),
)


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    module_month.catalog(settings=SETTINGS, tenants=TENANTS, rates=RATES, nodes=NODES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    return module_month.build("job_usage")


def hours(h: int, m: int = 0) -> float:
    """A duration as GPU-hours computed the way the mart does (units / 1,512,000,000.0)."""
    return (h * 60 + m) * 60_000 * 420 / UNITS_PER_GPU_HOUR


def test_waste_buckets_of_each_job(rows):
    columns = (
        "job_id", "state", "allocated_gpu_hours", "measured_gpu_hours", "productive_gpu_hours",
        "idle_gpu_hours", "zombie_gpu_hours", "failed_job_gpu_hours", "failed_infra_gpu_hours",
        "unmeasured_gpu_hours",
    )  # fmt: skip
    assert pick(rows, *columns) == [
        # j1, 4.5 h on one GPU: 1 h at util 5.0 = productive (idle is util < 5, not <= 5);
        # 2 h of util 2.0 = an idle run of exactly zombie_min_hours = zombie; 1 h at 81 =
        # productive; 04:00-04:30 has no sample = unmeasured 0.5, never idle
        ("j1", "COMPLETED", 4.5, 4.0, 2.0, 0.0, 2.0, 0.0, 0.0, 0.5),
        # j2, 2 GPUs x 3 h = 6.0: GPU 0 idle 1.5 h + 1 h (the busy half hour breaks the run:
        # 2.5 h idle, no run of 2 h, so no zombie) and busy 0.5 h; GPU 1 unmeasured 3 h
        ("j2", "COMPLETED", 6.0, 3.0, 0.5, 2.5, 0.0, 0.0, 0.0, 3.0),
        # j3 FAILED: all its hour is failed_job, busy samples or not (measured 1 h)
        ("j3", "FAILED", 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0),
        # j4 NODE_FAIL: all its 1.5 h is failed_infra
        ("j4", "NODE_FAIL", 1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5, 0.0),
        # j5: 6 minutes, no samples
        ("j5", "COMPLETED", hours(0, 6), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, hours(0, 6)),
        # j6 never started: a row (submitted in November) allocating nothing
        ("j6", "PENDING", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        # j7 ran 23:00 Oct 31 - 01:00 Nov 1: clipped to its November hour
        ("j7", "COMPLETED", 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0),
    ]
    assert hours(0, 6) == 0.1


def test_utilisation_is_the_sample_weighted_mean_of_measured_time(rows):
    assert pick(rows, "job_id", "mean_util_pct") == [
        # (1 h x 5.0 + 2 h x 2.0 + 1 h x 81.0) / 4 h = 90 / 4
        ("j1", 22.5),
        # (2.5 h x 3.0 + 0.5 h x 60.0) / 3 h measured (the unmeasured GPU does not count)
        ("j2", 12.5),
        ("j3", 90.0),
        # no sample: no utilisation, not 0 %
        ("j4", None),
        ("j5", None),
        ("j6", None),
        ("j7", None),
    ]


def test_amount_tenant_and_job_fields(rows):
    columns = ("job_id", "tenant_id", "account", "gpu_model", "gpus", "start_at", "end_at",
               "amount", "currency")  # fmt: skip
    nov = dt.datetime
    assert pick(rows, *columns) == [
        # 4.5 GPU-h x 2.50 = 11.25
        ("j1", "chaff", "chaff", "A100", 1.0, nov(2026, 11, 2), nov(2026, 11, 2, 4, 30),
         Decimal("11.25"), "USD"),
        # 6.0 x 2.50 = 15.00
        ("j2", "chaff", "chaff", "A100", 2.0, nov(2026, 11, 3), nov(2026, 11, 3, 3),
         Decimal("15.00"), "USD"),
        # a failed job is charged: 1.0 x 2.50
        ("j3", "chaff", "chaff", "A100", 1.0, nov(2026, 11, 4, 10), nov(2026, 11, 4, 11),
         Decimal("2.50"), "USD"),
        # NODE_FAIL: 1.5 x 2.50 = 3.75 charged and 3.75 credited back: 0.00
        ("j4", "chaff", "chaff", "A100", 1.0, nov(2026, 11, 4, 12), nov(2026, 11, 4, 13, 30),
         Decimal("0.00"), "USD"),
        # account ghost maps to no tenant: unmapped. 0.1 x 0.05 = 0.005, half up: 0.01
        ("j5", "unmapped", "ghost", "T4", 1.0, nov(2026, 11, 5), nov(2026, 11, 5, 0, 6),
         Decimal("0.01"), "USD"),
        # never started: the tenant of its account at submission, nothing charged
        ("j6", "chaff", "chaff", "A100", 1.0, None, None, Decimal("0.00"), "USD"),
        # the November hour only: 1.0 x 0.05
        ("j7", "chaff", "chaff", "T4", 1.0, nov(2026, 10, 31, 23), nov(2026, 11, 1, 1),
         Decimal("0.05"), "USD"),
    ]  # fmt: skip
    assert all(row["billing_month"] == dt.date(2026, 11, 1) for row in rows)
