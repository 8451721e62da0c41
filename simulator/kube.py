"""The Kubernetes cluster `kube` over the simulated window: inference deployments, training
pods queued by Kueue, notebooks and batch pods on MIG slices, notebooks and development pods on
the time-sliced node, the DCGM exporter's own pods; admitted and placed (Kueue, the scheduler's
bin packing), seen at the export, their GPUs numbered as the pipeline assigns them.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from simulator.scheduler import lowest_free_first, renumber_shared
from simulator.site import (
    A100,
    GPU_PRODUCTS,
    GPUS_PER_NODE,
    H100,
    MIG_1G,
    POD_LINGER_S,
    TIME_SLICED,
    USER_POOL,
    KubeLayout,
    KubeNode,
    Layout,
)
from simulator.workload import BURSTY, LOW, PRODUCTIVE, SERVING, UNDERUSED, ZOMBIE, submit_times


@dataclass
class Pod:
    """One pod of `kube`: the request, then what the Kueue / scheduler simulation made of it."""

    uid: str
    name: str
    namespace: str
    kind: str  # train | serve | notebook | batch | system
    user: str | None
    submit: int
    runtime: int
    pool: str | None  # H100 | A100 | MIG | TS, time-sliced (None: a system pod without GPUs)
    whole: int  # nvidia.com/gpu (on the time-sliced node: replicas)
    slices: int  # nvidia.com/mig-1g.10gb
    state: str  # final state if it ends before the export
    reason: str | None  # Evicted | KueuePreempted | DeadlineExceeded | OOMKilled | Error
    exit_code: int
    profile: int
    serial: int
    queue: str | None = None
    deadline: int | None = None
    container: str = "main"
    image: str = ""
    service_account: str = "default"
    priority: int = 0
    priority_class: str | None = None
    owner_kind: str | None = None
    owner_name: str = ""
    owner_uid: str = ""
    labels: dict = field(default_factory=dict)
    pin_product: bool = True  # a nodeSelector on nvidia.com/gpu.product
    pull_s: int = 20
    preemptor_uid: str = ""
    node: str | None = None  # for a system pod: its node from the start
    evict_at: int | None = None  # the kubelet evicts it then (node disk pressure)
    start: int | None = None
    end: int | None = None
    held: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def job_id(self) -> str:
        return self.uid

    @property
    def account(self) -> str:
        return self.namespace

    @property
    def gpus(self) -> float:
        """GPU-equivalents: whole GPUs plus 1/7 of a GPU per 1g slice; a replica of a
        time-sliced GPU is 1/4 of it."""
        if self.pool == "TS":
            return self.whole * TIME_SLICED.gpu_eq
        return self.whole + self.slices * MIG_1G.gpu_eq

    @property
    def gpu_eq(self) -> float:
        """The same as ``gpus``: named like the jobs' for the figures both feed."""
        return self.gpus

    @property
    def slots(self) -> int:
        """MIG instances or time-slicing replicas the pod holds (0: whole GPUs)."""
        return self.slices or (self.whole if self.pool == "TS" else 0)

    @property
    def gpu_model(self) -> str | None:
        return {"H100": H100, "A100": A100, "MIG": A100, "TS": A100}.get(self.pool or "")

    @property
    def product(self) -> str | None:
        """The `nvidia.com/gpu.product` its node selector names, if it has one: GPU feature
        discovery labels a time-sliced node's product `<product>-SHARED`."""
        if not self.pin_product or self.gpu_model is None:
            return None
        return GPU_PRODUCTS[self.gpu_model] + ("-SHARED" if self.pool == "TS" else "")

    @property
    def cpus(self) -> int:
        return (4 if self.pool == "TS" else 12) * self.whole + 4 * self.slices or 1

    @property
    def memory_gi(self) -> int:
        return (16 if self.pool == "TS" else 96) * self.whole + 16 * self.slices or 2

    @property
    def container_reason(self) -> str:
        if self.state == "COMPLETED":
            return "Completed"
        return "OOMKilled" if self.reason == "OOMKilled" else "Error"


class _Names:
    """Kubernetes-style random names and UIDs from one seeded stream."""

    ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.serial = 0

    def uid(self) -> str:
        h = f"{self.rnd.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"

    def suffix(self, n: int = 5) -> str:
        return "".join(self.rnd.choice(self.ALPHABET) for _ in range(n))

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial


JUPYTER_LABELS = {"app": "jupyterhub", "component": "singleuser-server"}
NOTEBOOK_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-2024-11-04"


def _notebook(pod, names, submit, runtime, pool, user, zombie, **kw) -> Pod:
    """A JupyterHub single-user server of ``user``; a forgotten one (``zombie``) sits idle."""
    return pod(
        "notebook",
        "jupyter",
        submit,
        runtime,
        pool,
        profile=ZOMBIE if zombie else BURSTY,
        user=user,
        name=f"jupyter-{user}-{names.suffix(4)}",
        container="notebook",
        image=NOTEBOOK_IMAGE,
        **kw,
    )


def _kueue_labels(queue: str) -> dict[str, str]:
    """Labels of a pod Kueue manages (plain-pod integration), naming its LocalQueue."""
    return {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": queue}


def _training_pod(pod, names, namespace, submit, runtime, pool, job, **kw) -> Pod:
    """The first pod of training ``job``, queued by Kueue in the namespace's LocalQueue; one
    Kueue preempted names the pod that took its place."""
    queue = f"lq-{namespace}"
    labels = {**_kueue_labels(queue), **kw.pop("labels", {})}
    return pod(
        "train",
        namespace,
        submit,
        runtime,
        pool,
        name=f"{job}-0-{names.suffix()}",
        container="trainer",
        queue=queue,
        priority=100,
        priority_class="training",
        preemptor_uid=names.uid() if kw.get("reason") == "KueuePreempted" else "",
        labels=labels,
        **kw,
    )


TRAIN_NAMESPACES = (("genai-train", 45), ("fraud-ml", 30), ("nlp-finetune", 25))
TRAIN_OUTCOMES = {
    # state, reason, exit code: weight
    ("COMPLETED", None, 0): 76,
    ("FAILED", "Error", 1): 7,
    ("OUT_OF_MEMORY", "OOMKilled", 137): 5,
    ("PREEMPTED", "KueuePreempted", 143): 9,
    ("PREEMPTED", "Evicted", 137): 3,
}


def _requests(rnd: random.Random, layout: Layout, kl: KubeLayout) -> list[Pod]:
    """Every pod of the simulated window: inference deployments created weeks before the month,
    Kueue-queued training pods, notebooks and batch pods on MIG slices, notebooks and
    development servers on the time-sliced node, the DCGM exporter of each node, and a few pods
    placed on purpose so that every seed shows each case."""
    names = _Names(random.Random(rnd.getrandbits(64)))
    users = rnd.sample(USER_POOL, 12)
    pods: list[Pod] = []
    pools = {_pool_of(node) for node in kl.nodes}

    def pod(kind: str, namespace: str, submit: int, runtime: int, pool: str | None, **kw) -> Pod:
        new = Pod(
            uid=names.uid(),
            name=kw.pop("name", ""),
            namespace=namespace,
            kind=kind,
            user=kw.pop("user", None),
            submit=submit,
            runtime=runtime,
            pool=pool,
            whole=kw.pop("whole", 0),
            slices=kw.pop("slices", 0),
            state=kw.pop("state", "COMPLETED"),
            reason=kw.pop("reason", None),
            exit_code=kw.pop("exit_code", 0),
            profile=kw.pop("profile", PRODUCTIVE),
            serial=names.next_serial(),
            pull_s=rnd.randint(5, 90),
            **kw,
        )
        if new.user:
            new.labels.setdefault("user", new.user)
        pods.append(new)
        return new

    # the DCGM exporter on every node, a DaemonSet pod without GPUs
    exporter_uid = names.uid()
    for node in kl.nodes:
        pod(
            "system",
            "gpu-operator",
            layout.first_month_start - 40 * 86400,
            10**8,
            None,
            name=f"nvidia-dcgm-exporter-{names.suffix()}",
            node=node.name,
            container="exporter",
            image="nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
            owner_kind="DaemonSet",
            owner_name="nvidia-dcgm-exporter",
            owner_uid=exporter_uid,
            service_account="nvidia-dcgm-exporter",
            pin_product=False,
            labels={"app": "nvidia-dcgm-exporter"},
        )

    # inference deployments: created in October, running through the export; the first
    # replica is evicted mid-month and its ReplicaSet replaces it
    evicted = False
    for namespace, deployment, replicas, whole, slices, pool in kl.deployments:
        if pool not in pools:
            continue
        template, owner = names.suffix(10), names.uid()
        created = layout.first_month_start - rnd.randint(12, 20) * 86400 + rnd.randrange(86400)
        submits = [created + replica * 7 for replica in range(replicas)]
        if not evicted:
            submits.append(kl.evicted_at + 4)
        for submit in submits:
            replica = pod(
                "serve",
                namespace,
                submit,
                10**8,
                pool,
                whole=whole,
                slices=slices,
                profile=SERVING if slices == 0 else BURSTY,
                name=f"{deployment}-{template}-{names.suffix()}",
                container="server",
                image=f"registry.example.com/{namespace}/{deployment}:2.4",
                service_account=deployment,
                priority=1000,
                priority_class="inference-high",
                owner_kind="ReplicaSet",
                owner_name=f"{deployment}-{template}",
                owner_uid=owner,
                labels={"app": deployment, "pod-template-hash": template},
                pin_product=slices == 0,
            )
            if not evicted:
                replica.evict_at, evicted = kl.evicted_at, True

    # training pods queued by Kueue
    weights = [w for _, w in TRAIN_NAMESPACES]
    outcomes, outcome_weights = list(TRAIN_OUTCOMES), list(TRAIN_OUTCOMES.values())
    whole_pools = sorted(p for p in pools if p not in ("MIG", "TS"))
    for submit in submit_times(rnd, layout, kl.n_train):
        namespace = rnd.choices([n for n, _ in TRAIN_NAMESPACES], weights=weights)[0]
        pool = "A100" if "A100" in whole_pools and rnd.random() < 0.22 else "H100"
        # a whole node only where the pool has more than the node the inference pods sit on
        big = pool == "H100" and sum(_pool_of(n) == "H100" for n in kl.nodes) > 1
        sizes = ((1, 2, 4, 8), (30, 30, 25, 15)) if big else ((1, 2, 4), (30, 40, 30))
        whole = rnd.choices(*sizes)[0]
        median = 5 * 3600 * kl.duration_scale
        runtime = int(min(48 * 3600, max(120.0, rnd.lognormvariate(math.log(median), 1.0))))
        state, reason, exit_code = rnd.choices(outcomes, weights=outcome_weights)[0]
        if state != "COMPLETED":
            runtime = max(60, int(runtime * rnd.uniform(0.05, 0.8)))
        draw = rnd.random()
        profile = UNDERUSED if whole >= 4 and draw < 0.05 else LOW if draw < 0.12 else PRODUCTIVE
        job = f"{namespace.split('-')[0]}-{rnd.choice(('pretrain', 'sft', 'eval', 'sweep'))}"
        job += f"-{names.suffix(4)}"
        _training_pod(
            pod,
            names,
            namespace,
            submit,
            runtime,
            pool,
            job,
            whole=whole,
            state=state,
            reason=reason,
            exit_code=exit_code,
            profile=profile,
            user=rnd.choice(users),
            image=f"registry.example.com/{namespace}/trainer:1.{rnd.randint(0, 9)}",
            labels={"app.kubernetes.io/name": job},
        )

    if "MIG" in pools:
        # notebooks on one MIG slice; a quarter are left open and idle
        for submit in submit_times(rnd, layout, kl.n_notebooks):
            user = rnd.choice(users)
            zombie = rnd.random() < 0.3
            runtime = rnd.randint(4 * 3600, 14 * 3600) if zombie else rnd.randint(1800, 6 * 3600)
            oom = not zombie and rnd.random() < 0.08
            _notebook(
                pod,
                names,
                submit,
                runtime if not oom else runtime // 3,
                "MIG",
                user,
                zombie,
                slices=1,
                state="OUT_OF_MEMORY" if oom else "COMPLETED",
                reason="OOMKilled" if oom else None,
                exit_code=137 if oom else 0,
                pin_product=False,
                labels=dict(JUPYTER_LABELS),
            )
        # batch inference and evaluation on one or two slices, with a 2-hour deadline
        for submit in submit_times(rnd, layout, kl.n_batch):
            slices = 1 if rnd.random() < 0.8 else 2
            median = 50 * 60 * kl.duration_scale
            runtime = int(max(60.0, rnd.lognormvariate(math.log(median), 0.9)))
            state, reason, code = rnd.choices(
                (
                    ("COMPLETED", None, 0),
                    ("FAILED", "Error", 2),
                    ("OUT_OF_MEMORY", "OOMKilled", 137),
                ),
                weights=(91, 5, 4),
            )[0]
            if state != "COMPLETED":
                runtime = max(30, int(runtime * rnd.uniform(0.1, 0.9)))
            elif runtime > 7200:
                state, reason, code, runtime = "TIMEOUT", "DeadlineExceeded", 137, 7200
            _batch_pod(pod, names, rnd, users, submit, runtime, slices, state, reason, code)

    _special_pods(pod, names, rnd, users, layout, kl)
    if "TS" in pools:
        _time_sliced_pods(pod, names, random.Random(rnd.getrandbits(64)), users, layout, kl)
    pods.sort(key=lambda p: (p.submit, p.uid))
    return pods


def _time_sliced_pods(pod, names, rnd, users, layout: Layout, kl: KubeLayout) -> None:
    """The pods of the time-sliced node, each asking for one `nvidia.com/gpu` (a replica, 1/4 of
    a GPU) pinned to the `-SHARED` product: genai's prompt playground (a deployment created
    before the month), notebooks of JupyterHub's "shared A100" profile (a quarter left open and
    idle), genai's short-lived development servers; and four notebooks opened at once for a
    course on the 10th, which fill a GPU."""
    replicas, n_notebooks, n_dev = kl.time_sliced
    template, owner = names.suffix(10), names.uid()
    created = layout.first_month_start - 15 * 86400 + rnd.randrange(86400)
    for replica in range(replicas):
        pod(
            "serve",
            "genai-serve",
            created + replica * 7,
            10**8,
            "TS",
            whole=1,
            profile=BURSTY,
            name=f"prompt-playground-{template}-{names.suffix()}",
            container="server",
            image="registry.example.com/genai-serve/playground:0.9",
            service_account="prompt-playground",
            priority=500,
            priority_class="interactive",
            owner_kind="ReplicaSet",
            owner_name=f"prompt-playground-{template}",
            owner_uid=owner,
            labels={"app": "prompt-playground", "pod-template-hash": template},
        )

    def notebook(submit: int, runtime: int, user: str, zombie: bool = False) -> None:
        profile = {**JUPYTER_LABELS, "hub.jupyter.org/profile": "shared-a100"}
        _notebook(pod, names, submit, runtime, "TS", user, zombie, whole=1, labels=profile)

    for submit in submit_times(rnd, layout, n_notebooks):
        zombie = rnd.random() < 0.25
        runtime = rnd.randint(4 * 3600, 12 * 3600) if zombie else rnd.randint(1800, 5 * 3600)
        notebook(submit, runtime, rnd.choice(users), zombie)
    course = layout.month_start + 9 * 86400 + 14 * 3600
    for seat, user in enumerate(rnd.sample(users, 4)):
        notebook(course + seat * 15, 2 * 3600, user)
    for submit in submit_times(rnd, layout, n_dev):
        median = 2 * 3600 * kl.duration_scale
        runtime = int(min(12 * 3600, max(300.0, rnd.lognormvariate(math.log(median), 0.8))))
        user = rnd.choice(users)
        pod(
            "dev",
            "genai-dev",
            submit,
            runtime,
            "TS",
            whole=1,
            profile=BURSTY if rnd.random() < 0.7 else LOW,
            user=user,
            name=f"vllm-dev-{user}-{names.suffix()}",
            container="vllm",
            image="vllm/vllm-openai:v0.6.4",
        )


def _batch_pod(pod, names, rnd, users, submit, runtime, slices, state, reason, code) -> Pod:
    run = f"batch-{rnd.choice(('embed', 'score', 'eval', 'transcribe'))}-{names.suffix(4)}"
    return pod(
        "batch",
        "ml-platform",
        submit,
        runtime,
        "MIG",
        slices=slices,
        state=state,
        reason=reason,
        exit_code=code,
        profile=PRODUCTIVE if rnd.random() < 0.8 else LOW,
        user=rnd.choice(users),
        name=f"{run}-{names.suffix()}",
        container="worker",
        image="registry.example.com/ml-platform/batch:5.2",
        queue="lq-mig",
        deadline=7200,
        priority=50,
        priority_class="batch",
        pin_product=False,
        labels=_kueue_labels("lq-mig"),
    )


def _special_pods(pod, names, rnd, users, layout: Layout, kl: KubeLayout) -> None:
    """Pods submitted on purpose, so that every seed shows each case the demo promises."""
    m0, day = layout.month_start, 86400

    def train(submit, hours, whole, state="COMPLETED", reason=None, code=0, name="special"):
        return _training_pod(
            pod,
            names,
            "genai-train",
            submit,
            int(hours * 3600),
            "H100",
            name,
            whole=whole,
            state=state,
            reason=reason,
            exit_code=code,
            user=users[0],
            image="registry.example.com/genai-train/trainer:1.7",
        )

    train(m0 + 2 * day + 9 * 3600, 5, 2, "OUT_OF_MEMORY", "OOMKilled", 137, "genai-sft-oom")
    train(m0 + 5 * day + 11 * 3600, 7, 4, "PREEMPTED", "KueuePreempted", 143, "genai-sweep")
    train(m0 + 7 * day + 15 * 3600, 3, 1, "FAILED", "Error", 1, "genai-eval-bad-config")
    # still training at the export, and one submitted as the last snapshot is taken
    train(layout.export_at - 5 * 3600, 30, 1, name="genai-pretrain-long")
    train(layout.export_at, 12, 8, name="genai-pretrain-next")
    # asks for more GPUs than a node has: Pending ("Insufficient nvidia.com/gpu") for good
    train(m0 + 27 * day + 15 * 3600, 24, 16, name="genai-pretrain-16gpu")
    _batch_pod(
        pod, names, rnd, users, m0 + 3 * day + 8 * 3600, 7200, 1, "TIMEOUT", "DeadlineExceeded", 137
    )
    # a MIG notebook opened on the 5th and forgotten
    forgotten, labels = m0 + 4 * day + 9 * 3600, dict(JUPYTER_LABELS)
    _notebook(
        pod,
        names,
        forgotten,
        11 * 3600,
        "MIG",
        users[1],
        True,
        slices=1,
        labels=labels,
        pin_product=False,
    )


def _schedule(rnd: random.Random, pods: list[Pod], layout: Layout, kl: KubeLayout) -> None:
    """Admit and place pods in submit order. Whole-GPU pods start at the earliest moment their
    GPUs are free for their whole run, without delaying pods placed before them (Kueue's
    BestEffortFIFO with the scheduler's backfill), on the fullest node that fits (bin packing).
    MIG pods are admitted strictly first-in first-out, so their starts only move forward and
    every placement sees all pods started before it: the lowest GPU with enough free instances
    is the pipeline's lowest-free-first choice by construction (`renumber_shared` checks).
    Pods of the time-sliced node take the lowest GPU with a free replica when one is free.
    Inference replicas bypass Kueue: they start as soon as their GPUs are free.
    """
    nodes: dict[str, list[str]] = {"H100": [], "A100": [], "MIG": [], "TS": []}
    for node in kl.nodes:
        nodes[_pool_of(node)].append(node.name)
    partitions = {node.name: node.partition for node in kl.nodes}
    # node -> (start, end, gpu, gi) of every placement that may still matter
    held: dict[str, list[tuple[int, int, int, int]]] = defaultdict(list)
    last_mig_start = -(10**12)
    for pod in pods:
        if pod.pool is None:
            pod.start, pod.end = pod.submit + rnd.randint(3, 30), pod.submit + pod.runtime
            continue
        for name in nodes[pod.pool]:  # nothing submitted from now on can overlap these
            held[name] = [h for h in held[name] if h[1] > pod.submit]
        t = pod.submit + rnd.randint(1, 20)
        if pod.pool == "MIG" and pod.kind != "serve":
            t = max(t, last_mig_start + 1)
        frees = sorted({h[1] + 5 for name in nodes[pod.pool] for h in held[name] if h[1] > t})
        for moment in [t, *frees]:
            if moment > layout.export_at:
                break
            fit = _fit(pod, moment, nodes[pod.pool], held, partitions)
            if fit is None:
                continue
            pod.node, pod.held = fit
            pod.start = moment
            pod.end = moment + pod.runtime
            if pod.evict_at is not None and pod.start < pod.evict_at < pod.end:
                pod.end, pod.state, pod.reason = pod.evict_at, "PREEMPTED", "Evicted"
                pod.exit_code = 137
            for _, gpu, slot in pod.held:
                held[pod.node].append((pod.start, pod.end, gpu, slot))
            if pod.pool == "MIG" and pod.kind != "serve":
                last_mig_start = moment
            break


def _pool_of(node: KubeNode) -> str:
    if node.partition is not None:
        return "MIG" if node.partition.mode == "mig" else "TS"
    return "H100" if node.gpu_model == H100 else "A100"


def _fit(pod: Pod, t: int, pool_nodes: list[str], held: dict, partitions: dict) -> tuple | None:
    """(node, [(node, gpu, slot), ...]) where the pod fits for its whole run from ``t`` (slot
    -1: a whole GPU; else a MIG instance or time-slicing replica), or None."""
    until = t + pod.runtime
    fits = []
    for node in pool_nodes:
        busy = [(g, slot) for s, e, g, slot in held[node] if s < until and e > t]
        if pod.slots:
            slots = partitions[node].slots
            used = Counter(g for g, _ in busy)
            for gpu in range(GPUS_PER_NODE):
                if used[gpu] + pod.slots <= len(slots):
                    taken = {slot for g, slot in busy if g == gpu}
                    free = [slot for slot in slots if slot not in taken][: pod.slots]
                    return node, [(node, gpu, slot) for slot in free]
            continue
        taken = {g for g, _ in busy}
        free = [g for g in range(GPUS_PER_NODE) if g not in taken]
        if len(free) >= pod.whole:
            fits.append((len(free), node, free[: pod.whole]))
    if not fits:
        return None
    _, node, free = min(fits)
    return node, [(node, g, -1) for g in free]


def _at_export(pods: list[Pod], layout: Layout) -> None:
    """Pods as the last snapshot shows them: running ones have no end, unplaced ones pend."""
    for pod in pods:
        if pod.start is None or pod.start > layout.export_at:
            pod.state, pod.start, pod.end, pod.held, pod.reason = "PENDING", None, None, [], None
            if pod.pool is not None:
                pod.node = None
        elif pod.end is None or pod.end > layout.export_at:
            pod.state, pod.end, pod.reason = "RUNNING", None, None


def simulate_month(seed: int, layout: Layout, kl: KubeLayout) -> list[Pod]:
    """The month of `kube`: pods requested, scheduled, seen at the export, GPUs numbered."""
    pods = _requests(random.Random(seed * 1000 + 11), layout, kl)
    _schedule(random.Random(seed * 1000 + 12), pods, layout, kl)
    _at_export(pods, layout)
    whole = [p for p in pods if p.whole and not p.slots]
    listed_after = layout.first_month_start - POD_LINGER_S  # the first pod list shows these
    lowest_free_first(whole, layout, listed_after, key=lambda node, i: (node, i, -1))
    partitions = {n.name: n.partition for n in kl.nodes if n.partition}
    renumber_shared(pods, layout, partitions, listed_after)
    return pods
