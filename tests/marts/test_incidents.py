"""incidents and availability: outage windows, node failures and telemetry silences of a month,
and the availability, MTTR and MTBF they give per node, GPU model and cluster.

Given (through the real ingest and SQL steps, tests/marts/conftest.py GivenMonth), November
2026 (720 h), cluster c1:
- n1 (A100, 2 GPUs) and n2 (A100, 2 GPUs) in service all month; n3 (H100, 1 GPU) from the 16th
  (360 h).
- outages.yaml: n1 down 10th 00:00-06:00 (psu); n2 down 30th 20:00 to December 1st 04:00
  (cooling: 4 h of it in November, not recovered in the month).
- Jobs: j1 on n1 ends NODE_FAIL at the n1 outage's start (one of its jobs hit); j3 on n1 and n2
  ends NODE_FAIL on the 20th at 03:00 with no outage (Slurm does not say which node failed);
  j4 on n2 ends NODE_FAIL on the 25th at 01:00; j5 on n3 16th 00:30-01:30; j6 on n1 15th
  14:00-16:00.
- Telemetry every 10 minutes (declared step 600 s), a silence is 60 min or more:
  n1 reports all month but 10th 00:00-08:00 (the outage explains 00:00-06:00: 06:00-08:00 is
  silent), 12th 10:10-11:00 (50 min: too short) and 15th 12:00-15:00; its GPU 1 alone also
  misses 5th 00:00-03:00 (GPU 0 reports: the node is not silent). n3 reports from 16th 02:00
  (silent from entering service at 00:00). n2 never reports: missing, not silent.
"""

from __future__ import annotations

import datetime as dt

import pytest

from tests.marts.conftest import CHAFF_TENANT, IDLE_RULES, JOBS_HEADER, pick

T = dt.datetime
SETTINGS = IDLE_RULES + "    silence_min_minutes: 60\n"
RATES = """
    rates:
      - {gpu_model: "*", price_per_gpu_hour: 1.00}
"""
NODES = """
    node,cluster,gpu_model,gpus,in_service_from
    n1,c1,A100,2,
    n2,c1,A100,2,
    n3,c1,H100,1,2026-11-16
"""
OUTAGES = """
    outages:
      - {cluster: c1, nodes: n1, start: 2026-11-10T00:00:00, end: 2026-11-10T06:00:00, reason: psu}
      - {cluster: c1, nodes: n2, start: 2026-11-30T20:00:00, end: 2026-12-01T04:00:00,
         reason: cooling}
"""
JOBS = f"""
    {JOBS_HEADER}
    j1,chaff,ann,batch,normal,A100,2,n1,2026-11-09T19:00:00,2026-11-09T20:00:00,2026-11-10T00:00:00,NODE_FAIL,0
    j3,chaff,ann,batch,normal,A100,4,"n[1-2]",2026-11-20T00:00:00,2026-11-20T00:00:00,2026-11-20T03:00:00,NODE_FAIL,0
    j4,chaff,ann,batch,normal,A100,1,n2,2026-11-25T00:00:00,2026-11-25T00:00:00,2026-11-25T01:00:00,NODE_FAIL,0
    j5,chaff,ann,batch,normal,H100,1,n3,2026-11-16T00:00:00,2026-11-16T00:30:00,2026-11-16T01:30:00,COMPLETED,0
    j6,chaff,ann,batch,normal,A100,1,n1,2026-11-15T14:00:00,2026-11-15T14:00:00,2026-11-15T16:00:00,COMPLETED,0
"""


def every_10_min(node: str, gpu: int, *spans: tuple[str, str]) -> list[str]:
    """Samples CSV lines every 10 minutes over each [from, to) span."""
    lines = []
    for first, until in spans:
        at, end = dt.datetime.fromisoformat(first), dt.datetime.fromisoformat(until)
        while at < end:
            lines.append(f"{at:%Y-%m-%d %H:%M:%S},{node},{gpu},50")
            at += dt.timedelta(minutes=10)
    return lines


N1_SPANS = (
    ("2026-11-01T00:00", "2026-11-10T00:00"),
    ("2026-11-10T08:00", "2026-11-12T10:10"),
    ("2026-11-12T11:00", "2026-11-15T12:00"),
    ("2026-11-15T15:00", "2026-12-01T00:00"),
)


def n1_gpu1_spans():
    # N1_SPANS with 5th 00:00-03:00 cut out of the first
    first, *rest = N1_SPANS
    return (
        (first[0], "2026-11-05T00:00"), ("2026-11-05T03:00", first[1]), *rest
    )  # fmt: skip


SAMPLES = "\n".join([
    "ts,node,gpu_index,util_pct",
    *every_10_min("n1", 0, *N1_SPANS),
    *every_10_min("n1", 1, *n1_gpu1_spans()),
    *every_10_min("n3", 0, ("2026-11-16T02:00", "2026-12-01T00:00")),
])  # fmt: skip


@pytest.fixture(scope="module")
def month(module_month):
    module_month.catalog(
        settings=SETTINGS, tenants=CHAFF_TENANT, rates=RATES, nodes=NODES, outages=OUTAGES
    )
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    return module_month


INCIDENT_COLUMNS = (
    "node", "gpu_model", "gpus", "source", "inferred", "cause", "started_at", "ended_at",
    "duration_hours", "recovered_in_month", "month_ms", "gpu_hours", "jobs_hit", "job_ids",
)  # fmt: skip


def test_incidents_of_the_month(month):
    rows = month.build("incidents")
    assert pick(rows, *INCIDENT_COLUMNS) == [
        ("n1", "A100", 2, "outage_window", False, "psu", T(2026, 11, 10), T(2026, 11, 10, 6),
         6.0, True, 21_600_000, 12.0, 1, ["j1"]),
        # the silence of 00:00-08:00 less the outage
        ("n1", "A100", 2, "telemetry_silence", True, "telemetry silence", T(2026, 11, 10, 6),
         T(2026, 11, 10, 8), 2.0, True, 7_200_000, 4.0, 0, []),
        # from the 11:50 sample's covered 10 minutes to the 15:00 sample; j6 ran in it
        ("n1", "A100", 2, "telemetry_silence", True, "telemetry silence", T(2026, 11, 15, 12),
         T(2026, 11, 15, 15), 3.0, True, 10_800_000, 6.0, 1, ["j6"]),
        ("n3", "H100", 1, "telemetry_silence", True, "telemetry silence", T(2026, 11, 16),
         T(2026, 11, 16, 2), 2.0, True, 7_200_000, 2.0, 1, ["j5"]),
        # no outage covers it; either node may have failed; the recovery is not recorded
        ("n1,n2", "A100", 4, "node_fail", False, "NODE_FAIL", T(2026, 11, 20, 3), None,
         None, False, None, None, 1, ["j3"]),
        ("n2", "A100", 2, "node_fail", False, "NODE_FAIL", T(2026, 11, 25, 1), None,
         None, False, None, None, 1, ["j4"]),
        # 8 h long, 4 of them in November; it ends in December
        ("n2", "A100", 2, "outage_window", False, "cooling", T(2026, 11, 30, 20),
         T(2026, 12, 1, 4), 8.0, False, 14_400_000, 8.0, 0, []),
    ]  # fmt: skip


AVAILABILITY_COLUMNS = (
    "level", "gpu_model", "node", "in_service_gpu_hours", "down_gpu_hours", "availability_pct",
    "incidents", "recovered", "mttr_hours", "mtbf_hours", "jobs_hit", "inferred_incidents",
    "silent_gpu_hours",
)  # fmt: skip


def test_availability_per_node_model_and_cluster(month):
    rows = month.build("availability")
    assert pick(rows, *AVAILABILITY_COLUMNS) == [
        # 3,240 GPU-h in service (n1, n2: 2 × 720; n3: 360), 20 down (n1 2 × 6, n2 2 × 4);
        # 4 incidents: 2 outages, 2 node failures; MTBF: (714 + 716 + 360) node-hours up / 4
        ("cluster", None, None, 3240.0, 20.0, pytest.approx(100 * 3220 / 3240), 4, 1, 6.0,
         447.5, 3, 3, 12.0),
        # the failure of j3 on n1 and n2 counts for A100: (714 + 716) / 4
        ("gpu_model", "A100", None, 2880.0, 20.0, pytest.approx(100 * 2860 / 2880), 4, 1, 6.0,
         357.5, 3, 2, 10.0),
        ("gpu_model", "H100", None, 360.0, 0.0, 100.0, 0, 0, None, None, 0, 1, 2.0),
        ("node", "A100", "n1", 1440.0, 12.0, pytest.approx(100 * 1428 / 1440), 1, 1, 6.0,
         714.0, 1, 2, 10.0),
        # the cooling outage is not over: no MTTR; 716 h up over its 2 incidents
        ("node", "A100", "n2", 1440.0, 8.0, pytest.approx(100 * 1432 / 1440), 2, 0, None,
         358.0, 1, 0, 0.0),
        ("node", "H100", "n3", 360.0, 0.0, 100.0, 0, 0, None, None, 0, 1, 2.0),
    ]  # fmt: skip


def every(minutes: int, node: str, gpu: int, first: str, until: str) -> list[str]:
    """Samples CSV lines every `minutes` over [first, until)."""
    at, end = dt.datetime.fromisoformat(first), dt.datetime.fromisoformat(until)
    lines = []
    while at < end:
        lines.append(f"{at:%Y-%m-%d %H:%M:%S},{node},{gpu},50")
        at += dt.timedelta(minutes=minutes)
    return lines


def test_a_silence_starts_when_the_last_covered_time_of_any_gpu_ends(given_month):
    # n1's GPU 0 reports every 10 minutes (its own step, no step declared), GPU 1 every minute;
    # on the 2nd both stop, GPU 0 after 12:00 and GPU 1 after 12:05, until 14:00. GPU 0's
    # 12:00 sample stands for 10 minutes: the node is silent from 12:10, not from 12:06, the
    # end of the latest sample's minute.
    given_month.catalog(
        settings="idle_threshold_pct: 5\nsilence_min_minutes: 60\n",
        tenants=CHAFF_TENANT, rates=RATES, nodes="node,cluster,gpu_model,gpus\nn1,c1,A100,2\n",
    )  # fmt: skip
    given_month.file("landing/scheduler/c1/jobs.csv", JOBS_HEADER + "\n")
    given_month.file("landing/telemetry/c1/samples.csv", "\n".join([
        "ts,node,gpu_index,util_pct",
        *every(10, "n1", 0, "2026-11-02T00:00", "2026-11-02T12:10"),
        *every(10, "n1", 0, "2026-11-02T14:00", "2026-11-03T00:00"),
        *every(1, "n1", 1, "2026-11-02T00:00", "2026-11-02T12:06"),
        *every(1, "n1", 1, "2026-11-02T14:00", "2026-11-03T00:00"),
    ]))  # fmt: skip
    rows = given_month.build("incidents")
    # and silent before the 2nd's first samples and after its last ones' covered time
    assert pick(rows, "node", "source", "started_at", "ended_at") == [
        ("n1", "telemetry_silence", T(2026, 11, 1), T(2026, 11, 2)),
        ("n1", "telemetry_silence", T(2026, 11, 2, 12, 10), T(2026, 11, 2, 14)),
        ("n1", "telemetry_silence", T(2026, 11, 3), T(2026, 12, 1)),
    ]
