"""The simulated site: its GPUs and how they are shared, its tenants, accounts and people, and
the two clusters of the demo month (`atlas`, Slurm; `kube`, Kubernetes) in their full and small
sizes, with the month's incidents. Data only: what happens on the clusters is simulated in
`workload`, `scheduler` and `kube`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase

from pipelines.months import first_days, first_of_next_month, month_label
from simulator.clock import add_months, date_of, epoch, month_bounds, months_between

CLUSTER = "atlas"
GPUS_PER_NODE = 8
A100, H100 = "A100-80GB", "H100-80GB"
GPU_MEMORY_MIB = 81920.0
# Board power of the SXM parts; idle draw is ~60 W for both.
TDP_W = {A100: 400.0, H100: 700.0}
RATES = {A100: "2.10", H100: "3.85"}
NODE_MONTHLY_COST = {A100: "14000.00", H100: "26000.00"}

# full_recovery: power, cooling, space and staff of each cluster beyond its nodes' cost
CLUSTER_MONTHLY_OVERHEAD = {"atlas": "6000.00", "kube": "2500.00"}
IDLE_THRESHOLD_PCT = 5

# id, name, department, cost centre, scheduler accounts (globs allowed)
TENANTS = (
    ("nlp", "Language Models", "Research", "CC-1001", ("nlp-*",)),
    ("vision", "Computer Vision", "Research", "CC-1002", ("vision",)),
    ("speech", "Speech Recognition", "Research", "CC-1003", ("speech",)),
    ("rl", "Reinforcement Learning", "Research", "CC-1004", ("rl-lab",)),
    ("bio", "Computational Biology", "Research", "CC-1005", ("bio-sim",)),
    ("search", "Search & Ranking", "Product Engineering", "CC-2001", ("search", "ranking")),
    ("recs", "Recommendations", "Product Engineering", "CC-2002", ("recsys",)),
    ("ads", "Ads Optimisation", "Product Engineering", "CC-2003", ("ads-ml",)),
    ("assist", "Assistant Product", "Product Engineering", "CC-2004", ("assistant",)),
    ("etl", "Data Pipelines", "Data Platform", "CC-3001", ("dp-etl",)),
    ("features", "Feature Store", "Data Platform", "CC-3002", ("features",)),
    ("notebooks", "Analytics Notebooks", "Data Platform", "CC-3003",
     ("analytics", "notebooks", "jupyter")),
    # tenants of the Kubernetes cluster (namespaces; nlp's `nlp-*` covers its namespaces too)
    ("genai", "Generative AI", "Product Engineering", "CC-2005", ("genai-*",)),
    ("fraud", "Fraud & Risk Models", "Product Engineering", "CC-2006", ("fraud-ml",)),
    ("platform", "ML Platform", "Data Platform", "CC-3004",
     ("ml-platform", "gpu-operator", "kube-system")),
)  # fmt: skip


def tenant_of(account: str) -> str | None:
    """The tenant whose account patterns match, as the pipeline maps them (None: unmapped)."""
    for tenant_id, _name, _dept, _cc, patterns in TENANTS:
        if any(fnmatchcase(account, p) for p in patterns):
            return tenant_id
    return None


KUBE = "kube"

# How far back before the month the exports reach: each daily sacct dump covers its day and
# the one before; a terminated pod stays listed 12 h (Job TTL / Kueue finalizer). The pipeline
# places GPUs over every job the exports list, so the simulator numbers them over those too.
SACCT_LOOKBACK_S = 86400
POD_LINGER_S = 12 * 3600
# `nvidia.com/gpu.product` label values (node selectors) and the names nvidia-smi / DCGM print
GPU_PRODUCTS = {A100: "NVIDIA-A100-SXM4-80GB", H100: "NVIDIA-H100-80GB-HBM3"}
GPU_NAMES = {A100: "NVIDIA A100-SXM4-80GB", H100: "NVIDIA H100 80GB HBM3"}
SLURM_GPU_TYPES = {A100: "a100", H100: "h100"}
WHOLE_GPU = 420  # the pipeline's share of a whole GPU; a 1g slice is 60


@dataclass(frozen=True)
class Partition:
    """How every GPU of a node is shared: cut into MIG instances of one profile, or handed out
    as time-slicing replicas. A slot is one job's (pod's) piece of a GPU.

    All slots of a node are alike, so the pipeline's assignment (the lowest GPU with room for the
    job's share, in 1/420ths) is also a placement the hardware allows. It knows no MIG geometry:
    on a node mixing profiles it would put a 3g.40gb job where only 1g.10gb instances are free.
    """

    mode: str  # mig | time-slicing
    slots: tuple[int, ...]  # GPU instance ids (MIG) or replica numbers (time-slicing)
    share: int  # each slot's part of the GPU, in 1/420ths
    memory_mib: float  # memory one slot holds
    profile: str = ""  # the MIG profile

    @property
    def gpu_eq(self) -> float:
        return self.share / WHOLE_GPU


MIG_SLICE_MIB = 9984.0  # one of the eight memory slices of an A100-80GB
# 7 x 1g.10gb on an A100-80GB (GPU instance ids 7-13): each 1/7 of the GPU
MIG_1G = Partition("mig", (7, 8, 9, 10, 11, 12, 13), 60, MIG_SLICE_MIB, "1g.10gb")
# 2 x 3g.40gb (GPU instance ids 1, 2) fill the memory of an A100-80GB but use six of its seven
# compute slices: each is 3/7 of the GPU, and a seventh of the GPU is never allocated
MIG_3G = Partition("mig", (1, 2), 180, 4 * MIG_SLICE_MIB, "3g.40gb")
# the device plugin's time-slicing config on kube-ts*: each GPU is 4 replicas of 1/4. Replicas
# share the memory, which nothing enforces: the demo's pods keep to a quarter each.
TIME_SLICED = Partition("time-slicing", (0, 1, 2, 3), 105, GPU_MEMORY_MIB / 4)


@dataclass(frozen=True)
class Account:
    """How one scheduler account submits work."""

    name: str
    weight: float  # share of submissions
    h100_share: float  # probability a job asks for H100 rather than A100
    queue_mix: tuple[float, float, float]  # batch, interactive, preemptible
    sizes: str  # key of SIZE_MIXES


# contractor-x is deliberately in no tenant's account list: it must surface as unmapped.
ACCOUNTS = (
    Account("nlp-train", 8, 0.6, (0.92, 0.0, 0.08), "large"),
    Account("nlp-eval", 7, 0.4, (0.8, 0.1, 0.1), "mixed"),
    Account("vision", 7, 0.1, (0.85, 0.1, 0.05), "medium"),
    Account("speech", 6, 0.2, (0.85, 0.1, 0.05), "mixed"),
    Account("rl-lab", 7, 0.1, (0.3, 0.05, 0.65), "small"),
    Account("bio-sim", 3, 0.4, (0.9, 0.1, 0.0), "small"),
    Account("search", 5, 0.3, (0.8, 0.15, 0.05), "mixed"),
    Account("ranking", 3, 0.2, (0.85, 0.1, 0.05), "small"),
    Account("recsys", 5, 0.2, (0.8, 0.1, 0.1), "mixed"),
    Account("ads-ml", 4, 0.3, (0.85, 0.05, 0.1), "mixed"),
    Account("assistant", 5, 0.6, (0.85, 0.15, 0.0), "large"),
    Account("dp-etl", 5, 0.0, (1.0, 0.0, 0.0), "small"),
    Account("features", 3, 0.0, (0.9, 0.1, 0.0), "small"),
    Account("analytics", 5, 0.0, (0.3, 0.7, 0.0), "small"),
    Account("notebooks", 6, 0.1, (0.1, 0.9, 0.0), "small"),
    Account("contractor-x", 2, 0.2, (0.8, 0.2, 0.0), "mixed"),
)

USER_POOL = (
    "asmith", "bchen", "cgarcia", "dkim", "epatel", "fnguyen", "grossi", "hwang", "iolsen",
    "jmüller", "kyamada", "lbrown", "mlopez", "nsingh", "okarimi", "pdubois", "qzhang", "rjones",
    "sahmed", "tnovak", "ueda", "vpetrov", "wlee", "xli", "ycohen", "zkowalski", "abaker",
    "bdiaz", "cevans", "dfischer",
)  # fmt: skip


@dataclass(frozen=True)
class Node:
    """One inventory node of the cluster."""

    name: str
    gpu_model: str
    rack: str
    fault_domain: str
    driver_version: str
    in_service_from: int  # epoch seconds
    partition: Partition | None = None  # MIG-partitioned GPUs (None: whole GPUs)


# atlas's MIG nodes (Slurm partitions `interactive` and `batch` include them; jobs ask for an
# instance by gres type, `--gres=gpu:a100_1g.10gb:1`), and the full month's jobs for each
ATLAS_MIG_NODES = {"gpu-m01": MIG_1G, "gpu-m02": MIG_3G}
MIG_SUBMISSIONS = {"1g.10gb": 1800, "3g.40gb": 600}


@dataclass(frozen=True)
class Layout:
    """Everything that differs between the full and the small demo, and between months."""

    month: str
    small: bool
    month_start: int
    month_end: int
    export_at: int
    sim_start: int
    nodes: tuple[Node, ...]
    outage_nodes: tuple[str, ...]
    outage: tuple[int, int]
    flaky_node: str
    n_submissions: int
    duration_scale: float
    max_job_gpus: int
    burst_jobs: int
    overlap_jobs: int
    step_s: int
    exporter_outage: tuple[str, int, int]  # node, start, end
    gpu_holes: tuple[tuple[str, int, int, int], ...]  # node, gpu index, start, end
    smi_nodes: tuple[str, ...]  # nodes logging with nvidia-smi instead of DCGM (real format)
    n_arrays: int
    mig_submissions: dict[str, int]  # MIG profile -> jobs asking for one instance of it
    mig_duration_scale: float
    # The exports cover the history months before the month, simulated with it in one run:
    # from the first of them on (first_month_start), counts of submissions are per month
    # (scaled to the simulated window) and demand grows by demand_growth a month.
    first_month_start: int
    demand_growth: float

    def month_views(self) -> list[Layout]:
        """One layout per month the exports cover, oldest first, each with its own bounds and
        export time (06:00 on the next month's first day); the last is this layout. History
        months sample at 5 minutes, so that three months stay quick to generate and load."""
        views = []
        for day in first_days(date_of(self.first_month_start), date_of(self.month_start))[:-1]:
            end = epoch(datetime.combine(first_of_next_month(day), datetime.min.time()))
            views.append(
                dataclasses.replace(
                    self,
                    month=month_label(day),
                    month_start=epoch(datetime.combine(day, datetime.min.time())),
                    month_end=end,
                    export_at=end + EXPORT_DELAY_S,
                    step_s=max(self.step_s, HISTORY_STEP_S),
                )
            )
        return [*views, self]

    def demand_at(self, moment: int) -> float:
        """The part of the month's demand submitted at ``moment``: 1 in the month, 1 / (1 +
        demand_growth) in the month before, and so on (calendar months)."""
        return (1 + self.demand_growth) ** -months_between(moment, self.month_start)


# History months: a 5-minute sample step, and 10 % more demand each month up to the month
HISTORY_STEP_S = 300
DEMAND_GROWTH = 0.10
EXPORT_DELAY_S = 6 * 3600  # the month's exports are taken at 06:00 on the next month's first day
WARM_UP_S = 6 * 86400  # jobs run up to five days: six days of history reach a steady state


def make_layout(month: str, small: bool, history_months: int = 0) -> Layout:
    """The cluster, the month's incidents and the workload size for one demo variant, with
    ``history_months`` months before it simulated in the same run."""
    start, end = month_bounds(month)
    m0 = epoch(start)
    first = epoch(month_bounds(add_months(month, -history_months))[0])

    def at(day: int, hour: float = 0.0) -> int:
        return m0 + int((day * 24 + hour) * 3600)

    if small:
        names = ["gpu-a01", "gpu-a02", "gpu-h01", "gpu-h02"]
        late, outage_nodes = "gpu-h02", ("gpu-a02",)
        flaky, exporter = "gpu-a01", "gpu-h01"
        holes = (
            ("gpu-a01", 3, at(4, 10), at(4, 13)),
            ("gpu-h01", 5, at(13, 3), at(13, 4.5)),
            ("gpu-h01", 1, at(25, 14), at(25, 19)),
        )
    else:
        names = [f"gpu-a{i:02d}" for i in range(1, 21)] + [f"gpu-h{i:02d}" for i in range(1, 13)]
        late, outage_nodes = "gpu-h12", ("gpu-a07", "gpu-a08")
        flaky, exporter = "gpu-a13", "gpu-a14"
        holes = (
            ("gpu-a03", 2, at(4, 10), at(4, 13)),
            ("gpu-a16", 5, at(9, 22), at(10, 4)),
            ("gpu-h04", 1, at(13, 3), at(13, 4)),
            ("gpu-h09", 7, at(25, 14), at(25, 18)),
        )
    late_from = at(9)  # enters service on the 10th
    names += list(ATLAS_MIG_NODES)
    nodes = tuple(_node(name, late_from if name == late else None) for name in names)
    return Layout(
        month=month,
        small=small,
        month_start=m0,
        month_end=epoch(end),
        export_at=epoch(end) + EXPORT_DELAY_S,
        sim_start=first - WARM_UP_S,
        nodes=nodes,
        outage_nodes=outage_nodes,
        outage=(at(17, 2), at(17, 14)),
        flaky_node=flaky,
        n_submissions=380 if small else 12_500,
        duration_scale=2.7 if small else 0.65,
        max_job_gpus=16 if small else 32,
        burst_jobs=1 if small else 4,
        overlap_jobs=12 if small else 200,
        step_s=300 if small else 60,
        exporter_outage=(exporter, at(21, 6), at(21, 18)),
        gpu_holes=holes,
        smi_nodes=("gpu-a02",) if small else ("gpu-a08", "gpu-a18", "gpu-a19", "gpu-a20"),
        n_arrays=4 if small else 14,
        # fewer MIG jobs running longer in the small demo, whose MIG nodes are as big
        mig_submissions={"1g.10gb": 160, "3g.40gb": 60} if small else MIG_SUBMISSIONS,
        mig_duration_scale=2.0 if small else 1.0,
        first_month_start=first,
        demand_growth=DEMAND_GROWTH if history_months else 0.0,
    )


def _node(name: str, late_from: int | None) -> Node:
    """Inventory facts of one node: racks of ten, two fault domains, two driver versions; the
    MIG nodes sit in the second A100 rack (MIG needs its newer driver)."""
    model = H100 if name.startswith("gpu-h") else A100
    number = int(name[-2:])
    if name in ATLAS_MIG_NODES:
        rack, driver = "r2", "560.35.03"
        since = epoch(datetime(2025, 6, 1))
    elif model == A100:
        rack = "r1" if number <= 10 else "r2"
        driver = "550.127.08" if number <= 10 else "560.35.03"
        since = epoch(datetime(2025, 6, 1))
    else:
        rack = "r3" if number <= 6 else "r4"
        driver = "560.35.03"
        since = epoch(datetime(2026, 3, 1))
    fault_domain = "fd-1" if rack in ("r1", "r3") else "fd-2"
    partition = ATLAS_MIG_NODES.get(name)
    return Node(name, model, rack, fault_domain, driver, late_from or since, partition)


KUBE_DRIVER = "565.57.01"


@dataclass(frozen=True)
class KubeNode:
    """One GPU node of `kube`: whole GPUs, 7 x 1g.10gb MIG instances per GPU, or GPUs
    time-sliced into 4 replicas each."""

    name: str
    gpu_model: str
    partition: Partition | None
    rack: str
    ip: str


@dataclass(frozen=True)
class KubeLayout:
    nodes: tuple[KubeNode, ...]
    n_train: int
    n_notebooks: int
    n_batch: int
    duration_scale: float
    # (namespace, deployment, replicas, whole GPUs, MIG slices, pool)
    deployments: tuple[tuple[str, str, int, int, int, str], ...]
    exporter_gap: tuple[str, int, int]  # node, start, end: the DCGM exporter pod restarted
    evicted_at: int  # the first inference replica is evicted (node disk pressure)
    # on the time-sliced node: replicas of its deployment, notebooks, development pods
    time_sliced: tuple[int, int, int]


# kube's inference deployments: (namespace, deployment, replicas in the small and in the full
# demo (0: none), whole GPUs, MIG slices, pool)
KUBE_DEPLOYMENTS = (
    ("nlp-inference", "llama-70b-chat", 1, 2, 2, 0, "H100"),
    ("genai-serve", "sdxl-api", 0, 2, 1, 0, "H100"),
    ("nlp-inference", "embedder", 0, 1, 1, 0, "A100"),
    ("genai-serve", "whisper-api", 4, 8, 0, 1, "MIG"),
    ("nlp-inference", "reranker", 6, 12, 0, 1, "MIG"),
    ("fraud-ml", "risk-scorer", 0, 6, 0, 1, "MIG"),
)


def make_kube_layout(layout: Layout) -> KubeLayout:
    """kube's nodes (one H100 node in the small demo, four and an A100 node in the full one;
    the MIG and the time-sliced node in both), deployments and workload size."""
    m0 = layout.month_start

    def at(day: int, hour: float = 0.0) -> int:
        return m0 + int((day * 24 + hour) * 3600)

    small = layout.small
    h100_nodes = tuple(
        KubeNode(f"kube-h0{k}", H100, None, "k1", f"10.20.0.{10 + k}")
        for k in range(1, 2 if small else 5)
    )
    a100_nodes = () if small else (KubeNode("kube-a01", A100, None, "k2", "10.20.0.15"),)
    nodes = (
        h100_nodes
        + a100_nodes
        + (
            KubeNode("kube-m01", A100, MIG_1G, "k2", "10.20.0.16"),
            KubeNode("kube-ts01", A100, TIME_SLICED, "k2", "10.20.0.17"),
        )
    )
    deployments = tuple(
        (namespace, name, replicas, whole, slices, pool)
        for namespace, name, small_replicas, full_replicas, whole, slices, pool in KUBE_DEPLOYMENTS
        if (replicas := small_replicas if small else full_replicas)
    )
    counts = (50, 40, 70) if small else (760, 300, 700)
    time_sliced = (1, 70, 50) if small else (2, 320, 300)
    gap_node = "kube-h01" if small else "kube-h02"
    return KubeLayout(
        nodes=nodes,
        n_train=counts[0],
        n_notebooks=counts[1],
        n_batch=counts[2],
        duration_scale=1.5 if small else 1.0,
        deployments=deployments,
        exporter_gap=(gap_node, at(11, 10), at(11, 13)),
        evicted_at=at(8, 14.37),
        time_sliced=time_sliced,
    )
