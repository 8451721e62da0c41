"""The canonical format of DESIGN.md: jobs and allocations as CSV (the month in two dumps
that overlap, three malformed rows in the second), GPU samples as one Parquet file a day.
`samples_table` is shared with the benchmark generator.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import hostlist
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from simulator.clock import fmt_date, fmt_ts
from simulator.scheduler import state_at
from simulator.site import CLUSTER, Layout
from simulator.telemetry import atlas_telemetry, per_gpu_series, productive_share, telemetry_day
from simulator.workload import Job
from simulator.writers import write_csv

JOBS_HEADER = [
    "job_id", "cluster", "account", "user", "queue", "qos", "gpu_model", "gpus", "nodes",
    "submit_time", "start_time", "end_time", "state", "exit_code",
]  # fmt: skip

# Deliberately broken rows in the second jobs dump, one of each.
BAD_ROWS = ("gpus is not a number", "end_time before start_time", "start_time is not a timestamp")


def _job_row(job: Job, as_of: int | None = None) -> list[str]:
    """One canonical CSV row; ``as_of`` gives the record an earlier dump would have held."""
    state, start, end, held = job.state, job.start, job.end, job.held
    if as_of is not None:
        snapshot = dataclasses.replace(job, held=list(job.held))
        state_at(snapshot, as_of)
        state, start, end, held = snapshot.state, snapshot.start, snapshot.end, snapshot.held
    nodes = hostlist.collect_hostlist(sorted({key[0] for key in held})) if held else ""
    exit_code = "" if state in ("RUNNING", "PENDING") else str(job.exit_code)
    # GPU-equivalents: a MIG instance as the shortest float text of its fraction
    gpus = str(job.gpus) if job.partition is None else repr(job.gpu_eq)
    return [
        job.job_id, CLUSTER, job.account, job.user, job.queue, job.qos, job.gpu_model,
        gpus, nodes, fmt_ts(job.submit), fmt_ts(start), fmt_ts(end), state, exit_code,
    ]  # fmt: skip


def _split_exports(jobs: list[Job], layout: Layout) -> tuple[list[list[str]], list[list[str]]]:
    """Two dumps split by submit time, overlapping by ``overlap_jobs`` jobs.

    The first dump is taken mid-month: the overlapping jobs appear there as they were then
    (often RUNNING or PENDING) and again, final, in the second dump.
    """
    cut_time = layout.month_start + 15 * 86400
    cut = sum(job.submit < cut_time for job in jobs)
    overlap = jobs[cut - layout.overlap_jobs : cut]
    part1 = [_job_row(j) for j in jobs[: cut - layout.overlap_jobs]]
    part1 += [_job_row(j, as_of=cut_time) for j in overlap]
    part2 = [_job_row(j) for j in jobs[cut - layout.overlap_jobs :]]
    return part1, _with_bad_rows(part2, layout)


def _with_bad_rows(rows: list[list[str]], layout: Layout) -> list[list[str]]:
    """The rows plus one row per entry of BAD_ROWS, spread through the file.

    Each bad row copies a completed job under a job id used nowhere else, so it is no real
    job: the pipeline must reject it and lose nothing.
    """
    col = {name: i for i, name in enumerate(JOBS_HEADER)}
    finished = [r for r in rows if r[col["state"]] == "COMPLETED"]
    first_unused_id = max(int(r[col["job_id"]].split("_")[0].split("+")[0]) for r in rows) + 1001
    out = list(rows)
    for number, defect in enumerate(BAD_ROWS):
        row = list(finished[(number + 1) * len(finished) // 4])
        row[col["job_id"]] = str(first_unused_id + number)
        if defect == "gpus is not a number":
            row[col["gpus"]] = "abc"
        elif defect == "end_time before start_time":
            row[col["start_time"]], row[col["end_time"]] = (
                row[col["end_time"]],
                row[col["start_time"]],
            )
        else:
            row[col["start_time"]] = f"{layout.month[:4]}-13-45T99:00:00"
        out.insert((number + 1) * len(rows) // 4, row)
    return out


def write_scheduler(folder: Path, jobs: list[Job], layout: Layout) -> dict:
    """Canonical format: the two overlapping job dumps and the GPU allocations."""
    folder.mkdir(parents=True, exist_ok=True)
    part1, part2 = _split_exports(jobs, layout)
    write_csv(folder / f"jobs-{layout.month}-part1.csv", JOBS_HEADER, part1)
    write_csv(folder / f"jobs-{layout.month}-part2.csv", JOBS_HEADER, part2)
    allocations = [
        [job.job_id, node, str(index)] for job in jobs for node, index, *_ in sorted(job.held)
    ]
    write_csv(
        folder / f"allocations-{layout.month}.csv", ["job_id", "node", "gpu_index"], allocations
    )
    return {
        "job_rows_part1": len(part1),
        "job_rows_part2": len(part2),
        "overlap_jobs": layout.overlap_jobs,
        "bad_rows": len(BAD_ROWS),
        "allocation_rows": len(allocations),
    }


# --------------------------------------------------------------------------------------------
# GPU samples


def samples_table(
    ts: np.ndarray,
    node: pa.Array,
    gpu_index: np.ndarray,
    util: np.ndarray,
    memory: np.ndarray,
    power: np.ndarray,
) -> pa.Table:
    """Canonical GPU samples as the Parquet files hold them (`ts` in epoch seconds)."""
    return pa.table(
        {
            "ts": pa.array(
                ts.astype("datetime64[s]").astype("datetime64[us]"), type=pa.timestamp("us")
            ),
            "node": node,
            "gpu_index": pa.array(gpu_index, type=pa.int32()),
            "util_pct": pa.array(util),
            "mem_used_mib": pa.array(memory),
            "power_w": pa.array(power),
        }
    )


def write_telemetry(folder: Path, jobs: list[Job], layout: Layout, seed: int) -> dict:
    """Canonical format: one Parquet file per day of the month."""
    folder.mkdir(parents=True, exist_ok=True)
    tel = atlas_telemetry(jobs, layout, seed)
    n_days = (layout.month_end - layout.month_start) // 86400
    count = busy = productive = 0
    for day in range(n_days):
        samples = telemetry_day(tel, day, layout, np.random.default_rng([seed, 3, day]))
        written = per_gpu_series(tel, samples)
        table = samples_table(
            written.ts,
            pc.take(pa.array(tel.rows.node), pa.array(written.row)),
            tel.rows.gpu_index[written.row],
            np.round(written.util, 1),
            np.round(written.memory),
            np.round(written.power, 1),
        )
        date = fmt_date(layout.month_start + day * 86400)
        pq.write_table(table, folder / f"gpu-samples-{date}.parquet", compression="zstd")
        count, busy = count + table.num_rows, busy + samples.busy
        productive += samples.productive
    return {
        "telemetry_files": n_days,
        "telemetry_rows": count,
        "productive_share_est": productive_share(tel.rows, busy, productive),
    }
