"""Figures of the simulated month that the catalog and the summary are built from (GPU-hours,
concurrency, allocation), and the check that a seed shows every case the demo promises.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from simulator.kube import Pod
from simulator.scheduler import held_until
from simulator.site import GPUS_PER_NODE, MIG_1G, MIG_3G, Layout, tenant_of
from simulator.workload import ZOMBIE, Job


def month_seconds(job: Job, layout: Layout) -> int:
    """Seconds of the job's run inside the month (running jobs held until the export)."""
    if job.start is None:
        return 0
    end = layout.export_at if job.end is None else job.end
    return max(0, min(end, layout.month_end) - max(job.start, layout.month_start))


def capacity_gpu_hours(layout: Layout) -> float:
    """GPU-hours the inventory offers in the month (a late node counts from its start)."""
    seconds = sum(
        max(0, layout.month_end - max(layout.month_start, n.in_service_from)) for n in layout.nodes
    )
    return seconds * GPUS_PER_NODE / 3600


def concurrency(jobs: list[Job], layout: Layout) -> dict[tuple[str, str], tuple[float, int]]:
    """Per tenant × GPU model: time-weighted mean and peak concurrent GPUs inside the month."""
    events = defaultdict(list)
    for job in jobs:
        tenant = tenant_of(job.account)
        if tenant is None or not job.gpus or month_seconds(job, layout) == 0:
            continue
        end = layout.export_at if job.end is None else job.end
        events[tenant, job.gpu_model] += [
            (max(job.start, layout.month_start), job.gpu_eq),
            (min(end, layout.month_end), -job.gpu_eq),
        ]
    month_s = layout.month_end - layout.month_start
    result = {}
    for key, points in events.items():
        level = peak = area = 0
        last = layout.month_start
        for t, delta in sorted(points):  # ends sort before starts at the same instant
            area += level * (t - last)
            level, last = level + delta, t
            peak = max(peak, level)
        result[key] = (area / month_s, peak)
    return result


def gpu_hours_by_tenant(
    jobs: list[Job], layout: Layout, credited: bool
) -> dict[tuple[str, str], float]:
    """Allocated GPU-hours in the month per tenant × model; ``credited`` drops NODE_FAIL."""
    hours = defaultdict(float)
    for job in jobs:
        tenant = tenant_of(job.account)
        if tenant is not None and job.gpus and not (credited and job.state == "NODE_FAIL"):
            hours[tenant, job.gpu_model] += job.gpu_eq * month_seconds(job, layout) / 3600
    return hours


def _of_the_month(job, layout: Layout) -> bool:
    """A job the pipeline bills or reports for the month: held GPUs in it, or submitted in it
    (a job cancelled while pending shows Start = End = its cancellation in sacct)."""
    start = job.start if job.start is not None else job.end
    until = held_until(job, layout.export_at) if job.start is not None else job.end
    if start is not None and start < layout.month_end and until > layout.month_start:
        return True
    return layout.month_start <= job.submit < layout.month_end


def cluster_figures(jobs: Sequence, layout: Layout, capacity: float) -> dict:
    allocated = sum(j.gpu_eq * month_seconds(j, layout) for j in jobs) / 3600
    return {
        "jobs_of_the_month": sum(_of_the_month(j, layout) for j in jobs),
        "allocated_gpu_hours": round(allocated, 1),
        "capacity_gpu_hours": round(capacity, 1),
        "allocation_rate": round(allocated / capacity, 3),
    }


# --------------------------------------------------------------------------------------------
# the cases every seed must show


def verify_jobs(jobs: list[Job], layout: Layout, vision_peak: int, vision_limit: int) -> None:
    """Fail loudly if this seed misses a case the demo promises (cheaper than guessing later)."""
    m0, m1 = layout.month_start, layout.month_end
    cases = {
        "NODE_FAIL at the outage start": any(
            j.state == "NODE_FAIL" and j.end == layout.outage[0] for j in jobs
        ),
        "started before the month, ended inside": any(
            j.start is not None and j.start < m0 and j.end is not None and m0 < j.end < m1
            for j in jobs
        ),
        "running past the month end": any(
            j.start is not None and j.start < m1 and (j.end is None or j.end > m1) for j in jobs
        ),
        "RUNNING": any(j.state == "RUNNING" for j in jobs),
        "PENDING": any(j.state == "PENDING" for j in jobs),
        "contractor-x": any(j.account == "contractor-x" for j in jobs),
        "zombie notebook": any(j.profile == ZOMBIE and j.start is not None for j in jobs),
        "vision over its limit": vision_peak > vision_limit,
        "array task pending at the export": any(
            j.array is not None and j.state == "PENDING" for j in jobs
        ),
        "array tasks waiting at a dump, run later": any(
            j.array == 0 and j.start is not None and j.start > j.submit + 3600 for j in jobs
        ),
        "heterogeneous job": sum(j.het is not None and j.start is not None for j in jobs) == 2,
        "1g.10gb jobs": sum(j.partition is MIG_1G and j.start is not None for j in jobs) > 10,
        "3g.40gb jobs": sum(j.partition is MIG_3G and j.start is not None for j in jobs) > 10,
        "a GPU's seven 1g.10gb instances held at once": _most_slots_held(jobs, "gpu-m01", layout)
        == 7,
        "two 3g.40gb jobs on one GPU at once": _most_slots_held(jobs, "gpu-m02", layout) == 2,
    }
    _fail_if_missing(cases)


def verify_pods(pods: list[Pod], layout: Layout) -> None:
    """The cases the Kubernetes month promises."""
    m0 = layout.month_start
    in_month = [p for p in pods if p.start is not None and month_seconds(p, layout) > 0]
    cases = {
        "MIG pods": sum(p.slices > 0 for p in in_month) > 10,
        "a pod on two MIG slices": any(p.slices == 2 for p in in_month),
        "OOMKilled": any(p.reason == "OOMKilled" for p in in_month),
        "Evicted": any(p.reason == "Evicted" for p in in_month),
        "Kueue-preempted": any(p.reason == "KueuePreempted" for p in in_month),
        "DeadlineExceeded": any(p.reason == "DeadlineExceeded" for p in in_month),
        "running at the export": any(p.state == "RUNNING" and p.gpus for p in pods),
        "pending at the export, submitted in the month": any(
            p.state == "PENDING" and p.gpus and p.submit < layout.month_end for p in pods
        ),
        "started before the month": any(p.gpus and p.start < m0 for p in in_month),
        "zombie MIG notebook": any(p.profile == ZOMBIE and p.slices for p in in_month),
        "time-sliced pods": sum(p.pool == "TS" for p in in_month) > 10,
        "a time-sliced GPU's four replicas held at once": _most_slots_held(
            pods, "kube-ts01", layout
        )
        == 4,
        "zombie time-sliced notebook": any(
            p.profile == ZOMBIE and p.pool == "TS" for p in in_month
        ),
    }
    _fail_if_missing(cases)


def _most_slots_held(jobs: Sequence, node: str, layout: Layout) -> int:
    """The most slots (MIG instances, replicas) of one GPU of ``node`` held at once in the
    month, by the GPUs the pipeline assigns (running jobs until the export)."""
    events = defaultdict(list)
    for job in jobs:
        if job.start is None or held_until(job, layout.export_at) <= layout.month_start:
            continue
        for held_node, gpu, *_ in job.held:
            if held_node == node:
                start = max(job.start, layout.month_start)
                events[gpu] += [(start, 1), (held_until(job, layout.export_at), -1)]
    most = 0
    for points in events.values():
        level = 0
        for _, delta in sorted(points):  # ends sort before starts at the same instant
            level += delta
            most = max(most, level)
    return most


def _fail_if_missing(cases: dict[str, bool]) -> None:
    missing = [name for name, present in cases.items() if not present]
    if missing:
        raise RuntimeError(f"demo seed misses required cases: {', '.join(missing)}")
