"""Slurm `sacct --parsable2` daily dumps of `atlas`: jobs, their steps, array tasks and the
collapsed record of an array's pending tasks, heterogeneous job components, MIG instances by gres
type; each dump covering two days (so they overlap), headerless in the Open XDMoD field order
until the 15th and with the collector's header (its own order) from the 16th, one dump sent
twice and one with three malformed lines.

The record functions only format what the simulation decided, deterministically: the same
input gives the same bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hostlist

from simulator.clock import fmt_date, fmt_ts
from simulator.site import (
    ACCOUNTS,
    CLUSTER,
    SACCT_LOOKBACK_S,
    SLURM_GPU_TYPES,
    USER_POOL,
    Layout,
)
from simulator.workload import Job

# Open XDMoD's documented `sacct --format` order: the files written without a header use it.
XDMOD_FIELDS = (
    "jobid", "jobidraw", "cluster", "partition", "qos", "account", "group", "gid", "user",
    "uid", "submit", "eligible", "start", "end", "elapsed", "exitcode", "state", "nnodes",
    "ncpus", "reqcpus", "reqmem", "reqtres", "alloctres", "timelimit", "nodelist", "jobname",
)  # fmt: skip
# The collector that writes a header uses its own order (sacct prints the names as given).
HEADED_FIELDS = (
    "JobID", "JobIDRaw", "JobName", "Partition", "QOS", "Account", "User", "UID", "Group",
    "GID", "Submit", "Eligible", "Start", "End", "Elapsed", "State", "ExitCode", "NNodes",
    "NCPUS", "ReqCPUS", "ReqMem", "ReqTRES", "AllocTRES", "Timelimit", "NodeList", "Cluster",
)  # fmt: skip
CPUS_PER_GPU = 16
MEM_PER_GPU_G = 120


@functools.cache
def node_list(nodes: tuple[str, ...]) -> str:
    """`gpu-a01,gpu-a02` as sacct prints it, `gpu-a[01-02]`: each job's lines in each dump
    print the same few lists, so each is collected once."""
    return hostlist.collect_hostlist(list(nodes))


def slurm_duration(seconds: int) -> str:
    """`[D-]HH:MM:SS`, as sacct prints Elapsed and Timelimit."""
    days, rest = divmod(max(0, int(seconds)), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


@dataclass(frozen=True)
class SacctTraits:
    """What sacct shows of a job that does not change from dump to dump."""

    uid: int
    gid: int
    name: str
    gres_style: str  # 'both' (untyped total + typed), 'typed' or 'untyped'
    gres_type: str  # lower-case Slurm GPU type: a100 / h100, a MIG instance a100_1g.10gb
    numbered_steps: int  # 0: no srun step, 1: `.0`, 2: `.0` and `.1`; -1: no steps at all
    cancelled_by: int  # uid in `CANCELLED by <uid>`


@dataclass(frozen=True)
class SacctView:
    """A job as one dump shows it (its state as of the dump time)."""

    job_id: str  # 123, 123_4, 123+0
    raw_id: str
    state: str  # normalised state as of the dump
    start: int | None
    end: int | None
    nodes: tuple[str, ...]  # nodes held (sorted), empty when it never ran
    gpus: int
    cancelled_at: int | None  # a job cancelled while pending: Start = End = this


def gres(traits: SacctTraits, gpus: int, count: str | None = None) -> str:
    """The gres/gpu part of a TRES string in the job's style (`count` overrides the number)."""
    n = str(gpus) if count is None else count
    typed = f"gres/gpu:{traits.gres_type}={n}"
    untyped = f"gres/gpu={n}"
    return {"both": f"{typed},{untyped}", "typed": typed, "untyped": untyped}[traits.gres_style]


def tres(traits: SacctTraits, gpus: int, nodes: int, count: str | None = None) -> str:
    cpus = max(1, gpus) * CPUS_PER_GPU
    return (
        f"billing={cpus},cpu={cpus},{gres(traits, gpus, count)},"
        f"mem={max(1, gpus) * MEM_PER_GPU_G}G,node={nodes}"
    )


def _exit_text(state: str, exit_code: int) -> str:
    if state == "FAILED":
        return f"{exit_code}:0" if exit_code < 128 else f"0:{exit_code - 128}"
    if state == "OUT_OF_MEMORY":
        return "0:125"
    if state in ("CANCELLED", "TIMEOUT", "PREEMPTED"):
        return "0:15"
    return "0:0"


def sacct_job_record(
    job: Any, view: SacctView, traits: SacctTraits, cluster: str, as_of: int
) -> dict[str, str]:
    """The job's own line (lower-case field name -> text)."""
    never_ran = view.start is None
    if view.cancelled_at is not None:
        start = end = fmt_ts(view.cancelled_at)
        elapsed = 0
    else:
        start = "Unknown" if never_ran else fmt_ts(view.start)
        end = "Unknown" if view.end is None else fmt_ts(view.end)
        elapsed = 0 if never_ran else (view.end if view.end is not None else as_of) - view.start
    state = view.state
    if state == "CANCELLED":
        state = f"CANCELLED by {traits.cancelled_by}"
    # a job that never ran asks for whole nodes beyond 8 GPUs
    nnodes = len(view.nodes) or max(1, -(-view.gpus // 8))
    per_node = view.gpus // nnodes
    running_or_done = not never_ran and view.cancelled_at is None
    return {
        "jobid": view.job_id,
        "jobidraw": view.raw_id,
        "cluster": cluster,
        "partition": job.queue,
        "qos": job.qos,
        "account": job.account,
        "group": job.account,
        "gid": str(traits.gid),
        "user": job.user,
        "uid": str(traits.uid),
        "submit": fmt_ts(job.submit),
        "eligible": fmt_ts(job.submit),
        "start": start,
        "end": end,
        "elapsed": slurm_duration(elapsed),
        "exitcode": "0:0"
        if view.state in ("RUNNING", "PENDING")
        else _exit_text(view.state, job.exit_code),
        "state": state,
        "nnodes": str(nnodes),
        "ncpus": str(max(1, view.gpus) * CPUS_PER_GPU),
        "reqcpus": str(max(1, view.gpus) * CPUS_PER_GPU),
        "reqmem": f"{max(1, per_node) * MEM_PER_GPU_G}G",
        "reqtres": tres(traits, job.gpus, nnodes),
        "alloctres": tres(traits, view.gpus, nnodes) if running_or_done else "",
        "timelimit": slurm_duration(job.time_limit),
        "nodelist": node_list(view.nodes) if view.nodes else "None assigned",
        "jobname": traits.name,
    }


_STEP_STATE = {
    "COMPLETED": "COMPLETED",
    "FAILED": "FAILED",
    "OUT_OF_MEMORY": "OUT_OF_MEMORY",
    "CANCELLED": "CANCELLED",
    "TIMEOUT": "CANCELLED",
    "PREEMPTED": "CANCELLED",
    "NODE_FAIL": "CANCELLED",
}


def sacct_step_records(
    job: Any, view: SacctView, traits: SacctTraits, cluster: str, as_of: int
) -> list[dict[str, str]]:
    """The job's steps that exist at the dump time: `.batch` (or `.interactive`), `.extern`
    and up to two numbered srun steps."""
    if view.start is None or traits.numbered_steps < 0 or not view.nodes:
        return []
    running = view.end is None
    end = view.end
    per_node = view.gpus // len(view.nodes)
    first = (job.queue == "interactive", view.nodes[0])
    steps: list[tuple[str, int, int | None, tuple[str, ...], str, str]] = []
    # (suffix, start, end, nodes, name, state)
    final = _STEP_STATE.get(view.state, "COMPLETED")
    lead = "interactive" if first[0] else "batch"
    steps.append((lead, view.start, end, (first[1],), lead, final))
    extern_state = "CANCELLED" if view.state in ("CANCELLED", "NODE_FAIL") else "COMPLETED"
    steps.append(("extern", view.start, end, view.nodes, "extern", extern_state))
    if traits.numbered_steps > 0:
        begin = view.start + 7
        total_end = end if end is not None else None
        if traits.numbered_steps == 2:
            span = (job.runtime if job.runtime else 120) // 3
            middle = begin + max(30, span)
            if total_end is None or middle < total_end:
                steps.append(("0", begin, middle if middle <= as_of else None, view.nodes,
                              "prep", "COMPLETED"))  # fmt: skip
                if middle <= as_of:
                    steps.append(("1", middle + 3, total_end, view.nodes, "train", final))
            else:
                steps.append(("0", begin, total_end, view.nodes, "train", final))
        elif total_end is None or begin < total_end:
            steps.append(("0", begin, total_end, view.nodes, "train", final))
    records = []
    for suffix, start, stop, nodes, name, state in steps:
        if start > as_of:
            continue
        step_running = running and stop is None
        gpus = per_node * len(nodes)
        records.append(
            {
                "jobid": f"{view.job_id}.{suffix}",
                "jobidraw": f"{view.raw_id}.{suffix}",
                "cluster": cluster,
                "partition": "",
                "qos": "",
                "account": job.account,
                "group": "",
                "gid": "",
                "user": "",
                "uid": "",
                "submit": fmt_ts(start),
                "eligible": fmt_ts(start),
                "start": fmt_ts(start),
                "end": "Unknown" if stop is None else fmt_ts(stop),
                "elapsed": slurm_duration((as_of if stop is None else stop) - start),
                "exitcode": "0:0" if step_running else _exit_text(state, job.exit_code),
                "state": "RUNNING" if step_running else state,
                "nnodes": str(len(nodes)),
                "ncpus": str(gpus * CPUS_PER_GPU),
                "reqcpus": str(gpus * CPUS_PER_GPU),
                "reqmem": "",
                "reqtres": "",
                "alloctres": tres(traits, gpus, len(nodes)),
                "timelimit": "",
                "nodelist": node_list(tuple(nodes)),
                "jobname": name,
            }
        )
    return records


def pending_array_record(
    job: Any, base: str, tasks: Sequence[int], traits: SacctTraits, cluster: str
) -> dict[str, str]:
    """The one line sacct shows for the still pending tasks of an array (`123_[4-9,12]`)."""
    text = _task_ranges(sorted(tasks))
    view = SacctView(f"{base}_[{text}]", base, "PENDING", None, None, (), job.gpus, None)
    return sacct_job_record(job, view, traits, cluster, job.submit)


def _task_ranges(tasks: list[int]) -> str:
    parts, start, prev = [], tasks[0], tasks[0]
    for t in tasks[1:] + [None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if t is not None:
            start = prev = t
    return ",".join(parts)


def sacct_text(records: Iterable[dict[str, str]], headed: bool) -> str:
    """A dump: `|`-separated lines, with the collector's header or headerless (XDMoD order)."""
    if headed:
        names = [name.lower() for name in HEADED_FIELDS]
        lines = ["|".join(HEADED_FIELDS)]
    else:
        names = list(XDMOD_FIELDS)
        lines = []
    lines += ["|".join(record[name] for name in names) for record in records]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# the month's daily dumps

# The same three defects as the canonical format's bad rows, as malformed sacct lines.
SACCT_BAD_LINES = ("gres count is not a number", "End before Start", "Start is not a time")

JOB_NAMES = (
    "train",
    "finetune-lora",
    "eval_sweep",
    "prétraitement",
    "datenaufbereitung",
    "推理-bench",
    "ablation",
    "ckpt-merge",
    "tokenize",
    "rl_rollout",
    "md-sim",
    "embed-corpus",
    "notebook",
)


def _sacct_traits(jobs: list[Job], seed: int) -> dict[str, SacctTraits]:
    """What sacct shows of each job that is the same in every dump (drawn once per job). A MIG
    job's gres names its instance's type (`a100_1g.10gb`) next to the untyped count, as
    AllocTRES always does for a typed request."""
    rnd = random.Random(seed * 1000 + 6)
    mig_rnd = random.Random(seed * 1000 + 8)  # the other jobs' traits stay as they were
    uids = {user: 20001 + k for k, user in enumerate(USER_POOL)}
    gids = {account.name: 5001 + k for k, account in enumerate(ACCOUNTS)}
    traits: dict[str, SacctTraits] = {}
    shared: dict[tuple[str, int], SacctTraits] = {}
    for job in jobs:
        group = ("array", job.array) if job.array is not None else ("het", job.het)
        if group[1] is not None and group in shared:
            base = shared[group]
            traits[job.job_id] = dataclasses.replace(base, gres_type=SLURM_GPU_TYPES[job.gpu_model])
            continue
        uid = uids[job.user]
        draw = rnd if job.partition is None else mig_rnd
        if job.queue == "interactive":
            name, steps = "interactive" if draw.random() < 0.5 else "jupyter", 0
        else:
            name = draw.choice(JOB_NAMES)
            steps = -1 if draw.random() < 0.12 else draw.choice((0, 1, 1, 2))
        style = draw.choices(("both", "typed", "untyped"), weights=(70, 22, 8))[0]
        gres_type = SLURM_GPU_TYPES[job.gpu_model]
        if job.partition is not None:
            style, gres_type = "both", f"{gres_type}_{job.partition.profile}"
        made = SacctTraits(
            uid=uid,
            gid=gids[job.account],
            name=name,
            # the het job's components name their types: two models in one job
            gres_style="both" if job.het is not None else style,
            gres_type=gres_type,
            numbered_steps=steps,
            cancelled_by=uid if draw.random() < 0.9 else 0,  # else an administrator (root)
        )
        traits[job.job_id] = made
        if group[1] is not None:
            shared[group] = made
    return traits


def _sacct_view(job: Job, now: int) -> SacctView:
    """The job as a dump taken at ``now`` shows it (``job`` is as of the export time)."""
    cancelled_at = None
    if job.start is None:
        if job.end is not None and job.end <= now:  # gave up waiting: never ran
            state, start, end, cancelled_at = job.state, None, None, job.end
        else:
            state, start, end = "PENDING", None, None
    elif job.start > now:
        state, start, end = "PENDING", None, None
    elif job.end is None or job.end > now:
        state, start, end = "RUNNING", job.start, None
    else:
        state, start, end = job.state, job.start, job.end
    nodes = tuple(sorted({k[0] for k in job.held})) if start is not None else ()
    return SacctView(job.job_id, job.raw_id, state, start, end, nodes, job.gpus, cancelled_at)


def _dump_entries(
    jobs: list[Job], traits: dict, window: tuple[int, int], taken: int
) -> list[tuple[tuple[int, int], list[dict]]]:
    """(sort key, lines) of every job a dump covering ``window`` and taken at ``taken`` lists:
    submitted before the window ends and not over before it begins (`sacct -S -E`)."""
    w0, w1 = window
    entries = []
    pending_tasks: dict[int, list[Job]] = defaultdict(list)
    for job in jobs:
        # over (ended, or given up waiting) before the window at the export: over at the dump
        if job.submit >= w1 or (job.end is not None and job.end < w0):
            continue
        view = _sacct_view(job, taken)
        over = view.cancelled_at if view.cancelled_at is not None else view.end
        if over is not None and over < w0:
            continue
        if job.array is not None and view.state == "PENDING":
            pending_tasks[job.array].append(job)
            continue
        lines = [sacct_job_record(job, view, traits[job.job_id], CLUSTER, taken)]
        lines += sacct_step_records(job, view, traits[job.job_id], CLUSTER, taken)
        entries.append(((int(job.raw_id), 0), lines))
    for tasks in pending_tasks.values():
        base = tasks[0].job_id.split("_")[0]
        record = pending_array_record(
            tasks[0], base, [t.task for t in tasks], traits[tasks[0].job_id], CLUSTER
        )
        entries.append(((int(base), -1), [record]))
    entries.sort(key=lambda e: e[0])
    return entries


def _bad_lines(entries: list, traits: dict, jobs: list[Job], layout: Layout) -> list:
    """Entries plus one malformed line per SACCT_BAD_LINES, spread through the dump. Each
    copies a completed job under a job id used nowhere else, so it is no real job."""
    by_id = {job.job_id: job for job in jobs}
    done = [e for e in entries if e[1][0]["state"] == "COMPLETED" and e[1][0]["jobid"] in by_id]
    first_unused = max(int(job.raw_id) for job in jobs) + 1001
    out = list(entries)
    for number, defect in enumerate(SACCT_BAD_LINES):
        record = dict(done[(number + 1) * len(done) // 4][1][0])
        record["jobid"] = record["jobidraw"] = str(first_unused + number)
        job = by_id[done[(number + 1) * len(done) // 4][1][0]["jobid"]]
        if defect == "gres count is not a number":
            nodes = int(record["nnodes"])
            record["alloctres"] = tres(traits[job.job_id], job.gpus, nodes, count="abc")
        elif defect == "End before Start":
            record["start"], record["end"] = record["end"], record["start"]
        else:
            record["start"] = f"{layout.month[:4]}-13-45T99:00:00"
        out.insert((number + 1) * len(entries) // 4 + number, ((0, 0), [record]))
    return out


BAD_DUMP_DAY = 19  # the dump of the 20th carries the malformed lines
RESENT_DUMP_DAY = 8  # the dump of the 9th arrives twice
HEADER_FROM_DAY = 15  # the collector writes a header from the dump of the 16th on


def write_dumps(folder: Path, jobs: list[Job], layout: Layout, seed: int) -> dict:
    """One `sacct --parsable2` dump a day; each covers the day and the one before, so every
    job shows up in two or more dumps (its latest, most complete record must win)."""
    folder.mkdir(parents=True, exist_ok=True)
    traits = _sacct_traits(jobs, seed)
    n_days = (layout.month_end - layout.month_start) // 86400
    lines = files = 0
    pending_arrays = 0
    for day in range(n_days):
        day_start = layout.month_start + day * 86400
        final = day == n_days - 1
        day_end = layout.export_at + 1 if final else day_start + 86400
        window = (day_start - SACCT_LOOKBACK_S, day_end)
        taken = layout.export_at if final else day_start + 86400 + 300
        entries = _dump_entries(jobs, traits, window, taken)
        if day == BAD_DUMP_DAY:
            entries = _bad_lines(entries, traits, jobs, layout)
        records = [line for _, entry_lines in entries for line in entry_lines]
        pending_arrays += sum(1 for r in records if "_[" in r["jobid"])
        text = sacct_text(records, headed=day >= HEADER_FROM_DAY)
        name = f"sacct-{fmt_date(day_start)}"
        (folder / f"{name}.log").write_text(text, encoding="utf-8")
        files, lines = files + 1, lines + len(records)
        if day == RESENT_DUMP_DAY:
            (folder / f"{name}.resent.log").write_text(text, encoding="utf-8")
            files, lines = files + 1, lines + len(records)
    return {"sacct_files": files, "sacct_lines": lines, "pending_array_records": pending_arrays}
