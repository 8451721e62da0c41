"""capacity_buckets: one row per billing month × cluster × GPU model × waste bucket, plus the
capacity; the eight buckets sum to the capacity exactly when the inventory knows it.

Given: canonical jobs and samples CSV and a catalog, built through the real ingest and SQL
steps (tests/marts/conftest.py, GivenMonth): job time comes from job_time_buckets, free time
(down, unallocated) and capacity from gpu_capacity's sweep over each GPU's timeline.

Inventory: n1 with 2 A100 all November (2 x 720 h = 1,440 GPU-h), n2 with 1 T4 in service
from Nov 16 (15 days = 360 GPU-h); x9 (an H100 a job ran on) is not in it.
Outage of n1, Nov 10 00:00-04:00 (2 GPUs x 4 h = 8 GPU-h of outage).
Samples declared 10 minutes apart; idle below 5 %, zombie after 2 h.

Job  GPU     November time            state      buckets (GPU-h)
a    n1/0    Nov 2 00:00-03:00        COMPLETED  productive 1, zombie 2 (2 h idle run)
b    n1/1    Nov 2 00:00-01:00        COMPLETED  idle 0.5 (30 min of idle samples),
                                                 unmeasured 0.5 (no samples)
c    n1/0    Nov 10 02:00-06:00       FAILED     failed_infra 2 (inside the outage),
                                                 failed_job 2
d    n2/0    Nov 20 00:00-01:30       NODE_FAIL  failed_infra 1.5
e    x9/0    Nov 3 00:00-01:00        COMPLETED  unmeasured 1 (H100: no capacity known)
"""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from tests.marts.conftest import (
    CHAFF_TENANT,
    IDLE_RULES,
    JOBS_HEADER,
    ONE_RATE,
    GivenMonth,
    pick,
    samples,
    samples_csv,
    units,
)

SETTINGS, TENANTS, RATES = IDLE_RULES, CHAFF_TENANT, ONE_RATE
NODES = """
    node,cluster,gpu_model,gpus,in_service_from
    n1,c1,A100,2,
    n2,c1,T4,1,2026-11-16
"""
OUTAGES = """
    outages:
      - {nodes: n1, start: 2026-11-10T00:00:00, end: 2026-11-10T04:00:00, reason: maintenance}
"""
JOBS = f"""
    {JOBS_HEADER}
    a,chaff,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T03:00:00,COMPLETED,0
    b,chaff,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T01:00:00,COMPLETED,0
    c,chaff,ann,batch,normal,A100,1,n1,2026-11-10T02:00:00,2026-11-10T02:00:00,2026-11-10T06:00:00,FAILED,1
    d,chaff,ann,batch,normal,T4,1,n2,2026-11-20T00:00:00,2026-11-20T00:00:00,2026-11-20T01:30:00,NODE_FAIL,
    e,chaff,ann,batch,normal,H100,1,x9,2026-11-03T00:00:00,2026-11-03T00:00:00,2026-11-03T01:00:00,COMPLETED,0
"""
SAMPLES = samples_csv(
    samples("n1", 0, "2026-11-02 00:00", 6, 80.0),  # a: busy hour
    samples("n1", 0, "2026-11-02 01:00", 12, 1.0),  # a: 2 h idle run: zombie
    samples("n1", 1, "2026-11-02 00:00", 3, 1.0),  # b: 30 min idle, then no samples
)


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    module_month.catalog(
        settings=SETTINGS, tenants=TENANTS, rates=RATES, nodes=NODES, outages=OUTAGES
    )
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    return module_month.build("capacity_buckets")


def test_every_bucket_of_each_pool(rows):
    assert pick(rows, "cluster", "gpu_model", "bucket", "gpu_hours", "gpu_units") == [
        # 2 GPUs x 720 h
        ("c1", "A100", "capacity", 1440.0, units(1440)),
        # outage: 2 GPUs x 4 h = 8, less the 2 h job c held GPU 0 in it
        ("c1", "A100", "down", 6.0, units(6)),
        # job c's 2 h inside the outage (not the tenant's fault)
        ("c1", "A100", "failed_infra", 2.0, units(2)),
        # job c's other 2 h: its own failure
        ("c1", "A100", "failed_job", 2.0, units(2)),
        ("c1", "A100", "idle", 0.5, units(0.5)),
        ("c1", "A100", "productive", 1.0, units(1)),
        # 1,440 - held (a 3 + b 1 + c 4 = 8) - down 6
        ("c1", "A100", "unallocated", 1426.0, units(1426)),
        ("c1", "A100", "unmeasured", 0.5, units(0.5)),
        ("c1", "A100", "zombie", 2.0, units(2)),
        # job e's node is not in the inventory: its time is bucketed, no capacity is known
        ("c1", "H100", "failed_infra", 0.0, 0),
        ("c1", "H100", "failed_job", 0.0, 0),
        ("c1", "H100", "idle", 0.0, 0),
        ("c1", "H100", "productive", 0.0, 0),
        ("c1", "H100", "unmeasured", 1.0, units(1)),
        ("c1", "H100", "zombie", 0.0, 0),
        # in service from Nov 16: 15 days x 24 h x 1 GPU
        ("c1", "T4", "capacity", 360.0, units(360)),
        ("c1", "T4", "down", 0.0, 0),
        ("c1", "T4", "failed_infra", 1.5, units(1.5)),
        ("c1", "T4", "failed_job", 0.0, 0),
        ("c1", "T4", "idle", 0.0, 0),
        ("c1", "T4", "productive", 0.0, 0),
        # 360 - 1.5 held by job d
        ("c1", "T4", "unallocated", 358.5, units(358.5)),
        ("c1", "T4", "unmeasured", 0.0, 0),
        ("c1", "T4", "zombie", 0.0, 0),
    ]


def test_buckets_sum_to_capacity_where_the_inventory_knows_it(rows):
    sums: dict[str, int] = {}
    capacity: dict[str, int] = {}
    for row in rows:
        into = capacity if row["bucket"] == "capacity" else sums
        into[row["gpu_model"]] = into.get(row["gpu_model"], 0) + row["gpu_units"]
    assert capacity == {"A100": units(1440), "T4": units(360)}
    assert {model: sums[model] for model in capacity} == capacity


def test_rate_card_prices_every_bucket_at_the_pools_charged_rate(rows):
    # ONE_RATE: every GPU-hour at 1.00, so each bucket's amount is its GPU-hours; the H100
    # pool has no capacity row (no inventory) but its job time is priced
    amounts = {(r["gpu_model"], r["bucket"]): r["amount"] for r in rows}
    assert {k: v for k, v in amounts.items() if v} == {
        ("A100", "capacity"): D("1440.00"), ("A100", "down"): D("6.00"),
        ("A100", "failed_infra"): D("2.00"), ("A100", "failed_job"): D("2.00"),
        ("A100", "idle"): D("0.50"), ("A100", "productive"): D("1.00"),
        ("A100", "unallocated"): D("1426.00"), ("A100", "unmeasured"): D("0.50"),
        ("A100", "zombie"): D("2.00"), ("H100", "unmeasured"): D("1.00"),
        ("T4", "capacity"): D("360.00"), ("T4", "failed_infra"): D("1.50"),
        ("T4", "unallocated"): D("358.50"),
    }  # fmt: skip
    assert {r["currency"] for r in rows} == {"USD"}


def test_full_recovery_spreads_each_pools_cost_over_its_buckets_to_the_cent(tmp_path):
    # n1's 2 A100 cost 1,000.00 a month, n2's T4 72.00; two jobs without telemetry hold
    # 6 + 2 A100 GPU-hours: unmeasured 8 of 1,440 GPU-h = 555.56 cents, unallocated 1,432 =
    # 99,444.44: floors 555 + 99,444, the cent left to the larger remainder (unmeasured)
    month = GivenMonth(tmp_path)
    try:
        month.catalog(
            settings="cost_mode: full_recovery\nidle_sharing: weighted\n", tenants=TENANTS,
            rates=RATES, nodes="""
                node,cluster,gpu_model,gpus,monthly_cost
                n1,c1,A100,2,1000.00
                n2,c1,T4,1,72.00
            """,
        )  # fmt: skip
        month.file("landing/scheduler/c1/jobs.csv", f"""
            {JOBS_HEADER}
            a1,chaff,ann,batch,normal,A100,2,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T03:00:00,COMPLETED,0
            b1,chaff,ann,batch,normal,A100,1,n1,2026-11-03T00:00:00,2026-11-03T00:00:00,2026-11-03T02:00:00,COMPLETED,0
        """)  # fmt: skip
        rows = month.build("capacity_buckets")
    finally:
        month.close()
    assert [(r["gpu_model"], r["bucket"], r["amount"]) for r in rows if r["amount"]] == [
        ("A100", "capacity", D("1000.00")),
        ("A100", "unallocated", D("994.44")),
        ("A100", "unmeasured", D("5.56")),
        ("T4", "capacity", D("72.00")),
        ("T4", "unallocated", D("72.00")),
    ]
