"""Kueue's configured GPU quotas and workloads: `kubectl get clusterqueues,localqueues,
resourceflavors,workloads -A -o json` (a `List`, or one kind's `ClusterQueueList`, ... of
`kueue.x-k8s.io` objects; any mix of the four kinds in a file).

One row per item (canonical quota columns, `canonical.QUOTA_COLUMNS`; source `kueue`,
object_kind the item's kind), except a ClusterQueue, which has one row per GPU resource
(`nvidia.com/gpu`) of each flavor of its `spec.resourceGroups` (one row without quota when
it has none):
- ClusterQueue: object_name its name, cohort `spec.cohort` (v1beta2: `spec.cohortName`),
  flavor the flavor's name (also `gpu_model`, the pool when the ResourceFlavor names no GPU
  product); guaranteed_gpus = `nominalQuota`; limit_gpus = nominalQuota + `borrowingLimit`,
  or, without a borrowingLimit, empty (no limit: it may borrow all its cohort has) in a cohort
  and nominalQuota outside one (nothing to borrow from).
- LocalQueue: account its namespace, target its `spec.clusterQueue`: the namespace's tenant
  is a tenant of that ClusterQueue.
- ResourceFlavor: flavor its name, gpu_model its `spec.nodeLabels` `nvidia.com/gpu.product`
  (the pool of the ClusterQueue quotas on the flavor).
- Workload: account its namespace, target `spec.queueName`, created / quota reserved /
  admitted times (`creationTimestamp`, the lastTransitionTime of its True `QuotaReserved` and
  `Admitted` conditions), admitted_queue `status.admission.clusterQueue`, owner_kind /
  owner_uid its controlling owner (`metadata.ownerReferences`, the one with `controller: true`,
  else the first): the Pod of a plain-pod workload, the Job of a batch one (whose pods Kueue
  lets be created only once admitted).
Quantities are whole GPUs (`8` or `"8"`); a quantity that is not, an item of another kind or
without a name is still a row, with `parse_error` naming the field, so it reaches the rejects
table. Invalid JSON or a top level that is no list stops with file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipelines.catalog import ClusterSettings
from pipelines.formats import ExportFormat, json_object_sniffer
from pipelines.formats.kubernetes import (
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    json_list,
    json_object,
    json_text,
    list_items,
)

API_GROUP = "kueue.x-k8s.io/"
KINDS = ("ClusterQueue", "LocalQueue", "ResourceFlavor", "Workload")
LIST_KINDS = ("List", *(f"{kind}List" for kind in KINDS))
_WHOLE = re.compile(r"[0-9]+")


class _FieldError(ValueError):
    """A field of an item that cannot be read: `str(error)` names it."""


def read_rows(path: Path, settings: ClusterSettings) -> Iterator[dict[str, Any]]:
    """Yield the rows of each item: the canonical quota columns as text, plus `line` (where
    the item starts), `raw` and `parse_error`."""
    for line, item in list_items(path, LIST_KINDS, of="Kueue objects", what="list"):
        yield from _item_rows(line, item)


def _item_rows(line: int, item: Any) -> Iterator[dict[str, Any]]:
    item = item if isinstance(item, dict) else {}
    meta, spec = json_object(item, "metadata"), json_object(item, "spec")
    kind, name = json_text(item.get("kind")), json_text(meta.get("name"))
    row: dict[str, Any] = {
        "source": "kueue",
        "object_kind": kind,
        "object_name": name,
        "line": line,
        "raw": f"{kind} {json_text(meta.get('namespace')) or ''}/{name or ''}",
        "parse_error": None,
    }
    if kind not in KINDS:
        row["parse_error"] = f"field kind: '{kind or ''}' is not a Kueue {', '.join(KINDS)}"
    elif row["object_name"] is None:
        row["parse_error"] = "field metadata.name: missing"
    if row["parse_error"] is not None:
        yield row
        return
    try:
        if kind == "ClusterQueue":
            yield from _cluster_queue_rows(row, spec)
            return
        if kind == "LocalQueue":
            row.update(
                account=json_text(meta.get("namespace")), target=json_text(spec.get("clusterQueue"))
            )
            if row["target"] is None:
                raise _FieldError("field spec.clusterQueue: missing")
        elif kind == "ResourceFlavor":
            labels = json_object(spec, "nodeLabels")
            row.update(
                flavor=row["object_name"], gpu_model=json_text(labels.get(GPU_PRODUCT_LABEL))
            )
        else:
            row.update(_workload(meta, spec, json_object(item, "status")))
        if kind in ("LocalQueue", "Workload") and row["account"] is None:
            raise _FieldError("field metadata.namespace: missing")
    except _FieldError as error:
        row["parse_error"] = str(error)
    yield row


def _cluster_queue_rows(row: dict[str, Any], spec: dict) -> Iterator[dict[str, Any]]:
    cohort = json_text(spec.get("cohort")) or json_text(spec.get("cohortName"))
    row = {**row, "cohort": cohort}
    quotas: list[dict[str, Any]] = []
    try:
        for g, group in enumerate(json_list(spec, "resourceGroups")):
            for f, flavor in enumerate(json_list(group, "flavors")):
                for r, resource in enumerate(json_list(flavor, "resources")):
                    if json_text(json_object({"r": resource}, "r").get("name")) != GPU_RESOURCE:
                        continue
                    where = f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}]"
                    name = json_text(flavor.get("name"))
                    if name is None:
                        at = f"spec.resourceGroups[{g}].flavors[{f}]"
                        raise _FieldError(f"field {at}.name: missing")
                    nominal = _quantity(resource.get("nominalQuota"), f"{where}.nominalQuota")
                    borrowing = resource.get("borrowingLimit")
                    if borrowing is not None:
                        limit = nominal + _quantity(borrowing, f"{where}.borrowingLimit")
                    else:
                        limit = None if cohort else nominal
                    quotas.append({
                        "flavor": name, "gpu_model": name, "guaranteed_gpus": str(nominal),
                        "limit_gpus": None if limit is None else str(limit),
                        "raw": f"{row['raw']} flavor={name} nominalQuota={nominal} "
                               f"borrowingLimit={borrowing if borrowing is not None else ''} "
                               f"cohort={cohort or ''}",
                    })  # fmt: skip
    except _FieldError as error:
        yield {**row, "parse_error": str(error)}
        return
    if not quotas:
        yield row
    for quota in quotas:
        yield {**row, **quota}


def _workload(meta: dict, spec: dict, status: dict) -> dict[str, Any]:
    owners = [o for o in json_list(meta, "ownerReferences") if isinstance(o, dict)]
    owner = next((o for o in owners if o.get("controller") is True), owners[0] if owners else {})
    conditions = {
        json_text(c.get("type")): json_text(c.get("lastTransitionTime"))
        for c in json_list(status, "conditions")
        if isinstance(c, dict) and json_text(c.get("status")) == "True"
    }
    return {
        "account": json_text(meta.get("namespace")),
        "target": json_text(spec.get("queueName")),
        "created_time": json_text(meta.get("creationTimestamp")),
        "quota_reserved_time": conditions.get("QuotaReserved"),
        "admitted_time": conditions.get("Admitted"),
        "admitted_queue": json_text(json_object(status, "admission").get("clusterQueue")),
        "owner_kind": json_text(owner.get("kind")),
        "owner_uid": json_text(owner.get("uid")),
    }


def _quantity(value: Any, field: str) -> int:
    """A whole number of GPUs (`8`, `"8"`); anything else names the field."""
    text = json_text(value)
    if isinstance(value, bool) or text is None or not _WHOLE.fullmatch(text):
        raise _FieldError(f"field {field}: '{text or ''}' is not a whole number of GPUs")
    return int(text)


def _is_kueue_list(text: str) -> bool:
    """An `items` array whose first item is a `kueue.x-k8s.io` object (kubectl writes each
    item's apiVersion before its nested fields; a pod list's is `v1`, even when a pod's owner
    or a plain-pod Workload's owner names another kind)."""
    first = _FIRST_API_VERSION.search(text)
    return bool(first and first["api"].startswith(API_GROUP))


_FIRST_API_VERSION = re.compile(r'"items"\s*:\s*\[\s*\{[^{]*?"apiVersion"\s*:\s*"(?P<api>[^"]*)"')


FORMAT = ExportFormat(
    name="kueue_objects",
    kind="quotas",
    expected=(
        "Kueue objects JSON (`kubectl get clusterqueues,localqueues,resourceflavors,workloads "
        "-A -o json`)"
    ),
    sniff=json_object_sniffer(_is_kueue_list),
    read_rows=read_rows,
)
