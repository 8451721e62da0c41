"""GPU telemetry series: which job (or pod) holds each GPU row at each sample of the month,
which samples the exporters delivered, and what each sample reads (utilisation, memory, power),
a day at a time and vectorised; shared GPUs folded into one series where the exporter cannot
tell their slots apart. The writers turn the days into DCGM, nvidia-smi or canonical files.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.scheduler import held_until
from simulator.site import (
    GPU_MEMORY_MIB,
    GPU_NAMES,
    GPUS_PER_NODE,
    H100,
    IDLE_THRESHOLD_PCT,
    KUBE_DRIVER,
    TDP_W,
    WHOLE_GPU,
    KubeLayout,
    Layout,
    Node,
    Partition,
)
from simulator.workload import BURSTY, HUNG, LOW, PRODUCTIVE, SERVING, UNDERUSED, ZOMBIE, Job


@dataclass
class GpuRows:
    """The telemetry rows of a cluster: one per GPU, or per slot of a shared GPU (MIG instance,
    time-slicing replica) so that each slot has its own holder. A slot row either is a series
    of its own (a MIG instance on `kube`, labelled `GPU_I_ID`) or is folded with its GPU's
    other slots into one series per GPU (`per_gpu`: time-slicing, which no exporter can split,
    and the MIG GPUs of `atlas`, whose Prometheus keeps per-GPU series)."""

    keys: list[tuple[str, int, int]]  # (node, GPU index, slot or -1)
    node: np.ndarray
    gpu_index: np.ndarray
    instance: np.ndarray
    model: np.ndarray
    tdp: np.ndarray
    memory_mib: np.ndarray
    labels: list[dict[str, str]]  # the series labels of its DCGM exporter, without __name__
    uuid: np.ndarray
    mode: np.ndarray  # the GPU's sharing: '', 'mig' or 'time-slicing'
    weight: np.ndarray  # a slot's share of its GPU in 1/420ths (1 for a whole GPU)
    per_gpu: np.ndarray  # folded with the other slots of its GPU into one series
    device: np.ndarray  # the row a folded row's series is written under: its GPU's first


def gpu_uuid(rnd: random.Random) -> str:
    """A GPU UUID as nvidia-smi and DCGM print it."""
    h = f"{rnd.getrandbits(128):032x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _gpu_rows(
    nodes: list[tuple[str, str, Partition | None, str, str]],
    rnd: random.Random,
    kube: bool,
    mig_per_instance: bool,
) -> GpuRows:
    """Rows of (node, model, partition, driver, ip) nodes, sorted by node, GPU index and slot.
    ``mig_per_instance``: a MIG instance is a series of its own."""
    keys, models, uuids, labels, tdp, memory = [], [], [], [], [], []
    modes, weights, per_gpu, device = [], [], [], []
    for name, model, partition, driver, ip in sorted(nodes, key=lambda n: n[0]):
        for gpu in range(GPUS_PER_NODE):
            uuid = gpu_uuid(rnd)
            first = len(keys)
            # a time-sliced GPU's replicas are always one series: nothing tells them apart
            folded = partition is not None and (partition.mode != "mig" or not mig_per_instance)
            for slot in partition.slots if partition else (-1,):
                share = partition.share if partition else WHOLE_GPU
                keys.append((name, gpu, slot))
                models.append(model)
                uuids.append(uuid)
                tdp.append(TDP_W[model] * share / WHOLE_GPU)
                memory.append(partition.memory_mib if partition else GPU_MEMORY_MIB)
                modes.append(partition.mode if partition else "")
                weights.append(share if partition else 1)
                per_gpu.append(folded)
                device.append(first if folded else len(keys) - 1)
                label = {
                    "DCGM_FI_DRIVER_VERSION": driver,
                    "UUID": uuid,
                    "device": f"nvidia{gpu}",
                    "gpu": str(gpu),
                    "instance": f"{ip}:9400",
                    "job": "gpu-metrics" if kube else "dcgm-exporter",
                    "modelName": GPU_NAMES[model],
                    "pci_bus_id": f"00000000:{0x18 + 0x10 * gpu:02X}:00.0",
                    # Prometheus relabels the node name to lower case on `kube`
                    ("hostname" if kube else "Hostname"): name,
                }
                if partition is not None and not folded:
                    label |= {"GPU_I_ID": str(slot), "GPU_I_PROFILE": partition.profile}
                labels.append(label)
    return GpuRows(
        keys=keys,
        node=np.array([k[0] for k in keys]),
        gpu_index=np.array([k[1] for k in keys], dtype=np.int32),
        instance=np.array([k[2] for k in keys], dtype=np.int32),
        model=np.array(models),
        tdp=np.array(tdp),
        memory_mib=np.array(memory),
        labels=labels,
        uuid=np.array(uuids),
        mode=np.array(modes),
        weight=np.array(weights, dtype=np.float64),
        per_gpu=np.array(per_gpu),
        device=np.array(device, dtype=np.int64),
    )


def _atlas_rows(layout: Layout, seed: int) -> GpuRows:
    def ip(node: Node) -> str:
        return f"10.1.{node.rack[1:]}.{int(node.name[-2:]) + 10}"

    nodes = [(n.name, n.gpu_model, n.partition, n.driver_version, ip(n)) for n in layout.nodes]
    return _gpu_rows(nodes, random.Random(seed * 1000 + 7), kube=False, mig_per_instance=False)


def _kube_rows(kl: KubeLayout, seed: int) -> GpuRows:
    nodes = [(n.name, n.gpu_model, n.partition, KUBE_DRIVER, n.ip) for n in kl.nodes]
    return _gpu_rows(nodes, random.Random(seed * 1000 + 13), kube=True, mig_per_instance=True)


@dataclass
class Telemetry:
    """Per-row timelines of the month (which allocation holds each sample) and per-job traits."""

    rows: GpuRows
    idle_w: np.ndarray
    owner: np.ndarray  # [row, step] -> allocation number, -1 when free
    measured: np.ndarray  # [row, step] -> the exporter delivered this sample
    alloc_job: np.ndarray  # allocation number -> job number
    alloc_active: np.ndarray  # allocation number -> the job actually uses this GPU
    traits: dict[str, np.ndarray]  # per job number
    salt: int


@dataclass
class DaySamples:
    """The samples of one day, row-major (by row, then time)."""

    ts: np.ndarray  # epoch seconds
    row: np.ndarray
    util: np.ndarray
    memory: np.ndarray
    power: np.ndarray
    job: np.ndarray  # job number holding the GPU, -1 when free
    busy: np.ndarray  # per row: samples on held GPUs (delivered or not)
    productive: np.ndarray  # per row: of them, delivered working samples of jobs that did not fail


def _steps(layout: Layout, start: int, end: int) -> slice:
    """Sample columns of the month with ``start <= ts < end`` (samples sit on whole steps)."""

    def first_at_or_after(t: int) -> int:
        return max(0, -(-(t - layout.month_start) // layout.step_s))

    return slice(first_at_or_after(start), first_at_or_after(end))


def _telemetry_gaps(layout: Layout) -> list[tuple[str, int, int, int]]:
    """(node, gpu index, start, end) of every stretch without samples on `atlas`."""
    gaps = [(n.name, i, 0, n.in_service_from) for n in layout.nodes for i in range(GPUS_PER_NODE)]
    gaps += [(n, i, *layout.outage) for n in layout.outage_nodes for i in range(GPUS_PER_NODE)]
    node, start, end = layout.exporter_outage
    gaps += [(node, i, start, end) for i in range(GPUS_PER_NODE)]
    return gaps + list(layout.gpu_holes)  # single GPUs whose scrapes were lost


def _timelines(
    jobs: Sequence, rows: GpuRows, gaps: list, layout: Layout, rng: np.random.Generator
) -> Telemetry:
    """Who holds each GPU at each sample, and which samples the exporters delivered."""
    row_of = {key: r for r, key in enumerate(rows.keys)}
    n_steps = (layout.month_end - layout.month_start) // layout.step_s
    owner = np.full((len(rows.keys), n_steps), -1, dtype=np.int32)
    alloc_job, alloc_active = [], []
    for number, job in enumerate(jobs):
        until = held_until(job, layout.export_at)
        for position, key in enumerate(sorted(job.held)):
            row = row_of[key if len(key) == 3 else (*key, -1)]
            owner[row, _steps(layout, job.start, until)] = len(alloc_job)
            alloc_job.append(number)
            alloc_active.append(job.profile != UNDERUSED or position == 0)
    measured = np.ones(owner.shape, dtype=bool)
    for node, index, start, end in gaps:
        hit = (rows.node == node) & (rows.gpu_index == index)
        measured[np.ix_(hit, np.arange(n_steps)[_steps(layout, start, end)])] = False
    scale = rows.tdp / np.array([TDP_W[m] for m in rows.model])  # a MIG instance: 1/7
    return Telemetry(
        rows=rows,
        idle_w=rng.uniform(55.0, 66.0, len(rows.keys)) * scale,
        owner=owner,
        measured=measured,
        alloc_job=np.array(alloc_job, dtype=np.int64),
        alloc_active=np.array(alloc_active, dtype=bool),
        traits=_job_traits(jobs, layout, rng),
        salt=int(rng.integers(1 << 30)),
    )


def atlas_telemetry(jobs: Sequence, layout: Layout, seed: int) -> Telemetry:
    """`atlas`'s timelines over the month, the same whichever format its telemetry is written in
    (a day's samples then come from `telemetry_day` with the stream `[seed, 3, day]`)."""
    rows = _atlas_rows(layout, seed)
    gaps = _telemetry_gaps(layout)
    return _timelines(started(jobs), rows, gaps, layout, np.random.default_rng([seed, 2]))


def kube_telemetry(pods: Sequence, layout: Layout, kl: KubeLayout, seed: int) -> Telemetry:
    """`kube`'s timelines over the month: job number k is the k-th of `started(pods)` (a day's
    samples then come from `telemetry_day` with the stream `[seed, 13, day]`)."""
    rows = _kube_rows(kl, seed)
    gap_node, gap_from, gap_to = kl.exporter_gap
    gaps = [(gap_node, i, gap_from, gap_to) for i in range(GPUS_PER_NODE)]
    return _timelines(started(pods), rows, gaps, layout, np.random.default_rng([seed, 12]))


def _job_traits(jobs: list[Job], layout: Layout, rng: np.random.Generator) -> dict:
    """Per-job utilisation behaviour: mean level, noise, idle share, phases, memory."""
    n = len(jobs)
    profile = np.array([j.profile for j in jobs])
    start = np.array([(j.start or 0) - layout.month_start for j in jobs], dtype=np.int64)
    run = np.array([((j.end or layout.export_at) - (j.start or 0)) for j in jobs], dtype=np.int64)
    oom = np.array([j.state == "OUT_OF_MEMORY" for j in jobs])
    level = np.select(
        [profile == LOW, profile == BURSTY],
        [rng.uniform(8, 20, n), rng.uniform(25, 75, n)],
        rng.uniform(40, 95, n),
    )
    # Share of time a working job waits on data, evaluation or checkpoints; notebooks mostly
    # wait on their user. H100 time is scarce: a team profiles its input pipeline before it
    # gets H100s, so a working job there pauses only to checkpoint or evaluate.
    on_h100 = np.array([j.gpu_model == H100 for j in jobs])
    idle_share = np.select(
        [
            profile == BURSTY,
            profile == SERVING,
            profile == LOW,
            profile == ZOMBIE,
            (profile == PRODUCTIVE) & on_h100,
        ],
        [
            rng.uniform(0.5, 0.85, n),
            rng.uniform(0.15, 0.35, n),
            np.full(n, 0.05),
            np.zeros(n),
            rng.beta(1.2, 30.0, n),
        ],
        rng.beta(1.3, 4.5, n),
    )
    memory = np.select(
        [oom, profile == LOW, (profile == BURSTY) | (profile == ZOMBIE)],
        [rng.uniform(0.97, 0.995, n), rng.uniform(0.05, 0.3, n), rng.uniform(0.05, 0.4, n)],
        rng.uniform(0.3, 0.95, n),
    )
    return {
        "profile": profile,
        "start": start,
        "level": level,
        "noise": np.where(profile == LOW, 2.0, rng.uniform(2, 8, n)),
        "idle_share": idle_share,
        # loading data before the first kernel (H100 nodes stage it on local NVMe)
        "warmup": np.where(on_h100, rng.uniform(1, 5, n), rng.uniform(3, 20, n)) * 60,
        "active": rng.uniform(15, 60, n) * 60,  # a zombie notebook's only busy spell
        "hang": run * rng.uniform(0.2, 0.6, n),  # a hung job stops making progress here
        "memory": memory,
        "failed": np.array([j.state in ("FAILED", "OUT_OF_MEMORY", "NODE_FAIL") for j in jobs]),
    }


def unit_hash(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Deterministic uniform [0, 1) per (a, b), so all GPUs of a job pause together."""
    x = a.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= b.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)
    x ^= x >> np.uint64(29)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(32)
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def telemetry_day(tel: Telemetry, day: int, layout: Layout, rng: np.random.Generator) -> DaySamples:
    """The delivered samples of one day (util, memory and power of every measured row)."""
    per_day = 86400 // layout.step_s
    steps = slice(day * per_day, (day + 1) * per_day)
    alloc = tel.owner[:, steps]
    busy = alloc >= 0
    alloc = np.where(busy, alloc, 0)
    job = np.where(busy, tel.alloc_job[alloc], 0)  # free GPUs borrow job 0, masked below
    trait = {name: values[job] for name, values in tel.traits.items()}
    shape = alloc.shape
    t_rel = (np.arange(per_day, dtype=np.int64) + day * per_day) * layout.step_s
    since = t_rel[None, :] - trait["start"]
    # Pauses come in 10-minute blocks shared by all GPUs of a job, as in real training loops.
    pause = unit_hash(job + tel.salt, np.broadcast_to(t_rel // 600, shape))
    idle = (
        (pause < trait["idle_share"])
        | (since < trait["warmup"])
        | ~tel.alloc_active[alloc]
        | ((trait["profile"] == ZOMBIE) & (since >= trait["active"]))
        | ((trait["profile"] == HUNG) & (since >= trait["hang"]))
    )
    util = np.clip(trait["level"] + trait["noise"] * rng.standard_normal(shape), 0, 100)
    util = np.where(busy, np.where(idle, rng.uniform(0, 2, shape), util), 0.0)
    capacity = tel.rows.memory_mib[:, None]
    memory = trait["memory"] * capacity + rng.normal(0, 1, shape) * capacity / 320
    memory = np.where(tel.alloc_active[alloc], memory, 420.0)  # an unused GPU: CUDA context
    # a held GPU never reads 0 MiB (the CUDA context), a free one always does
    memory = np.where(busy, np.clip(memory, 64.0, capacity), 0.0)
    idle_w = tel.idle_w[:, None]
    tdp = tel.rows.tdp[:, None]
    scale = tdp / np.array([TDP_W[m] for m in tel.rows.model])[:, None]
    # Held GPUs run at raised clocks even when idle; load adds power up to the board limit.
    lift = 18.0 * scale
    power = idle_w + busy * lift + (tdp - idle_w - lift) * util / 100
    power = np.clip(power + rng.normal(0, 3, shape) * scale, 40.0 * scale, tdp)

    keep = tel.measured[:, steps]
    rows, cols = np.nonzero(keep)  # row-major: ordered by (row, ts)
    productive = busy & keep & (util >= IDLE_THRESHOLD_PCT) & ~trait["failed"]
    return DaySamples(
        ts=layout.month_start + (day * per_day + cols.astype(np.int64)) * layout.step_s,
        row=rows,
        util=util[keep],
        memory=memory[keep],
        power=power[keep],
        job=np.where(busy, job, -1)[keep],
        busy=busy.sum(axis=1),
        productive=productive.sum(axis=1),
    )


def per_gpu_series(tel: Telemetry, day: DaySamples) -> DaySamples:
    """The day's samples as written: the slot rows of a `per_gpu` GPU folded into one sample
    of the GPU per time, under its first row. Its utilisation is the share-weighted mean of its
    slots' (a free slot reads 0: what DCGM reports for a MIG GPU; on a time-sliced GPU each
    replica's activity counts in its quarter of the time), memory and power are their sums;
    no pod holds it alone, so it carries no pod label. Other rows pass unchanged."""
    rows = tel.rows
    if not rows.per_gpu[day.row].any():
        return day
    series = rows.device[day.row]
    order = np.lexsort((day.ts, series))  # folded rows are adjacent: only they move
    series, ts = series[order], day.ts[order]
    starts = np.flatnonzero(
        np.concatenate([[True], (series[1:] != series[:-1]) | (ts[1:] != ts[:-1])])
    )
    weight = rows.weight[day.row[order]]
    util = day.util[order]
    folded = np.diff(np.append(starts, len(series))) > 1
    weighted = np.add.reduceat(util * weight, starts) / np.add.reduceat(weight, starts)
    return dataclasses.replace(
        day,
        ts=ts[starts],
        row=series[starts],
        util=np.where(folded, weighted, util[starts]),
        memory=np.add.reduceat(day.memory[order], starts),
        power=np.add.reduceat(day.power[order], starts),
        job=np.where(folded, -1, day.job[order][starts]),
    )


def productive_share(rows: GpuRows, busy: np.ndarray, productive: np.ndarray) -> float:
    """Ground truth for the pipeline's productive share: productive over held sample time,
    in GPU-equivalents (a MIG instance's samples weigh 1/7)."""
    weight = rows.tdp / np.array([TDP_W[m] for m in rows.model])
    held = float((busy * weight).sum())
    return round(float((productive * weight).sum()) / held, 3) if held else 0.0


def started(jobs: Sequence) -> list:
    return [j for j in jobs if j.start is not None]
