"""Writers of the real export formats for the demo generator (`pipelines.demo`).

Each writer turns the simulated month into the files a site would collect:

- Slurm `sacct --parsable2` daily dumps (`sacct_dump_lines`): jobs, their steps, array tasks
  and the collapsed record of an array's pending tasks, heterogeneous job components;
- Kubernetes `kubectl get pods -A -o json` snapshots (`pod_object`, `pod_list_text`);
- DCGM metrics as the JSON body of Prometheus `/api/v1/query_range` (`query_range_body`);
- `nvidia-smi --query-gpu=... --format=csv -l 60` logs (`nvidia_smi_lines`).

Nothing here decides what happened (that is the simulation in `pipelines.demo`); it only
formats it, deterministically: the same input gives the same bytes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import hostlist
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

EPOCH = datetime(1970, 1, 1)

# Open XDMoD's documented `sacct --format` order: the files written without a header use it.
XDMOD_FIELDS = (
    "jobid", "jobidraw", "cluster", "partition", "qos", "account", "group", "gid", "user",
    "uid", "submit", "eligible", "start", "end", "elapsed", "exitcode", "state", "nnodes",
    "ncpus", "reqcpus", "reqmem", "reqtres", "alloctres", "timelimit", "nodelist", "jobname",
)  # fmt: skip
# The collector that writes a header uses its own order (sacct prints the names as given).
HEADED_FIELDS = (
    "JobID", "JobIDRaw", "JobName", "Partition", "QOS", "Account", "User", "UID", "Group",
    "GID", "Submit", "Eligible", "Start", "End", "Elapsed", "State", "ExitCode", "NNodes",
    "NCPUS", "ReqCPUS", "ReqMem", "ReqTRES", "AllocTRES", "Timelimit", "NodeList", "Cluster",
)  # fmt: skip
CPUS_PER_GPU = 16
MEM_PER_GPU_G = 120


def fmt_ts(ts: int | None) -> str:
    """Epoch seconds as sacct / ISO text without zone (`2026-11-01T12:00:00`)."""
    return "" if ts is None else (EPOCH + timedelta(seconds=ts)).strftime("%Y-%m-%dT%H:%M:%S")


def rfc3339(ts: int) -> str:
    """Epoch seconds as Kubernetes RFC 3339 UTC text (`2026-11-01T12:00:00Z`)."""
    return fmt_ts(ts) + "Z"


def slurm_duration(seconds: int) -> str:
    """`[D-]HH:MM:SS`, as sacct prints Elapsed and Timelimit."""
    days, rest = divmod(max(0, int(seconds)), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


# --------------------------------------------------------------------------------------------
# Slurm sacct


@dataclass(frozen=True)
class SacctTraits:
    """What sacct shows of a job that does not change from dump to dump."""

    uid: int
    gid: int
    name: str
    gres_style: str  # 'both' (untyped total + typed), 'typed' or 'untyped'
    gres_type: str  # lower-case Slurm GPU type: a100 / h100, a MIG instance a100_1g.10gb
    numbered_steps: int  # 0: no srun step, 1: `.0`, 2: `.0` and `.1`; -1: no steps at all
    cancelled_by: int  # uid in `CANCELLED by <uid>`


@dataclass(frozen=True)
class SacctView:
    """A job as one dump shows it (its state as of the dump time)."""

    job_id: str  # 123, 123_4, 123+0
    raw_id: str
    state: str  # normalised state as of the dump
    start: int | None
    end: int | None
    nodes: tuple[str, ...]  # nodes held (sorted), empty when it never ran
    gpus: int
    cancelled_at: int | None  # a job cancelled while pending: Start = End = this


def gres(traits: SacctTraits, gpus: int, count: str | None = None) -> str:
    """The gres/gpu part of a TRES string in the job's style (`count` overrides the number)."""
    n = str(gpus) if count is None else count
    typed = f"gres/gpu:{traits.gres_type}={n}"
    untyped = f"gres/gpu={n}"
    return {"both": f"{typed},{untyped}", "typed": typed, "untyped": untyped}[traits.gres_style]


def tres(traits: SacctTraits, gpus: int, nodes: int, count: str | None = None) -> str:
    cpus = max(1, gpus) * CPUS_PER_GPU
    return (
        f"billing={cpus},cpu={cpus},{gres(traits, gpus, count)},"
        f"mem={max(1, gpus) * MEM_PER_GPU_G}G,node={nodes}"
    )


def _exit_text(state: str, exit_code: int) -> str:
    if state == "FAILED":
        return f"{exit_code}:0" if exit_code < 128 else f"0:{exit_code - 128}"
    if state == "OUT_OF_MEMORY":
        return "0:125"
    if state in ("CANCELLED", "TIMEOUT", "PREEMPTED"):
        return "0:15"
    return "0:0"


def sacct_job_record(
    job: Any, view: SacctView, traits: SacctTraits, cluster: str, as_of: int
) -> dict[str, str]:
    """The job's own line (lower-case field name -> text)."""
    never_ran = view.start is None
    if view.cancelled_at is not None:
        start = end = fmt_ts(view.cancelled_at)
        elapsed = 0
    else:
        start = "Unknown" if never_ran else fmt_ts(view.start)
        end = "Unknown" if view.end is None else fmt_ts(view.end)
        elapsed = 0 if never_ran else (view.end if view.end is not None else as_of) - view.start
    state = view.state
    if state == "CANCELLED":
        state = f"CANCELLED by {traits.cancelled_by}"
    # a job that never ran asks for whole nodes beyond 8 GPUs
    nnodes = len(view.nodes) or max(1, -(-view.gpus // 8))
    per_node = view.gpus // nnodes
    running_or_done = not never_ran and view.cancelled_at is None
    return {
        "jobid": view.job_id,
        "jobidraw": view.raw_id,
        "cluster": cluster,
        "partition": job.queue,
        "qos": job.qos,
        "account": job.account,
        "group": job.account,
        "gid": str(traits.gid),
        "user": job.user,
        "uid": str(traits.uid),
        "submit": fmt_ts(job.submit),
        "eligible": fmt_ts(job.submit),
        "start": start,
        "end": end,
        "elapsed": slurm_duration(elapsed),
        "exitcode": "0:0"
        if view.state in ("RUNNING", "PENDING")
        else _exit_text(view.state, job.exit_code),
        "state": state,
        "nnodes": str(nnodes),
        "ncpus": str(max(1, view.gpus) * CPUS_PER_GPU),
        "reqcpus": str(max(1, view.gpus) * CPUS_PER_GPU),
        "reqmem": f"{max(1, per_node) * MEM_PER_GPU_G}G",
        "reqtres": tres(traits, job.gpus, nnodes),
        "alloctres": tres(traits, view.gpus, nnodes) if running_or_done else "",
        "timelimit": slurm_duration(job.time_limit),
        "nodelist": hostlist.collect_hostlist(list(view.nodes)) if view.nodes else "None assigned",
        "jobname": traits.name,
    }


_STEP_STATE = {
    "COMPLETED": "COMPLETED",
    "FAILED": "FAILED",
    "OUT_OF_MEMORY": "OUT_OF_MEMORY",
    "CANCELLED": "CANCELLED",
    "TIMEOUT": "CANCELLED",
    "PREEMPTED": "CANCELLED",
    "NODE_FAIL": "CANCELLED",
}


def sacct_step_records(
    job: Any, view: SacctView, traits: SacctTraits, cluster: str, as_of: int
) -> list[dict[str, str]]:
    """The job's steps that exist at the dump time: `.batch` (or `.interactive`), `.extern`
    and up to two numbered srun steps."""
    if view.start is None or traits.numbered_steps < 0 or not view.nodes:
        return []
    running = view.end is None
    end = view.end
    per_node = view.gpus // len(view.nodes)
    first = (job.queue == "interactive", view.nodes[0])
    steps: list[tuple[str, int, int | None, tuple[str, ...], str, str]] = []
    # (suffix, start, end, nodes, name, state)
    final = _STEP_STATE.get(view.state, "COMPLETED")
    lead = "interactive" if first[0] else "batch"
    steps.append((lead, view.start, end, (first[1],), lead, final))
    extern_state = "CANCELLED" if view.state in ("CANCELLED", "NODE_FAIL") else "COMPLETED"
    steps.append(("extern", view.start, end, view.nodes, "extern", extern_state))
    if traits.numbered_steps > 0:
        begin = view.start + 7
        total_end = end if end is not None else None
        if traits.numbered_steps == 2:
            span = (job.runtime if job.runtime else 120) // 3
            middle = begin + max(30, span)
            if total_end is None or middle < total_end:
                steps.append(("0", begin, middle if middle <= as_of else None, view.nodes,
                              "prep", "COMPLETED"))  # fmt: skip
                if middle <= as_of:
                    steps.append(("1", middle + 3, total_end, view.nodes, "train", final))
            else:
                steps.append(("0", begin, total_end, view.nodes, "train", final))
        elif total_end is None or begin < total_end:
            steps.append(("0", begin, total_end, view.nodes, "train", final))
    records = []
    for suffix, start, stop, nodes, name, state in steps:
        if start > as_of:
            continue
        step_running = running and stop is None
        gpus = per_node * len(nodes)
        records.append(
            {
                "jobid": f"{view.job_id}.{suffix}",
                "jobidraw": f"{view.raw_id}.{suffix}",
                "cluster": cluster,
                "partition": "",
                "qos": "",
                "account": job.account,
                "group": "",
                "gid": "",
                "user": "",
                "uid": "",
                "submit": fmt_ts(start),
                "eligible": fmt_ts(start),
                "start": fmt_ts(start),
                "end": "Unknown" if stop is None else fmt_ts(stop),
                "elapsed": slurm_duration((as_of if stop is None else stop) - start),
                "exitcode": "0:0" if step_running else _exit_text(state, job.exit_code),
                "state": "RUNNING" if step_running else state,
                "nnodes": str(len(nodes)),
                "ncpus": str(gpus * CPUS_PER_GPU),
                "reqcpus": str(gpus * CPUS_PER_GPU),
                "reqmem": "",
                "reqtres": "",
                "alloctres": tres(traits, gpus, len(nodes)),
                "timelimit": "",
                "nodelist": hostlist.collect_hostlist(list(nodes)),
                "jobname": name,
            }
        )
    return records


def pending_array_record(
    job: Any, base: str, tasks: Sequence[int], traits: SacctTraits, cluster: str
) -> dict[str, str]:
    """The one line sacct shows for the still pending tasks of an array (`123_[4-9,12]`)."""
    text = _task_ranges(sorted(tasks))
    view = SacctView(f"{base}_[{text}]", base, "PENDING", None, None, (), job.gpus, None)
    return sacct_job_record(job, view, traits, cluster, job.submit)


def _task_ranges(tasks: list[int]) -> str:
    parts, start, prev = [], tasks[0], tasks[0]
    for t in tasks[1:] + [None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if t is not None:
            start = prev = t
    return ",".join(parts)


def sacct_text(records: Iterable[dict[str, str]], headed: bool) -> str:
    """A dump: `|`-separated lines, with the collector's header or headerless (XDMoD order)."""
    if headed:
        names = [name.lower() for name in HEADED_FIELDS]
        lines = ["|".join(HEADED_FIELDS)]
    else:
        names = list(XDMOD_FIELDS)
        lines = []
    lines += ["|".join(record[name] for name in names) for record in records]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Kubernetes pod lists

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
# DCGM via Prometheus query_range


def value_text(values: np.ndarray, decimals: int) -> pa.Array:
    """Sample values as Prometheus writes them (strings): integers or rounded decimals."""
    if decimals == 0:
        return pc.cast(pa.array(np.round(values).astype(np.int64)), pa.string())
    return pc.cast(pa.array(np.round(values, decimals)), pa.string())


def query_range_body(
    labels: list[dict[str, str]], ts: np.ndarray, values: pa.Array, offsets: np.ndarray
) -> str:
    """A `/api/v1/query_range` response body: series k has `labels[k]` and the points
    `offsets[k]:offsets[k+1]` of (`ts` epoch seconds, `values` text). Series come out sorted
    by their label sets, as Prometheus returns them."""
    pairs = pc.binary_join_element_wise(
        "[", pc.cast(pa.array(ts), pa.string()), ',"', values, '"]', ""
    )
    joined = pc.binary_join(
        pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pairs), ","
    ).to_pylist()
    series = sorted(
        (sorted(label.items()), json.dumps(label, separators=(",", ":"), sort_keys=True), text)
        for label, text in zip(labels, joined, strict=True)
    )
    result = ",".join(f'{{"metric":{metric},"values":[{text}]}}' for _, metric, text in series)
    return '{"status":"success","data":{"resultType":"matrix","result":[' + result + "]}}\n"


# --------------------------------------------------------------------------------------------
# nvidia-smi


SMI_HEADER = (
    "timestamp, index, uuid, name, utilization.gpu [%], memory.used [MiB], power.draw [W]\n"
)


def nvidia_smi_lines(
    ts: np.ndarray,
    gpu_index: np.ndarray,
    uuids: pa.Array,
    names: pa.Array,
    util: np.ndarray,
    memory: np.ndarray,
    power: np.ndarray,
    power_missing: np.ndarray,
) -> list[str]:
    """One log line per sample, ordered as given: `2026/11/01 00:00:00.103, 3, GPU-..., NVIDIA
    A100-SXM4-80GB, 87 %, 40960 MiB, 301.25 W` (`[N/A]` where the power read failed). The
    milliseconds grow with the GPU index, as nvidia-smi queries the GPUs one after another."""
    stamp = pc.strftime(pa.array(ts.astype("datetime64[s]")), format="%Y/%m/%d %H:%M:%S")
    millis = pa.array([f".{100 + 3 * g:03d}" for g in range(16)]).take(pa.array(gpu_index))
    cents = np.round(power * 100).astype(np.int64)
    watts = pc.binary_join_element_wise(
        pc.cast(pa.array(cents // 100), pa.string()),
        pc.utf8_lpad(pc.cast(pa.array(cents % 100), pa.string()), 2, "0"),
        ".",
    )
    watts = pc.if_else(
        pa.array(power_missing), pa.scalar("[N/A]"), pc.binary_join_element_wise(watts, " W", "")
    )

    def with_unit(values: np.ndarray, unit: str) -> pa.Array:
        text = pc.cast(pa.array(np.round(values).astype(np.int64)), pa.string())
        return pc.binary_join_element_wise(text, unit, "")

    lines = pc.binary_join_element_wise(
        pc.binary_join_element_wise(stamp, millis, ""),
        pc.cast(pa.array(gpu_index), pa.string()),
        uuids,
        names,
        with_unit(util, " %"),
        with_unit(memory, " MiB"),
        watts,
        ", ",
    )
    return lines.to_pylist()


def gpu_uuid(rnd: random.Random) -> str:
    """A GPU UUID as nvidia-smi and DCGM print it."""
    h = f"{rnd.getrandbits(128):032x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
