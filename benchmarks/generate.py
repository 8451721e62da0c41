"""Deterministic, vectorised scale data for the benchmarks: one cluster of N GPUs over D days.

Writes the same shapes as the demo month (`python -m simulator`), at any size, with the demo
site's GPUs, tenants and accounts and its writers' formats (the `simulator` package):

    <out>/landing/scheduler/bench/jobs.csv, allocations.csv          canonical CSV
    <out>/landing/telemetry/bench/gpu-samples-<YYYY-MM-DD>.parquet    canonical samples, a day each
    <out>/catalog/settings.yaml, tenants.yaml, rates.yaml, quotas.yaml, budgets.yaml,
                  outages.yaml, nodes.csv                             8 GPUs a node
    <out>/landing-dcgm/telemetry/bench/dcgm-<metric>-<day>-part<k>.json   with --formats dcgm
    <out>/landing-nvidia-smi/telemetry/bench/<node>.csv                   with --formats nvidia-smi
    <out>/generated.json                                              parameters and row counts

The `landing-<format>` folders hold the same samples as the canonical Parquet in that export
format, with `scheduler/` linked to the canonical one, so each is a complete landing folder.

Placement is vectorised: every node is cut into "lanes" of 1, 2, 4 or 8 GPUs and each lane's
timeline into consecutive job slots (a gap, then the job), so no GPU is ever held by two jobs.
Jobs start up to 12 h before the first day and end up to 12 h after the last one (clipped by
the billing month like any real export). A node is down for 6 h mid-period (jobs on it end
NODE_FAIL, its exporter is silent) and another node's exporter misses 3 h of the first day.

Same parameters give byte-identical files. Usage:

    python benchmarks/generate.py --gpus 1000 --days 30 --interval-s 60 --jobs 200000 \
        --out /tmp/chargeback-bench/g1000-d30 [--formats canonical,dcgm,nvidia-smi]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from simulator import site
from simulator.catalog import flow, outage_entry, rates_yaml, settings_head, tenants_yaml
from simulator.site import (
    A100,
    GPU_MEMORY_MIB,
    GPU_NAMES,
    GPUS_PER_NODE,
    H100,
    NODE_MONTHLY_COST,
    RATES,
    TDP_W,
)
from simulator.telemetry import unit_hash
from simulator.writers.canonical import samples_table
from simulator.writers.dcgm import query_range_document, series_values, value_text
from simulator.writers.nvidia_smi import SMI_HEADER, nvidia_smi_lines

CLUSTER = "bench"
JOB_ID_BASE = 7_000_000
MIN_SLOT_S = 120  # the shortest job slot: two minutes
EDGE_S = 12 * 3600  # jobs start before the first day and end after the last by up to this
GPU_BLOCK = 1024  # GPUs generated together (a Parquet row group); a multiple of 8
FORMATS = ("canonical", "dcgm", "nvidia-smi")

# How a node's 8 GPUs are split into lanes (jobs of that many GPUs), and how often.
LANE_PATTERNS = (
    ((8,), 2.0),
    ((4, 4), 2.0),
    ((4, 2, 2), 1.0),
    ((2, 2, 2, 2), 2.0),
    ((4, 2, 1, 1), 1.0),
    ((2, 2, 1, 1, 1, 1), 1.0),
    ((1,) * 8, 3.0),
)

# The demo site's first twelve tenants, each with its Slurm accounts named one by one (no
# patterns); an account submits with the demo's weight (simulator.site.ACCOUNTS).
TENANT_ACCOUNTS = {
    "nlp": ("nlp-train", "nlp-eval"),
    "vision": ("vision",),
    "speech": ("speech",),
    "rl": ("rl-lab",),
    "bio": ("bio-sim",),
    "search": ("search", "ranking"),
    "recs": ("recsys",),
    "ads": ("ads-ml",),
    "assist": ("assistant",),
    "etl": ("dp-etl",),
    "features": ("features",),
    "notebooks": ("analytics",),
}
# tenant id, name, department, cost centre, its scheduler accounts
TENANTS = tuple(
    (tenant, name, department, cost_center, TENANT_ACCOUNTS[tenant])
    for tenant, name, department, cost_center, _ in site.TENANTS
    if tenant in TENANT_ACCOUNTS
)
ACCOUNT_WEIGHT = {account.name: account.weight for account in site.ACCOUNTS}
ACCOUNTS = [account for *_, accounts in TENANTS for account in accounts]
ACCOUNT_WEIGHTS = np.array([ACCOUNT_WEIGHT[account] for account in ACCOUNTS], float)
USERS_PER_ACCOUNT = 6

QUEUES = np.array(["batch", "interactive", "preemptible"])
QOS = np.array(["normal", "high", "low"])
STATES = np.array(
    ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "PREEMPTED", "NODE_FAIL"]
)
STATE_WEIGHTS = np.array([80, 7, 5, 4, 2, 2, 0], float)
EXIT_CODES = np.array(["0", "1", "0", "0", "137", "0", "0"])

# Utilisation profiles of a job's GPUs.
PRODUCTIVE, LOW, BURSTY, IDLE, ZOMBIE = range(5)
PROFILE_WEIGHTS = np.array([60, 15, 12, 5, 8], float)


@dataclass(frozen=True)
class Params:
    gpus: int
    days: int
    interval_s: int
    jobs: int
    month: str = "2026-11"
    seed: int = 11
    jitter: bool = False  # each GPU's samples offset by a fixed 0..interval-1 s phase
    formats: tuple[str, ...] = ("canonical",)

    @property
    def nodes(self) -> int:
        return self.gpus // GPUS_PER_NODE

    @property
    def start(self) -> int:
        """First instant of the data (the billing month's first day), epoch seconds."""
        return int(dt.datetime.strptime(self.month, "%Y-%m").replace(tzinfo=dt.UTC).timestamp())

    @property
    def samples_per_day(self) -> int:
        return 86400 // self.interval_s


def validate(p: Params) -> None:
    first = dt.datetime.strptime(p.month, "%Y-%m")
    month_days = ((first + dt.timedelta(days=32)).replace(day=1) - first).days
    problems = []
    if p.gpus <= 0 or p.gpus % GPUS_PER_NODE:
        problems.append(f"--gpus must be a positive multiple of {GPUS_PER_NODE}")
    if not 1 <= p.days <= month_days:
        problems.append(f"--days must be 1..{month_days} (the data stays inside {p.month})")
    if p.interval_s <= 0 or 86400 % p.interval_s:
        problems.append("--interval-s must divide a day")
    if p.jobs <= 0:
        problems.append("--jobs must be positive")
    unknown = set(p.formats) - set(FORMATS)
    if unknown or "canonical" not in p.formats:
        problems.append(f"--formats: canonical plus any of {FORMATS[1:]}, got {p.formats}")
    if problems:
        raise SystemExit("generate: " + "; ".join(problems))


# --------------------------------------------------------------------------------------------
# cluster and jobs


@dataclass
class Cluster:
    node_names: np.ndarray  # per node
    node_model: np.ndarray  # per node, A100 or H100
    gpu_node: np.ndarray  # per GPU (GPUs ordered by node, index): node number
    gpu_index: np.ndarray  # per GPU: index on its node
    gpu_lane: np.ndarray  # per GPU: lane number
    lane_node: np.ndarray  # per lane
    lane_first: np.ndarray  # per lane: first GPU index on the node
    lane_size: np.ndarray  # per lane: GPUs
    outage_nodes: np.ndarray  # node numbers down during the outage
    outage: tuple[int, int]  # epoch seconds [from, to)
    exporter_gap: tuple[int, int, int]  # node number, [from, to): its exporter was silent


def make_cluster(p: Params, rng: np.random.Generator) -> Cluster:
    n = p.nodes
    names = np.array([f"gpu{i:05d}" for i in range(1, n + 1)])
    models = np.where(np.arange(n) < math.ceil(0.6 * n), A100, H100)
    weights = np.array([w for _, w in LANE_PATTERNS])
    pattern = rng.choice(len(LANE_PATTERNS), size=n, p=weights / weights.sum())
    sizes = [LANE_PATTERNS[k][0] for k in pattern]
    lane_size = np.concatenate([np.array(s) for s in sizes]).astype(np.int64)
    lane_node = np.repeat(np.arange(n), [len(s) for s in sizes])
    lane_first = np.concatenate([np.cumsum((0,) + s[:-1]) for s in sizes]).astype(np.int64)
    mid = p.start + (p.days * 86400) // 2
    outage = (mid + 2 * 3600, mid + 8 * 3600)
    # Two nodes in the middle of the list are down (one when there are only two nodes).
    outage_nodes = np.array(sorted({n // 2, n // 2 + 1} & set(range(1, n))), dtype=np.int64)
    gap_node = 0
    return Cluster(
        node_names=names,
        node_model=models,
        gpu_node=np.repeat(np.arange(n), GPUS_PER_NODE),
        gpu_index=np.tile(np.arange(GPUS_PER_NODE), n),
        gpu_lane=np.repeat(np.arange(len(lane_size)), lane_size),
        lane_node=lane_node,
        lane_first=lane_first,
        lane_size=lane_size,
        outage_nodes=outage_nodes,
        outage=outage,
        exporter_gap=(gap_node, p.start + 6 * 3600, p.start + 9 * 3600),
    )


@dataclass
class Jobs:
    """Job slots in lane-major, time order (the order telemetry looks them up in)."""

    lane: np.ndarray
    start: np.ndarray  # epoch seconds
    end: np.ndarray
    valid: np.ndarray  # False: dropped (would start while its node is down)
    state: np.ndarray  # index into STATES
    profile: np.ndarray
    level: np.ndarray  # mean util_pct while busy
    noise: np.ndarray
    active_s: np.ndarray  # a zombie's busy spell, from its start
    memory: np.ndarray  # share of GPU memory used while held


def make_jobs(p: Params, c: Cluster, rng: np.random.Generator) -> Jobs:
    lanes = len(c.lane_size)
    w0 = p.start - EDGE_S
    span = p.days * 86400 + 2 * EDGE_S
    # Wider lanes run fewer, longer jobs.
    share = c.lane_size.astype(float) ** -0.5
    counts = rng.multinomial(max(p.jobs - lanes, 0), share / share.sum()) + 1
    if (counts * MIN_SLOT_S).max() * 2 > span:
        raise SystemExit("generate: too many jobs for the period: raise --days or --gpus")
    n = int(counts.sum())
    lane = np.repeat(np.arange(lanes), counts)
    first = np.cumsum(counts) - counts  # first slot of each lane
    k = np.arange(n) - first[lane]  # slot number within its lane
    # Slot lengths: MIN_SLOT_S plus a log-normal share of the lane's remaining time.
    weight = rng.lognormal(0.0, 1.2, n)
    cum = np.cumsum(weight)
    lane_cum = cum - (cum[first] - weight[first])[lane]
    lane_total = np.bincount(lane, weights=weight, minlength=lanes)
    spare = span - counts * MIN_SLOT_S
    slot_end = w0 + (k + 1) * MIN_SLOT_S + np.floor(lane_cum / lane_total[lane] * spare[lane])
    slot_end = np.minimum(slot_end.astype(np.int64), w0 + span)
    slot_start = np.where(k == 0, w0, np.roll(slot_end, 1))
    length = slot_end - slot_start
    gap = np.floor(rng.beta(1.0, 6.0, n) * (length - MIN_SLOT_S)).astype(np.int64)
    start, end = slot_start + gap, slot_end.copy()

    state = rng.choice(len(STATES), size=n, p=STATE_WEIGHTS / STATE_WEIGHTS.sum())
    down = np.isin(c.lane_node[lane], c.outage_nodes)
    o_from, o_to = c.outage
    struck = down & (start < o_from) & (end > o_from)
    end = np.where(struck, o_from, end)
    state = np.where(struck, np.flatnonzero(STATES == "NODE_FAIL")[0], state)

    profile = rng.choice(5, size=n, p=PROFILE_WEIGHTS / PROFILE_WEIGHTS.sum())
    level = np.select(
        [profile == LOW, profile == BURSTY],
        [rng.uniform(8, 30, n), rng.uniform(30, 90, n)],
        rng.uniform(55, 95, n),
    )
    return Jobs(
        lane=lane,
        start=start,
        end=end,
        valid=~(down & (start >= o_from) & (start < o_to)),
        state=state,
        profile=profile,
        level=level,
        noise=rng.uniform(2, 8, n),
        active_s=(rng.uniform(0.05, 0.4, n) * (end - start)).astype(np.int64),
        memory=np.where(profile == LOW, rng.uniform(0.05, 0.3, n), rng.uniform(0.3, 0.95, n)),
    )


def _fmt_ts(seconds: np.ndarray) -> np.ndarray:
    return np.datetime_as_string(seconds.astype("datetime64[s]"), unit="s")


def write_scheduler(folder: Path, p: Params, c: Cluster, j: Jobs, rng) -> dict:
    """jobs.csv (one record per job, job ids in submit order) and allocations.csv."""
    folder.mkdir(parents=True, exist_ok=True)
    slots = np.flatnonzero(j.valid)
    n = len(slots)
    lane = j.lane[slots]
    size = c.lane_size[lane]
    queue = rng.choice(3, size=n, p=[0.75, 0.15, 0.10])
    queue = np.where((queue == 1) & (size > 2), 0, queue)  # notebooks hold one or two GPUs
    wait = np.floor(rng.exponential(np.where(queue == 1, 120.0, 900.0))).astype(np.int64)
    start, end = j.start[slots], j.end[slots]
    submit = start - wait
    order = np.lexsort((lane, submit))  # job ids follow submit order
    job_id = np.empty(n, dtype=np.int64)
    job_id[order] = JOB_ID_BASE + np.arange(n)
    account = rng.choice(len(ACCOUNTS), size=n, p=ACCOUNT_WEIGHTS / ACCOUNT_WEIGHTS.sum())
    user = rng.integers(0, USERS_PER_ACCOUNT, n)
    accounts = np.array(ACCOUNTS)
    state = j.state[slots]
    node = c.node_names[c.lane_node[lane]]
    jobs = pa.table(
        {
            "job_id": job_id.astype(str),
            "cluster": np.full(n, CLUSTER),
            "account": accounts[account],
            "user": np.char.add(np.char.add(accounts[account], "-u"), user.astype(str)),
            "queue": QUEUES[queue],
            "qos": QOS[queue],
            "gpu_model": c.node_model[c.lane_node[lane]],
            "gpus": size.astype(str),
            "nodes": node,
            "submit_time": _fmt_ts(submit),
            "start_time": _fmt_ts(start),
            "end_time": _fmt_ts(end),
            "state": STATES[state],
            "exit_code": EXIT_CODES[state],
        }
    ).take(pa.array(order))
    options = pacsv.WriteOptions(quoting_style="needed")
    pacsv.write_csv(jobs, folder / "jobs.csv", options)

    # One row per GPU of each job, in job id order.
    per_gpu = np.repeat(order, size[order])
    first = np.cumsum(size[order]) - size[order]
    offset = np.arange(len(per_gpu)) - np.repeat(first, size[order])
    allocations = pa.table(
        {
            "job_id": job_id[per_gpu].astype(str),
            "node": node[per_gpu],
            "gpu_index": (c.lane_first[lane[per_gpu]] + offset).astype(str),
        }
    )
    pacsv.write_csv(allocations, folder / "allocations.csv", options)
    return {"jobs": n, "allocation_rows": len(per_gpu)}


# --------------------------------------------------------------------------------------------
# catalog


def write_catalog(folder: Path, p: Params, c: Cluster, j: Jobs) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.yaml").write_text(
        settings_head() + f"  {CLUSTER}: {{scheduler_timezone: UTC}}\n"
    )
    (folder / "tenants.yaml").write_text(tenants_yaml(TENANTS, quote=json.dumps))
    (folder / "rates.yaml").write_text(rates_yaml())

    # Quotas and budgets from each tenant's expected share of the cluster.
    share = {t: sum(ACCOUNT_WEIGHT[a] for a in accounts) for t, *_, accounts in TENANTS}
    total = sum(share.values())
    quotas, budgets = ["quotas:"], ["budgets:"]
    hours = p.days * 24
    for tenant, weight in share.items():
        spend = 0.0
        for model in (A100, H100):
            pool = int((c.node_model == model).sum()) * GPUS_PER_NODE
            guaranteed = max(1, round(0.8 * pool * weight / total))
            quota = {"tenant": tenant, "pool": model, "guaranteed_gpus": guaranteed}
            quota |= {"limit_gpus": 2 * guaranteed, "reserved": tenant == "assist"}
            quotas.append(flow(quota))
            spend += guaranteed * hours * float(RATES[model])
        budgets.append(flow({"tenant": tenant, "month": p.month, "amount": int(round(spend, -2))}))
    (folder / "quotas.yaml").write_text("\n".join(quotas) + "\n")
    (folder / "budgets.yaml").write_text("\n".join(budgets) + "\n")
    outages = ["outages:"]
    if len(c.outage_nodes):
        names = ",".join(c.node_names[c.outage_nodes])
        o_from, o_to = (_fmt_ts(np.array(c.outage))).tolist()
        outages.append(outage_entry(CLUSTER, names, o_from, o_to))
    (folder / "outages.yaml").write_text("\n".join(outages) + "\n")

    rack = np.char.add("r", (np.arange(p.nodes) // 16 + 1).astype(str))
    nodes = pa.table(
        {
            "node": c.node_names,
            "cluster": np.full(p.nodes, CLUSTER),
            "gpu_model": c.node_model,
            "gpus": np.full(p.nodes, str(GPUS_PER_NODE)),
            "rack": rack,
            "fault_domain": np.char.add("fd-", ((np.arange(p.nodes) // 16) % 2 + 1).astype(str)),
            "driver_version": np.where(np.arange(p.nodes) % 3 == 0, "550.127.08", "560.35.03"),
            "in_service_from": np.full(p.nodes, "2025-06-01"),
            "in_service_to": np.full(p.nodes, ""),
            "monthly_cost": np.vectorize(NODE_MONTHLY_COST.get)(c.node_model),
        }
    )
    pacsv.write_csv(nodes, folder / "nodes.csv", pacsv.WriteOptions(quoting_style="needed"))


# --------------------------------------------------------------------------------------------
# telemetry


@dataclass
class Block:
    """The samples of a block of GPUs for one day, as [GPU, step] matrices."""

    gpus: np.ndarray  # global GPU numbers of the rows
    ts: np.ndarray  # [gpu, step] epoch seconds
    keep: np.ndarray  # [gpu, step] the exporter delivered this sample
    util: np.ndarray
    memory: np.ndarray
    power: np.ndarray


def telemetry_block(
    p: Params, c: Cluster, j: Jobs, phase: np.ndarray, day: int, gpus: np.ndarray
) -> Block:
    rng = np.random.default_rng([p.seed, 3, day, int(gpus[0])])
    steps = p.samples_per_day
    ts = (p.start + day * 86400 + np.arange(steps, dtype=np.int64) * p.interval_s)[None, :]
    ts = ts + phase[gpus][:, None]
    shape = (len(gpus), steps)
    lane = c.gpu_lane[gpus][:, None]
    # The job slot holding each (GPU, step): last slot of the lane starting at or before ts.
    key = lane * (1 << 32) + (ts - (p.start - EDGE_S))
    slot_key = j.lane * (1 << 32) + (j.start - (p.start - EDGE_S))
    slot = np.searchsorted(slot_key, key, side="right") - 1
    slot = np.maximum(slot, 0)
    held = (j.lane[slot] == lane) & (ts < j.end[slot]) & j.valid[slot]
    slot = np.where(held, slot, 0)

    profile = j.profile[slot]
    since = ts - j.start[slot]
    pause = unit_hash(slot, ts // 600)  # ten-minute pauses shared by the job's GPUs
    idle = (
        (profile == IDLE)
        | ((profile == ZOMBIE) & (since >= j.active_s[slot]))
        | ((profile == BURSTY) & (pause < 0.5))
    )
    util = np.clip(j.level[slot] + j.noise[slot] * rng.standard_normal(shape), 0, 100)
    util = np.where(held, np.where(idle, rng.uniform(0, 2, shape), util), 0.0)
    memory = np.clip(j.memory[slot] * GPU_MEMORY_MIB + rng.normal(0, 256, shape), 0, GPU_MEMORY_MIB)
    memory = np.where(held, memory, 0.0)
    tdp = np.vectorize(TDP_W.get)(c.node_model[c.gpu_node[gpus]])[:, None]
    power = 60.0 + held * 18.0 + (tdp - 78.0) * util / 100 + rng.normal(0, 3, shape)
    power = np.clip(power, 40.0, tdp)

    node = c.gpu_node[gpus][:, None]
    o_from, o_to = c.outage
    gap_node, g_from, g_to = c.exporter_gap
    silent = (np.isin(node, c.outage_nodes) & (ts >= o_from) & (ts < o_to)) | (
        (node == gap_node) & (ts >= g_from) & (ts < g_to)
    )
    return Block(
        gpus=gpus,
        ts=ts,
        keep=np.broadcast_to(~silent, shape),
        util=np.round(util, 1),
        memory=np.round(memory),
        power=np.round(power, 1),
    )


def canonical_table(c: Cluster, b: Block) -> pa.Table:
    rows, cols = np.nonzero(b.keep)  # row-major: ordered by (node, gpu_index, ts)
    gpu = b.gpus[rows]
    node = pa.DictionaryArray.from_arrays(
        pa.array(c.gpu_node[gpu].astype(np.int32)), pa.array(c.node_names)
    ).cast(pa.string())
    return samples_table(
        b.ts[rows, cols],
        node,
        c.gpu_index[gpu],
        b.util[rows, cols],
        b.memory[rows, cols],
        b.power[rows, cols],
    )


def _uuid(gpus: np.ndarray) -> np.ndarray:
    """A stable, UUID-shaped GPU id per GPU number."""
    words = [
        (unit_hash(gpus + 1, np.full_like(gpus, k + 1)) * 2**32).astype(np.int64) for k in range(4)
    ]
    return np.array(
        [
            f"GPU-{a:08x}-{b >> 16:04x}-{b & 0xFFFF:04x}-{c >> 16:04x}-{c & 0xFFFF:04x}{d:08x}"
            for a, b, c, d in zip(*(w.tolist() for w in words), strict=True)
        ]
    )


DCGM_METRICS = {
    # metric: (column, scale, decimals)
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("util", 0.01, 3),
    "DCGM_FI_DEV_GPU_UTIL": ("util", 1.0, 0),
    "DCGM_FI_DEV_FB_USED": ("memory", 1.0, 0),
    "DCGM_FI_DEV_POWER_USAGE": ("power", 1.0, 1),
}


def write_dcgm(folder: Path, c: Cluster, b: Block, day_label: str, part: int, uuids) -> int:
    """One Prometheus `query_range` body per metric: one series per GPU, missed scrapes absent."""
    rows, cols = np.nonzero(b.keep)
    counts = np.bincount(rows, minlength=len(b.gpus))
    offsets = np.concatenate([[0], np.cumsum(counts)])
    size = 0
    for metric, (column, scale, decimals) in DCGM_METRICS.items():
        values = value_text(getattr(b, column)[rows, cols] * scale, decimals)
        texts = series_values(b.ts[rows, cols], values, offsets)
        series = []
        for k, gpu in enumerate(b.gpus):
            node = int(c.gpu_node[gpu])
            labels = {
                "__name__": metric,
                "Hostname": str(c.node_names[node]),
                "gpu": str(int(c.gpu_index[gpu])),
                "UUID": str(uuids[gpu]),
                "device": f"nvidia{int(c.gpu_index[gpu])}",
                "modelName": GPU_NAMES[str(c.node_model[node])],
                "instance": f"{c.node_names[node]}:9400",
                "job": "dcgm-exporter",
            }
            series.append((json.dumps(labels), texts[k]))
        path = (
            folder / f"dcgm-{metric.removeprefix('DCGM_FI_').lower()}-{day_label}-part{part}.json"
        )
        path.write_text(query_range_document(series))
        size += path.stat().st_size
    return size


def write_nvidia_smi(folder: Path, c: Cluster, b: Block, uuids) -> None:
    """Append the block's samples to one `nvidia-smi --query-gpu ... --format=csv` log per node:
    for each timestamp one line per GPU, as `nvidia-smi -l` writes them."""
    nodes = len(b.gpus) // GPUS_PER_NODE
    steps = b.ts.shape[1]

    def by_time(m: np.ndarray) -> np.ndarray:  # [node, gpu, step] -> [node, step, gpu], flat
        return m.reshape(nodes, GPUS_PER_NODE, steps).transpose(0, 2, 1).reshape(-1)

    keep = by_time(np.ascontiguousarray(b.keep))
    gpu = by_time(np.repeat(b.gpus[:, None], steps, axis=1))[keep]
    model = c.node_model[c.gpu_node[gpu]]
    lines = nvidia_smi_lines(
        by_time(b.ts)[keep],
        c.gpu_index[gpu],
        pa.array(uuids[gpu]),
        pa.array(np.where(model == A100, GPU_NAMES[A100], GPU_NAMES[H100])),
        by_time(b.util)[keep],
        by_time(b.memory)[keep],
        by_time(b.power)[keep],
        staggered=False,
    )
    per_node = np.bincount(c.gpu_node[gpu] - c.gpu_node[b.gpus[0]], minlength=nodes)
    offsets = pa.array(np.concatenate([[0], np.cumsum(per_node)]).astype(np.int32))
    texts = pc.binary_join(pa.ListArray.from_arrays(offsets, lines), "\n").to_pylist()
    for k in range(nodes):
        path = folder / f"{c.node_names[c.gpu_node[b.gpus[0]] + k]}.csv"
        new = not path.exists()
        with path.open("a", encoding="utf-8", newline="\n") as handle:
            if new:
                handle.write(SMI_HEADER)
            if texts[k]:
                handle.write(texts[k] + "\n")


def write_telemetry(out: Path, p: Params, c: Cluster, j: Jobs) -> dict:
    canonical = out / "landing" / "telemetry" / CLUSTER
    canonical.mkdir(parents=True, exist_ok=True)
    extra = {f: out / f"landing-{f}" / "telemetry" / CLUSTER for f in p.formats if f != "canonical"}
    for fmt, folder in extra.items():
        folder.mkdir(parents=True, exist_ok=True)
        (out / f"landing-{fmt}" / "scheduler").symlink_to(Path("..") / "landing" / "scheduler")
    rng = np.random.default_rng([p.seed, 2])
    phase = rng.integers(0, p.interval_s, p.gpus) if p.jitter else np.zeros(p.gpus, np.int64)
    uuids = _uuid(np.arange(p.gpus)) if extra else None
    rows = dcgm_bytes = 0
    for day in range(p.days):
        label = (
            dt.datetime.fromtimestamp(p.start, dt.UTC).date() + dt.timedelta(days=day)
        ).isoformat()
        path = canonical / f"gpu-samples-{label}.parquet"
        writer = None
        for part, first in enumerate(range(0, p.gpus, GPU_BLOCK)):
            block = telemetry_block(
                p, c, j, phase, day, np.arange(first, min(first + GPU_BLOCK, p.gpus))
            )
            table = canonical_table(c, block)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table, row_group_size=table.num_rows)
            rows += table.num_rows
            if "dcgm" in extra:
                dcgm_bytes += write_dcgm(extra["dcgm"], c, block, label, part, uuids)
            if "nvidia-smi" in extra:
                write_nvidia_smi(extra["nvidia-smi"], c, block, uuids)
        writer.close()
    return {"telemetry_rows": rows, "telemetry_files": p.days}


# --------------------------------------------------------------------------------------------
# entry points


def generate(out: Path, p: Params) -> dict:
    """Write the landing folder(s), catalog and generated.json under `out` (replaced whole)."""
    validate(p)
    began = time.perf_counter()
    out = Path(out)
    for name in ("landing", "catalog", "generated.json", *(f"landing-{f}" for f in FORMATS)):
        target = out / name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
    rng = np.random.default_rng([p.seed, 1])
    cluster = make_cluster(p, rng)
    jobs = make_jobs(p, cluster, rng)
    summary: dict = {"params": asdict(p), "nodes": p.nodes}
    summary |= write_scheduler(out / "landing" / "scheduler" / CLUSTER, p, cluster, jobs, rng)
    write_catalog(out / "catalog", p, cluster, jobs)
    summary |= write_telemetry(out, p, cluster, jobs)
    summary["landing_bytes"] = sum(
        f.stat().st_size for f in (out / "landing").rglob("*") if f.is_file()
    )
    summary["seconds"] = round(time.perf_counter() - began, 1)
    (out / "generated.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def parse_args(argv: list[str] | None = None) -> tuple[Path, Params]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000, help="GPUs, a multiple of 8")
    parser.add_argument("--days", type=int, default=30, help="days of data from the 1st")
    parser.add_argument("--interval-s", type=int, default=60, help="telemetry sample spacing")
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="jobs (approximate); default 6.7 per GPU-day (200k a 1,000-GPU month)",
    )
    parser.add_argument("--month", default="2026-11", help="billing month YYYY-MM")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--jitter",
        action="store_true",
        help="offset each GPU's samples by a fixed phase (not on whole minutes)",
    )
    parser.add_argument(
        "--formats",
        default="canonical",
        help="canonical[,dcgm][,nvidia-smi]: telemetry export formats to write",
    )
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    a = parser.parse_args(argv)
    jobs = a.jobs if a.jobs is not None else default_jobs(a.gpus, a.days)
    formats = tuple(f.strip() for f in a.formats.split(",") if f.strip())
    return a.out, Params(a.gpus, a.days, a.interval_s, jobs, a.month, a.seed, a.jitter, formats)


def default_jobs(gpus: int, days: int) -> int:
    return round(200_000 * gpus * days / (1000 * 30))


def main(argv: list[str] | None = None) -> None:
    out, params = parse_args(argv)
    print(json.dumps(generate(out, params), indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
