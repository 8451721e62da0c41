"""MIG slices and shared GPUs, on Slurm and Kubernetes, in a month computed by hand.

Cluster `hpc` (Slurm sacct): node g1 has one A100 cut into MIG instances, node s1 two A100s
in a shard pool of 4 replicas per GPU. Cluster `kube` (pod snapshots): node ts1 has one A100
time-sliced into 4 replicas, node gp1 one A100 that is not shared. One rate: A100 2.10/GPU-h.

Job   where        asks for                                   November time   GPU-eq  GPU-h
101   hpc g1       gres/gpu=1 + gres/gpu:1g.10gb=1            11-02 00-10 h   1/7     10/7
102   hpc g1       gres/gpu=2 + gres/gpu:a100_3g.40gb=2       11-02 00-07 h   6/7     6
103   hpc s1       gres/shard=2                               11-03 00-04 h   1/2     2
104   hpc s1       gres/shard=1                               11-03 00-08 h   1/4     2
105   hpc s1       gres/gpu=1 (a whole GPU on a shard node)   11-03 00-02 h   1       2
p1    kube ts1     nvidia.com/gpu: 1 (a time-sliced replica)  11-03 00-04 h   1/4     1
p2    kube ts1     nvidia.com/gpu: 1                          11-03 00-04 h   1/4     1
p3    kube ts1     nvidia.com/gpu: 2                          11-03 00-02 h   1/2     1
101 and 102 share g1's GPU exactly (1/7 + 6/7); 103 and 104 share s1's GPU 0 (3/4), 105 takes
GPU 1; p1, p2 and p3 fill ts1's GPU from 00:00 to 02:00. Telemetry: ts1's GPU every 10 min,
00:00-04:00 at 80 %: split by the shares, each pod's GPU-hours are all measured, productive.
Money: (10/7 + 6 + 2 + 2 + 2 + 1 + 1 + 1) GPU-h x 2.10 = 3.00 + 12.60 + 3 x 4.20 + 3 x 2.10.
"""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from pipelines.catalog import CatalogError, load_catalog
from tests.conftest import materialize_month, query, write

# slow (quick tier: make test-quick): materialises its month, and again per overlap case
pytestmark = pytest.mark.slow

SACCT = """
JobID|Account|User|Partition|Submit|Start|End|State|ExitCode|ReqTRES|AllocTRES|NodeList
101|physics|ada|mig|2026-11-01T23:00:00|2026-11-02T00:00:00|2026-11-02T10:00:00|COMPLETED|0:0|cpu=1,gres/gpu=1|cpu=1,gres/gpu=1,gres/gpu:1g.10gb=1|g1
101.batch|physics||mig|2026-11-01T23:00:00|2026-11-02T00:00:00|2026-11-02T10:00:00|COMPLETED|0:0||cpu=1,gres/gpu=1,gres/gpu:1g.10gb=1|g1
102|physics|ada|mig|2026-11-01T23:00:00|2026-11-02T00:00:00|2026-11-02T07:00:00|COMPLETED|0:0|cpu=8,gres/gpu=2|cpu=8,gres/gpu=2,gres/gpu:a100_3g.40gb=2|g1
103|physics|bo|shared|2026-11-02T23:00:00|2026-11-03T00:00:00|2026-11-03T04:00:00|COMPLETED|0:0|cpu=2,gres/shard=2|cpu=2,gres/shard=2|s1
104|physics|bo|shared|2026-11-02T23:00:00|2026-11-03T00:00:00|2026-11-03T08:00:00|COMPLETED|0:0|cpu=2,gres/shard=1|cpu=2,gres/shard=1|s1
105|physics|bo|shared|2026-11-02T23:00:00|2026-11-03T00:00:00|2026-11-03T02:00:00|COMPLETED|0:0|cpu=8,gres/gpu=1|cpu=8,gres/gpu=1|s1
"""

SETTINGS = """
page_pdfs: false
clusters:
  hpc:
    sharing: [{nodes: "s[1-2]", mode: shard, replicas: 4}]
  kube:
    sharing: {nodes: "ts*", mode: time-slicing, replicas: 4}
"""


def pod(uid: str, node: str, gpus: int, start: str, end: str) -> dict:
    """A finished pod of namespace `vision` holding `gpus` of nvidia.com/gpu on `node`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"uid": uid, "name": f"train-{uid}", "namespace": "vision",
                     "creationTimestamp": start, "labels": {"user": "cy"}},
        "spec": {"nodeName": node, "containers": [
            {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        ]},
        "status": {"phase": "Succeeded", "startTime": start, "containerStatuses": [
            {"name": "main", "state": {"terminated": {
                "exitCode": 0, "reason": "Completed", "startedAt": start, "finishedAt": end,
            }}}
        ]},
    }  # fmt: skip


PODS = [
    pod("p1", "ts1", 1, "2026-11-03T00:00:00Z", "2026-11-03T04:00:00Z"),
    pod("p2", "ts1", 1, "2026-11-03T00:00:00Z", "2026-11-03T04:00:00Z"),
    pod("p3", "ts1", 2, "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z"),
]


def write_pods(path: Path, pods: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))


def build_shared_month(root: Path) -> None:
    write(root / "landing/scheduler/hpc/sacct-2026-11.log", SACCT)
    write_pods(root / "landing/scheduler/kube/pods-2026-11-04T00-00-00Z.json", PODS)
    telemetry = root / "landing/telemetry/kube"
    telemetry.mkdir(parents=True)
    con = duckdb.connect()
    con.execute(
        f"""
        copy (
            select 'ts1' as node, 0 as gpu_index,
                '2026-11-03 00:00:00'::timestamp + to_minutes(10 * i) as ts,
                80.0 as util_pct, 1000.0 as mem_used_mib, 200.0 as power_w
            from range(24) as t(i)
        ) to '{telemetry}/ts1.parquet'
        """
    )
    con.close()
    write(root / "catalog/settings.yaml", SETTINGS)
    write(
        root / "catalog/tenants.yaml",
        """
        tenants:
          - {id: phys, name: Physics, department: Science, cost_center: CC-1,
             accounts: [physics]}
          - {id: vision, name: Vision, department: AI, cost_center: CC-2, accounts: [vision]}
        """,
    )
    write(root / "catalog/rates.yaml", "rates:\n  - {gpu_model: A100, price_per_gpu_hour: 2.10}\n")
    write(
        root / "catalog/nodes.csv",
        """
        node,cluster,gpu_model,gpus
        g1,hpc,A100,1
        s1,hpc,A100,2
        ts1,kube,A100,1
        gp1,kube,A100,1
        """,
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("shared")
    build_shared_month(root)
    result = materialize_month(root, "2026-11-01")
    assert result.success
    return root, result


def test_every_check_passes_with_declared_sharing(shared):
    _, result = shared
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations["gpus_never_oversubscribed"] is True
    assert evaluations["capacity_buckets_sum_to_capacity"] is True
    assert evaluations["charges_tie_out"] is True


def test_mig_slices_and_shares_are_billed_as_gpu_equivalents(shared):
    root, _ = shared
    rows = query(
        root,
        """
        select cluster, job_id, gpus, round(allocated_gpu_hours, 9), productive_gpu_hours,
            unmeasured_gpu_hours, amount
        from job_usage order by cluster, job_id
        """,
    )
    assert rows == [
        ("hpc", "101", 1 / 7, round(10 / 7, 9), 0.0, 10 / 7, Decimal("3.00")),
        ("hpc", "102", 6 / 7, 6.0, 0.0, 6.0, Decimal("12.60")),
        ("hpc", "103", 0.5, 2.0, 0.0, 2.0, Decimal("4.20")),
        ("hpc", "104", 0.25, 2.0, 0.0, 2.0, Decimal("4.20")),
        ("hpc", "105", 1.0, 2.0, 0.0, 2.0, Decimal("4.20")),
        # the time-sliced GPU's samples are split by the shares: all of each pod's time
        ("kube", "p1", 0.25, 1.0, 1.0, 0.0, Decimal("2.10")),
        ("kube", "p2", 0.25, 1.0, 1.0, 0.0, Decimal("2.10")),
        ("kube", "p3", 0.5, 1.0, 1.0, 0.0, Decimal("2.10")),
    ]


def test_shared_gpus_hold_their_shares_and_the_buckets_sum_to_capacity(shared):
    root, _ = shared
    held = query(
        root,
        "select cluster, job_id, node, gpu_index, gpu_share from job_gpus order by all",
    )
    assert held == [
        ("hpc", "101", "g1", 0, 60),  # 1/7 of 420
        ("hpc", "102", "g1", 0, 360),  # 2 x 3/7
        ("hpc", "103", "s1", 0, 210),
        ("hpc", "104", "s1", 0, 105),
        ("hpc", "105", "s1", 1, 420),
        ("kube", "p1", "ts1", 0, 105),
        ("kube", "p2", "ts1", 0, 105),
        ("kube", "p3", "ts1", 0, 210),
    ]
    buckets = dict(
        query(
            root,
            "select bucket, round(gpu_hours, 9) from capacity_buckets "
            "where cluster = 'kube' order by bucket",
        )
    )
    # 2 GPUs x 720 h; the pods' 3 GPU-h measured at 80 %
    assert buckets["capacity"] == 1440.0
    assert buckets["productive"] == 3.0
    assert buckets["unallocated"] == 1437.0
    hpc = dict(query(root, "select bucket, gpu_hours from capacity_buckets where cluster = 'hpc'"))
    assert hpc["capacity"] == 2160.0  # 3 GPUs x 720 h
    assert round(hpc["unmeasured"], 9) == round(12 + 10 / 7, 9)
    assert round(hpc["unallocated"] + hpc["unmeasured"], 9) == 2160.0


def test_undeclared_overlap_blocks_the_reports_and_names_the_gpu_and_jobs(shared, tmp_path):
    root, _ = shared
    for part in ("landing", "catalog"):
        shutil.copytree(root / part, tmp_path / part)
    # gp1 is not in a sharing pool: two pods holding its one GPU at once is a data error
    write_pods(
        tmp_path / "landing/scheduler/kube/pods-2026-11-06T00-00-00Z.json",
        [
            pod("q1", "gp1", 1, "2026-11-05T00:00:00Z", "2026-11-05T02:00:00Z"),
            pod("q2", "gp1", 1, "2026-11-05T01:00:00Z", "2026-11-05T03:00:00Z"),
        ],
    )
    result = materialize_month(tmp_path, "2026-11-01", raise_on_error=False)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert evaluations["capacity_buckets_sum_to_capacity"].passed is False  # blocking
    oversubscribed = evaluations["gpus_never_oversubscribed"]
    assert oversubscribed.passed is False
    assert oversubscribed.metadata["first_violations"].value == [
        {
            "cluster": "kube",
            "node": "gp1",
            "gpu_index": "0",
            "excess_gpu_hours": "1.0",
            "first_overlap_at": "2026-11-05 01:00:00",
            "jobs": "q1, q2",
        }
    ]
    assert not (tmp_path / "reports/2026-11/chargeback-2026-11.xlsx").exists()


def test_more_replicas_than_declared_are_an_overlap(shared, tmp_path):
    root, _ = shared
    for part in ("landing", "catalog"):
        shutil.copytree(root / part, tmp_path / part)
    # a fifth replica on ts1 while p1..p3 hold its whole GPU (2 + 1 + 1 replicas of 4)
    write_pods(
        tmp_path / "landing/scheduler/kube/pods-2026-11-04T00-00-00Z.json",
        [*PODS, pod("p4", "ts1", 1, "2026-11-03T01:00:00Z", "2026-11-03T01:30:00Z")],
    )
    result = materialize_month(tmp_path, "2026-11-01", raise_on_error=False)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    [violation] = evaluations["gpus_never_oversubscribed"].metadata["first_violations"].value
    assert (violation["node"], violation["excess_gpu_hours"], violation["jobs"]) == (
        "ts1",
        "0.125",  # a quarter GPU for half an hour
        "p1, p2, p3, p4",
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            "clusters: {kube: {sharing: {mode: time-slicing, replicas: 8}}}",
            "field 'clusters.kube.sharing.0.replicas': Value error, 8 replicas: a replica must "
            "be a whole number of 1/420 GPU",
        ),
        (
            "clusters: {kube: {sharing: {mode: slicing, replicas: 4}}}",
            "field 'clusters.kube.sharing.0.mode': Input should be 'time-slicing', 'mps' or "
            "'shard'",
        ),
        (
            "clusters: {kube: {sharing: {nodes: 'ts[1-', mode: mps, replicas: 4}}}",
            "field 'clusters.kube.sharing.0.nodes': Value error, 'ts[1-' is neither a glob nor "
            "a hostlist",
        ),
    ],
)
def test_a_sharing_mistake_is_a_catalog_error(tmp_path, settings, message):
    build_shared_month(tmp_path)
    write(tmp_path / "catalog/settings.yaml", settings + "\n")
    with pytest.raises(CatalogError) as error:
        load_catalog(tmp_path / "catalog")
    assert str(error.value).startswith(f"{tmp_path / 'catalog/settings.yaml'}: settings: ")
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("sharing", "message"),
    [
        (
            "[{nodes: 'ts*', mode: time-slicing, replicas: 4}, {nodes: ts1, mode: mps, "
            "replicas: 2}]",
            "field 'clusters.kube.sharing.1.nodes': node ts1 is in sharing pool 0 as well ('ts*')",
        ),
        (
            "{nodes: 'gpu-*', mode: mps, replicas: 2}",
            "field 'clusters.kube.sharing.0.nodes': 'gpu-*' matches no node of kube in nodes.csv",
        ),
    ],
)
def test_a_pool_is_not_ambiguous_and_not_empty(tmp_path, sharing, message):
    build_shared_month(tmp_path)
    write(tmp_path / "catalog/settings.yaml", f"clusters:\n  kube:\n    sharing: {sharing}\n")
    with pytest.raises(CatalogError) as error:
        load_catalog(tmp_path / "catalog")
    assert str(error.value) == f"{tmp_path / 'catalog/settings.yaml'}: settings: {message}"
