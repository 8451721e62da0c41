"""user_efficiency: one row per billing month × tenant × user: GPU-hours, waste, memory use
and energy of the user's jobs (issue 18 item 6).

Given: canonical jobs and samples CSV (with memory and power) and a catalog, built through the
real ingest, rollup and SQL steps (tests/marts/conftest.py, GivenMonth). Samples are declared
10 minutes apart (each stands for 600 s); idle below 5 %, zombie after 2 h; the catalog gives
the A100's memory (81,920 MiB) and not the T4's; notices above 1 idle + zombie GPU-hour.

- j1 (ann, chaff; A100 n1/0) 2026-11-02 00:00-04:16: 00:00-01:00 busy (util 80, 61,440 MiB =
  75 %, 400 W); 01:00-03:30 idle (util 1, 8,192 MiB = 10 %, 100 W), a 2.5 h run: zombie;
  03:30-04:10 busy (util 60, 40,960 MiB = 50 %, 300 W), whose last sample (04:10) covers 6 of
  its 10 minutes before the job ends. Hours 00-04 are whole (the rollup's sums per hour), the
  last 16 minutes come from the samples.
- j4 (ann, chaff; A100 n1/0) 2026-11-05 00:00-03:00: idle all along (util 0), samples without
  memory or power: 3 h zombie, no memory time, no energy.
- j2 (bob, chaff; A100 n1/0) 2026-11-03 10:00-12:00: 1 h idle (util 2, 20,480 MiB, 80 W), then
  1 h busy (util 90, 20,480 MiB, 350 W): a 1 h idle run, not zombie.
- j3 (bob, alpha; T4 n2/0) 2026-11-04 00:00-01:00: busy (util 50, 4,000 MiB, 70 W); the
  catalog has no T4 memory: no memory ratios.
- j5 (cyd, alpha; T4 n2/0) 2026-11-06 00:00-01:00: busy (util 40, 2,000 MiB), no sample reads
  power: no energy figure at all (empty, not 0 kWh).
"""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from pipelines.catalog import load_catalog
from pipelines.reports.exports import write_notices_csv
from tests.marts.conftest import (
    IDLE_RULES,
    JOBS_HEADER,
    UNITS_PER_GPU_HOUR,
    month_params,
    pick,
)

MEMORY_AND_NOTICES = """
    gpu_memory_mib: {A100: 81920}
    notice_idle_gpu_hours: 1
"""
SETTINGS = IDLE_RULES + MEMORY_AND_NOTICES
TENANTS = """
    tenants:
      - {id: chaff, name: Chaffinch Lab, department: Biology, cost_center: CC-1,
         owner: lead@chaff.example, accounts: [chaff]}
      - {id: alpha, name: Alpha Lab, department: Physics, cost_center: CC-2,
         owner: head@alpha.example, accounts: [alpha]}
"""
RATES = """
    rates:
      - {gpu_model: "*", price_per_gpu_hour: 1.00}
"""
NODES = """
    node,cluster,gpu_model,gpus
    n1,c1,A100,1
    n2,c1,T4,1
"""
JOBS = f"""
    {JOBS_HEADER}
    j1,chaff,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T04:16:00,COMPLETED,0
    j2,chaff,bob,batch,normal,A100,1,n1,2026-11-03T10:00:00,2026-11-03T10:00:00,2026-11-03T12:00:00,COMPLETED,0
    j3,alpha,bob,batch,normal,T4,1,n2,2026-11-04T00:00:00,2026-11-04T00:00:00,2026-11-04T01:00:00,COMPLETED,0
    j4,chaff,ann,batch,normal,A100,1,n1,2026-11-05T00:00:00,2026-11-05T00:00:00,2026-11-05T03:00:00,TIMEOUT,0
    j5,alpha,cyd,batch,normal,T4,1,n2,2026-11-06T00:00:00,2026-11-06T00:00:00,2026-11-06T01:00:00,COMPLETED,0
"""


def _samples(node: str, first: str, count: int, util: float, mem="", power="") -> list[str]:
    hour, minute = (int(part) for part in first[11:].split(":"))
    lines = []
    for i in range(count):
        total = hour * 60 + minute + 10 * i
        ts = f"{first[:10]} {total // 60:02d}:{total % 60:02d}:00"
        lines.append(f"{ts},{node},0,{util},{mem},{power}")
    return lines


SAMPLES = "\n".join([
    "ts,node,gpu_index,util_pct,mem_used_mib,power_w",
    *_samples("n1", "2026-11-02 00:00", 6, 80.0, 61440, 400),
    *_samples("n1", "2026-11-02 01:00", 15, 1.0, 8192, 100),
    *_samples("n1", "2026-11-02 03:30", 5, 60.0, 40960, 300),
    *_samples("n1", "2026-11-03 10:00", 6, 2.0, 20480, 80),
    *_samples("n1", "2026-11-03 11:00", 6, 90.0, 20480, 350),
    *_samples("n2", "2026-11-04 00:00", 6, 50.0, 4000, 70),
    *_samples("n1", "2026-11-05 00:00", 18, 0.0),
    *_samples("n2", "2026-11-06 00:00", 6, 40.0, 2000),
])  # fmt: skip


def hours(minutes: int) -> float:
    """Minutes of one GPU as GPU-hours, computed as the mart does (units / 1,512,000,000)."""
    return minutes * 60_000 * 420 / UNITS_PER_GPU_HOUR


def build(month) -> list[dict]:
    month.catalog(settings=SETTINGS, tenants=TENANTS, rates=RATES, nodes=NODES)
    month.file("landing/scheduler/c1/jobs.csv", JOBS)
    month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    return month.build("user_efficiency")


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    return build(module_month)


def test_gpu_hours_and_waste_per_user(rows):
    columns = (
        "tenant_id", "department", "user", "jobs", "allocated_gpu_hours", "measured_gpu_hours",
        "productive_gpu_hours", "productive_share_pct", "idle_gpu_hours", "zombie_gpu_hours",
        "idle_zombie_gpu_hours",
    )  # fmt: skip
    assert pick(rows, *columns) == [
        # bob's T4 hour, all busy
        ("alpha", "Physics", "bob", 1, 1.0, 1.0, 1.0, 100.0, 0.0, 0.0, 0.0),
        ("alpha", "Physics", "cyd", 1, 1.0, 1.0, 1.0, 100.0, 0.0, 0.0, 0.0),
        # ann: j1 4 h 16 min + j4 3 h; productive 60 + 46 min of j1; zombie 2.5 h (j1) + 3 h
        # (j4): the jobs' buckets summed
        ("chaff", "Biology", "ann", 2, hours(256 + 180), hours(256 + 180), hours(106),
         100.0 * 106 / 436, 0.0, 5.5, 5.5),
        # bob: j2's idle hour is a run shorter than 2 h: idle, not zombie
        ("chaff", "Biology", "bob", 1, 2.0, 2.0, 1.0, 50.0, 1.0, 0.0, 1.0),
    ]  # fmt: skip


def test_memory_use_over_the_gpus_memory(rows):
    columns = ("tenant_id", "user", "memory_measured_gpu_hours", "mean_memory_pct",
               "peak_memory_pct", "peak_memory_mib")  # fmt: skip
    assert pick(rows, *columns) == [
        # the catalog gives no T4 memory: no ratio, never a guess (the MiB read are shown)
        ("alpha", "bob", 1.0, None, None, 4000),
        ("alpha", "cyd", 1.0, None, None, 2000),
        # ann: (60 min x 75 % + 150 min x 10 % + 46 min x 50 %) / 256 min = 8,300 / 256; j4's
        # samples read no memory and weigh nothing; the peak is j1's first hour
        ("chaff", "ann", hours(256), 32.421875, 75.0, 61440),
        ("chaff", "bob", 2.0, 25.0, 25.0, 20480),
    ]


def test_energy_is_covered_time_times_power(rows):
    assert pick(rows, "tenant_id", "user", "power_measured_gpu_hours", "energy_kwh") == [
        # 1 h x 70 W
        ("alpha", "bob", 1.0, D("0.070")),
        # no sample read power: no energy figure, not 0 kWh
        ("alpha", "cyd", 0.0, None),
        # j1: 1 h x 400 W + 2.5 h x 100 W + 46 min x 300 W (the last sample's 4 minutes past
        # the job's end are not the job's) = 400 + 250 + 230 Wh over j1's 256 minutes; j4's
        # 3 hours read no power and add neither energy nor power-measured time
        ("chaff", "ann", hours(256), D("0.880")),
        # 1 h x 80 W + 1 h x 350 W
        ("chaff", "bob", 2.0, D("0.430")),
    ]


def test_idlest_jobs_and_who_is_notified(rows):
    assert pick(rows, "tenant_id", "user", "idlest_jobs", "is_notified") == [
        ("alpha", "bob", None, False),
        ("alpha", "cyd", None, False),
        # most idle + zombie GPU-hours first
        ("chaff", "ann", "c1/j4 (3.00); c1/j1 (2.50)", True),
        # exactly at the threshold (1 GPU-hour) is not above it
        ("chaff", "bob", "c1/j2 (1.00)", False),
    ]


def test_the_notices_csv_names_each_user_past_the_threshold(module_month, rows, tmp_path):
    settings = load_catalog(module_month.root / "catalog").settings
    out = tmp_path / "notices-2026-11.csv"
    assert write_notices_csv(module_month.con, month_params(settings), out) == 1
    assert out.read_bytes().decode() == (
        "billing_month,user,tenant_id,tenant_name,department,address,address_source,jobs,"
        "allocated_gpu_hours,idle_gpu_hours,zombie_gpu_hours,idle_zombie_gpu_hours,"
        "threshold_gpu_hours,productive_share_pct,mean_util_pct,mean_memory_pct,"
        "peak_memory_pct,power_measured_gpu_hours,energy_kwh,idlest_jobs\n"
        # ann only (bob's 1.00 is not above 1): 436 min = 7.27 GPU-h; 106 / 436 productive;
        # utilisation (60 x 80 + 150 x 1 + 46 x 60 + 180 x 0) / 436 = 17.68; the address is
        # chaff's owner (no users file)
        "2026-11,ann,chaff,Chaffinch Lab,Biology,lead@chaff.example,tenant owner,2,"
        "7.27,0.00,5.50,5.50,1.000,24.31,17.68,32.42,75.00,4.27,0.880,c1/j4 (3.00); c1/j1 (2.50)\n"
    )
