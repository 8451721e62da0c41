"""`atlas`'s scheduler: jobs placed in submit order by conservative backfill (no GPU is ever
held by two jobs at once), the MIG jobs on the MIG nodes, the outage and the flaky node striking;
then each job as the export shows it, and the GPUs of the month's jobs (and pods) numbered as
the pipeline will assign them.
"""

from __future__ import annotations

import bisect
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from simulator.site import GPUS_PER_NODE, Layout, Partition
from simulator.workload import Job

# the first job id of the simulated window (ids then follow submit order)
JOB_ID_BASE = 4_810_000


class _PoolEnds:
    """The ends of the busy intervals of every GPU of a pool, sorted: the pool's candidate
    starts without a pass over each of its GPUs (most of the scheduler's time before)."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes  # the pool's list of node names, as the scheduler passes it
        self.ends: list[int] = []


class _Gpu:
    """Busy intervals of one GPU, kept sorted and non-overlapping (so ends are sorted too)."""

    def __init__(self, pool: _PoolEnds | None = None) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.holders: list[Job | None] = []  # None marks time the GPU cannot be used
        self.pool = pool

    def is_free(self, start: int, end: int) -> bool:
        """No interval overlaps [start, end): the last one beginning before ``end`` is over."""
        i = bisect.bisect_left(self.starts, end)
        return i == 0 or self.ends[i - 1] <= start

    def hold(self, start: int, end: int, holder: Job | None) -> None:
        i = bisect.bisect_left(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        self.holders.insert(i, holder)
        if self.pool is not None:
            bisect.insort(self.pool.ends, end)

    def release(self, holder: Job) -> None:
        i = next(k for k, h in enumerate(self.holders) if h is holder)
        if self.pool is not None:
            del self.pool.ends[bisect.bisect_left(self.pool.ends, self.ends[i])]
        del self.starts[i], self.ends[i], self.holders[i]


def schedule(rnd: random.Random, jobs: list[Job], layout: Layout) -> None:
    """Place jobs in submit order, each at the earliest time enough GPUs are free for its run.

    This is conservative backfill: a job may start before jobs queued ahead of it when it fits
    in a gap, but never delays them, and no GPU is ever held by two jobs at once. The outage is
    unplanned: jobs submitted before it are placed as if it would not happen, and it strikes
    (see _outage_strikes) when the first job after its start is submitted. The MIG jobs are
    placed apart, on the MIG nodes (schedule_mig).
    """
    whole_nodes = [node for node in layout.nodes if node.partition is None]
    pools = defaultdict(list)
    for node in whole_nodes:
        pools[node.gpu_model].append(node.name)
    pool_ends = {model: _PoolEnds(nodes) for model, nodes in pools.items()}
    gpus = {
        (n.name, i): _Gpu(pool_ends[n.gpu_model]) for n in whole_nodes for i in range(GPUS_PER_NODE)
    }
    for node in whole_nodes:
        for i in range(GPUS_PER_NODE):
            gpus[node.name, i].hold(0, node.in_service_from, None)  # not installed yet
    het_parts = defaultdict(list)
    for job in jobs:
        if job.het is not None:
            het_parts[job.het].append(job)
    outage_pending = True
    for job in jobs:
        if outage_pending and job.submit >= layout.outage[0]:
            _outage_strikes(rnd, jobs, gpus, pools, layout)
            outage_pending = False
        if job.partition is not None:
            continue
        if job.het is not None:
            if job.het_part == 0:
                _place_together(rnd, het_parts[job.het], gpus, pools)
            continue
        _place(rnd, job, gpus, job.nodelist or pools[job.gpu_model])
        if job.start is not None:
            _hit_by_flaky_node(rnd, job, gpus, layout)


def schedule_mig(rnd: random.Random, jobs: list[Job], layout: Layout) -> None:
    """Place the MIG jobs in submit order, each at the earliest moment an instance of its
    profile is free for its whole run (any instance: `renumber_shared` then numbers the GPUs
    as the pipeline will). Interactive users give up as on whole GPUs."""
    instances: dict[Partition, list[tuple[str, int, int]]] = defaultdict(list)
    for node in layout.nodes:
        if node.partition is not None:
            instances[node.partition] += [
                (node.name, gpu, slot)
                for gpu in range(GPUS_PER_NODE)
                for slot in node.partition.slots
            ]
    busy = {key: _Gpu() for keys in instances.values() for key in keys}
    for job in jobs:
        if job.partition is None:
            continue
        keys = instances[job.partition]
        for start in _candidate_starts([busy[k] for k in keys], job.submit, rnd):
            free = next((k for k in keys if busy[k].is_free(start, start + job.runtime)), None)
            if free is not None:
                break
        if job.patience is not None and start - job.submit > job.patience:
            job.state, job.exit_code = "CANCELLED", 15
            job.end = job.submit + job.patience  # gave up waiting; never held an instance
            continue
        job.start, job.end, job.held = start, start + job.runtime, [free]
        busy[free].hold(job.start, job.end, job)


def _place(
    rnd: random.Random, job: Job, gpus: dict, pool: Sequence[str], earliest: int | None = None
) -> None:
    """Give the job its GPUs, or cancel it if an interactive user would have given up."""
    pool_gpus = [gpus[node, i] for node in pool for i in range(GPUS_PER_NODE)]
    starts = _candidate_starts(pool_gpus, job.submit if earliest is None else earliest, rnd, pool)
    fit = _fit_whole_nodes if job.gpus > GPUS_PER_NODE else _fit_one_node
    start, held = fit(job, gpus, pool, starts)
    if job.patience is not None and start - job.submit > job.patience:
        job.state, job.exit_code = "CANCELLED", 15
        job.end = job.submit + job.patience  # gave up waiting; never held a GPU
        return
    job.start, job.end, job.held = start, start + job.runtime, held
    for key in held:
        gpus[key].hold(job.start, job.end, job)


def _place_together(rnd: random.Random, parts: list[Job], gpus: dict, pools: dict) -> None:
    """The components of a heterogeneous job start together, each on its own pool."""
    starts = sorted(
        {
            t
            for part in parts
            for t in _candidate_starts(
                [gpus[node, i] for node in pools[part.gpu_model] for i in range(GPUS_PER_NODE)],
                part.submit,
                rnd,
            )
        }
    )
    for start in starts:
        fits = [_fit_at(part, gpus, pools[part.gpu_model], start) for part in parts]
        if all(held is not None for held in fits):
            for part, held in zip(parts, fits, strict=True):
                part.start, part.end, part.held = start, start + part.runtime, held
                for key in held:
                    gpus[key].hold(part.start, part.end, part)
            return
    raise RuntimeError("the heterogeneous job never fits")


def _fit_at(job: Job, gpus: dict, pool: Sequence[str], start: int) -> list | None:
    """The GPUs the job would get if it started at ``start``, or None."""
    try:
        fit = _fit_whole_nodes if job.gpus > GPUS_PER_NODE else _fit_one_node
        return fit(job, gpus, pool, [start])[1]
    except RuntimeError:
        return None


def _candidate_starts(
    pool_gpus: list[_Gpu], earliest: int, rnd: random.Random, nodes: Sequence[str] = ()
) -> list[int]:
    """Instants worth trying: the earliest start and each later moment a pool GPU comes free,
    each one scheduler cycle later. ``nodes``: the pool's nodes, when they are a whole pool's
    list (its ends are then read in one piece)."""
    pool = pool_gpus[0].pool if pool_gpus else None
    sources = (
        [pool.ends] if pool is not None and pool.nodes is nodes else [g.ends for g in pool_gpus]
    )
    times = {earliest}
    for ends in sources:
        times.update(ends[bisect.bisect_left(ends, earliest) :])
    latency = rnd.randint(2, 45)
    return sorted(t + latency for t in times)


# candidate instants tried one by one before the free gaps are worked out: any number gives
# the same placements (1, 2, 4 and 8 took the same time on the demo's three months, within this
# machine's noise)
_TRIED_ONE_BY_ONE = 4


def _fit_one_node(
    job: Job, gpus: dict, pool: Sequence[str], starts: list[int]
) -> tuple[int, list[tuple[str, int]]]:
    """Earliest start on a single node; ties go to the fullest node to keep nodes whole."""
    devices = [(node, [gpus[node, i] for i in range(GPUS_PER_NODE)]) for node in pool]
    # most jobs fit at their first instant or soon after: tried one by one; a job still
    # waiting then has its earliest start found per node from the GPUs' free gaps
    first = starts[:_TRIED_ONE_BY_ONE]
    for start in first:
        fits = _fits_at(job, devices, start)
        if fits:
            break
    else:
        rest = starts[len(first) :]
        found = [_first_fit(job, node_gpus, rest) for _, node_gpus in devices] if rest else []
        earliest = min((index for index in found if index is not None), default=None)
        if earliest is None:
            raise RuntimeError(f"no {job.gpu_model} node can ever hold {job.gpus} GPUs")
        start = rest[earliest]
        fits = _fits_at(job, devices, start)
    _, node, indices = min(fits)
    return start, [(node, i) for i in indices]


def _fits_at(job: Job, devices: list, start: int) -> list[tuple[int, str, list[int]]]:
    """The nodes that can hold the job from ``start``: (free GPUs, node, the GPUs it takes)."""
    end = start + job.runtime
    bisect_left = bisect.bisect_left
    fits = []
    for node, node_gpus in devices:
        free = []
        for i, gpu in enumerate(node_gpus):  # _Gpu.is_free inlined: the demo's hottest loop
            k = bisect_left(gpu.starts, end)
            if k == 0 or gpu.ends[k - 1] <= start:
                free.append(i)
        if len(free) >= job.gpus:
            fits.append((len(free), node, free[: job.gpus]))
    return fits


def _first_fit(job: Job, node_gpus: list[_Gpu], starts: list[int]) -> int | None:
    """The index of the first of ``starts`` at which the node has ``job.gpus`` GPUs free for
    the job's whole run, or None. A GPU is free from s to s + runtime exactly when s lies in
    one of its gaps [end of an interval, start of the next - runtime]: each gap is a run of
    candidate indices, and the answer is the first index that enough runs cover."""
    runtime = job.runtime
    first_start, last = starts[0], len(starts) - 1
    events = []  # (candidate index, +1 a gap begins / -1 it has ended)
    for gpu in node_gpus:
        lo = None  # the gap before the first interval still running at the first start
        for j in range(bisect.bisect_right(gpu.ends, first_start), len(gpu.starts) + 1):
            hi = gpu.starts[j] - runtime if j < len(gpu.starts) else None
            begin = 0 if lo is None else bisect.bisect_left(starts, lo)
            stop = last if hi is None else bisect.bisect_right(starts, hi) - 1
            if begin <= stop:
                events += [(begin, 1), (stop + 1, -1)]
            if j < len(gpu.ends):
                lo = gpu.ends[j]
    free = 0
    for index, change in sorted(events):  # at one index, the ended gaps (-1) count first
        free += change
        if free >= job.gpus:
            return index
    return None


def _fit_whole_nodes(
    job: Job, gpus: dict, pool: Sequence[str], starts: list[int]
) -> tuple[int, list[tuple[str, int]]]:
    """Earliest start on enough completely free nodes (multi-node jobs take whole nodes)."""
    wanted = job.gpus // GPUS_PER_NODE
    for start in starts:
        end = start + job.runtime
        free_nodes = [
            node
            for node in pool
            if all(gpus[node, i].is_free(start, end) for i in range(GPUS_PER_NODE))
        ]
        if len(free_nodes) >= wanted:
            return start, [(n, i) for n in free_nodes[:wanted] for i in range(GPUS_PER_NODE)]
    raise RuntimeError(f"the {job.gpu_model} pool has fewer than {wanted} nodes")


def _outage_strikes(
    rnd: random.Random, jobs: list[Job], gpus: dict, pools: dict, layout: Layout
) -> None:
    """The outage nodes fail: running jobs end as NODE_FAIL, queued ones are placed again."""
    outage_start, outage_end = layout.outage
    struck = [
        job
        for job in jobs
        if job.start is not None
        and any(n in layout.outage_nodes for n, _ in job.held)
        and job.start < outage_end
        and job.end > outage_start
    ]
    for job in struck:
        for key in job.held:
            gpus[key].release(job)
    for node in layout.outage_nodes:
        for i in range(GPUS_PER_NODE):
            gpus[node, i].hold(outage_start, outage_end, None)
    for job in struck:
        if job.start < outage_start:
            job.end, job.state, job.exit_code = outage_start, "NODE_FAIL", 0
            for key in job.held:
                gpus[key].hold(job.start, job.end, job)
        else:
            # Still queued for the broken nodes: the scheduler finds it other GPUs from now on,
            # or waits for the nodes when too few others are left for it.
            job.start, job.end, job.held = None, None, []
            pool = [n for n in job.nodelist or pools[job.gpu_model] if n not in layout.outage_nodes]
            if len(pool) * GPUS_PER_NODE < job.gpus:
                pool = pools[job.gpu_model]
            _place(rnd, job, gpus, pool, earliest=outage_start)


def _hit_by_flaky_node(rnd: random.Random, job: Job, gpus: dict, layout: Layout) -> None:
    """One node with an old driver crashes some jobs early (evidence for the failures view)."""
    on_flaky = any(node == layout.flaky_node for node, _ in job.held)
    if on_flaky and job.state == "COMPLETED" and rnd.random() < 0.2 and job.array is None:
        for key in job.held:
            gpus[key].release(job)
        job.end = job.start + max(60, int(job.runtime * rnd.uniform(0.05, 0.5)))
        job.state, job.exit_code = "FAILED", 1
        for key in job.held:
            gpus[key].hold(job.start, job.end, job)


# --------------------------------------------------------------------------------------------
# what the export at export time shows


def exported_jobs(jobs: list[Job], layout: Layout) -> list[Job]:
    """Jobs the export of the month contains, with their state as of the export time.

    Job ids follow submit order over the whole simulation (an array takes one id per task,
    `<first>_<task>`; a het job one per component, `<first>+<component>`), set on every job:
    jobs that ended before the month belong to the previous export and are left out.
    """
    tasks = Counter(job.array for job in jobs if job.array is not None)
    firsts: dict[tuple[str, int], int] = {}
    next_id = JOB_ID_BASE
    exported = []
    for job in jobs:
        if job.array is not None or job.het is not None:
            group = ("array", job.array) if job.array is not None else ("het", job.het)
            if group not in firsts:
                firsts[group] = next_id
                next_id += tasks[job.array] if job.array is not None else 2
            first = firsts[group]
            number = job.task if job.array is not None else job.het_part
            job.job_id = f"{first}{'_' if job.array is not None else '+'}{number}"
            job.raw_id = str(first + number)
        else:
            job.job_id = job.raw_id = str(next_id)
            next_id += 1
        state_at(job, layout.export_at)
        if job.end is None or job.end > layout.month_start:
            exported.append(job)
    return exported


def state_at(job: Job, now: int) -> None:
    """Turn a job into what the scheduler reports about it at ``now`` (in place)."""
    if job.start is None or job.start > now:
        if job.start is not None or job.end is None or job.end > now:
            job.state, job.start, job.end, job.held = "PENDING", None, None, []
    elif job.end is None or job.end > now:
        job.state, job.end = "RUNNING", None


def held_until(job, export_at: int) -> int:
    return export_at if job.end is None else job.end


# --------------------------------------------------------------------------------------------
# GPU indices, as the pipeline assigns them


def lowest_free_first(
    jobs: Sequence,
    layout: Layout,
    listed_after: int,
    key: Callable[[str, int], tuple] = lambda n, i: (n, i),
) -> None:
    """Renumber the GPUs each job holds on each node as the pipeline will assign them.

    Neither sacct nor a pod list says which GPU indices a job held, so the pipeline assigns
    them as Slurm's default selection (and the device plugin) does: in start order (ties by job
    id), the lowest indices free at the job's start (`loading.py::assign_gpu_indices`). Done
    over every started job the exports list (held past ``listed_after``: the first sacct dump
    covers the day before the month, the first pod list shows pods ended in the 12 hours
    before), as the pipeline replays them whichever month they belong to, the renumbering
    keeps every node's GPU count at every instant, so it never runs out of free GPUs; the
    simulated placement only chose the nodes and the times.
    """
    entries = defaultdict(list)
    for job in jobs:
        if job.start is None or not job.held:
            continue
        if held_until(job, layout.export_at) <= listed_after:
            continue
        for node, count in Counter(k[0] for k in job.held).items():
            entries[node].append(
                (job.start, job.job_id, held_until(job, layout.export_at), count, job)
            )
    renumbered: dict[int, list] = defaultdict(list)
    for node in sorted(entries):
        active: list[tuple[int, set[int]]] = []
        for start, job_id, end, count, job in sorted(entries[node], key=lambda e: e[:2]):
            active = [(e, taken) for e, taken in active if e > start]
            busy = set().union(*(taken for _, taken in active))
            free = [i for i in range(GPUS_PER_NODE) if i not in busy][:count]
            if len(free) < count:
                raise RuntimeError(f"{node}: {job_id} finds {len(free)} of {count} GPUs free")
            active.append((end, set(free)))
            renumbered[id(job)] += [key(node, i) for i in free]
    for job in jobs:
        if id(job) in renumbered:
            job.held = sorted(renumbered[id(job)])


def renumber_shared(
    jobs: Sequence, layout: Layout, partitions: dict[str, Partition], listed_after: int
) -> None:
    """Renumber the GPUs of the jobs (or pods) on shared GPUs as the pipeline assigns them.

    Over the jobs the exports list (held past ``listed_after``, as `lowest_free_first`), in
    start order (ties by job id), each goes to the lowest GPU of its
    node with room for its share (`loading.py::assign_gpu_indices`: a share is a slot's 1/420ths
    times the slots it holds), and within it to the lowest free slots (MIG instances, replicas).
    The simulation only chose the nodes and times: it kept every node within its slots at every
    instant, so a GPU with room exists whenever each job holds one slot; a job of several slots
    finds one because those pods are admitted first in first out (see `kube.py`).
    """
    entries = defaultdict(list)
    for job in jobs:
        if job.start is None or not job.held or job.held[0][0] not in partitions:
            continue
        if held_until(job, layout.export_at) > listed_after:
            entries[job.held[0][0]].append(job)
    for node, node_jobs in sorted(entries.items()):
        slots = partitions[node].slots
        active: list[tuple[int, int, set[int]]] = []  # (held until, GPU, slots taken)
        for job in sorted(node_jobs, key=lambda j: (j.start, j.job_id)):
            active = [a for a in active if a[0] > job.start]
            used = Counter()
            for _, gpu, taken in active:
                used[gpu] += len(taken)
            need = len(job.held)
            gpu = next((g for g in range(GPUS_PER_NODE) if used[g] + need <= len(slots)), None)
            if gpu is None:
                raise RuntimeError(f"{node}: no GPU has {need} free slots for {job.job_id}")
            taken = set().union(*(t for _, g, t in active if g == gpu))
            free = [slot for slot in slots if slot not in taken][:need]
            active.append((held_until(job, layout.export_at), gpu, set(free)))
            job.held = [(node, gpu, slot) for slot in free]
