"""Kubernetes `kubectl get pods -A -o json` snapshots of `kube`, every 6 hours from the month
start to the export; a terminated pod stays listed for 12 h (Job TTL / Kueue finalizer), so its
final state is always seen. The pod objects only format what the simulation decided,
deterministically: the same input gives the same bytes.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from simulator.clock import EPOCH, fmt_ts
from simulator.kube import Pod
from simulator.site import POD_LINGER_S, KubeLayout, Layout


def rfc3339(ts: int) -> str:
    """Epoch seconds as Kubernetes RFC 3339 UTC text (`2026-11-01T12:00:00Z`)."""
    return fmt_ts(ts) + "Z"


GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def phase_number(pod: Any, as_of: int) -> int:
    """0 pending, 1 running, 2 terminated at ``as_of``: the pod's object only changes with it."""
    if pod.start is None or pod.start > as_of:
        return 0
    return 2 if pod.end is not None and pod.end <= as_of else 1


def pod_object(pod: Any, as_of: int, node_ip: dict[str, str], product: str | None) -> dict:
    """The pod as `kubectl get pods -A -o json` shows it at `as_of` (keys sorted on output).
    It is the same object for every ``as_of`` of one phase (see `phase_number`)."""
    started = pod.start is not None and pod.start <= as_of
    ended = started and pod.end is not None and pod.end <= as_of
    resources: dict[str, dict[str, str]] = {
        "limits": {"cpu": str(pod.cpus), "memory": f"{pod.memory_gi}Gi"},
        "requests": {"cpu": str(pod.cpus), "memory": f"{pod.memory_gi}Gi"},
    }
    if pod.whole:
        resources["limits"]["nvidia.com/gpu"] = str(pod.whole)
        resources["requests"]["nvidia.com/gpu"] = str(pod.whole)
    if pod.slices:
        resources["limits"]["nvidia.com/mig-1g.10gb"] = str(pod.slices)
        resources["requests"]["nvidia.com/mig-1g.10gb"] = str(pod.slices)
    labels = dict(pod.labels)
    metadata: dict[str, Any] = {
        "creationTimestamp": rfc3339(pod.submit),
        "labels": labels,
        "name": pod.name,
        "namespace": pod.namespace,
        # changes with every update of the pod: here, its phase
        "resourceVersion": str(2_000_000 + 3 * pod.serial + phase_number(pod, as_of)),
        "uid": pod.uid,
    }
    if pod.owner_kind:
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1" if pod.owner_kind == "ReplicaSet" else "batch/v1",
             "blockOwnerDeletion": True, "controller": True, "kind": pod.owner_kind,
             "name": pod.owner_name, "uid": pod.owner_uid}
        ]  # fmt: skip
    if pod.queue:
        metadata["finalizers"] = ["kueue.x-k8s.io/managed"]
    container = {
        "image": pod.image,
        "imagePullPolicy": "IfNotPresent",
        "name": pod.container,
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": pod.priority,
        "restartPolicy": "Always" if pod.owner_kind in ("ReplicaSet", "DaemonSet") else "Never",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": pod.service_account,
        "serviceAccountName": pod.service_account,
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
        ],
    }
    if pod.priority_class:
        spec["priorityClassName"] = pod.priority_class
    if pod.deadline:
        spec["activeDeadlineSeconds"] = pod.deadline
    if product:
        spec["nodeSelector"] = {GPU_PRODUCT_LABEL: product}
    status: dict[str, Any] = {"qosClass": "Guaranteed"}
    if not started:
        status["phase"] = "Pending"
        reason = "SchedulingGated" if pod.queue else "Unschedulable"
        if pod.queue:
            spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
        status["conditions"] = [
            {"lastProbeTime": None, "lastTransitionTime": rfc3339(pod.submit),
             "message": "Scheduling is blocked due to non-empty scheduling gates"
             if pod.queue else "0/6 nodes are available: insufficient nvidia.com/gpu.",
             "reason": reason, "status": "False", "type": "PodScheduled"}
        ]  # fmt: skip
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
                "status": status}  # fmt: skip
    spec["nodeName"] = pod.node
    status["hostIP"] = node_ip[pod.node]
    status["podIP"] = f"10.244.{pod.serial % 200}.{pod.serial % 250 + 2}"
    status["startTime"] = rfc3339(pod.start)
    running_since = pod.start + pod.pull_s
    conditions = [
        ("PodReadyToStartContainers", pod.start + 1),
        ("Initialized", pod.start),
        ("Ready", running_since),
        ("ContainersReady", running_since),
        ("PodScheduled", pod.start),
    ]
    if not ended:
        status["phase"] = "Running"
        status["conditions"] = [
            {"lastProbeTime": None, "lastTransitionTime": rfc3339(t), "status": "True",
             "type": kind}
            for kind, t in conditions
        ]  # fmt: skip
        status["containerStatuses"] = [
            _container_status(pod, {"running": {"startedAt": rfc3339(running_since)}}, True)
        ]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
                "status": status}  # fmt: skip
    succeeded = pod.state == "COMPLETED"
    status["phase"] = "Succeeded" if succeeded else "Failed"
    terminated = {
        "containerID": f"containerd://{pod.uid.replace('-', '')}{pod.serial:08x}",
        "exitCode": pod.exit_code,
        "finishedAt": rfc3339(pod.end),
        "reason": pod.container_reason,
        "startedAt": rfc3339(min(running_since, pod.end)),
    }
    done = [
        {"lastProbeTime": None, "lastTransitionTime": rfc3339(pod.end),
         "reason": "PodCompleted" if succeeded else "PodFailed", "status": "False",
         "type": kind}
        if kind in ("Ready", "ContainersReady")
        else {"lastProbeTime": None, "lastTransitionTime": rfc3339(t), "status": "True",
              "type": kind}
        for kind, t in conditions
    ]  # fmt: skip
    if pod.reason == "Evicted":
        status["reason"] = "Evicted"
        status["message"] = (
            "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, "
            "available: 8812Mi. Container "
            f"{pod.container} was using 61Gi, request is 0, has larger consumption of "
            "ephemeral-storage."
        )
        done.append({"lastProbeTime": None, "lastTransitionTime": rfc3339(pod.end),
                     "message": "The node was low on resource: ephemeral-storage.",
                     "reason": "TerminationByKubelet", "status": "True",
                     "type": "DisruptionTarget"})  # fmt: skip
    elif pod.reason == "DeadlineExceeded":
        status["reason"] = "DeadlineExceeded"
        status["message"] = "Pod was active on the node longer than the specified deadline"
    elif pod.reason == "KueuePreempted":
        done.append({"lastProbeTime": None, "lastTransitionTime": rfc3339(pod.end - 30),
                     "message": "Preempted to accommodate a workload (UID: "
                     f"{pod.preemptor_uid}) due to prioritization in the ClusterQueue",
                     "reason": "WorkloadEvictedDueToPreempted", "status": "True",
                     "type": "TerminationTarget"})  # fmt: skip
    status["conditions"] = done
    status["containerStatuses"] = [_container_status(pod, {"terminated": terminated}, False)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": status}  # fmt: skip


def _container_status(pod: Any, state: dict, ready: bool) -> dict:
    return {
        "containerID": f"containerd://{pod.uid.replace('-', '')}{pod.serial:08x}",
        "image": pod.image,
        "imageID": f"{pod.image.split(':')[0]}@sha256:{pod.uid.replace('-', '')}{'0' * 32}",
        "lastState": {},
        "name": pod.container,
        "ready": ready,
        "restartCount": 0,
        "started": ready,
        "state": state,
    }


def pod_item_text(pod: dict) -> str:
    """One pod as it sits in the `items` array of `pod_list_text` (indented two levels)."""
    text = json.dumps(pod, indent=4, sort_keys=True, ensure_ascii=False)
    return "\n".join("        " + line for line in text.split("\n"))


def pod_list_text(items: list[str]) -> str:
    """A `kubectl get pods -A -o json` document: a v1 List, keys sorted, 4-space indent, of
    items made by `pod_item_text` (what `json.dumps(..., indent=4, sort_keys=True)` writes)."""
    listed = "[\n" + ",\n".join(items) + "\n    ]" if items else "[]"
    return (
        '{\n    "apiVersion": "v1",\n    "items": ' + listed + ',\n    "kind": "List",\n'
        '    "metadata": {\n        "resourceVersion": ""\n    }\n}\n'
    )


# --------------------------------------------------------------------------------------------
# the month's snapshots

SNAPSHOT_EVERY_S = 6 * 3600


def write_snapshots(folder: Path, pods: list[Pod], layout: Layout, kl: KubeLayout) -> dict:
    """`kubectl get pods -A -o json` every 6 hours from the month start to the export."""
    folder.mkdir(parents=True, exist_ok=True)
    ips = {node.name: node.ip for node in kl.nodes}
    ordered = sorted(pods, key=lambda p: (p.namespace, p.name))
    texts: dict[tuple[int, int], str] = {}  # a pod's text per phase: it changes with it

    def text(number: int, pod: Pod, moment: int) -> str:
        key = (number, phase_number(pod, moment))
        if key not in texts:
            texts[key] = pod_item_text(pod_object(pod, moment, ips, pod.product))
        return texts[key]

    files = items = 0
    for moment in range(layout.month_start, layout.export_at + 1, SNAPSHOT_EVERY_S):
        listed = [
            text(number, pod, moment)
            for number, pod in enumerate(ordered)
            if pod.submit <= moment and (pod.end is None or moment < pod.end + POD_LINGER_S)
        ]
        stamp = (EPOCH + timedelta(seconds=moment)).strftime("%Y-%m-%dT%H-%M-%SZ")
        (folder / f"pods-{stamp}.json").write_text(pod_list_text(listed), encoding="utf-8")
        files, items = files + 1, items + len(listed)
    return {"pod_list_files": files, "pod_records": items}
