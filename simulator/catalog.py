"""The catalog of the simulated site: settings.yaml, tenants.yaml, rates.yaml, quotas.yaml,
budgets.yaml, outages.yaml and nodes.csv, consistent with the clusters and with what their jobs
did (quotas follow use, budgets are set to be over, near and within). The YAML pieces are shared
with the benchmark generator (benchmarks/generate.py).
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import hostlist
import yaml

from simulator.clock import fmt_date, fmt_ts
from simulator.figures import concurrency, gpu_hours_by_tenant
from simulator.site import (
    A100,
    CLUSTER,
    CLUSTER_MONTHLY_OVERHEAD,
    GPU_MEMORY_MIB,
    GPU_PRODUCTS,
    GPUS_PER_NODE,
    H100,
    IDLE_THRESHOLD_PCT,
    KUBE,
    KUBE_DRIVER,
    NODE_MONTHLY_COST,
    RATES,
    SLURM_GPU_TYPES,
    TENANTS,
    TIME_SLICED,
    KubeLayout,
    Layout,
)
from simulator.workload import Job
from simulator.writers import write_csv

NODES_HEADER = [
    "node", "cluster", "gpu_model", "gpus", "rack", "fault_domain", "driver_version",
    "in_service_from", "in_service_to", "monthly_cost",
]  # fmt: skip


def yaml_scalar(value: object) -> str:
    """A scalar as plain YAML when it reads back unchanged, else double-quoted."""
    text = str(value)
    try:
        plain_ok = yaml.safe_load(text) == value and "#" not in text
    except yaml.YAMLError:
        plain_ok = False
    return text if plain_ok else json.dumps(text, ensure_ascii=False)


def flow(entry: dict) -> str:
    """One list entry as a flow mapping: ``  - {key: value, ...}``."""
    values = [
        str(v).lower() if isinstance(v, bool) else yaml_scalar(v) if isinstance(v, str) else v
        for v in entry.values()
    ]
    return "  - {" + ", ".join(f"{k}: {v}" for k, v in zip(entry, values, strict=True)) + "}"


def settings_head(cost_mode: str = "rate_card", idle_sharing: str | None = None) -> str:
    """The top of settings.yaml, up to `clusters:`: costing in USD (rate card, or full cost
    recovery with its `idle_sharing` policy), UTC billing days, the idle and zombie thresholds."""
    return (
        "currency: USD\n"
        "billing_timezone: UTC\n"
        f"cost_mode: {cost_mode}\n"
        + (f"idle_sharing: {idle_sharing}\n" if idle_sharing else "")
        + f"idle_threshold_pct: {IDLE_THRESHOLD_PCT}\n"
        "zombie_min_hours: 2\n"
        # the simulated GPUs' memory (telemetry.py reads memory up to it): memory-use ratios
        + "gpu_memory_mib: {"
        + ", ".join(f"{model}: {int(GPU_MEMORY_MIB)}" for model in (A100, H100))
        + "}\n"
        "clusters:\n"
    )


def _settings_yaml(kube: bool, cost_mode: str = "rate_card", idle_sharing: str = "weighted") -> str:
    """settings.yaml: `settings_head`, then each cluster's GPU type names (Slurm gres types,
    Kubernetes `nvidia.com/gpu.product` values, a time-sliced GPU's `-SHARED` one too) mapped
    to catalog models, its monthly overhead in full cost recovery; kube's time-sliced node
    pool."""
    full = cost_mode == "full_recovery"

    def overhead(cluster: str) -> str:
        return f", monthly_overhead: {CLUSTER_MONTHLY_OVERHEAD[cluster]}" if full else ""

    slurm_types = ", ".join(f"{t}: {m}" for m, t in sorted(SLURM_GPU_TYPES.items()))
    text = settings_head(cost_mode, idle_sharing if full else None) + (
        f"  {CLUSTER}: {{scheduler_timezone: UTC, gpu_models: {{{slurm_types}}}"
        f"{overhead(CLUSTER)}}}\n"
    )
    if kube:
        products = {product: model for model, product in GPU_PRODUCTS.items()}
        products[GPU_PRODUCTS[A100] + "-SHARED"] = A100  # the time-sliced node's label
        product_text = ", ".join(f"{p}: {m}" for p, m in sorted(products.items()))
        sharing = (
            f'[{{nodes: "kube-ts*", mode: {TIME_SLICED.mode}, replicas: {len(TIME_SLICED.slots)}}}]'
        )
        text += (
            f"  {KUBE}:\n"
            "    scheduler_timezone: UTC\n"
            f"    gpu_models: {{{product_text}}}\n"
            + (f"    monthly_overhead: {CLUSTER_MONTHLY_OVERHEAD[KUBE]}\n" if full else "")
            + "    # the device plugin's time-slicing config on these nodes\n"
            f"    sharing: {sharing}\n"
        )
    return text


def tenants_yaml(
    tenants: Iterable[tuple[str, str, str, str, Sequence[str]]],
    quote: Callable[[str], str] = yaml_scalar,
) -> str:
    """tenants.yaml: one block per (id, name, department, cost centre, account patterns)
    tenant; `quote` writes the name and department (plain where YAML reads them back
    unchanged, by default)."""
    lines = ["tenants:"]
    for tenant_id, name, department, cost_center, patterns in tenants:
        accounts = ", ".join(json.dumps(p) for p in patterns)
        lines += [
            f"  - id: {tenant_id}",
            f"    name: {quote(name)}",
            f"    department: {quote(department)}",
            f"    cost_center: {cost_center}",
            f"    owner: {tenant_id}-lead@example.com",
            f"    accounts: [{accounts}]",
        ]
    return "\n".join(lines) + "\n"


def rates_yaml() -> str:
    """rates.yaml: a price per GPU model plus the fallback for unknown models."""
    lines = ["rates:"]
    lines += [
        f"  - {{gpu_model: {model}, price_per_gpu_hour: {price}, valid_from: 2026-01-01}}"
        for model, price in RATES.items()
    ]
    lines.append('  - {gpu_model: "*", price_per_gpu_hour: 1.50}')
    return "\n".join(lines) + "\n"


def quotas_for(jobs: list[Job], layout: Layout) -> list[dict]:
    """One quota per tenant and pool it used this month.

    Most quotas follow use (guarantee ≈ mean, limit above the peak; a tenant that averages
    less than half a GPU gets a limit and no guarantee); three are set to make a point: vision
    bursts far over its A100 limit, bio holds 30 % of the A100 pool as a guarantee it barely
    uses (so A100 capacity is governed before it is bought), and assist pays for a reserved
    H100 guarantee.
    """
    pool_gpus = defaultdict(int)
    for node in layout.nodes:
        pool_gpus[node.gpu_model] += GPUS_PER_NODE
    quotas = []
    for (tenant, model), (mean, peak) in sorted(concurrency(jobs, layout).items()):
        guaranteed = round(mean)
        limit = max(2 * guaranteed, 4 * math.ceil(peak / 4))
        if (tenant, model) == ("vision", A100):
            guaranteed, limit = round(pool_gpus[A100] * 0.1), round(pool_gpus[A100] * 0.2)
        elif (tenant, model) == ("bio", A100):
            # a grant project's share of the pool, set aside before the project got going
            guaranteed = max(4 * math.ceil(mean), round(pool_gpus[A100] * 0.3))
            limit = max(limit, 2 * guaranteed)
        quotas.append(
            {
                "tenant": tenant,
                "pool": model,
                "guaranteed_gpus": guaranteed,
                "limit_gpus": limit,
                "reserved": (tenant, model) == ("assist", H100),
            }
        )
    return quotas


def _budgets(rnd: random.Random, jobs: list[Job], quotas: list[dict], layout: Layout) -> list:
    """Budgets set so that vision ends clearly over, nlp at ~90 % (warn), the rest fine.

    The basis is the rate-card charge net of NODE_FAIL credits; a reserved guarantee is added
    in full so the reserving tenant stays below 80 % whatever part of it goes unused. History
    months have the month's budgets (set for the quarter), which growing demand approaches.
    """
    hours = gpu_hours_by_tenant(jobs, layout, credited=True)
    month_h = (layout.month_end - layout.month_start) / 3600
    basis = defaultdict(float)
    for (tenant, model), gpu_hours in hours.items():
        basis[tenant] += gpu_hours * float(RATES[model])
    for quota in quotas:
        if quota["reserved"]:
            basis[quota["tenant"]] += (
                quota["guaranteed_gpus"] * month_h * float(RATES[quota["pool"]])
            )
    budgets = []
    for tenant_id, *_ in TENANTS:
        charge = basis[tenant_id]
        if tenant_id == "vision":
            amount = max(100, round(charge / 1.25 / 100) * 100)
        elif tenant_id == "nlp":
            amount = max(10, round(charge / 0.9 / 10) * 10)
        else:
            amount = max(500, math.ceil(charge / rnd.uniform(0.45, 0.72) / 500) * 500)
        for view in layout.month_views():
            budgets.append({"tenant": tenant_id, "month": view.month, "amount": amount})
    return budgets


def outage_entry(cluster: str, nodes: str, start: str, end: str) -> str:
    """One hardware outage of outages.yaml (`nodes` a list or hostlist, times as text)."""
    return (
        f'  - {{cluster: {cluster}, nodes: "{nodes}", start: {start}, end: {end}, '
        "reason: hardware}"
    )


def _outages_yaml(layout: Layout) -> str:
    """outages.yaml: the one hardware outage of the month."""
    nodes = hostlist.collect_hostlist(list(layout.outage_nodes))
    start, end = (fmt_ts(t) for t in layout.outage)
    return "outages:\n" + outage_entry(CLUSTER, nodes, start, end) + "\n"


def write_catalog(
    folder: Path,
    jobs: list,
    quotas: list[dict],
    layout: Layout,
    seed: int,
    kl: KubeLayout | None = None,
    cost_mode: str = "rate_card",
    idle_sharing: str = "weighted",
) -> None:
    """The catalog YAML files and nodes.csv, consistent with the clusters and the jobs."""
    folder.mkdir(parents=True)
    budgets = _budgets(random.Random(seed * 1000 + 4), jobs, quotas, layout)
    files = {
        "settings.yaml": _settings_yaml(kl is not None, cost_mode, idle_sharing),
        "tenants.yaml": tenants_yaml(TENANTS),
        "rates.yaml": rates_yaml(),
        "quotas.yaml": "quotas:\n" + "".join(flow(q) + "\n" for q in quotas),
        "budgets.yaml": "budgets:\n" + "".join(flow(b) + "\n" for b in budgets),
        "outages.yaml": _outages_yaml(layout),
    }
    clusters = CLUSTER if kl is None else f"{CLUSTER} and {KUBE}"
    header = f"# Demo catalog for {clusters}, generated by python -m simulator (seed {seed}).\n"
    for name, text in files.items():
        (folder / name).write_text(header + text, encoding="utf-8")
    rows = [
        [n.name, CLUSTER, n.gpu_model, str(GPUS_PER_NODE), n.rack, n.fault_domain,
         n.driver_version, fmt_date(n.in_service_from), "", NODE_MONTHLY_COST[n.gpu_model]]
        for n in layout.nodes
    ]  # fmt: skip
    if kl is not None:
        rows += [
            [n.name, KUBE, n.gpu_model, str(GPUS_PER_NODE), n.rack, f"fd-{n.rack}", KUBE_DRIVER,
             "2026-06-01", "", NODE_MONTHLY_COST[n.gpu_model]]
            for n in kl.nodes
        ]  # fmt: skip
    write_csv(folder / "nodes.csv", NODES_HEADER, rows)
