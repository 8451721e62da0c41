"""Given/expect tests for the governance marts (on the demo month: tests/e2e/test_demo_month.py).

Each given/expect test builds the input tables of one SQL file in an in-memory DuckDB with a
handful of rows whose results are computed by hand in the comments, then runs the file exactly
as the pipeline does (pipelines.sql.run with bound parameters).
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest
from pytest import approx

from pipelines.defs.governance.assets import _label_files
from pipelines.defs.resources import prepare_connection
from pipelines.sql import replace_month, run
from tests.conftest import month_run, write
from tests.marts.conftest import ALPHA_TENANT, ONE_RATE, GivenMonth

T = dt.datetime
NOV = {
    "billing_month": dt.date(2026, 11, 1),
    "month_start": T(2026, 11, 1),
    "month_end": T(2026, 12, 1),
    "currency": "USD",
}
HOUR = dt.timedelta(hours=1)


@pytest.fixture
def con():
    con = prepare_connection(duckdb.connect())
    yield con
    con.close()


def rows_of(con, name: str, params: dict, columns: list[str]) -> list[tuple]:
    """The rows `sql/<name>.sql` returns, reduced to `columns`, in the file's order."""
    cursor = run(con, name, params)
    names = [c[0] for c in cursor.description]
    index = [names.index(c) for c in columns]
    return [tuple(row[i] for i in index) for row in cursor.fetchall()]


# --------------------------------------------------------------------------------------------
# input tables, shaped like the pipeline's


def given_job_gpu_hours(con, held: list[tuple], month_start: dt.datetime | None = None) -> None:
    """held: (job_id, node, gpu_index, gpu_model, start, end[, outage (from, to)][, share]);
    each is cut at hour boundaries, at the outage edges and where a billing day (24 hours from
    `month_start`, November's in UTC when not given) begins, as facts/job_gpu_hours does.
    share is the job's part of the GPU in 1/420ths (420, a whole GPU, when not given). Also
    job_day_tenants: each job's days with its job_usage tenant (given_job_usage, before or
    after)."""
    con.execute(
        "create table job_gpu_hours (billing_month date, cluster varchar, job_id varchar, "
        "node varchar, gpu_index integer, gpu_share integer, gpu_model varchar, hour timestamp, "
        "seg_from timestamp, seg_to timestamp, day_index bigint, priced_at timestamp, "
        "gpu_ms bigint, gpu_units bigint, in_outage boolean)"
    )
    month_start = month_start or T(2026, 11, 1)
    month_start = month_start or T(2026, 11, 1)
    for job_id, node, gpu, model, start, end, *extra in held:
        outage = next((e for e in extra if isinstance(e, tuple)), None)
        share = next((e for e in extra if isinstance(e, int)), 420)
        cuts = {start, end}
        hour = start.replace(minute=0, second=0)
        while hour < end:
            cuts.add(max(hour, start))
            hour += HOUR
        day = month_start
        while day < end:
            if day > start:
                cuts.add(day)
            day += dt.timedelta(days=1)
        if outage:
            cuts |= {t for t in outage if start < t < end}
        points = sorted(cuts)
        for seg_from, seg_to in zip(points, points[1:], strict=False):
            in_outage = outage is not None and outage[0] <= seg_from < outage[1]
            gpu_ms = int((seg_to - seg_from).total_seconds() * 1000)
            day_index = (seg_from - month_start) // dt.timedelta(days=1)
            hour = seg_from.replace(minute=0, second=0, microsecond=0)
            priced_at = max(hour, month_start + dt.timedelta(days=day_index))
            con.execute(
                "insert into job_gpu_hours values (date '2026-11-01', 'c1', ?, ?, ?, ?, ?, ?, ?, "
                "?, ?, ?, ?, ?, ?)",
                [job_id, node, gpu, share, model, hour, seg_from, seg_to, day_index, priced_at,
                 gpu_ms, gpu_ms * share, in_outage],
            )  # fmt: skip
    _given_job_day_tenants(con)


def _given_job_day_tenants(con) -> None:
    """job_day_tenants once job_gpu_hours and job_usage are both given: each job's tenant on
    every day it holds a GPU (no reorganisation here)."""
    tables = {name for (name,) in con.execute("select table_name from duckdb_tables()").fetchall()}
    if {"job_gpu_hours", "job_usage"} <= tables:
        con.execute(
            "create or replace view job_day_tenants as select distinct g.billing_month, "
            "g.cluster, g.job_id, g.day_index, u.tenant_id from job_gpu_hours as g "
            "join job_usage as u using (billing_month, cluster, job_id)"
        )


def given_job_usage(con, jobs: list[tuple]) -> None:
    """jobs: (job_id, tenant_id, queue, gpu_model, gpus, state, submit_at, start_at, end_at[,
    eligible_at]) (no eligible time when not given)."""
    con.execute(
        "create table job_usage (billing_month date, cluster varchar, job_id varchar, "
        "tenant_id varchar, queue varchar, gpu_model varchar, gpus double, state varchar, "
        "submit_at timestamp, start_at timestamp, end_at timestamp, eligible_at timestamp)"
    )
    for job in jobs:
        con.execute(
            "insert into job_usage values (date '2026-11-01', 'c1', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [*job, None] if len(job) == 9 else list(job),
        )
    _given_job_day_tenants(con)


def given_catalog_nodes(con, nodes: list[tuple]) -> None:
    """nodes: (node, gpu_model, gpus, fault_domain, driver_version, in_service_from[, to])."""
    con.execute(
        "create table catalog_nodes (cluster varchar, node varchar, gpu_model varchar, "
        "gpus integer, rack varchar, fault_domain varchar, driver_version varchar, "
        "in_service_from timestamp, in_service_to timestamp, monthly_cost decimal(18, 2))"
    )
    for node, model, gpus, domain, driver, since, *until in nodes:
        con.execute(
            "insert into catalog_nodes values ('c1', ?, ?, ?, 'r1', ?, ?, ?, ?, null)",
            [node, model, gpus, domain, driver, since, until[0] if until else T(9999, 12, 31)],
        )


# --------------------------------------------------------------------------------------------
# quota_compliance

QUOTA_COLUMNS = [
    "tenant_id", "pool", "has_quota", "guaranteed_gpus", "limit_gpus", "used_gpu_hours",
    "mean_gpus", "peak_gpus", "peak_at", "guaranteed_gpu_hours", "borrowed_gpu_hours",
    "unused_guaranteed_gpu_hours", "minutes_above_limit", "quota_use_pct", "borrowing_days",
    "days", "breach", "idle_quota", "chronic_borrowing",
]  # fmt: skip


def given_quota_month(con) -> None:
    con.execute(
        "create table catalog_quotas (tenant_id varchar, pool varchar, guaranteed_gpus double, "
        "limit_gpus double, reserved boolean, valid_from timestamp, valid_to timestamp)"
    )
    always, never = T(1900, 1, 1), T(9999, 12, 31)
    con.executemany(
        "insert into catalog_quotas values (?, ?, ?, ?, ?, ?, ?)",
        [
            ("alpha", "A100", 2, 3, False, always, never),
            ("alpha", "interactive", 1, 1, False, always, never),  # a queue pool
            ("beta", "H100", 1, None, True, T(2026, 11, 16), never),  # from the 16th, no limit
            ("gamma", "A100", 4, 8, False, always, never),  # never used
            ("gamma", "H100", 4, 8, False, always, T(2026, 10, 1)),  # expired: no row
            # a new version from the 16th added without closing the old one: it wins
            ("delta", "V100", 1, 2, False, always, never),
            ("delta", "V100", 2, 4, False, T(2026, 11, 16), never),
        ],
    )
    given_job_usage(con, [
        ("a1", "alpha", "batch", "A100", 2, "COMPLETED", None, None, None),
        ("a2", "alpha", "batch", "A100", 2, "COMPLETED", None, None, None),
        ("a3", "alpha", "interactive", "A100", 1, "COMPLETED", None, None, None),
        ("a4", "alpha", "batch", "A100", 1, "COMPLETED", None, None, None),
        ("b1", "beta", "batch", "H100", 2, "RUNNING", None, None, None),
        ("u1", "unmapped", "batch", "A100", 1, "COMPLETED", None, None, None),
        ("d1", "delta", "batch", "V100", 2, "COMPLETED", None, None, None),
        ("d2", "delta", "batch", "V100", 1 / 7, "COMPLETED", None, None, None),
    ])  # fmt: skip
    given_job_gpu_hours(con, [
        # alpha on A100: 2 GPUs 00:00-10:00 (20 GPU-h); 2 more 08:00-09:30 (3 GPU-h) take it
        # to 4 > limit 3 for 90 minutes and 2 above its guarantee (3 GPU-h borrowed); a4 takes
        # over GPU 0 the instant a1 releases it (1 GPU-h); a3 is interactive (0.5 GPU-h)
        ("a1", "n1", 0, "A100", T(2026, 11, 1, 0), T(2026, 11, 1, 10)),
        ("a1", "n1", 1, "A100", T(2026, 11, 1, 0), T(2026, 11, 1, 10)),
        ("a2", "n1", 2, "A100", T(2026, 11, 1, 8), T(2026, 11, 1, 9, 30)),
        ("a2", "n1", 3, "A100", T(2026, 11, 1, 8), T(2026, 11, 1, 9, 30)),
        ("a4", "n1", 0, "A100", T(2026, 11, 1, 10), T(2026, 11, 1, 11)),
        ("a3", "n2", 0, "A100", T(2026, 11, 2, 0), T(2026, 11, 2, 0, 30)),
        # beta: 2 H100 from the 10th to the 26th (384 h, 768 GPU-h)
        ("b1", "n3", 0, "H100", T(2026, 11, 10), T(2026, 11, 26)),
        ("b1", "n3", 1, "H100", T(2026, 11, 10), T(2026, 11, 26)),
        # unmapped: 2 GPU-h on A100 without any quota
        ("u1", "n2", 1, "A100", T(2026, 11, 5, 12), T(2026, 11, 5, 14)),
        # delta: 2 V100 for the first 15 days (720 GPU-h), nothing after
        ("d1", "n4", 0, "V100", T(2026, 11, 1), T(2026, 11, 16)),
        ("d1", "n4", 1, "V100", T(2026, 11, 1), T(2026, 11, 16)),
        # and a 1g MIG slice (60/420 = 1/7 GPU) for the 20th: 24/7 GPU-h
        ("d2", "n4", 2, "V100", T(2026, 11, 20), T(2026, 11, 21), 60),
    ])  # fmt: skip
    # quota_compliance reads the concurrency timeline of facts/quota_steps (no rate changes)
    con.execute(
        "create table catalog_rates (gpu_model varchar, valid_from timestamp, valid_to timestamp)"
    )
    replace_month(con, "quota_steps", "facts/quota_steps", NOV)


def test_quota_compliance_by_hand(con):
    given_quota_month(con)
    rows = rows_of(con, "marts/quota_compliance", NOV, QUOTA_COLUMNS)
    assert rows == [
        # used 20 + 3 + 1 + 0.5 = 24.5; guaranteed 2 × 720 h = 1440; unused 1440 − (24.5 − 3);
        # day 1 used 24 < 48 guaranteed: no borrowing day
        ("alpha", "A100", True, 2.0, 3.0, approx(24.5), approx(24.5 / 720), 4.0,
         T(2026, 11, 1, 8), 1440.0, approx(3.0), approx(1418.5), approx(90.0),
         approx(100 * 24.5 / 1440), 0, 30, True, True, False),
        # only a3 is in the queue: 1 GPU is not above a limit of 1
        ("alpha", "interactive", True, 1.0, 1.0, approx(0.5), approx(0.5 / 720), 1.0,
         T(2026, 11, 2), 720.0, approx(0.0), approx(719.5), 0.0, approx(100 * 0.5 / 720), 0,
         30, False, True, False),
        # borrowed: 10th-16th 2 × 144 h + 16th-26th (2 − 1) × 240 h = 528; guaranteed 1 × 360 h
        # from the 16th, unused 26th-1st 120 h; borrowing days 10th-25th = 16 > 15: chronic
        ("beta", "H100", True, 1.0, None, approx(768.0), approx(768 / 720), 2.0,
         T(2026, 11, 10), 360.0, approx(528.0), approx(120.0), 0.0, approx(100 * 768 / 360),
         16, 30, False, False, True),
        # 1st-16th: 2 GPUs on a guarantee of 1 (360 borrowed, limit 2 not exceeded); then 1/7
        # GPU for a day on the new guarantee of 2 (720 − 24/7 unused); guaranteed 360 + 720 =
        # 1080; 15 borrowing days are not more than half of 30
        ("delta", "V100", True, 2.0, 4.0, approx(720 + 24 / 7), approx((720 + 24 / 7) / 720),
         2.0, T(2026, 11, 1), 1080.0, approx(360.0), approx(720 - 24 / 7), 0.0,
         approx(100 * (720 + 24 / 7) / 1080), 15, 30, False, False, False),
        ("gamma", "A100", True, 4.0, 8.0, 0.0, 0.0, 0.0, None, 2880.0, 0.0, approx(2880.0),
         0.0, 0.0, 0, 30, False, True, False),
        # use without a quota: all borrowed, no limit to breach, no guarantee to leave idle
        ("unmapped", "A100", False, 0.0, None, approx(2.0), approx(2 / 720), 1.0,
         T(2026, 11, 5, 12), 0.0, approx(2.0), 0.0, 0.0, None, 1, 30, False, False, False),
    ]  # fmt: skip


def test_quota_compliance_check_passes_then_catches_lost_time(con):
    given_quota_month(con)
    replace_month(con, "quota_compliance", "marts/quota_compliance", NOV)
    assert run(con, "checks/quota_compliance_ties_out", NOV).fetchall() == []
    con.execute(
        "update quota_compliance set used_gpu_hours = used_gpu_hours - 1, mean_gpus = 5 "
        "where tenant_id = 'alpha' and pool = 'A100'"
    )
    found = run(con, "checks/quota_compliance_ties_out", NOV).fetchall()
    assert [(level, subject) for level, subject, *_ in found] == [
        ("gpu_model", "A100"),
        ("row", "alpha/A100"),
    ]
    # alpha 24.5 + unmapped 2 GPU-hours were allocated on A100
    assert found[0][2:] == (approx(25.5), approx(26.5))


# --------------------------------------------------------------------------------------------
# queue_stats

QUEUE_COLUMNS = [
    "grouping_set", "tenant_id", "queue", "gpu_model", "jobs", "jobs_submitted", "jobs_started",
    "wait_p50_s", "wait_p90_s", "wait_p95_s", "wait_mean_s", "pending_gpu_hours", "jobs_ended",
    "completed_jobs", "failed_jobs", "timeout_jobs", "node_fail_jobs", "cancelled_jobs",
    "success_rate_pct",
]  # fmt: skip


def given_kueue_waits(con, workloads: list[tuple]) -> None:
    """workloads: (billing_month, owner_kind, owner_uid, is_admitted, wait_s[, created_at]) on
    cluster c1, as facts/kueue_workload_waits has them."""
    con.execute(
        "create table kueue_workload_waits (billing_month date, cluster varchar, "
        "owner_kind varchar, owner_uid varchar, is_admitted boolean, wait_s double, "
        "created_at timestamp)"
    )
    if workloads:
        con.executemany(
            "insert into kueue_workload_waits values (?, 'c1', ?, ?, ?, ?, ?)",
            [(*w, None) if len(w) == 5 else w for w in workloads],
        )


def given_queue_month(con, kueue_waits: list[tuple] = (), pod_owners: dict | None = None) -> None:
    """The queue month; `pod_owners` {job_id: owner uid} the pods' controlling owners as
    stg_jobs has them (a Kueue Job's pods: the Job), with the jobs' submit and end times."""
    given_kueue_waits(con, list(kueue_waits))
    d = T(2026, 11, 1)
    given_job_usage(con, [
        # alpha batch: waits 0, 60, 120, 600 s; q3 asked for no model but held an A100
        ("q1", "alpha", "batch", "A100", 1, "COMPLETED", d.replace(day=2, hour=10),
         d.replace(day=2, hour=10), d.replace(day=2, hour=11)),
        ("q2", "alpha", "batch", "A100", 2, "COMPLETED", d.replace(day=3, hour=10),
         d.replace(day=3, hour=10, minute=1), d.replace(day=3, hour=12)),
        ("q3", "alpha", "batch", None, 1, "FAILED", d.replace(day=4, hour=10),
         d.replace(day=4, hour=10, minute=2), d.replace(day=4, hour=11)),
        ("q4", "alpha", "batch", "A100", 4, "NODE_FAIL", d.replace(day=5, hour=10),
         d.replace(day=5, hour=10, minute=10), d.replace(day=5, hour=11)),
        # waited 2 h across the month start: wait 7200 s, pending 1 h × 2 GPUs in November
        ("q5", "alpha", "interactive", "A100", 2, "CANCELLED", T(2026, 10, 31, 23),
         T(2026, 11, 1, 1), T(2026, 11, 1, 2)),
        # beta: still pending at the month end (4 h × 4 GPUs), cancelled while pending
        # (0.5 h × 1), started in October and timed out in November (no wait this month)
        ("q6", "beta", "batch", "H100", 4, "PENDING", T(2026, 11, 30, 20), None, None),
        ("q7", "beta", "batch", "H100", 1, "CANCELLED", T(2026, 11, 10), None,
         T(2026, 11, 10, 0, 30)),
        ("q8", "beta", "batch", "H100", 1, "TIMEOUT", T(2026, 10, 29), T(2026, 10, 30),
         T(2026, 11, 2)),
        # submitted at 23:00 on the 30th, started in December: 1 h × 1 GPU pending, no wait
        ("q10", "beta", "batch", "H100", 1, "COMPLETED", T(2026, 11, 30, 23), T(2026, 12, 1, 1),
         T(2026, 12, 1, 2)),
        # cancelled while pending, the export lost its end: no pending time can be claimed
        ("q11", "beta", "batch", "H100", 1, "CANCELLED", T(2026, 11, 12), None, None),
        # a CPU job is not a GPU job
        ("q9", "beta", "batch", None, 0, "COMPLETED", d.replace(day=6), d.replace(day=7),
         d.replace(day=8)),
    ])  # fmt: skip
    con.execute("create table pod_owners (job_id varchar, owner_uid varchar)")
    if pod_owners:
        con.executemany("insert into pod_owners values (?, ?)", list(pod_owners.items()))
    con.execute(
        "create table stg_jobs as select billing_month, cluster, job_id, submit_at, end_at, "
        "owner_uid from job_usage left join pod_owners using (job_id)"
    )
    given_job_gpu_hours(con, [
        ("q1", "n1", 0, "A100", d.replace(day=2, hour=10), d.replace(day=2, hour=11)),
        ("q3", "n1", 0, "A100", d.replace(day=4, hour=10, minute=2), d.replace(day=4, hour=11)),
        ("q8", "n2", 0, "H100", T(2026, 11, 1), T(2026, 11, 2)),
    ])  # fmt: skip


def test_queue_stats_by_hand(con):
    given_queue_month(con)
    rows = rows_of(con, "marts/queue_stats", NOV, QUEUE_COLUMNS)
    # waits [0, 60, 120, 600]: p50 = 90, p90 = 120 + 0.7 × 480 = 456, p95 = 120 + 0.85 × 480
    batch_waits = (approx(90.0), approx(456.0), approx(528.0), approx(195.0))
    # with q5's 7200: p50 = 120, p90 = 600 + 0.6 × 6600 = 4560, p95 = 600 + 0.8 × 6600
    alpha_waits = (approx(120.0), approx(4560.0), approx(5880.0), approx(7980 / 5))
    no_waits = (None, None, None, None)
    # alpha batch pending: (2 × 60 + 1 × 120 + 4 × 600) GPU-s = 2640 / 3600 GPU-h
    alpha_batch = approx(2640 / 3600)
    assert rows == [
        ("cluster", "all", "all", "all", 10, 8, 5, *alpha_waits,
         approx(2640 / 3600 + 2 + 17.5), 7, 2, 1, 1, 1, 2, approx(40.0)),
        ("gpu_model", "all", "all", "A100", 5, 4, 5, *alpha_waits,
         approx(2640 / 3600 + 2), 5, 2, 1, 0, 1, 1, approx(50.0)),
        ("gpu_model", "all", "all", "H100", 5, 4, 0, *no_waits, approx(17.5), 2, 0, 0, 1, 0,
         1, approx(0.0)),
        ("queue", "all", "batch", "all", 9, 8, 4, *batch_waits, approx(2640 / 3600 + 17.5), 6,
         2, 1, 1, 1, 1, approx(40.0)),
        ("queue", "all", "interactive", "all", 1, 0, 1, *(approx(7200.0),) * 4, approx(2.0),
         1, 0, 0, 0, 0, 1, None),
        ("tenant", "alpha", "all", "all", 5, 4, 5, *alpha_waits, approx(2640 / 3600 + 2), 5,
         2, 1, 0, 1, 1, approx(50.0)),
        ("tenant", "beta", "all", "all", 5, 4, 0, *no_waits, approx(17.5), 2, 0, 0, 1, 0, 1,
         approx(0.0)),
        ("tenant_queue_gpu_model", "alpha", "batch", "A100", 4, 4, 4, *batch_waits,
         alpha_batch, 4, 2, 1, 0, 1, 0, approx(50.0)),
        ("tenant_queue_gpu_model", "alpha", "interactive", "A100", 1, 0, 1,
         *(approx(7200.0),) * 4, approx(2.0), 1, 0, 0, 0, 0, 1, None),
        ("tenant_queue_gpu_model", "beta", "batch", "H100", 5, 4, 0, *no_waits, approx(17.5),
         2, 0, 0, 1, 0, 1, approx(0.0)),
    ]  # fmt: skip


def test_a_pod_kueue_admitted_waited_from_its_workloads_creation_to_admission(con):
    # q2's pod was created at 10:00 and ran from 10:01; its Workload (owned by the pod) was
    # admitted after 30 s, in October's dump for q1 (a month earlier: still its wait), and a
    # Job-owned workload and one never admitted change nothing
    given_queue_month(con, [
        (dt.date(2026, 11, 1), "Pod", "q2", True, 30.0),
        (dt.date(2026, 10, 1), "Pod", "q1", True, 12.5),
        (dt.date(2026, 11, 1), "Job", "q3", True, 5.0),
        (dt.date(2026, 11, 1), "Pod", "q4", False, None),
    ])  # fmt: skip
    columns = [*QUEUE_COLUMNS[:4], "jobs_started", "wait_p50_s", "wait_p90_s", "wait_p95_s",
               "wait_mean_s", "pending_gpu_hours", "kueue_waits"]  # fmt: skip
    rows = {r[:4]: r[4:] for r in rows_of(con, "marts/queue_stats", NOV, columns)}
    # alpha batch waits [12.5, 30, 120, 600]: p50 = 75, p90 = 120 + 0.7 × 480,
    # p95 = 120 + 0.85 × 480; pending time stays the pods' (until they ran)
    assert rows["tenant_queue_gpu_model", "alpha", "batch", "A100"] == (
        4, approx(75.0), approx(456.0), approx(528.0), approx(762.5 / 4),
        approx(2640 / 3600), 2,
    )  # fmt: skip
    assert rows["cluster", "all", "all", "all"][-1] == 2
    assert rows["tenant", "beta", "all", "all"][-1] == 0


def test_a_kueue_jobs_pod_waited_from_the_jobs_workload_creation_to_its_admission(con):
    # q2 is a pod of Job job-a (created at 10:00 once the Job was admitted, ran from 10:01);
    # job-a's Workload was created at 09:00 and admitted 45 s later. q3's pod belongs to a Job
    # whose Workload was never admitted, and a Workload owned by a pod uid as Job changes nothing
    given_queue_month(
        con,
        [
            (dt.date(2026, 11, 1), "Job", "job-a", True, 45.0, T(2026, 11, 3, 9)),
            (dt.date(2026, 11, 1), "Job", "job-b", False, None, T(2026, 11, 4, 9)),
            (dt.date(2026, 11, 1), "Job", "q4", True, 5.0, T(2026, 11, 5, 9)),
        ],
        pod_owners={"q2": "job-a", "q3": "job-b", "q1": "rs-1"},
    )
    columns = [*QUEUE_COLUMNS[:4], "jobs_started", "wait_p50_s", "wait_p90_s", "wait_p95_s",
               "wait_mean_s", "pending_gpu_hours", "kueue_waits"]  # fmt: skip
    rows = {r[:4]: r[4:] for r in rows_of(con, "marts/queue_stats", NOV, columns)}
    # alpha batch waits [0, 45, 120, 600]: p50 = 82.5, p90 = 120 + 0.7 × 480,
    # p95 = 120 + 0.85 × 480; q2 pending from the Workload's creation: 61 min × 2 GPUs, so
    # (7320 + 120 + 2400) GPU-s in all
    assert rows["tenant_queue_gpu_model", "alpha", "batch", "A100"] == (
        4, approx(82.5), approx(456.0), approx(528.0), approx(765 / 4), approx(9840 / 3600), 1,
    )  # fmt: skip
    assert rows["cluster", "all", "all", "all"][-1] == 1


def test_a_kueue_jobs_later_pods_waited_only_for_themselves(con):
    # q1 and q2 are pods of Job job-a, admitted 45 s after its Workload's creation at 09:00
    # on the 2nd: q1 (created 10:00, ran 10:00-11:00) was released by the admission; q2,
    # created on the 3rd after q1 had ended (a retry, or the Job's next completion), waited
    # its own minute in an admitted Job
    given_queue_month(
        con,
        [(dt.date(2026, 11, 1), "Job", "job-a", True, 45.0, T(2026, 11, 2, 9))],
        pod_owners={"q1": "job-a", "q2": "job-a"},
    )
    columns = [*QUEUE_COLUMNS[:4], "jobs_started", "wait_p50_s", "wait_mean_s",
               "pending_gpu_hours", "kueue_waits"]  # fmt: skip
    rows = {r[:4]: r[4:] for r in rows_of(con, "marts/queue_stats", NOV, columns)}
    # waits [45, 60, 120, 600]; pending: q1 1 h × 1 GPU from 09:00, q2 60 s × 2 GPUs, q3
    # 120 s × 1, q4 600 s × 4: (3600 + 120 + 120 + 2400) GPU-s
    assert rows["tenant_queue_gpu_model", "alpha", "batch", "A100"] == (
        4, approx(90.0), approx(825 / 4), approx(6240 / 3600), 1,
    )  # fmt: skip


def test_a_job_waits_from_its_eligible_time_when_the_export_has_one(con):
    given_kueue_waits(con, [])
    given_job_usage(con, [
        # submitted 00:00, eligible (its begin time, its dependencies met) 10:00, started
        # 11:00: waited 1 h, pending 1 h × 2 GPUs
        ("e1", "alpha", "batch", "A100", 2, "COMPLETED", T(2026, 11, 2, 0), T(2026, 11, 2, 11),
         T(2026, 11, 2, 12), T(2026, 11, 2, 10)),
        # no eligible time (sacct's Unknown): waited from submit, 2 h × 1 GPU
        ("e2", "alpha", "batch", "A100", 1, "COMPLETED", T(2026, 11, 3, 0), T(2026, 11, 3, 2),
         T(2026, 11, 3, 3)),
        # still pending at the month end, eligible 2 h after its submission: pending from
        # 22:00 on the 30th, 2 h × 1 GPU
        ("e3", "alpha", "batch", "A100", 1, "PENDING", T(2026, 11, 30, 20), None, None,
         T(2026, 11, 30, 22)),
    ])  # fmt: skip
    con.execute(
        "create table stg_jobs as select billing_month, cluster, job_id, submit_at, end_at, "
        "null::varchar as owner_uid from job_usage"
    )
    given_job_gpu_hours(con, [])
    columns = [*QUEUE_COLUMNS[:4], "jobs_started", "wait_p50_s", "wait_mean_s", "wait_max_s",
               "pending_gpu_hours"]  # fmt: skip
    rows = {r[:4]: r[4:] for r in rows_of(con, "marts/queue_stats", NOV, columns)}
    # waits [3600, 7200]; pending (2 × 3600 + 7200 + 7200) GPU-s = 6 GPU-h
    assert rows["tenant_queue_gpu_model", "alpha", "batch", "A100"] == (
        2, approx(5400.0), approx(5400.0), approx(7200.0), approx(6.0),
    )  # fmt: skip


# Slurm's Eligible through the real steps: a sacct dump (header line) and a canonical jobs
# file with eligible_time, read, typed and ranked up to queue_stats (tests/marts/conftest.py)
SACCT = """
    JobID|Account|User|Partition|Submit|Eligible|Start|End|State|AllocTRES|NodeList
    1|alpha|ann|batch|2026-11-02T00:00:00|2026-11-02T10:00:00|2026-11-02T11:00:00|2026-11-02T12:00:00|COMPLETED|gres/gpu=1|n1
    2|alpha|ann|batch|2026-11-03T00:00:00|Unknown|2026-11-03T02:00:00|2026-11-03T03:00:00|COMPLETED|gres/gpu=1|n1
    3|alpha|ann|batch|2026-11-04T00:00:00|2026-11-04T05:00:00|2026-11-04T01:00:00|2026-11-04T02:00:00|COMPLETED|gres/gpu=1|n1
    4|alpha|ann|batch|2026-11-06T01:00:00|2026-11-06T00:00:00|2026-11-06T02:00:00|2026-11-06T03:00:00|COMPLETED|gres/gpu=1|n1
"""
CANONICAL_JOBS = """
    job_id,account,gpus,nodes,submit_time,eligible_time,start_time,end_time,state
    c1,alpha,1,m1,2026-11-05T00:00:00,2026-11-05T00:30:00,2026-11-05T01:00:00,2026-11-05T02:00:00,COMPLETED
"""


@pytest.fixture(scope="module")
def eligible_month(tmp_path_factory):
    """The month built up to data_quality (the last step, so every table is there)."""
    month = GivenMonth(tmp_path_factory.mktemp("eligible"))
    month.catalog(tenants=ALPHA_TENANT, rates=ONE_RATE)
    month.file("landing/scheduler/slurm/sacct.log", SACCT)
    month.file("landing/scheduler/canon/jobs.csv", CANONICAL_JOBS)
    month.build("data_quality")
    yield month.con
    month.close()


def test_sacct_eligible_times_decide_the_waits_of_queue_stats(eligible_month):
    rows = eligible_month.execute(
        "select cluster, jobs_started, wait_p50_s, wait_mean_s, wait_max_s, pending_gpu_hours "
        "from queue_stats where grouping_set = 'cluster' order by cluster"
    ).fetchall()
    assert rows == [
        # c1: eligible 00:30, started 01:00
        ("canon", 1, 1800.0, 1800.0, 1800.0, approx(0.5)),
        # job 1: eligible 10:00, started 11:00: 1 h, not the 11 h since its submission; job
        # 2: Unknown, from submit: 2 h; jobs 3 and 4: eligible after the start, or before
        # the submission, ignored: from submit, 1 h each. Waits [3600, 3600, 3600, 7200];
        # pending (1 + 2 + 1 + 1) h × 1 GPU
        ("slurm", 4, 3600.0, 4500.0, 7200.0, approx(5.0)),
    ]  # fmt: skip
    usage = eligible_month.execute(
        "select job_id, eligible_at from job_usage order by job_id"
    ).fetchall()
    assert usage == [("1", T(2026, 11, 2, 10)), ("2", None), ("3", None), ("4", None),
                     ("c1", T(2026, 11, 5, 0, 30))]  # fmt: skip


def test_an_eligible_time_after_the_start_is_ignored_and_counted(eligible_month):
    rows = eligible_month.execute(
        "select cluster, subject, value, detail from data_quality "
        "where category = 'eligible_time_ignored'"
    ).fetchall()
    assert rows == [
        ("slurm", "slurm", 2.0,
         "2 jobs with an eligible time before submit or after start: waits from submit"),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------
# failure_stats

FAILURE_COLUMNS = [
    "dimension", "value", "jobs", "completed_jobs", "failed_jobs", "out_of_memory_jobs",
    "node_fail_jobs", "infra_failure_rate_pct", "job_failure_rate_pct", "allocated_gpu_hours",
    "failed_infra_gpu_hours", "failed_job_gpu_hours", "failure_rank",
]  # fmt: skip


def given_failure_month(con, jobs: list[tuple] | None = None) -> None:
    """jobs: (job, state, exit code, [(node, gpu, start, end[, outage])]), the month below
    when not given."""
    given_catalog_nodes(con, [
        ("n1", "A100", 2, "fd-a", "drv-1", T(2025, 1, 1)),
        ("n2", "A100", 1, "fd-a", "drv-2", T(2025, 1, 1)),
        ("n3", "A100", 1, "fd-b", "drv-2", T(2025, 1, 1)),  # no job: rates unknown
        ("n4", "A100", 1, "fd-c", "drv-3", T(2025, 1, 1), T(2026, 10, 1)),  # retired: no row
    ])  # fmt: skip
    jobs = jobs if jobs is not None else [
        # job, state, exit code, [(node, gpu, start, end, outage)]
        ("f1", "COMPLETED", "0", [("n1", 0, T(2026, 11, 2, 0), T(2026, 11, 2, 2))]),
        # a NODE_FAIL over two nodes counts on both (the export does not say which one failed)
        ("f2", "NODE_FAIL", None, [("n1", 0, T(2026, 11, 3, 0), T(2026, 11, 3, 1)),
                                   ("n2", 0, T(2026, 11, 3, 0), T(2026, 11, 3, 1))]),
        ("f3", "FAILED", "1", [("n2", 0, T(2026, 11, 4, 0), T(2026, 11, 4, 3))]),
        ("f4", "OUT_OF_MEMORY", "125", [("n2", 0, T(2026, 11, 5, 0), T(2026, 11, 5, 0, 30))]),
        # its second hour lies in an outage of n1: failed_infra although it completed
        ("f5", "COMPLETED", "0", [("n1", 1, T(2026, 11, 6, 0), T(2026, 11, 6, 2),
                                   (T(2026, 11, 6, 1), T(2026, 11, 6, 5)))]),
        # still running: its hours count, its outcome does not
        ("f6", "RUNNING", None, [("n1", 1, T(2026, 11, 30, 22), T(2026, 12, 1))]),
        # cancelled while pending: no node, and its exit code is no failure evidence
        ("f7", "CANCELLED", "15", []),
    ]  # fmt: skip
    con.execute(
        "create table stg_jobs (billing_month date, cluster varchar, job_id varchar, "
        "gpus double, start_at timestamp, end_at timestamp, state varchar, exit_code varchar)"
    )
    con.execute(
        "create table job_gpus (billing_month date, cluster varchar, job_id varchar, "
        "node varchar, gpu_index integer, index_source varchar)"
    )
    held = []
    for job_id, state, exit_code, gpus in jobs:
        start, end = (gpus[0][2], gpus[0][3]) if gpus else (None, T(2026, 11, 7))
        con.execute(
            "insert into stg_jobs values (date '2026-11-01', 'c1', ?, ?, ?, ?, ?, ?)",
            [
                job_id,
                max(len(gpus), 1),
                start,
                None if state == "RUNNING" else end,
                state,
                exit_code,
            ],
        )
        for node, gpu, seg_start, seg_end, *outage in gpus:
            con.execute(
                "insert into job_gpus values (date '2026-11-01', 'c1', ?, ?, ?, 'export')",
                [job_id, node, gpu],
            )
            held.append((job_id, node, gpu, "A100", seg_start, seg_end, *outage))
    given_job_gpu_hours(con, held)


def test_failure_stats_by_hand(con):
    given_failure_month(con)
    rows = rows_of(con, "marts/failure_stats", NOV, FAILURE_COLUMNS)
    third, two_thirds = approx(100 / 3), approx(200 / 3)
    assert rows == [
        # drv-2 is n2 (and the idle n3): same infra rate as drv-1, more job failures
        ("driver_version", "drv-2", 3, 0, 1, 1, 1, third, two_thirds, 4.5, 1.0, 3.5, 1),
        ("driver_version", "drv-1", 3, 2, 0, 0, 1, third, 0.0, 7.0, 2.0, 0.0, 2),
        # exit codes: by jobs, then value; f2 has none; f6, running, has none yet: its hours
        # count on their own row, without a job outcome
        ("exit_code", "0", 2, 2, 0, 0, 0, 0.0, 0.0, 4.0, 1.0, 0.0, None),
        ("exit_code", "1", 1, 0, 1, 0, 0, 0.0, 100.0, 3.0, 0.0, 3.0, None),
        ("exit_code", "125", 1, 0, 0, 1, 0, 0.0, 100.0, 0.5, 0.0, 0.5, None),
        ("exit_code", "unknown", 1, 0, 0, 0, 1, 100.0, 0.0, 2.0, 2.0, 0.0, None),
        ("exit_code", "running", 0, 0, 0, 0, 0, None, None, 2.0, 0.0, 0.0, None),
        # fd-a holds f2 once although it ran on two of its nodes
        ("fault_domain", "fd-a", 5, 2, 1, 1, 1, 20.0, 40.0, 11.5, 3.0, 3.5, 1),
        ("fault_domain", "fd-b", 0, 0, 0, 0, 0, None, None, 0.0, 0.0, 0.0, 2),
        ("node", "n2", 3, 0, 1, 1, 1, third, two_thirds, 4.5, 1.0, 3.5, 1),
        ("node", "n1", 3, 2, 0, 0, 1, third, 0.0, 7.0, 2.0, 0.0, 2),
        ("node", "n3", 0, 0, 0, 0, 0, None, None, 0.0, 0.0, 0.0, 3),
    ]  # fmt: skip


def test_failure_stats_report_interrupted_jobs_apart(con):
    # TIMEOUT, CANCELLED and PREEMPTED jobs' GPU time outside outage windows: their own column
    given_failure_month(con, [
        ("t1", "TIMEOUT", "0", [("n3", 0, T(2026, 11, 2, 0), T(2026, 11, 2, 1))]),
        # its second hour lies in an outage of n3: failed_infra, not interrupted
        ("p1", "PREEMPTED", None, [("n3", 0, T(2026, 11, 3, 0), T(2026, 11, 3, 2),
                                    (T(2026, 11, 3, 1), T(2026, 11, 3, 4)))]),
        ("c1", "CANCELLED", "15", [("n1", 0, T(2026, 11, 4, 0), T(2026, 11, 4, 0, 30))]),
        ("k1", "COMPLETED", "0", [("n1", 1, T(2026, 11, 4, 0), T(2026, 11, 4, 1))]),
    ])  # fmt: skip
    rows = rows_of(con, "marts/failure_stats", NOV, [
        "dimension", "value", "timeout_jobs", "cancelled_jobs", "preempted_jobs",
        "allocated_gpu_hours", "failed_infra_gpu_hours", "interrupted_gpu_hours",
    ])  # fmt: skip
    assert [row for row in rows if row[0] == "node"] == [
        ("node", "n1", 0, 1, 0, 1.5, 0.0, 0.5),
        ("node", "n3", 1, 0, 1, 3.0, 1.0, 2.0),
        ("node", "n2", 0, 0, 0, 0.0, 0.0, 0.0),
    ]


# --------------------------------------------------------------------------------------------
# capacity_evidence

EVIDENCE_COLUMNS = [
    "cluster", "gpu_model", "allocated_gpu_hours", "allocation_rate_pct", "productive_share_pct",
    "waste_share_pct", "unmeasured_share_pct", "wait_p95_s", "pending_gpu_hours",
    "idle_quota_share_pct", "availability_pct", "history_months", "trend_gpu_hours_per_month",
    "verdict", "verdict_rule",
]  # fmt: skip


def given_evidence_month(con) -> None:
    con.execute(
        "create table capacity_buckets (billing_month date, cluster varchar, gpu_model varchar, "
        "bucket varchar, gpu_hours double, gpu_units bigint)"
    )
    buckets = ("capacity", "productive", "idle", "zombie", "failed_job", "failed_infra",
               "unmeasured", "down", "unallocated")  # fmt: skip
    models = {
        # waste (150 + 30 + 7.5) / 750 = 25.0 %, exactly the threshold
        ("c1", "A100"): (1000, 500, 150, 30, 7.5, 42.5, 20, 0, 250),
        # little waste, but 30 % of the H100 guarantees belong to an idle quota
        ("c1", "H100"): (1000, 800, 50, 0, 0, 0, 50, 0, 100),
        # 90 % allocated, 5 h p95 wait, waste 70 / 900, unmeasured 30 / 900
        ("c2", "B200"): (1000, 800, 50, 0, 20, 0, 30, 0, 100),
        # busy and waiting, but waste 20 % is not low enough to buy
        ("c2", "L40S"): (1000, 660, 120, 30, 20, 0, 20, 50, 100),
        # busy, waiting, 5 % waste, but 50 % of it unmeasured: low waste is not established
        ("c3", "A10"): (1000, 380, 45, 0, 0, 0, 475, 0, 100),
        # quiet: half allocated, short waits, no quota
        ("c3", "T4"): (1000, 450, 50, 0, 0, 0, 0, 0, 500),
        # no inventory: allocation unknown
        ("c3", "unknown"): (None, 10, 0, 0, 0, 0, 0, None, None),
        # as B200, but 5 % of its GPU time was down
        ("c2", "GH200"): (1000, 800, 50, 0, 20, 0, 30, 0, 100),
        # as B200, but demand falls: 1000, 950, then 900 GPU-hours allocated
        ("c1", "V100"): (1000, 800, 50, 0, 20, 0, 30, 0, 100),
    }
    earlier = {
        # B200 rises from 800 allocated GPU-hours in October
        ("2026-10-01", "c2", "B200"): (1000, 700, 50, 0, 20, 0, 30, 0, 200),
        ("2026-10-01", "c1", "V100"): (1000, 850, 50, 0, 20, 0, 30, 0, 50),
        ("2026-09-01", "c1", "V100"): (1000, 900, 50, 0, 20, 0, 30, 0, 0),
        # older than 12 months: not in the trend
        ("2025-11-01", "c2", "B200"): (1000, 0, 0, 0, 0, 0, 0, 0, 1000),
    }
    months = {("2026-11-01", *key): hours for key, hours in models.items()} | earlier
    for (month, cluster, model), hours in months.items():
        for bucket, value in zip(buckets, hours, strict=True):
            if value is not None:
                con.execute(
                    "insert into capacity_buckets values (?, ?, ?, ?, ?, ?)",
                    [month, cluster, model, bucket, value, int(value * 1_512_000_000)],
                )
    con.execute(
        "create table availability (billing_month date, level varchar, cluster varchar, "
        "gpu_model varchar, availability_pct double)"
    )
    con.executemany(
        "insert into availability values (?, ?, ?, ?, ?)",
        [("2026-11-01", "gpu_model", cluster, model, 95.0 if model == "GH200" else 99.5)
         for cluster, model in models if model != "unknown"]
        # a node's, a cluster's and another month's rows are not the model's
        + [("2026-11-01", "node", "c2", "B200", 50.0), ("2026-11-01", "cluster", "c2", None, 50.0),
           ("2026-10-01", "gpu_model", "c2", "B200", 50.0)],
    )  # fmt: skip
    con.execute(
        "create table queue_stats (billing_month date, cluster varchar, grouping_set varchar, "
        "tenant_id varchar, queue varchar, gpu_model varchar, wait_p95_s double, "
        "pending_gpu_hours double)"
    )
    con.executemany(
        "insert into queue_stats values (date '2026-11-01', ?, ?, 'all', 'all', ?, ?, ?)",
        [
            ("c1", "gpu_model", "A100", 20000, 100),
            ("c1", "gpu_model", "H100", 20000, 300),
            ("c2", "gpu_model", "B200", 18000, 400),
            ("c2", "gpu_model", "L40S", 18000, 50),
            ("c3", "gpu_model", "A10", 18000, 60),
            ("c3", "gpu_model", "T4", 1800, 2),
            ("c2", "gpu_model", "GH200", 18000, 400),
            ("c1", "gpu_model", "V100", 18000, 400),
            # detail rows must not be read as the model's figures
            ("c2", "tenant_queue_gpu_model", "B200", 0, 0),
            ("c2", "tenant", "B200", 0, 0),
        ],
    )
    con.execute(
        "create table quota_compliance (billing_month date, tenant_id varchar, pool varchar, "
        "has_quota boolean, guaranteed_gpu_hours double, idle_quota boolean)"
    )
    con.executemany(
        "insert into quota_compliance values (date '2026-11-01', ?, ?, ?, ?, ?)",
        [
            ("t1", "A100", True, 400, False),
            ("t1", "H100", True, 700, False),
            ("t2", "H100", True, 300, True),
            ("t1", "B200", True, 500, False),
            ("t3", "B200", False, 0, False),  # use without a quota
            ("t2", "batch", True, 200, True),  # a queue pool is no GPU model's
            ("t1", "L40S", True, 400, True),  # 400 of 2400: 16.7 % < 20 %
            ("t2", "L40S", True, 2000, False),
            ("t1", "A10", True, 100, False),
        ],
    )


def test_capacity_evidence_shows_every_verdict_with_its_numbers(con):
    given_evidence_month(con)
    rows = rows_of(con, "marts/capacity_evidence", NOV, EVIDENCE_COLUMNS)
    assert rows == [
        ("c1", "A100", approx(750.0), approx(75.0), approx(100 * 500 / 750), approx(25.0),
         approx(100 * 20 / 750), 20000.0, 100.0, 0.0, 99.5, 1, None, "govern first",
         "waste share 25.0% >= 25% → govern first"),
        ("c1", "H100", approx(900.0), approx(90.0), approx(100 * 800 / 900),
         approx(100 * 50 / 900), approx(100 * 50 / 900), 20000.0, 300.0, approx(30.0), 99.5, 1,
         None, "govern first", "idle quota share 30.0% >= 20% → govern first"),
        # governed, available, but demand falls 50 GPU-hours a month: not short for long
        ("c1", "V100", approx(900.0), approx(90.0), approx(100 * 800 / 900),
         approx(100 * 70 / 900), approx(100 * 30 / 900), 18000.0, 400.0, None, 99.5, 3,
         approx(-50.0), "hold",
         "waste share 7.8% < 25%; no guaranteed quota; but trend -50 GPU-hours a month over 3 "
         "months → hold"),
        ("c2", "B200", approx(900.0), approx(90.0), approx(100 * 800 / 900),
         approx(100 * 70 / 900), approx(100 * 30 / 900), 18000.0, 400.0, 0.0, 99.5, 2,
         approx(100.0), "expansion justified",
         "allocation 90.0% >= 80%, p95 wait 5.0 h >= 4 h, waste share 7.8% < 15%, "
         "unmeasured 3.3% <= 20%, availability 99.5% >= 97%, trend +100 GPU-hours a month "
         "over 2 months → expansion justified"),
        # short because GPUs were down: repairs, not purchases
        ("c2", "GH200", approx(900.0), approx(90.0), approx(100 * 800 / 900),
         approx(100 * 70 / 900), approx(100 * 30 / 900), 18000.0, 400.0, None, 95.0, 1, None,
         "hold",
         "waste share 7.8% < 25%; no guaranteed quota; but availability 95.0% < 97% → hold"),
        ("c2", "L40S", approx(850.0), approx(85.0), approx(100 * 660 / 850),
         approx(100 * 170 / 850), approx(100 * 20 / 850), 18000.0, 50.0, approx(100 / 6),
         99.5, 1, None, "hold",
         "waste share 20.0% < 25%; idle quota share 16.7% < 20%; but waste share 20.0% >= 15% "
         "→ hold"),
        ("c3", "A10", approx(900.0), approx(90.0), approx(100 * 380 / 900), approx(5.0),
         approx(100 * 475 / 900), 18000.0, 60.0, 0.0, 99.5, 1, None, "hold",
         "waste share 5.0% < 25%; idle quota share 0.0% < 20%; but unmeasured 52.8% > 20% "
         "→ hold"),
        ("c3", "T4", approx(500.0), approx(50.0), approx(90.0), approx(10.0), 0.0, 1800.0, 2.0,
         None, 99.5, 1, None, "hold",
         "waste share 10.0% < 25%; no guaranteed quota; but allocation 50.0% < 80%, "
         "p95 wait 0.5 h < 4 h → hold"),
        ("c3", "unknown", approx(10.0), None, approx(100.0), 0.0, 0.0, None, 0.0, None, None, 1,
         None, "hold",
         "waste share 0.0% < 25%; no guaranteed quota; but allocation unknown (no inventory), "
         "p95 wait unknown (no job started), availability unknown → hold"),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------
# utilization_daily

DAILY_COLUMNS = [
    "day", "gpu_model", "level", "tenant_id", "jobs", "allocated_gpu_hours",
    "productive_gpu_hours", "measured_gpu_hours", "mean_util_pct", "capacity_gpu_hours",
    "allocation_rate_pct",
]  # fmt: skip


def given_job_sample_time(con, rows: list[tuple]) -> None:
    """rows: (job_id, gpu_model, day, measured, util-weighted, productive units) of cluster c1."""
    con.execute(
        "create table job_sample_time (billing_month date, cluster varchar, job_id varchar, "
        "gpu_model varchar, day date, measured_units bigint, util_weighted_units double, "
        "productive_units bigint)"
    )
    for row in rows:
        con.execute(
            "insert into job_sample_time values (date '2026-11-01', 'c1', ?, ?, ?, ?, ?, ?)",
            list(row),
        )


def given_daily_month(con) -> None:
    given_catalog_nodes(con, [
        ("n1", "A100", 2, "fd-a", "drv-1", T(2025, 1, 1)),
        ("n2", "H100", 1, "fd-a", "drv-1", T(2026, 11, 3)),  # in service from the 3rd
        ("n3", "A100", 1, "fd-a", "drv-1", T(2025, 1, 1), T(2026, 11, 3)),  # retired on the 3rd
    ])  # fmt: skip
    given_job_usage(con, [
        ("u1", "alpha", "batch", "A100", 1, "COMPLETED", None, None, None),
        ("u2", "alpha", "batch", "A100", 1, "COMPLETED", None, None, None),
        ("u3", "beta", "batch", "H100", 1, "COMPLETED", None, None, None),
        ("u4", "alpha", "batch", "A100", 1, "FAILED", None, None, None),
    ])  # fmt: skip
    given_job_gpu_hours(con, [
        ("u1", "n1", 0, "A100", T(2026, 11, 1, 22), T(2026, 11, 2, 2)),  # 2 h on each day
        ("u2", "n1", 1, "A100", T(2026, 11, 2, 0), T(2026, 11, 2, 1)),
        ("u3", "n2", 0, "H100", T(2026, 11, 3, 0), T(2026, 11, 3, 6)),
        ("u4", "n1", 1, "A100", T(2026, 11, 3, 1), T(2026, 11, 3, 2)),
    ])  # fmt: skip
    h = 1_512_000_000  # GPU units in a GPU-hour
    d = dt.date(2026, 11, 1)
    given_job_sample_time(con, [
        # u1: measured throughout at 50 %; productive 1 h on the 1st, 2 h on the 2nd
        ("u1", "A100", d, 2 * h, 2 * h * 50.0, h),
        ("u1", "A100", d.replace(day=2), 2 * h, 2 * h * 50.0, 2 * h),
        # u2: half measured at 2 %, nothing productive
        ("u2", "A100", d.replace(day=2), h // 2, h / 2 * 2.0, 0),
        ("u3", "H100", d.replace(day=3), 6 * h, 6 * h * 90.0, 6 * h),
        # u4 failed: its busy samples are not productive (job_time_buckets counts failed_job)
        ("u4", "A100", d.replace(day=3), h, h * 80.0, h),
    ])  # fmt: skip
    con.execute(
        "create table job_time_buckets (billing_month date, cluster varchar, job_id varchar, "
        "gpu_model varchar, allocated_units bigint, measured_units bigint, "
        "util_weighted_units double, productive_units bigint)"
    )
    con.executemany(
        "insert into job_time_buckets values (date '2026-11-01', 'c1', ?, ?, ?, ?, ?, ?)",
        [
            ("u1", "A100", 4 * h, 4 * h, 4 * h * 50.0, 3 * h),
            ("u2", "A100", 1 * h, h // 2, h / 2 * 2.0, 0),
            ("u3", "H100", 6 * h, 6 * h, 6 * h * 90.0, 6 * h),
            ("u4", "A100", 1 * h, h, h * 80.0, 0),
        ],
    )


def test_utilization_daily_by_hand(con):
    given_daily_month(con)
    rows = rows_of(con, "marts/utilization_daily", NOV, DAILY_COLUMNS)
    assert len(rows) == 4 + 30 * 2  # four tenant-days, and each model on each day
    tenants = [row for row in rows if row[2] == "tenant"]
    d = dt.date(2026, 11, 1)
    assert tenants == [
        # each day's own samples, not the month's spread over the days
        (d, "A100", "tenant", "alpha", 1, 2.0, approx(1.0), approx(2.0), approx(50.0), None,
         None),
        # u1's second day plus u2: util (2 × 50 + 0.5 × 2) / 2.5 measured hours
        (d.replace(day=2), "A100", "tenant", "alpha", 2, 3.0, approx(2.0), approx(2.5),
         approx(101 / 2.5), None, None),
        (d.replace(day=3), "A100", "tenant", "alpha", 1, 1.0, 0.0, approx(1.0), approx(80.0),
         None, None),
        (d.replace(day=3), "H100", "tenant", "beta", 1, 6.0, approx(6.0), approx(6.0),
         approx(90.0), None, None),
    ]  # fmt: skip
    models = {(row[0].day, row[1]): row for row in rows if row[2] == "gpu_model"}
    assert models[1, "A100"] == (d, "A100", "gpu_model", "all", 1, 2.0, approx(1.0),
                                 approx(2.0), approx(50.0), 72.0, approx(100 * 2 / 72))  # fmt: skip
    assert models[2, "A100"][4:7] == (2, 3.0, approx(2.0))
    assert models[1, "H100"] == (d, "H100", "gpu_model", "all", 0, 0.0, 0.0, 0.0, None, 0.0,
                                 None)  # fmt: skip
    assert models[3, "H100"][5:] == (6.0, approx(6.0), approx(6.0), approx(90.0), 24.0,
                                     approx(25.0))  # fmt: skip
    assert models[3, "A100"][9] == 48.0
    assert sum(row[9] for row in models.values() if row[1] == "A100") == 2 * 720 + 2 * 24
    assert sum(row[9] for row in models.values() if row[1] == "H100") == 28 * 24


def test_utilization_daily_splits_a_segment_at_a_half_hour_midnight(con):
    # billing in Asia/Kolkata (+05:30): November starts 2026-10-31 18:30 UTC, so the hour
    # segment 11-01 18:00-19:00 UTC is half on the 1st and half on the 2nd
    given_catalog_nodes(con, [("n1", "A100", 1, "fd-a", "drv-1", T(2025, 1, 1))])
    given_job_usage(con, [("k1", "alpha", "batch", "A100", 1, "COMPLETED", None, None, None)])
    given_job_gpu_hours(
        con,
        [("k1", "n1", 0, "A100", T(2026, 11, 1, 18), T(2026, 11, 1, 19))],
        month_start=T(2026, 10, 31, 18, 30),
    )
    # one sample at 18:29 UTC covering 2 minutes: a minute on each side of midnight in Kolkata
    given_job_sample_time(
        con,
        [
            ("k1", "A100", dt.date(2026, 11, 1), 60_000 * 420, 0.0, 0),
            ("k1", "A100", dt.date(2026, 11, 2), 60_000 * 420, 0.0, 0),
        ],
    )
    kolkata = {**NOV, "month_start": T(2026, 10, 31, 18, 30), "month_end": T(2026, 11, 30, 18, 30)}
    rows = rows_of(con, "marts/utilization_daily", kolkata, DAILY_COLUMNS)
    tenants = [(row[0], row[5], row[7]) for row in rows if row[2] == "tenant"]
    assert tenants == [
        (dt.date(2026, 11, 1), 0.5, approx(1 / 60)),
        (dt.date(2026, 11, 2), 0.5, approx(1 / 60)),
    ]


def test_utilization_daily_check_passes_then_catches_a_lost_hour(con):
    given_daily_month(con)
    con.execute(
        "create table gpu_capacity (billing_month date, cluster varchar, gpu_model varchar, "
        "capacity_units bigint)"
    )
    con.executemany(
        "insert into gpu_capacity values (date '2026-11-01', 'c1', ?, ?)",
        [("A100", (2 * 720 + 2 * 24) * 1_512_000_000), ("H100", 28 * 24 * 1_512_000_000)],
    )
    replace_month(con, "utilization_daily", "marts/utilization_daily", NOV)
    assert run(con, "checks/utilization_daily_ties_out", NOV).fetchall() == []
    con.execute(
        "update utilization_daily set allocated_gpu_hours = allocated_gpu_hours - 1 "
        "where level = 'tenant' and gpu_model = 'H100'"
    )
    found = run(con, "checks/utilization_daily_ties_out", NOV).fetchall()
    assert found == [
        ("c1", "H100", "allocated", approx(5.0), approx(6.0)),
        ("c1", "H100", "gpu_model rows allocated", approx(6.0), approx(5.0)),
    ]


def test_the_label_check_reads_only_files_with_a_label(con, tmp_path):
    # a label in a row of the second row group; a label column NULL throughout; no label column
    labelled, all_null, unlabelled = (tmp_path / f"{name}.parquet" for name in "abc")
    con.execute(
        f"copy (select range as gpu_index, case when range = 3 then 'job-7' end as job_id "
        f"from range(4)) to '{labelled}' (format parquet, row_group_size 2)"
    )
    con.execute(
        f"copy (select 0 as gpu_index, null::varchar as pod) to '{all_null}' (format parquet)"
    )
    con.execute(f"copy (select 0 as gpu_index) to '{unlabelled}' (format parquet)")
    con.execute("create table sample_sources (path varchar)")
    con.executemany(
        "insert into sample_sources values (?)",
        [[str(unlabelled)], [str(all_null)], [str(labelled)]],
    )
    root = tmp_path / "site"
    write(
        root / "catalog/tenants.yaml",
        "tenants:\n  - {id: a, name: A, department: D, cost_center: C, accounts: [a]}\n",
    )
    write(root / "catalog/rates.yaml", "rates:\n  - {gpu_model: '*', price_per_gpu_hour: 1}\n")
    files = _label_files(month_run(con, root))["files"]
    *read, schema_file = files
    assert read == [str(labelled)]
    assert schema_file.endswith(".parquet") and "schema" in schema_file
