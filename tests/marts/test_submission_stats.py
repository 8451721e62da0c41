"""submission_stats: what became of the GPU jobs submitted in the month, by tenant and queue.

Given: canonical jobs on one A100 node, built through the real ingest and SQL steps
(tests/marts/conftest.py, GivenMonth). Tenant chaff owns account chaff; account ghost maps to
no tenant (unmapped). A Kueue dump of the cluster lists four workloads of chaff's queue batch.
Cluster c2 is a Slurm cluster whose sacct dump holds a job cancelled while pending, as sacct
prints it.
No telemetry: submission figures read the scheduler only.
"""

from __future__ import annotations

import json

import pytest

from tests.marts.conftest import CHAFF_TENANT, JOBS_HEADER, pick

RATES = """
    rates:
      - {gpu_model: A100, price_per_gpu_hour: 2.50}
"""
NODES = """
    node,cluster,gpu_model,gpus
    n1,c1,A100,4
    s1,c2,A100,4
"""
JOBS = f"""
    {JOBS_HEADER}
    j1,chaff,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T01:00:00,2026-11-02T02:00:00,COMPLETED,0
    j2,chaff,ann,batch,normal,A100,1,n1,2026-11-03T00:00:00,2026-11-03T00:30:00,2026-11-03T02:00:00,FAILED,1
    j3,chaff,ann,batch,normal,A100,1,,2026-11-04T00:00:00,,2026-11-04T05:00:00,CANCELLED by 42,
    j4,chaff,ann,batch,normal,A100,1,,2026-11-05T00:00:00,,2026-11-05T00:01:00,BOOT_FAIL,
    j5,chaff,ann,batch,normal,A100,2,,2026-11-29T00:00:00,,,PENDING,
    j6,chaff,ann,interactive,normal,A100,1,n1,2026-11-06T00:00:00,2026-11-06T00:00:00,2026-11-06T01:00:00,CANCELLED,
    j7,chaff,ann,batch,normal,A100,1,n1,2026-10-31T20:00:00,2026-11-01T00:00:00,2026-11-01T01:00:00,COMPLETED,0
    j8,ghost,gus,,normal,A100,1,n1,2026-11-07T00:00:00,2026-11-07T00:00:00,2026-11-07T01:00:00,COMPLETED,0
    j9,chaff,ann,batch,normal,,0,n1,2026-11-08T00:00:00,2026-11-08T00:00:00,2026-11-08T01:00:00,COMPLETED,0
    j10,chaff,ann,batch,normal,A100,1,n1,2026-11-30T00:00:00,2026-11-30T00:00:00,,RUNNING,
"""
# sacct prints a job cancelled while pending with Start = End (the cancel time), NodeList
# `None assigned` and its request in ReqTRES only
SACCT = "\n".join([
    "JobID|Account|User|Partition|QOS|Submit|Start|End|State|ExitCode|ReqTRES|AllocTRES|NodeList",
    "41|chaff|ann|gpu|normal|2026-11-10T00:00:00|2026-11-10T01:00:00|2026-11-10T03:00:00|"
    "COMPLETED|0:0|gres/gpu=1|gres/gpu=1|s1",
    "42|chaff|ann|gpu|normal|2026-11-10T00:00:00|2026-11-10T06:00:00|2026-11-10T06:00:00|"
    "CANCELLED by 1000|0:0|gres/gpu=2||None assigned",
]) + "\n"  # fmt: skip
COLUMNS = (
    "cluster", "tenant_id", "queue", "submitted_jobs", "started_jobs", "not_started_jobs",
    "cancelled_pending_jobs", "failed_to_start_jobs", "pending_jobs", "completed_jobs",
    "ended_jobs", "submission_success_pct", "job_success_pct",
)  # fmt: skip


def workload(name: str, created: str, owner_kind: str, owner_uid: str, admitted: bool) -> dict:
    """A Kueue Workload of namespace chaff in the LocalQueue batch."""
    condition = {"type": "Admitted", "status": "True" if admitted else "False",
                 "lastTransitionTime": created}  # fmt: skip
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": name, "namespace": "chaff", "creationTimestamp": created,
            "ownerReferences": [{"apiVersion": "v1", "kind": owner_kind, "name": name,
                                 "uid": owner_uid, "controller": True}],
        },
        "spec": {"queueName": "batch"},
        "status": {"conditions": [condition]},
    }  # fmt: skip


KUEUE = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        # a suspended Job never admitted: no pod exists, a submission still pending
        workload("job-train-7", "2026-11-20T00:00:00Z", "Job", "uid-job-7", admitted=False),
        # j5's own workload, pending: j5 is its pod, counted once
        workload("pod-j5", "2026-11-29T00:00:00Z", "Pod", "j5", admitted=False),
        # admitted: its pods are the jobs' rows
        workload("pod-j1", "2026-11-02T00:00:00Z", "Pod", "j1", admitted=True),
        # created in October: not this month's submission
        workload("job-old", "2026-10-30T00:00:00Z", "Job", "uid-old", admitted=False),
    ],
}


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    module_month.catalog(tenants=CHAFF_TENANT, rates=RATES, nodes=NODES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/scheduler/c1/kueue-2026-11-30.json", json.dumps(KUEUE))
    module_month.file("landing/scheduler/c2/sacct-2026-11-30.log", SACCT)
    return module_month.build("submission_stats")


def test_submissions_by_tenant_and_queue(rows):
    # chaff/batch: j1, j2, j10 started; j3 cancelled and j4 failed at boot before they
    # started; j5 and Kueue's suspended job-train-7 still pending. Success 3 of the 5 decided;
    # j10 still runs, so 1 of the 2 ended (j1) completed. j7 was submitted in October, j9
    # holds no GPU: neither counts.
    # chaff/interactive: j6 started, then was cancelled: neither ended nor failed.
    # ghost's j8 has no queue: tenant unmapped, queue unknown.
    assert pick(rows, *COLUMNS) == [
        ("c1", "chaff", "batch", 7, 3, 4, 1, 1, 2, 1, 2, 60.0, 50.0),
        ("c1", "chaff", "interactive", 1, 1, 0, 0, 0, 0, 0, 0, 100.0, None),
        ("c1", "unmapped", "unknown", 1, 1, 0, 0, 0, 0, 1, 1, 100.0, 100.0),
        # 42 was withdrawn after six hours pending: a submission that never started
        ("c2", "chaff", "gpu", 2, 1, 1, 1, 0, 0, 1, 1, 50.0, 100.0),
    ]


def test_a_slurm_job_cancelled_while_pending_waited_for_its_request(module_month, rows):
    """sacct's Start (= End) of a job cancelled while pending is not a start: the job waited
    from submit to its cancellation for the 2 GPUs it asked for, and held none."""
    [job] = module_month.con.execute(
        "select gpus, start_at, end_at::varchar, held_until from stg_jobs "
        "where cluster = 'c2' and job_id = '42'"
    ).fetchall()
    assert job == (2.0, None, "2026-11-10 06:00:00", None)
