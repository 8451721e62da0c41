"""The GPU quotas the simulated site configured in its schedulers, as the platform team dumps
them at the month's end: `sacctmgr show assoc --parsable2` and `sacctmgr show qos
--parsable2` for atlas (Slurm), `kubectl get resourceflavors,clusterqueues,localqueues,
workloads -A -o json` for kube (Kueue). The site keeps Kueue's Workloads of the month (one per
queued pod submitted in it: created at the pod's creation, admitted when its image pull began,
or still pending) for the queue-wait figures.

Each cluster configures the catalog's quota (quotas.yaml) of every tenant that uses it, for
every pool the tenant has a quota on, as the site's conventions say: on atlas a GrpTRES limit
on the tenant's first account's association (typed gres per GPU type), nlp through its own
QOS `gpu-nlp`, the Data Platform tenants etl and features through one QOS `gpu-dp` they share;
on kube one ClusterQueue per tenant in the cohort `gpu` (nominalQuota = guarantee,
borrowingLimit = limit − guarantee) with a LocalQueue in each of the tenant's namespaces, and
`cq-mig` (MIG slices only: no nvidia.com/gpu quota) for the queue `lq-mig`.

Drift on purpose (quota_drift shows each): vision's association allows half as much again as
its catalog limit (raised for its campaign, the catalog never updated); speech's A100 limit was
never configured; the association of `hpc-legacy`, an account of a project that ended (the
catalog maps it to no tenant), still holds an A100 limit; etl and
features share `gpu-dp`; genai's ClusterQueue guarantees 4 H100s more than the catalog, and
fraud's has no borrowingLimit (in a cohort: no limit).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from simulator.clock import fmt_date, fmt_ts
from simulator.site import A100, GPU_PRODUCTS, H100, SLURM_GPU_TYPES, Layout, tenant_of

ASSOC_HEADER = (
    "Cluster|Account|User|Partition|Share|Priority|GrpJobs|GrpTRES|GrpSubmit|GrpWall|"
    "GrpTRESMins|MaxJobs|MaxTRES|MaxTRESPerNode|MaxSubmit|MaxWall|MaxTRESMins|QOS|Def QOS|"
    "GrpTRESRunMins"
)
QOS_HEADER = (
    "Name|Priority|GraceTime|Preempt|PreemptExemptTime|PreemptMode|Flags|UsageThres|"
    "UsageFactor|GrpTRES|GrpTRESMins|GrpTRESRunMins|GrpJobs|GrpSubmit|GrpWall|MaxTRES|"
    "MaxTRESPerNode|MaxTRESMins|MaxWall|MaxTRESPU|MaxJobsPU|MaxSubmitPU|MaxTRESPA|MaxJobsPA|"
    "MaxSubmitPA|MinTRES"
)
KUEUE = "kueue.x-k8s.io/v1beta1"
FLAVORS = {A100: "a100", H100: "h100"}
COHORT = "gpu"
SHARED_QOS = {"gpu-dp": ("etl", "features")}
OWN_QOS = {"nlp": "gpu-nlp"}
RAISED_LIMIT = ("vision", A100)  # Slurm allows 1.5 × the catalog's limit
NEVER_CONFIGURED = ("speech", A100)
RETIRED_ACCOUNT = ("hpc-legacy", A100, 8)  # a Slurm limit of an account of no tenant
RAISED_GUARANTEE = ("genai", H100, 4)
NO_BORROWING_LIMIT = "fraud"


def _tenant_quotas(quotas: list[dict]) -> dict[str, dict[str, dict]]:
    by_tenant: dict[str, dict[str, dict]] = defaultdict(dict)
    for quota in quotas:
        by_tenant[quota["tenant"]][quota["pool"]] = quota
    return by_tenant


def _gres(limits: dict[str, int]) -> str:
    return ",".join(f"gres/gpu:{SLURM_GPU_TYPES[m]}={n}" for m, n in sorted(limits.items()))


def write_slurm_quotas(
    folder: Path, cluster: str, jobs, quotas: list[dict], layout: Layout
) -> dict:
    """The association and QOS dumps of `cluster` (atlas) at the export time."""
    accounts: dict[str, set[str]] = defaultdict(set)
    for job in jobs:
        tenant = tenant_of(job.account)
        if tenant is not None and job.gpus:
            accounts[tenant].add(job.account)
    by_tenant = _tenant_quotas(quotas)
    qos_of = {t: q for q, tenants in SHARED_QOS.items() for t in tenants} | OWN_QOS
    qos_limits: dict[str, dict[str, int]] = defaultdict(dict)
    assoc_lines = [ASSOC_HEADER, _assoc(cluster, "root", qos="normal"),
                   _assoc(cluster, "root", user="root", qos="normal")]  # fmt: skip
    for tenant in sorted(accounts):
        limits = {
            pool: quota["limit_gpus"]
            for pool, quota in by_tenant.get(tenant, {}).items()
            if pool in SLURM_GPU_TYPES and (tenant, pool) != NEVER_CONFIGURED
        }
        if (tenant, A100) == RAISED_LIMIT and A100 in limits:
            limits[A100] = math.ceil(limits[A100] * 1.5)
        qos = "normal"
        if tenant in qos_of:
            name = qos_of[tenant]
            qos = f"{name},normal"
            for pool, limit in limits.items():
                qos_limits[name][pool] = qos_limits[name].get(pool, 0) + limit
            limits = {}
        for k, account in enumerate(sorted(accounts[tenant])):
            grptres = _gres(limits) if k == 0 and limits else ""
            assoc_lines.append(_assoc(cluster, account, grptres=grptres, qos=qos))
    account, pool, limit = RETIRED_ACCOUNT
    assoc_lines.append(_assoc(cluster, account, grptres=_gres({pool: limit}), qos="normal"))
    qos_lines = [QOS_HEADER, _qos("normal")]
    qos_lines += [_qos(name, _gres(limits)) for name, limits in sorted(qos_limits.items())]
    day = fmt_date(layout.export_at)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"sacctmgr-assoc-{day}.psv").write_text("\n".join(assoc_lines) + "\n", "utf-8")
    (folder / f"sacctmgr-qos-{day}.psv").write_text("\n".join(qos_lines) + "\n", "utf-8")
    return {"sacctmgr_lines": len(assoc_lines) + len(qos_lines) - 2}


def _assoc(cluster: str, account: str, user: str = "", grptres: str = "", qos: str = "") -> str:
    fields = [""] * len(ASSOC_HEADER.split("|"))
    fields[0], fields[1], fields[2], fields[4] = cluster, account, user, "1"
    fields[7], fields[17], fields[18] = grptres, qos, "normal" if qos else ""
    return "|".join(fields)


def _qos(name: str, grptres: str = "") -> str:
    fields = [""] * len(QOS_HEADER.split("|"))
    fields[0], fields[1], fields[2], fields[5], fields[8] = name, "0", "00:00:00", "cluster", "1"
    fields[9] = grptres
    return "|".join(fields)


def write_kueue_objects(folder: Path, pods, quotas: list[dict], layout: Layout) -> dict:
    """The ResourceFlavors, ClusterQueues and LocalQueues of kube at the export time."""
    namespaces: dict[str, set[str]] = defaultdict(set)
    queues: set[tuple[str, str]] = set()
    for pod in pods:
        tenant = tenant_of(pod.namespace)
        if tenant is not None and pod.gpus:
            namespaces[tenant].add(pod.namespace)
        if pod.queue:
            queues.add((pod.namespace, pod.queue))
    by_tenant = _tenant_quotas(quotas)
    items: list[dict] = [
        _object("ResourceFlavor", flavor,
                spec={"nodeLabels": {"nvidia.com/gpu.product": GPU_PRODUCTS[model]}})
        for model, flavor in sorted(FLAVORS.items())
    ]  # fmt: skip
    items.append(_object("ResourceFlavor", "mig-1g", spec={}))
    for tenant in sorted(namespaces):
        flavors = []
        for pool, quota in sorted(by_tenant.get(tenant, {}).items()):
            if pool not in FLAVORS:
                continue
            nominal, limit = quota["guaranteed_gpus"], quota["limit_gpus"]
            if (tenant, pool) == RAISED_GUARANTEE[:2]:
                nominal += RAISED_GUARANTEE[2]  # the limit stays the catalog's
            gpu = {"name": "nvidia.com/gpu", "nominalQuota": str(nominal)}
            if tenant != NO_BORROWING_LIMIT:
                gpu["borrowingLimit"] = str(limit - nominal)
            flavors.append({"name": FLAVORS[pool], "resources": [gpu]})
        if flavors:
            items.append(_cluster_queue(f"cq-{tenant}", flavors))
    items.append(_cluster_queue("cq-mig", [{"name": "mig-1g", "resources": [
        {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "56"}]}]))  # fmt: skip
    local = {(ns, f"lq-{ns}") for tenant in namespaces for ns in namespaces[tenant]} | queues
    for namespace, queue in sorted(local):
        target = "cq-mig" if queue == "lq-mig" else f"cq-{tenant_of(namespace)}"
        items.append(_object("LocalQueue", queue, namespace, spec={"clusterQueue": target}))
    items += [
        _workload(pod, "cq-mig" if pod.queue == "lq-mig" else f"cq-{tenant_of(pod.namespace)}")
        for pod in sorted(pods, key=lambda p: (p.namespace, p.name))
        if pod.queue and layout.month_start <= pod.submit < layout.month_end
    ]
    folder.mkdir(parents=True, exist_ok=True)
    body = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    path = folder / f"kueue-objects-{fmt_date(layout.export_at)}.json"
    path.write_text(json.dumps(body, indent=4) + "\n", encoding="utf-8")
    return {"kueue_objects": len(items)}


def _workload(pod, cluster_queue: str) -> dict:
    """The Workload Kueue made of a queued pod: admitted (quota reserved) when the pod was
    let go to the node, its image pull before it started; pending when it never started."""
    created = fmt_ts(pod.submit) + "Z"
    status: dict = {"conditions": []}
    if pod.start is not None:
        admitted = fmt_ts(max(pod.submit, pod.start - pod.pull_s)) + "Z"
        status["admission"] = {"clusterQueue": cluster_queue}
        status["conditions"] = [
            {"lastTransitionTime": admitted, "reason": reason, "status": "True", "type": kind}
            for kind, reason in (("QuotaReserved", "QuotaReserved"), ("Admitted", "Admitted"))
        ]
    else:
        status["conditions"] = [{"lastTransitionTime": created, "reason": "Pending",
                                 "status": "False", "type": "QuotaReserved"}]  # fmt: skip
    workload = _object("Workload", f"pod-{pod.name}-{pod.uid[:5]}", pod.namespace,
                       spec={"queueName": pod.queue})  # fmt: skip
    workload["metadata"]["creationTimestamp"] = created
    # a plain-pod workload: its pod owns it (and exists, gated, while the workload pends)
    workload["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True,
    }]  # fmt: skip
    workload["status"] = status
    return workload


def _cluster_queue(name: str, flavors: list[dict]) -> dict:
    covered = sorted({r["name"] for f in flavors for r in f["resources"]})
    return _object("ClusterQueue", name, spec={
        "cohort": COHORT, "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
    })  # fmt: skip


def _object(kind: str, name: str, namespace: str | None = None, spec: dict | None = None) -> dict:
    metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {"apiVersion": KUEUE, "kind": kind, "metadata": metadata, "spec": spec or {}}
