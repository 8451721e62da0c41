"""The Kubernetes pod-list reader on three hand-written `kubectl get pods -A -o json` snapshots,
on single ugly pods, and end to end through the real pipeline.

Fixtures: tests/fixtures/kubernetes/pods-2026-11-10T{06,12,18}-00-00Z.json, snapshots of one
cluster six hours apart (keys sorted, 4-space indent, as kubectl writes them). The pods:

pod  namespace/name                 GPUs              06:00      12:00         18:00
A    nlp-prod/llama-pretrain-0      4 (A100 selector) Pending    Running       Succeeded 15:30
B    nlp-dev/ft-mistral-7b-0        1                 Running    OOMKilled 09:15  -
C    vision/yolo-train-0            2                 Running    Evicted 10:30    Evicted (again)
D    nlp-prod/sweep-lr-3 (Kueue)    2                 Running    preempted 11:00  -  (deleted)
E    vision/notebook-dana           mig-1g.10gb x 2   -          Running       Succeeded 15:00
F    nlp-prod/llm-serve-...         1                 -          Running       Running
G    nlp-dev/tokenize-shards-0      0 (CPU only)      Succeeded  Succeeded     -
H    vision/eval-resnet-0           1                 -          -             Running, startTime
                                                                               '...T25:10:00Z'
Started: A 07:00, B 04:00, C 02:00, D 05:00, E 08:00, F 10:00, G 03:00-05:00.
"""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from pipelines.catalog import ClusterSettings
from pipelines.formats import kubernetes
from pipelines.landing import LandingError, discover
from tests.conftest import materialize_month, query, write

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/kubernetes"
SNAPSHOTS = sorted(FIXTURES.glob("pods-*.json"))
UTC = ClusterSettings()

A = "5f0c8e2a-1b7d-4c3e-9a61-2d8f4b7e9c10"
B = "8a3d6b1e-5c2f-4e9a-8b7d-1f6e3a2c9d04"
C = "c71e4a90-2d3b-4f8c-a6e5-9b0d1c2e3f47"
D = "1b9e7d52-6a4c-4e3f-b2d1-7c8a9f0e1d26"
E = "e2a4c6e8-0b1d-4f3a-9c5e-7d9f1b3d5e60"
F = "f3b5d7f9-1c2e-4a4b-8d6f-9e1a3c5e7f81"
G = "0d2f4b6d-8e1a-4c3e-a5f7-b9d1e3f5a7c2"
H = "a6c8e0a2-4b6d-4f8a-bc0e-2d4f6a8c0e13"

KEYS = {
    "job_id", "cluster", "account", "user", "queue", "qos", "gpu_model", "gpus", "nodes",
    "submit_time", "start_time", "end_time", "state", "exit_code", "job_name", "line", "raw",
    "parse_error", "record_type", "owner_uid",
}  # fmt: skip
COLUMNS = (
    "line", "job_id", "account", "user", "queue", "qos", "gpu_model", "gpus", "nodes",
    "submit_time", "start_time", "end_time", "state", "exit_code", "raw", "parse_error",
)  # fmt: skip
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
TWO_SEVENTHS = "0.2857142857142857"


def t(clock: str) -> str:
    return f"2026-11-10T{clock}Z"


def rows_of(path: Path) -> list[tuple]:
    rows = list(kubernetes.read_rows(path, UTC))
    for row in rows:
        assert set(row) == KEYS
        assert row["cluster"] is None  # the loader sets it from the folder
        assert row["record_type"] == "job"
    return [tuple(row[c] for c in COLUMNS) for row in rows]


# what the reader yields for each snapshot: (line, job_id, account, user, queue, qos,
# gpu_model, gpus, nodes, submit, start, end, state, exit_code, raw, parse_error)
G_DONE = (G, "nlp-dev", "erin", None, "Guaranteed", None, "0", "cpu-01", t("02:59:00"),
          t("03:00:00"), t("05:00:00"), "COMPLETED", "0",
          f"nlp-dev/tokenize-shards-0-b7c9d uid={G} phase=Succeeded", None)  # fmt: skip
C_EVICTED = (C, "vision", "carol", None, "Guaranteed", None, "2", "gpu-a100-03", t("01:58:00"),
             t("02:00:00"), t("10:30:00"), "PREEMPTED", "137",
             f"vision/yolo-train-0-m5n2p uid={C} phase=Failed reason=Evicted", None)  # fmt: skip
EXPECTED_ROWS = {
    "pods-2026-11-10T06-00-00Z.json": [
        (4, *G_DONE),
        (172, C, "vision", "carol", None, "Guaranteed", None, "2", "gpu-a100-03", t("01:58:00"),
         t("02:00:00"), t("06:00:00"), "RUNNING", None,
         f"vision/yolo-train-0-m5n2p uid={C} phase=Running", None),
        # user from the `owner` label
        (341, B, "nlp-dev", "bob", None, "Burstable", None, "1", "gpu-a100-02", t("03:58:30"),
         t("04:00:00"), t("06:00:00"), "RUNNING", None,
         f"nlp-dev/ft-mistral-7b-0-q8r4t uid={B} phase=Running", None),
        # user from the service account; queue from the Kueue label
        (510, D, "nlp-prod", "sweep-runner", "nlp-queue", "Guaranteed", None, "2", "gpu-a100-04",
         t("04:55:10"), t("05:00:00"), t("06:00:00"), "RUNNING", None,
         f"nlp-prod/sweep-lr-3 uid={D} phase=Running", None),
        # not scheduled yet: no node, no start, no end
        (676, A, "nlp-prod", "alice", "nlp-queue", "Guaranteed", A100, "4", None, t("05:50:00"),
         None, None, "PENDING", None,
         f"nlp-prod/llama-pretrain-0-7x2kq uid={A} phase=Pending", None),
    ],
    "pods-2026-11-10T12-00-00Z.json": [
        (4, *G_DONE),
        # no finishedAt (ContainerStatusUnknown): ends at its last condition transition
        (172, *C_EVICTED),
        (350, B, "nlp-dev", "bob", None, "Burstable", None, "1", "gpu-a100-02", t("03:58:30"),
         t("04:00:00"), t("09:15:00"), "OUT_OF_MEMORY", "137",
         f"nlp-dev/ft-mistral-7b-0-q8r4t uid={B} phase=Failed reason=OOMKilled", None),
        (525, D, "nlp-prod", "sweep-runner", "nlp-queue", "Guaranteed", None, "2", "gpu-a100-04",
         t("04:55:10"), t("05:00:00"), t("11:00:00"), "PREEMPTED", "143",
         f"nlp-prod/sweep-lr-3 uid={D} phase=Failed reason=WorkloadEvictedDueToPreempted", None),
        (707, A, "nlp-prod", "alice", "nlp-queue", "Guaranteed", A100, "4", "gpu-a100-01",
         t("05:50:00"), t("07:00:00"), t("12:00:00"), "RUNNING", None,
         f"nlp-prod/llama-pretrain-0-7x2kq uid={A} phase=Running", None),
        (890, E, "vision", "dana", None, "Burstable", H100, TWO_SEVENTHS, "gpu-h100-01",
         t("07:58:00"), t("08:00:00"), t("12:00:00"), "RUNNING", None,
         f"vision/notebook-dana uid={E} phase=Running", None),
        (1049, F, "nlp-prod", "llm-serve", None, "Guaranteed", None, "1", "gpu-a100-01",
         t("09:55:00"), t("10:00:00"), t("12:00:00"), "RUNNING", None,
         f"nlp-prod/llm-serve-6f7d9c5b8-xk2lp uid={F} phase=Running", None),
    ],
    "pods-2026-11-10T18-00-00Z.json": [
        (4, *C_EVICTED),
        (182, A, "nlp-prod", "alice", "nlp-queue", "Guaranteed", A100, "4", "gpu-a100-01",
         t("05:50:00"), t("07:00:00"), t("15:30:00"), "COMPLETED", "0",
         f"nlp-prod/llama-pretrain-0-7x2kq uid={A} phase=Succeeded", None),
        (371, E, "vision", "dana", None, "Burstable", H100, TWO_SEVENTHS, "gpu-h100-01",
         t("07:58:00"), t("08:00:00"), t("15:00:00"), "COMPLETED", "0",
         f"vision/notebook-dana uid={E} phase=Succeeded", None),
        (536, F, "nlp-prod", "llm-serve", None, "Guaranteed", None, "1", "gpu-a100-01",
         t("09:55:00"), t("10:00:00"), t("18:00:00"), "RUNNING", None,
         f"nlp-prod/llm-serve-6f7d9c5b8-xk2lp uid={F} phase=Running", None),
        # passed through as text: SQL rejects it, naming start_time
        (704, H, "vision", "carol", None, "Guaranteed", None, "1", "gpu-a100-03", t("16:55:00"),
         "2026-11-10T25:10:00Z", t("18:00:00"), "RUNNING", None,
         f"vision/eval-resnet-0-p2w6z uid={H} phase=Running", None),
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED_ROWS))
def test_each_snapshot_reads_as_exact_rows(name):
    assert rows_of(FIXTURES / name) == EXPECTED_ROWS[name]


def test_each_pod_names_its_controlling_owner():
    # a Job's pods their Job, a Deployment's its ReplicaSet; a bare pod (the sweep Kueue runs
    # as a plain pod, the notebook) none
    path = FIXTURES / "pods-2026-11-10T12-00-00Z.json"
    owners = {row["job_name"]: row["owner_uid"] for row in kubernetes.read_rows(path, UTC)}
    assert owners == {
        "tokenize-shards-0-b7c9d": "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e",
        "yolo-train-0-m5n2p": "e0f1a2b3-c4d5-4e6f-8a9b-0c1d2e3f4a5b",
        "ft-mistral-7b-0-q8r4t": "c4d2e1f0-7a6b-4c5d-9e8f-0a1b2c3d4e5f",
        "sweep-lr-3": None,
        "llama-pretrain-0-7x2kq": "0b6f5c1d-93f2-4a8e-b0d4-6a1e2c3f4b5a",
        "notebook-dana": None,
        "llm-serve-6f7d9c5b8-xk2lp": "a9b8c7d6-e5f4-4a3b-9c2d-1e0f9a8b7c6d",
    }


def test_line_is_where_the_pods_object_starts():
    for path in SNAPSHOTS:
        lines = path.read_text().split("\n")
        for row in kubernetes.read_rows(path, UTC):
            opening = lines[row["line"] - 1]
            uid_line = next(
                i for i in range(row["line"], len(lines)) if lines[i].startswith(" " * 16 + '"uid"')
            )
            assert opening == " " * 8 + "{"
            assert row["job_id"] in lines[uid_line]


def test_the_snapshots_are_recognised_as_pod_lists(tmp_path):
    for path in SNAPSHOTS:
        target = tmp_path / "scheduler/k8s" / path.name.replace(".json", "")  # no extension
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    found = discover(tmp_path, "scheduler")
    assert [(f.cluster, f.format.name) for f in found] == [("k8s", "kubernetes_podlist")] * 3


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ('{"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []}', True),
        ('{\n  "apiVersion": "v1",\n  "items": [],\n  "kind": "List"\n}', True),
        ('{"apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "Node"}], "kind": "List"}',
         False),
        ('{"status": "success", "data": {"resultType": "matrix", "result": []}}', False),
        ("JobID|Account|State\n1|a|COMPLETED\n", False),
        ('[{"kind": "Pod"}]', False),
    ],
)  # fmt: skip
def test_sniff(text, accepted):
    assert kubernetes.FORMAT.sniff(Path("x.json"), text) is accepted


# ---- single pods --------------------------------------------------------------------------


def a_pod(phase="Running", uid="u-1", **status) -> dict:
    """A minimal pod with one 1-GPU container, started 08:00 on n1."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": t("07:55:00"), "name": "p", "namespace": "ns", "uid": uid,
        },
        "spec": {
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "nodeName": "n1",
            "serviceAccountName": "default",
        },
        "status": {"phase": phase, "startTime": t("08:00:00"), **status},
    }  # fmt: skip


def terminated(reason: str, code: int, finished: str | None = t("09:00:00")) -> list[dict]:
    state = {"terminated": {"exitCode": code, "finishedAt": finished, "reason": reason}}
    return [{"name": "main", "state": state}]


def condition(kind: str, reason: str, at: str = t("08:59:00")) -> list[dict]:
    return [{"lastTransitionTime": at, "reason": reason, "status": "True", "type": kind}]


def read_pods(tmp_path: Path, *items, name: str = "pods-2026-11-10T10-00-00Z.json") -> list[dict]:
    path = tmp_path / name
    doc = {"apiVersion": "v1", "items": list(items), "kind": "List", "metadata": {}}
    path.write_text(json.dumps(doc, indent=4))
    return list(kubernetes.read_rows(path, UTC))


@pytest.mark.parametrize(
    ("pod", "state", "reason", "end", "exit_code"),
    [
        (a_pod("Succeeded", containerStatuses=terminated("Completed", 0)),
         "COMPLETED", None, t("09:00:00"), "0"),
        (a_pod("Failed", containerStatuses=terminated("Error", 2)),
         "FAILED", None, t("09:00:00"), "2"),
        (a_pod("Failed", containerStatuses=terminated("OOMKilled", 137)),
         "OUT_OF_MEMORY", "OOMKilled", t("09:00:00"), "137"),
        (a_pod("Failed", reason="NodeLost", containerStatuses=terminated("Error", 137)),
         "NODE_FAIL", "NodeLost", t("09:00:00"), "137"),
        (a_pod("Failed", reason="Terminated", containerStatuses=terminated("Error", 143)),
         "NODE_FAIL", "Terminated", t("09:00:00"), "143"),
        (a_pod("Failed", conditions=condition("DisruptionTarget", "DeletionByTaintManager"),
               containerStatuses=terminated("OOMKilled", 137)),
         "NODE_FAIL", "DeletionByTaintManager", t("09:00:00"), "137"),
        (a_pod("Failed", reason="DeadlineExceeded", conditions=condition("Ready", "PodFailed")),
         "TIMEOUT", "DeadlineExceeded", t("08:59:00"), None),
        (a_pod("Failed", reason="Preempting", containerStatuses=terminated("Error", 143)),
         "PREEMPTED", "Preempting", t("09:00:00"), "143"),
        (a_pod("Failed", conditions=condition("DisruptionTarget", "PreemptionByScheduler"),
               containerStatuses=terminated("Error", 143)),
         "PREEMPTED", "PreemptionByScheduler", t("09:00:00"), "143"),
        (a_pod("Failed", conditions=condition("DisruptionTarget", "EvictionByEvictionAPI"),
               containerStatuses=terminated("Error", 143)),
         "PREEMPTED", "EvictionByEvictionAPI", t("09:00:00"), "143"),
        (a_pod("Failed", conditions=condition("TerminationTarget", "WorkloadDeleted"),
               containerStatuses=terminated("Error", 143)),
         "CANCELLED", "WorkloadDeleted", t("09:00:00"), "143"),
        # a condition that is not True decides nothing
        (a_pod("Failed", conditions=[{"reason": "PreemptionByScheduler", "status": "False",
                                      "type": "DisruptionTarget"}],
               containerStatuses=terminated("Error", 1)),
         "FAILED", None, t("09:00:00"), "1"),
        # terminated without any time: ends at the snapshot
        (a_pod("Failed", reason="Evicted", containerStatuses=terminated("Unknown", 137, None)),
         "PREEMPTED", "Evicted", t("10:00:00"), "137"),
        # unreachable node: still holds its GPU as far as anyone knows
        (a_pod("Unknown"), "RUNNING", None, t("10:00:00"), None),
        # admitted by the kubelet, images still pulling: holds its GPU
        (a_pod("Pending"), "PENDING", None, t("10:00:00"), None),
    ],
)  # fmt: skip
def test_state_end_and_exit_code_of_a_pod(tmp_path, pod, state, reason, end, exit_code):
    [row] = read_pods(tmp_path, pod)
    assert (row["state"], row["end_time"], row["exit_code"], row["parse_error"]) == (
        state, end, exit_code, None,
    )  # fmt: skip
    assert row["raw"] == f"ns/p uid=u-1 phase={pod['status']['phase']}" + (
        f" reason={reason}" if reason else ""
    )


def test_first_non_zero_exit_code_and_latest_finish_of_several_containers(tmp_path):
    statuses = [
        {"name": "a", "state": {"terminated": {"exitCode": 0, "finishedAt": t("09:30:00")}}},
        {"name": "b", "state": {"terminated": {"exitCode": 3, "finishedAt": t("09:10:00")}}},
        {"name": "c", "state": {"terminated": {"exitCode": 4, "finishedAt": t("09:20:00")}}},
    ]
    [row] = read_pods(tmp_path, a_pod("Failed", containerStatuses=statuses))
    assert (row["end_time"], row["exit_code"]) == (t("09:30:00"), "3")


def test_an_unreadable_finish_time_passes_through_for_sql_to_reject(tmp_path):
    statuses = terminated("Completed", 0) + terminated("Completed", 0, "2026-11-10T9:7")
    [row] = read_pods(tmp_path, a_pod("Succeeded", containerStatuses=statuses))
    assert row["end_time"] == "2026-11-10T9:7"


def containers(*gpus: dict, init: tuple = ()) -> dict:
    pod = a_pod()
    pod["spec"]["containers"] = [
        {"name": f"c{i}", "resources": resources} for i, resources in enumerate(gpus)
    ]
    if init:
        pod["spec"]["initContainers"] = [
            {"name": f"i{i}", "resources": resources, **extra}
            for i, (resources, extra) in enumerate(init)
        ]
    return pod


@pytest.mark.parametrize(
    ("pod", "gpus"),
    [
        (containers({"limits": {"nvidia.com/gpu": "2"}}, {"limits": {"nvidia.com/gpu": 1}}), "3"),
        # limits win over requests; requests count when there is no limit
        (containers({"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "1"}}),
         "2"),
        (containers({"requests": {"nvidia.com/gpu": "2"}}), "2"),
        (containers({"limits": {"cpu": "4", "memory": "8Gi"}}), "0"),
        (containers({}), "0"),
        # MIG instances are N/7 of a GPU each, whole GPUs added
        (containers({"limits": {"nvidia.com/mig-3g.40gb": "1", "nvidia.com/gpu": "1"}}),
         repr(10 / 7)),
        (containers({"limits": {"nvidia.com/mig-1g.10gb": "7"}}), "1"),
        (containers({"limits": {"nvidia.com/mig-2g.20gb": "1"}},
                    {"limits": {"nvidia.com/mig-1g.10gb+me": "1"}}), repr(3 / 7)),
        # an init container's peak counts when above the app containers' sum...
        (containers({"limits": {"nvidia.com/gpu": "1"}},
                    init=[({"limits": {"nvidia.com/gpu": "4"}}, {})]), "4"),
        (containers({"limits": {"nvidia.com/gpu": "2"}},
                    init=[({"limits": {"nvidia.com/gpu": "1"}}, {})]), "2"),
        # ...and a sidecar (restartPolicy Always) runs beside everything after it
        (containers({"limits": {"nvidia.com/gpu": "2"}},
                    init=[({"limits": {"nvidia.com/gpu": "1"}}, {"restartPolicy": "Always"}),
                          ({"limits": {"nvidia.com/gpu": "3"}}, {})]), "4"),
    ],
)  # fmt: skip
def test_gpu_equivalents_of_a_pod(tmp_path, pod, gpus):
    [row] = read_pods(tmp_path, pod)
    assert (row["gpus"], row["parse_error"]) == (gpus, None)


TIME_SLICED = ClusterSettings(
    sharing=[{"nodes": "n1", "mode": "time-slicing", "replicas": 4}],
    mig_profiles={"1g.6gb": "1/4"},  # an A30's quarter
)


def on_node(pod: dict, node: str | None) -> dict:
    pod["spec"]["nodeName"] = node
    if node is None:
        del pod["spec"]["nodeName"]
    return pod


@pytest.mark.parametrize(
    ("pod", "gpus", "error"),
    [
        # n1 is time-sliced into 4 replicas: each nvidia.com/gpu is a quarter GPU
        (containers({"limits": {"nvidia.com/gpu": "1"}}), "0.25", None),
        (containers({"limits": {"nvidia.com/gpu": "2"}}), "0.5", None),
        (containers({"limits": {"nvidia.com/gpu.shared": "3"}}), "0.75", None),
        # n2 is in no pool: whole GPUs, and a renamed shared replica is an error
        (on_node(containers({"limits": {"nvidia.com/gpu": "1"}}), "n2"), "1", None),
        (on_node(containers({"limits": {"nvidia.com/gpu.shared": "1"}}), "n2"), None,
         "field gpus: containers[c0].resources.limits.nvidia.com/gpu.shared: replicas of a "
         "shared GPU, on a node of no sharing pool (settings.yaml clusters: <cluster>: "
         "sharing)"),
        # not placed yet: whole GPUs asked for, or replicas of the cluster's one pool size
        (on_node(containers({"limits": {"nvidia.com/gpu": "1"}}), None), "1", None),
        (on_node(containers({"limits": {"nvidia.com/gpu.shared": "2"}}), None), "0.5", None),
        # the catalog's MIG profile table over the N/7 default
        (containers({"limits": {"nvidia.com/mig-1g.6gb": "1"}}), "0.25", None),
        (containers({"limits": {"nvidia.com/mig-2g.20gb": "1"}}), repr(2 / 7), None),
    ],
)  # fmt: skip
def test_gpu_equivalents_on_a_time_sliced_node(tmp_path, pod, gpus, error):
    path = tmp_path / "pods-2026-11-10T10-00-00Z.json"
    path.write_text(json.dumps({"apiVersion": "v1", "items": [pod], "kind": "List"}))
    [row] = kubernetes.read_rows(path, TIME_SLICED)
    assert (row["gpus"], row["parse_error"]) == (gpus, error)


UNKNOWN_MIG = (
    "NVIDIA's are 1g to 7g with 1 to 288 GB (declare any other in rates.yaml mig_profiles)"
)


@pytest.mark.parametrize(
    ("resource", "profile"),
    [
        # once a whole GPU (min(9/7, 1)), or nothing (0/7): a charge no hardware gave
        ("nvidia.com/mig-9g.99gb", "9g.99gb"),
        ("nvidia.com/mig-0g.5gb", "0g.5gb"),
        ("nvidia.com/mig-1g.0gb", "1g.0gb"),
        ("nvidia.com/mig-7g.999gb+me", "7g.999gb"),
        # once ignored: a MIG resource of no profile shape held no GPU at all
        ("nvidia.com/mig-3g", "3g"),
    ],
)
def test_an_unknown_mig_profile_rejects_the_pod_naming_the_field(tmp_path, resource, profile):
    [row] = read_pods(tmp_path, containers({"limits": {resource: "1"}}))
    assert (row["gpus"], row["parse_error"]) == (
        None,
        f"field gpus: containers[c0].resources.limits.{resource}: "
        f"unknown MIG profile '{profile}': {UNKNOWN_MIG}",
    )


def test_mig_profiles_of_the_catalog_beyond_nvidias_shapes_are_known(tmp_path):
    declared = ClusterSettings(mig_profiles={"10g.300gb": "1", "9g": "1/2"})
    pods = [
        containers({"limits": {"nvidia.com/mig-10g.300gb": "1"}}),
        containers({"limits": {"nvidia.com/mig-9g.99gb": "1"}}),  # the `9g` entry: any size
        containers({"limits": {"nvidia.com/mig-9g.99gb": "0"}, "requests": {"cpu": "1"}}),
        containers({"limits": {"nvidia.com/mig-99g.1gb": "0"}}),  # none of it asked for
    ]
    path = tmp_path / "pods-2026-11-10T10-00-00Z.json"
    path.write_text(json.dumps({"apiVersion": "v1", "items": pods, "kind": "List"}))
    rows = kubernetes.read_rows(path, declared)
    assert [(row["gpus"], row["parse_error"]) for row in rows] == [
        ("1", None), ("0.5", None), ("0", None), ("0", None),
    ]  # fmt: skip


def test_gpu_model_from_a_one_product_node_affinity(tmp_path):
    def affinity(*values):
        pod = a_pod()
        expression = {"key": "nvidia.com/gpu.product", "operator": "In", "values": list(values)}
        required = {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
        return pod

    rows = read_pods(tmp_path, affinity("NVIDIA-L40S"), affinity("NVIDIA-L40S", "NVIDIA-L4"))
    assert [row["gpu_model"] for row in rows] == ["NVIDIA-L40S", None]


def test_a_malformed_pod_is_a_row_with_the_field_named(tmp_path):
    no_uid = a_pod()
    del no_uid["metadata"]["uid"]
    no_phase = a_pod(uid="u-3")
    del no_phase["status"]["phase"]
    bad_gpus = containers({"limits": {"nvidia.com/gpu": "two"}})
    bad_gpus["metadata"]["uid"] = "u-4"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"uid": "u-5", "namespace": "ns"}}
    rows = read_pods(tmp_path, "oops", no_uid, no_phase, bad_gpus, job)
    assert [(row["line"], row["job_id"], row["parse_error"]) for row in rows] == [
        (4, None, "field items[]: not a JSON object"),
        (5, None, "field metadata.uid: missing"),
        (32, "u-3", "field status.phase: '' is not a pod phase"),
        (59, "u-4", "field gpus: containers[c0].resources.limits.nvidia.com/gpu: "
                    "'two' is not a whole number"),
        (87, "u-5", "field kind: 'Job' is not a Pod"),
    ]  # fmt: skip
    assert rows[0]["raw"] == '"oops"'


def test_snapshot_time_without_one_in_the_name_is_the_newest_time_in_the_file(tmp_path):
    later = a_pod(uid="u-2", conditions=condition("Ready", "PodFailed", t("09:41:07")))
    rows = read_pods(tmp_path, a_pod(), later, name="pods.json")
    assert [row["end_time"] for row in rows] == [t("09:41:07")] * 2


def test_a_name_earlier_than_the_contents_gives_way_to_them(tmp_path):
    pod = a_pod(conditions=condition("Ready", "PodFailed", t("10:20:00")))
    [row] = read_pods(tmp_path, pod, name="pods-20261110T100000Z.json")
    assert row["end_time"] == t("10:20:00")
    [row] = read_pods(tmp_path, a_pod(), name="pods-20261110T100000Z.json")
    assert row["end_time"] == t("10:00:00")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n    "apiVersion": "v1",\n    "items": [\n        {"kind": "Pod",}\n',
         "line 4: invalid JSON (Expecting property name enclosed in double quotes)"),
        ('{\n    "items": [\n        {"kind": "Pod"}\n',  # truncated
         "line 3: invalid JSON (the file ends early: truncated?)"),
        ('{\n    "items": [],\n    "kind": "NodeList"\n}\n',
         "line 3: field kind: 'NodeList' is not a List or PodList"),
        ('{\n    "items": {}\n}\n', "line 2: field items: not an array"),
        ('{"kind": "List"}', "line 1: field items: missing (not a Kubernetes List or PodList)"),
        ('{"items": []}\n{"items": []}\n', "line 2: invalid JSON (extra data after the pod list)"),
        ('{"items": [{"kind": "Pod"} {"kind": "Pod"}]}',
         "line 1: invalid JSON (expected ',' or ']')"),
        ("[]", "line 1: expected a JSON object (a Kubernetes List or PodList of pods)"),
    ],
)  # fmt: skip
def test_a_malformed_file_stops_with_file_and_line(tmp_path, text, message):
    path = tmp_path / "pods.json"
    path.write_text(text)
    with pytest.raises(LandingError) as error:
        list(kubernetes.read_rows(path, UTC))
    assert str(error.value) == f"{path}: {message}"


def test_an_item_nested_too_deeply_stops_with_file_and_line_not_a_recursion_error(tmp_path):
    # the standard decoder recurses per level: 100,000 levels raised RecursionError, no file
    path = tmp_path / "pods.json"
    path.write_text('{"kind": "List",\n"items": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    with pytest.raises(LandingError) as error:
        list(kubernetes.read_rows(path, UTC))
    assert str(error.value) == f"{path}: line 2: invalid JSON (nested too deeply to read)"


# ---- end to end ---------------------------------------------------------------------------


# `kubectl get workloads -A -o json` at 06:00: Kueue admitted the Job llama-pretrain (whose
# pod A it created at 05:50) at 05:49:30, 9.5 minutes after the Job's Workload was created
LLAMA_JOB = "0b6f5c1d-93f2-4a8e-b0d4-6a1e2c3f4b5a"
WORKLOADS = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [{
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-llama-pretrain-3c1f2", "namespace": "nlp-prod", "uid": "uid-wl-llama",
            "creationTimestamp": "2026-11-10T05:40:00Z",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                 "name": "llama-pretrain", "uid": LLAMA_JOB,
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {"queueName": "nlp-queue", "podSets": [{"name": "main", "count": 1}]},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "lastTransitionTime": "2026-11-10T05:49:30Z"},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "lastTransitionTime": "2026-11-10T05:49:30Z"},
            ],
            "admission": {"clusterQueue": "cq-nlp", "podSetAssignments": []},
        },
    }],
}  # fmt: skip


def build_k8s_month(root: Path) -> None:
    """The three snapshots and the Workloads as cluster `k8s`; namespaces nlp-* and vision
    mapped; one flat rate; no nodes.csv (capacity unknown), no telemetry."""
    for path in SNAPSHOTS:
        target = root / "landing/scheduler/k8s" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    (root / "landing/scheduler/k8s/workloads-2026-11-10T06-00-00Z.json").write_text(
        json.dumps(WORKLOADS, indent=1)
    )
    write(
        root / "catalog/tenants.yaml",
        """
        tenants:
          - {id: nlp, name: NLP Research, department: Research, cost_center: CC-10,
             accounts: ["nlp-*"]}
          - {id: vision, name: Vision, department: Research, cost_center: CC-20,
             accounts: [vision]}
        """,
    )
    write(root / "catalog/rates.yaml", 'rates:\n  - {gpu_model: "*", price_per_gpu_hour: 2.00}\n')


@pytest.fixture(scope="module")
def k8s_month(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("k8s")
    build_k8s_month(root)
    result = materialize_month(root, "2026-11-01")
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks and all(checks.values()), checks
    return root


@pytest.mark.slow
def test_each_pod_counts_once_in_its_last_state(k8s_month):
    rows = query(
        k8s_month,
        """
        select job_id, tenant_id, account, "user", state, gpus, start_at::varchar,
               end_at::varchar, allocated_gpu_hours, failed_job_gpu_hours, amount
        from job_usage where job_id <> $mig order by start_at
        """,
        {"mig": E},
    )
    assert rows == [
        (C, "vision", "vision", "carol", "PREEMPTED", 2.0, "2026-11-10 02:00:00",
         "2026-11-10 10:30:00", 17.0, 0.0, Decimal("34.00")),
        (G, "nlp", "nlp-dev", "erin", "COMPLETED", 0.0, "2026-11-10 03:00:00",
         "2026-11-10 05:00:00", 0.0, 0.0, Decimal("0.00")),
        (B, "nlp", "nlp-dev", "bob", "OUT_OF_MEMORY", 1.0, "2026-11-10 04:00:00",
         "2026-11-10 09:15:00", 5.25, 5.25, Decimal("10.50")),
        (D, "nlp", "nlp-prod", "sweep-runner", "PREEMPTED", 2.0, "2026-11-10 05:00:00",
         "2026-11-10 11:00:00", 12.0, 0.0, Decimal("24.00")),
        # Pending -> Running -> Succeeded: the Succeeded record wins
        (A, "nlp", "nlp-prod", "alice", "COMPLETED", 4.0, "2026-11-10 07:00:00",
         "2026-11-10 15:30:00", 34.0, 0.0, Decimal("68.00")),
        # running at the last snapshot: ends at its time (18:00), not at 12:00's record
        (F, "nlp", "nlp-prod", "llm-serve", "RUNNING", 1.0, "2026-11-10 10:00:00",
         "2026-11-10 18:00:00", 8.0, 0.0, Decimal("16.00")),
    ]  # fmt: skip


@pytest.mark.slow
def test_the_mig_pod_is_a_fraction_of_a_gpu(k8s_month):
    rows = query(
        k8s_month,
        "select state, gpus, gpu_model, start_at::varchar, end_at::varchar from job_usage "
        "where job_id = $mig",
        {"mig": E},
    )
    assert rows == [
        ("COMPLETED", 2 / 7, H100, "2026-11-10 08:00:00", "2026-11-10 15:00:00"),
    ]


@pytest.mark.slow
def test_the_mig_pod_allocates_its_gpu_equivalents(k8s_month):
    rows = query(
        k8s_month,
        "select allocated_gpu_hours, amount from job_usage where job_id = $mig",
        {"mig": E},
    )
    assert rows == [(2.0, Decimal("4.00"))]  # 2/7 GPU x 7 h at 2.00


CHARGE_LINES = "select tenant_id, gpu_model, charge_category, gpu_hours, amount from charge_lines"


@pytest.mark.slow
def test_charge_lines_of_whole_gpu_pods(k8s_month):
    rows = query(
        k8s_month, f"{CHARGE_LINES} where gpu_model <> $h100 order by 1, 2", {"h100": H100}
    )
    assert rows == [
        ("nlp", A100, "Usage", 34.0, Decimal("68.00")),  # A
        ("nlp", "unknown", "Usage", 25.25, Decimal("50.50")),  # B 5.25 + D 12 + F 8
        ("vision", "unknown", "Usage", 17.0, Decimal("34.00")),  # C
    ]


@pytest.mark.slow
def test_charge_lines_of_the_mig_pod_and_the_total(k8s_month):
    assert query(k8s_month, f"{CHARGE_LINES} where gpu_model = $h100", {"h100": H100}) == [
        ("vision", H100, "Usage", 2.0, Decimal("4.00")),
    ]
    assert query(k8s_month, "select sum(amount) from charge_lines") == [(Decimal("156.50"),)]


@pytest.mark.slow
def test_rows_reconcile_and_repeated_snapshots_are_folded(k8s_month):
    files = query(
        k8s_month,
        "select subject, rows_read, rows_loaded, rows_rejected, duplicates_folded "
        "from data_quality where category = 'file' order by subject",
    )
    assert files == [
        # all five superseded by later records (G by 12:00's identical one)
        ("scheduler/k8s/pods-2026-11-10T06-00-00Z.json", 5, 5, 0, 5),
        # A, E, F superseded at 18:00; C by 18:00's identical record; B, D, G win here
        ("scheduler/k8s/pods-2026-11-10T12-00-00Z.json", 7, 7, 0, 4),
        # A, C, E, F win; H rejected
        ("scheduler/k8s/pods-2026-11-10T18-00-00Z.json", 5, 4, 1, 0),
        ("scheduler/k8s/workloads-2026-11-10T06-00-00Z.json", 1, 1, 0, 0),
    ]
    assert query(k8s_month, "select file, line, reason, raw from rejects") == [
        ("scheduler/k8s/pods-2026-11-10T18-00-00Z.json", 704,
         "field start_time: '2026-11-10T25:10:00Z' is not a timestamp",
         f"vision/eval-resnet-0-p2w6z uid={H} phase=Running"),
    ]  # fmt: skip
    assert query(k8s_month, "select count(*) from job_usage") == [(7,)]


@pytest.mark.slow
def test_a_kueue_jobs_pod_waits_as_long_as_kueue_held_its_job(k8s_month):
    # pod A knows its Job (ownerReferences); the Job's Workload was created at 05:40 and
    # admitted at 05:49:30: A's wait is those 570 s (not the 70 minutes from the pod's creation
    # at 05:50 to its start at 07:00), and its 4 GPUs were pending from 05:40 to 07:00
    assert query(
        k8s_month, "select job_id from stg_jobs where owner_uid = $job", {"job": LLAMA_JOB}
    ) == [(A,)]
    rows = query(
        k8s_month,
        "select jobs_started, wait_p50_s, pending_gpu_hours, kueue_waits from queue_stats "
        "where grouping_set = 'tenant_queue_gpu_model' and queue = 'nlp-queue' "
        "and gpu_model = $a100",
        {"a100": A100},
    )
    assert rows == [(1, 570.0, pytest.approx(80 / 60 * 4), 1)]
