"""A pod asking for a MIG profile no GPU has (`nvidia.com/mig-9g.99gb`, `mig-0g.5gb`) is a
reject naming file, line and field, like a bad `nvidia.com/gpu` value: it was a whole GPU
(min(9/7, 1)) or nothing (0/7). The month is then the month without it.

Given: a Kubernetes pod list and a catalog, built through the real reader and every step up
to data_quality (tests/marts/conftest.py, GivenMonth). Catalog: node kube-m01 holds one A100
(2.10 USD/GPU-hour); namespace vision is tenant alpha.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

TENANTS = """
    tenants:
      - {id: alpha, name: Alpha Lab, department: Physics, cost_center: CC-1, accounts: [vision]}
"""
RATES = """
    rates:
      - {gpu_model: A100, price_per_gpu_hour: 2.10}
"""
NODES = """
    node,cluster,gpu_model,gpus
    kube-m01,k1,A100,1
"""
PODS = "landing/scheduler/k1/pods-2026-11-10T12-00-00Z.json"
UNKNOWN = "NVIDIA's are 1g to 7g with 1 to 288 GB (declare any other in rates.yaml mig_profiles)"


def pod(uid: str, resource: str) -> dict:
    """A pod of namespace vision on kube-m01 holding one `resource`, 08:00-10:00 Nov 10."""
    finished = {"terminated": {"exitCode": 0, "finishedAt": "2026-11-10T10:00:00Z"}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"creationTimestamp": "2026-11-10T08:00:00Z", "name": uid,
                     "namespace": "vision", "uid": uid},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {resource: "1"}}}],
                 "nodeName": "kube-m01"},
        "status": {"phase": "Succeeded", "startTime": "2026-11-10T08:00:00Z",
                   "containerStatuses": [{"name": "main", "state": finished}]},
    }  # fmt: skip


GOOD = pod("good", "nvidia.com/mig-1g.10gb")
BAD = [pod("nine", "nvidia.com/mig-9g.99gb"), pod("zero", "nvidia.com/mig-0g.5gb")]


def build(month, pods: list[dict]) -> list[dict]:
    month.catalog(tenants=TENANTS, rates=RATES, nodes=NODES)
    month.file(PODS, json.dumps({"apiVersion": "v1", "items": pods, "kind": "List"}, indent=1))
    return month.build("data_quality")


@pytest.fixture(scope="module")
def quality(module_month) -> list[dict]:
    return build(module_month, [GOOD, *BAD])


def query(month, sql: str) -> list[tuple]:
    return month.con.execute(sql, {"month": dt.date(2026, 11, 1)}).fetchall()


def test_the_pods_of_unknown_profiles_are_rejects_with_file_line_and_field(quality, module_month):
    assert query(
        module_month,
        "select file, line, reason from rejects where billing_month = $month order by line",
    ) == [
        # the line where each pod's object begins
        ("scheduler/k1/pods-2026-11-10T12-00-00Z.json", 42,
         "field gpus: containers[main].resources.limits.nvidia.com/mig-9g.99gb: "
         f"unknown MIG profile '9g.99gb': {UNKNOWN}"),
        ("scheduler/k1/pods-2026-11-10T12-00-00Z.json", 80,
         "field gpus: containers[main].resources.limits.nvidia.com/mig-0g.5gb: "
         f"unknown MIG profile '0g.5gb': {UNKNOWN}"),
    ]  # fmt: skip
    files = [row for row in quality if row["category"] == "file"]
    assert [
        (r["subject"], r["rows_read"], r["rows_loaded"], r["rows_rejected"]) for r in files
    ] == [("scheduler/k1/pods-2026-11-10T12-00-00Z.json", 3, 1, 2)]


def test_the_month_is_the_month_without_those_pods(quality, module_month, given_month):
    build(given_month, [GOOD])
    charges = (
        "select tenant_id, gpu_model, charge_category, gpu_hours, amount from charge_lines "
        "where billing_month = $month order by all"
    )
    usage = (
        "select job_id, gpus, allocated_gpu_hours, amount from job_usage "
        "where billing_month = $month order by all"
    )
    for sql in (charges, usage):
        assert query(module_month, sql) == query(given_month, sql), sql
    # the 1g.10gb pod: 1/7 of the A100 for 2 h at 2.10
    assert query(module_month, usage) == [("good", 1 / 7, 2 / 7, Decimal("0.60"))]
    assert query(module_month, charges) == [("alpha", "A100", "Usage", 2 / 7, Decimal("0.60"))]
