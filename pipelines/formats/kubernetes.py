"""Kubernetes pod lists (DESIGN.md "Inputs" 2): `kubectl get pods -A -o json` snapshots.

A file is one `List` / `PodList` of pods taken at one moment; snapshots are collected
periodically, so a pod appears in many files. Each pod of each file is one row, job_id = its
`metadata.uid`; SQL keeps the row that ranks first per UID (`stg_job_records.sql`), which is
the pod's last state:

- a terminated pod (phase Succeeded / Failed) ends at its latest container
  `terminated.finishedAt` (else its latest condition transition, else the snapshot time);
- a pod that has started but not terminated (Running, Unknown, or Pending after the kubelet
  admitted it) ends at the **snapshot time**: the moment it was last seen holding its GPUs.
  Its state stays RUNNING (PENDING), so the newest snapshot's record outranks older ones
  (`end_at desc`), a pod still running in the last snapshot ends there (the export time), and
  a pod deleted between two snapshots (Kueue preemption, `kubectl delete`, node drain: deleted
  pods never show a final phase) is charged up to its last sighting, not up to the end of all
  exports. `job_usage.is_running` is therefore false for these pods.

The snapshot time is in no pod field and `kubectl` writes none for the list, so it is the UTC
timestamp in the file name (`pods-2026-11-10T06-00-00Z.json[.gz]`, `...T06:00:00Z...`,
`20261110T060000Z`), or, when the name has none (or an earlier one), the newest timestamp
inside the file (creation, start, condition and container times): a lower bound.

Columns: job_name = the pod's `metadata.name`; account = namespace; user = label `user`, else
label `owner`, else the service account; queue = label `kueue.x-k8s.io/queue-name`; qos =
`status.qosClass`; nodes = `spec.nodeName`; submit / start = `creationTimestamp` /
`status.startTime` (RFC 3339 text, typed in SQL); owner_uid = the uid of the pod's controlling
owner (`metadata.ownerReferences`, `controller: true`; a Job's pods: the Job). gpus =
GPU-equivalents: `nvidia.com/gpu` (limits, else requests) plus MIG instances
`nvidia.com/mig-<N>g.<M>gb` at their profile's fraction (catalog `mig_profiles`, else N/7:
A100/H100), summed over containers with Kubernetes' init-container rule. On a node of a declared
sharing pool (time-slicing or MPS, settings.yaml) each `nvidia.com/gpu` (or renamed
`nvidia.com/gpu.shared`) is a replica: 1/replicas of a GPU. gpu_model = the pod's
`nvidia.com/gpu.product` node selector (or a one-valued required node affinity on it), else
None. For MIG pods too: GPU-equivalents already carry the fraction and rates are per GPU-hour of
the parent GPU, so a profile as model would only miss the rate card (and quota pools).

State, from phase and reasons (the deciding reason goes into `raw`): Succeeded -> COMPLETED;
Running / Unknown -> RUNNING; Pending -> PENDING; Failed -> NODE_FAIL (node lost or shut
down, or deleted by the taint manager / pod GC), else TIMEOUT (`DeadlineExceeded`), else
PREEMPTED (`Evicted`, `Preempting`, a DisruptionTarget condition of scheduler preemption or
eviction, Kueue's TerminationTarget for preemption), else CANCELLED (stopped by Kueue for
another reason), else OUT_OF_MEMORY (a container `OOMKilled`), else FAILED.

The whole file is read as text (snapshots are a few MB; a 10,000-pod list is ~100 MB) but
decoded one pod at a time, so memory holds the text, one pod and the file's rows, never the
whole object tree (several times the text). A streaming parser (ijson) would drop the text
too; not worth a dependency at these sizes.
Invalid JSON or a top level that is not a pod list stops with file and line; a malformed pod
is still a row, with `parse_error` naming the field, so it reaches the rejects table.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

from pipelines.catalog import ClusterSettings
from pipelines.formats import ExportFormat, json_object_sniffer, open_text, without_gz
from pipelines.formats.gpus import gpu_text, mig_equivalent
from pipelines.landing import LandingError

GPU_RESOURCE = "nvidia.com/gpu"
# the device plugin's replicas of a time-sliced or MPS GPU when it renames them (renameByDefault)
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
# nvidia.com/mig-1g.10gb, mig-3g.40gb, mig-1g.10gb+me (media extensions): the profile; one
# that is no MIG profile (mig-9g.99gb) rejects the pod, it is never ignored (gpus.mig_equivalent)
MIG_RESOURCE = re.compile(r"nvidia\.com/mig-(.+?)(?:[.+]me)?")
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
USER_LABELS = ("user", "owner")

_PHASES = {
    "Succeeded": "COMPLETED",
    "Failed": "FAILED",
    "Running": "RUNNING",
    "Unknown": "RUNNING",  # the node stopped reporting: the pod still holds its GPUs
    "Pending": "PENDING",
}
# status.reason of a Failed pod
_NODE_FAILURE_REASONS = {"NodeLost", "Terminated", "Shutdown", "NodeShutdown"}
_PREEMPTION_REASONS = {"Evicted", "Preempting", "Preempted"}
# DisruptionTarget condition reasons (Kubernetes >= 1.26)
_NODE_FAILURE_DISRUPTIONS = {"DeletionByTaintManager", "DeletionByPodGC"}
_PREEMPTION_DISRUPTIONS = {
    "PreemptionByScheduler", "PreemptionByKubeScheduler", "EvictionByEvictionAPI",
    "TerminationByKubelet",
}  # fmt: skip
# Kueue's plain-pod integration marks the pods it stops with this condition; the reason is
# `WorkloadEvictedDueTo<eviction reason>` (Preempted, PodsReadyTimeout, ...) or WorkloadDeleted.
_KUEUE_STOP_CONDITION = "TerminationTarget"

# a timestamp in a file name: 2026-11-10T06-00-00Z, 2026-11-10T06:00:00Z, 20261110T060000Z
_NAME_TIME = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})[T_](\d{2})[:-]?(\d{2})[:-]?(\d{2})")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def read_rows(path: Path, settings: ClusterSettings) -> Iterator[dict[str, Any]]:
    """Yield one row per pod of the snapshot: the canonical job columns as text, plus `line`
    (where the pod's object starts), `raw` (`namespace/name uid=... phase=...`),
    `parse_error` and `record_type` 'job'.

    The rows of a file are collected before any is yielded: the end of a running pod is the
    snapshot time, known only once every timestamp of the file has been seen.
    """
    rows: list[dict[str, Any]] = []
    seen_until = _name_time(path)
    for line, item in list_items(path):
        row, newest = _pod_row(line, item, settings)
        rows.append(row)
        if newest is not None and (seen_until is None or newest > seen_until):
            seen_until = newest
    snapshot = _rfc3339(seen_until) if seen_until is not None else None
    for row in rows:
        if row.pop("_ends_at_snapshot"):
            row["end_time"] = snapshot
    yield from rows


def list_items(
    path: Path,
    list_kinds: tuple[str, ...] = ("List", "PodList"),
    of: str = "pods",
    what: str = "pod list",
) -> Iterator[tuple[int, Any]]:
    """(line where it starts, decoded value) of each element of the top-level `items` array
    of a Kubernetes list whose `kind` is one of `list_kinds` (`of` names its items and `what`
    the list in messages; the Kueue objects' reader shares it).

    The text is walked with the standard decoder's `raw_decode`, one value at a time, so that
    each pod's position in the (pretty-printed) file is known and only one pod is decoded at a
    time. A top level that is no pod list is found at its end (kubectl writes `kind` after
    `items`), after the items have been yielded: `read_rows` yields nothing before then.
    """
    with open_text(path) as handle:  # gzipped or not
        text = handle.read()
    decoder = json.JSONDecoder()
    lines = _LineCounter(text)

    def fail(pos: int, message: str) -> LandingError:
        return LandingError(f"{path}: line {lines.at(pos)}: {message}")

    def decode(pos: int) -> tuple[Any, int]:
        try:
            return decoder.raw_decode(text, pos)
        except json.JSONDecodeError as error:
            raise LandingError(f"{path}: line {error.lineno}: invalid JSON ({error.msg})") from None
        except RecursionError:  # the decoder recurses per level: a value nested absurdly deep
            raise fail(pos, "invalid JSON (nested too deeply to read)") from None

    def skip(pos: int) -> int:
        return _JSON_SPACE.match(text, pos).end()

    pos = skip(1 if text.startswith("\ufeff") else 0)
    if not text.startswith("{", pos):
        raise fail(pos, f"expected a JSON object (a Kubernetes {' or '.join(list_kinds)} of {of})")
    pos, kind, kind_at, has_items = skip(pos + 1), None, 0, False
    while not text.startswith("}", pos):
        key_at = pos
        key, pos = decode(pos)
        if not isinstance(key, str):
            raise fail(key_at, "invalid JSON (expected a property name)")
        pos = skip(pos)
        if not text.startswith(":", pos):
            raise fail(pos, "invalid JSON (expected ':')")
        pos = skip(pos + 1)
        if key == "items":
            if not text.startswith("[", pos):
                raise fail(pos, "field items: not an array")
            has_items, pos = True, skip(pos + 1)
            while not text.startswith("]", pos):
                item_at = pos
                item, pos = decode(pos)
                yield lines.at(item_at), item
                pos = _after_separator(text, skip(pos), "]", fail)
            pos += 1
        else:
            value_at = pos
            value, pos = decode(pos)
            if key == "kind":
                kind, kind_at = value, value_at
        pos = _after_separator(text, skip(pos), "}", fail)
    if skip(pos + 1) < len(text):
        raise fail(skip(pos + 1), f"invalid JSON (extra data after the {what})")
    kinds = " or ".join(list_kinds)
    if kind is not None and kind not in list_kinds:
        raise fail(kind_at, f"field kind: '{kind}' is not a {kinds}")
    if not has_items:
        raise fail(0, f"field items: missing (not a Kubernetes {kinds})")


def _after_separator(text: str, pos: int, closing: str, fail) -> int:
    """The position after a ',' (then whitespace), or of the closing bracket."""
    if text.startswith(",", pos):
        return _JSON_SPACE.match(text, pos + 1).end()
    if text.startswith(closing, pos):
        return pos
    if pos >= len(text):
        raise fail(len(text.rstrip()), "invalid JSON (the file ends early: truncated?)")
    raise fail(pos, f"invalid JSON (expected ',' or '{closing}')")


class _LineCounter:
    """Line numbers of increasing positions in a text, counted incrementally."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line = text, 0, 1

    def at(self, pos: int) -> int:
        if pos < self.pos:
            return self.text.count("\n", 0, pos) + 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _pod_row(
    line: int, pod: Any, settings: ClusterSettings
) -> tuple[dict[str, Any], dt.datetime | None]:
    """The row of one pod, and the newest timestamp it carries (for the snapshot time)."""
    row: dict[str, Any] = {
        "job_id": None, "cluster": None, "account": None, "user": None, "queue": None,
        "qos": None, "gpu_model": None, "gpus": None, "nodes": None, "submit_time": None,
        "start_time": None, "end_time": None, "state": None, "exit_code": None,
        "job_name": None, "line": line, "raw": None, "parse_error": None, "record_type": "job",
        "owner_uid": None, "_ends_at_snapshot": False,
    }  # fmt: skip
    if not isinstance(pod, dict):
        row["raw"] = json.dumps(pod)[:200]
        row["parse_error"] = "field items[]: not a JSON object"
        return row, None
    meta, spec, status = (
        json_object(pod, "metadata"),
        json_object(pod, "spec"),
        json_object(pod, "status"),
    )
    labels = json_object(meta, "labels")
    phase = json_text(status.get("phase"))
    state, reason = _state(phase, status)
    namespace, name, uid = (json_text(meta.get(key)) for key in ("namespace", "name", "uid"))
    row["raw"] = " ".join(
        part
        for part in (
            f"{namespace or '?'}/{name or '?'}",
            f"uid={uid or '?'}",
            f"phase={phase or '?'}",
            f"reason={reason}" if reason else "",
        )
        if part
    )
    row.update(
        job_id=uid,
        job_name=name,
        account=namespace,
        user=next((json_text(labels[k]) for k in USER_LABELS if json_text(labels.get(k))), None)
        or json_text(spec.get("serviceAccountName"))
        or json_text(spec.get("serviceAccount")),
        queue=json_text(labels.get(QUEUE_LABEL)),
        qos=json_text(status.get("qosClass")),
        gpu_model=_gpu_model(spec),
        nodes=json_text(spec.get("nodeName")),
        submit_time=json_text(meta.get("creationTimestamp")),
        start_time=json_text(status.get("startTime")),
        state=state,
        owner_uid=_controller_uid(meta),
    )
    terminated = [
        json_object(json_object(c, "state"), "terminated")
        for key in ("initContainerStatuses", "containerStatuses")
        for c in json_list(status, key)
        if isinstance(c, dict) and json_object(json_object(c, "state"), "terminated")
    ]
    if state not in (None, "RUNNING", "PENDING"):
        row["end_time"] = _latest(t.get("finishedAt") for t in terminated) or _latest(
            c.get("lastTransitionTime")
            for c in json_list(status, "conditions")
            if isinstance(c, dict)
        )
        row["_ends_at_snapshot"] = row["end_time"] is None
        row["exit_code"] = _exit_code(terminated)
    elif state is not None and row["start_time"] is not None:
        row["_ends_at_snapshot"] = True
    try:
        row["gpus"] = gpu_text(_pod_gpus(spec, settings))
    except ValueError as error:
        row["parse_error"] = str(error)
    if pod.get("kind") not in (None, "Pod"):
        row["parse_error"] = f"field kind: '{pod.get('kind')}' is not a Pod"
    elif uid is None:
        row["parse_error"] = "field metadata.uid: missing"
    elif namespace is None:
        row["parse_error"] = "field metadata.namespace: missing"
    elif state is None:
        row["parse_error"] = f"field status.phase: '{phase or ''}' is not a pod phase"
    return row, _newest_time(meta, status)


def _controller_uid(meta: dict) -> str | None:
    """The uid of the object that controls the pod (`metadata.ownerReferences`, the one with
    `controller: true`): a batch Job's pods name their Job, whose Kueue Workload says when the
    Job was admitted (sql/marts/queue_stats.sql)."""
    owners = json_list(meta, "ownerReferences")
    owner = next((o for o in owners if isinstance(o, dict) and o.get("controller") is True), {})
    return json_text(owner.get("uid"))


def _state(phase: str | None, status: dict) -> tuple[str | None, str | None]:
    """(normalised state, the reason that decided it) of a pod."""
    state = _PHASES.get(phase or "")
    if state != "FAILED":
        return state, None
    reason = json_text(status.get("reason"))
    conditions = [
        c
        for c in json_list(status, "conditions")
        if isinstance(c, dict) and c.get("status") == "True"
    ]
    disruption = next(
        (json_text(c.get("reason")) for c in conditions if c.get("type") == "DisruptionTarget"),
        None,
    )
    kueue_stop = next(
        (json_text(c.get("reason")) for c in conditions if c.get("type") == _KUEUE_STOP_CONDITION),
        None,
    )
    oom = any(
        json_object(json_object(c, "state"), "terminated").get("reason") == "OOMKilled"
        for key in ("initContainerStatuses", "containerStatuses")
        for c in json_list(status, key)
        if isinstance(c, dict)
    )
    if reason in _NODE_FAILURE_REASONS:
        return "NODE_FAIL", reason
    if disruption in _NODE_FAILURE_DISRUPTIONS:
        return "NODE_FAIL", disruption
    if reason == "DeadlineExceeded":
        return "TIMEOUT", reason
    if reason in _PREEMPTION_REASONS:
        return "PREEMPTED", reason
    if disruption in _PREEMPTION_DISRUPTIONS:
        return "PREEMPTED", disruption
    if kueue_stop is not None:
        return ("PREEMPTED" if "Preempted" in kueue_stop else "CANCELLED"), kueue_stop
    if oom:
        return "OUT_OF_MEMORY", "OOMKilled"
    return "FAILED", reason or disruption


def _pod_gpus(spec: dict, settings: ClusterSettings) -> Fraction:
    """GPU-equivalents the pod holds, by Kubernetes' rule for init containers: the larger of
    (app containers + sidecars) and the peak of any one init container (+ earlier sidecars)."""
    replicas = _replicas(spec, settings)
    sidecars = Fraction(0)
    init_peak = Fraction(0)
    for container in json_list(spec, "initContainers"):
        gpus = _container_gpus(container, "initContainers", replicas, settings)
        if isinstance(container, dict) and container.get("restartPolicy") == "Always":
            sidecars += gpus
        else:
            init_peak = max(init_peak, sidecars + gpus)
    app = sum(
        (
            _container_gpus(c, "containers", replicas, settings)
            for c in json_list(spec, "containers")
        ),
        Fraction(0),
    )
    return max(app + sidecars, init_peak)


def _replicas(spec: dict, settings: ClusterSettings) -> dict[str, Fraction | None]:
    """What one `nvidia.com/gpu` and one `nvidia.com/gpu.shared` are worth on the pod's node:
    1/replicas of a GPU on a node of a declared sharing pool (time-slicing, MPS); elsewhere a
    whole GPU and nothing (None; `gpu.shared` is then an error). A pod not yet placed asks for
    whole GPUs, or for replicas (`gpu.shared`) of its cluster's pools when they have one size."""
    node = json_text(spec.get("nodeName"))
    if node is not None:
        pool = settings.sharing_of(node)
        replica = Fraction(1, pool.replicas) if pool else None
        return {GPU_RESOURCE: replica or Fraction(1), SHARED_GPU_RESOURCE: replica}
    sizes = {pool.replicas for pool in settings.sharing}
    return {
        GPU_RESOURCE: Fraction(1),
        SHARED_GPU_RESOURCE: Fraction(1, sizes.pop()) if len(sizes) == 1 else None,
    }


def _container_gpus(
    container: Any,
    where: str,
    replicas: dict[str, Fraction | None],
    settings: ClusterSettings,
) -> Fraction:
    resources = json_object(container, "resources")
    limits, requests = json_object(resources, "limits"), json_object(resources, "requests")
    total = Fraction(0)
    for name in sorted({*limits, *requests}):
        mig = MIG_RESOURCE.fullmatch(name)
        if name not in (GPU_RESOURCE, SHARED_GPU_RESOURCE) and mig is None:
            continue
        source = "limits" if name in limits else "requests"
        value = (limits if name in limits else requests)[name]
        count = _whole_number(value)
        field = f"field gpus: {where}[{json_text(container.get('name')) or '?'}].resources.{source}"
        if count is None:
            raise ValueError(f"{field}.{name}: '{value}' is not a whole number")
        if mig:
            try:
                total += count * mig_equivalent(mig.group(1), settings) if count else 0
            except ValueError as error:
                raise ValueError(f"{field}.{name}: {error}") from None
        elif replicas[name] is not None:
            total += count * replicas[name]
        elif count:
            raise ValueError(
                f"{field}.{name}: replicas of a shared GPU, on a node of no sharing pool "
                "(settings.yaml clusters: <cluster>: sharing)"
            )
    return total


def _whole_number(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _gpu_model(spec: dict) -> str | None:
    """The `nvidia.com/gpu.product` the pod is pinned to by node selector or by a required node
    affinity whose terms all name the same single product."""
    selected = json_text(json_object(spec, "nodeSelector").get(GPU_PRODUCT_LABEL))
    if selected:
        return selected
    required = json_object(
        json_object(json_object(spec, "affinity"), "nodeAffinity"),
        "requiredDuringSchedulingIgnoredDuringExecution",
    )
    products = {
        json_text(values[0])
        for term in json_list(required, "nodeSelectorTerms")
        for expression in json_list(term, "matchExpressions")
        if isinstance(expression, dict)
        and expression.get("key") == GPU_PRODUCT_LABEL
        and expression.get("operator") == "In"
        and len(values := json_list(expression, "values")) == 1
    }
    return products.pop() if len(products) == 1 else None


def _exit_code(terminated: list[dict]) -> str | None:
    """The first non-zero container exit code, else 0 when every container exited cleanly."""
    codes = [t.get("exitCode") for t in terminated if isinstance(t.get("exitCode"), int)]
    failed = [code for code in codes if code != 0]
    if failed:
        return str(failed[0])
    return "0" if codes else None


def _latest(values) -> str | None:
    """The latest of RFC 3339 texts (None if none); an unreadable one wins, so SQL rejects it."""
    best: tuple[dt.datetime, str] | None = None
    for value in values:
        text = json_text(value)
        if text is None:
            continue
        parsed = _parse_time(text)
        if parsed is None:
            return text
        if best is None or parsed > best[0]:
            best = (parsed, text)
    return best[1] if best else None


def _newest_time(meta: dict, status: dict) -> dt.datetime | None:
    """The newest readable timestamp a pod carries (deletionTimestamp excluded: it is a
    deadline in the future, not an observation)."""
    values = [meta.get("creationTimestamp"), status.get("startTime")]
    for condition in json_list(status, "conditions"):
        if isinstance(condition, dict):
            values += [condition.get("lastTransitionTime"), condition.get("lastProbeTime")]
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for container in json_list(status, key):
            for which in ("state", "lastState"):
                for detail in ("running", "terminated"):
                    times = json_object(json_object(container, which), detail)
                    values += [times.get("startedAt"), times.get("finishedAt")]
    times = [t for t in (_parse_time(v) for v in values if isinstance(v, str)) if t is not None]
    return max(times, default=None)


def _name_time(path: Path) -> dt.datetime | None:
    """The UTC timestamp in the file name (the last one when there are several), if any."""
    for match in reversed(list(_NAME_TIME.finditer(without_gz(path).name))):
        try:
            return dt.datetime(*map(int, match.groups()), tzinfo=dt.UTC)
        except ValueError:
            continue
    return None


def _parse_time(text: str) -> dt.datetime | None:
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.astimezone(dt.UTC) if parsed.tzinfo else None


def _rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def json_object(parent: Any, key: str) -> dict:
    """parent[key] when both are objects, else {}."""
    value = parent.get(key) if isinstance(parent, dict) else None
    return value if isinstance(value, dict) else {}


def json_list(parent: Any, key: str) -> list:
    """parent[key] when it is a list and parent an object, else []."""
    value = parent.get(key) if isinstance(parent, dict) else None
    return value if isinstance(value, list) else []


def json_text(value: Any) -> str | None:
    """A scalar as stripped text; None for null, empty, objects and lists."""
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text or None


def _is_pod_list(text: str) -> bool:
    """An `items` array of pods: `"kind": "Pod"` items (kubectl) or `"kind": "PodList"` (the
    API), or an empty `List`."""
    if not re.search(r'"items"\s*:\s*\[', text):
        return False
    if re.search(r'"kind"\s*:\s*"(?:Pod|PodList)"', text):
        return True
    return bool(
        re.search(r'"items"\s*:\s*\[\s*\]', text) and re.search(r'"kind"\s*:\s*"List"', text)
    )


FORMAT = ExportFormat(
    name="kubernetes_podlist",
    kind="jobs",
    expected="Kubernetes pod list JSON (`kubectl get pods -A -o json`: a List of Pod items)",
    sniff=json_object_sniffer(_is_pod_list),
    read_rows=read_rows,
)
