"""`nvidia-smi --query-gpu=timestamp,index,uuid,name,utilization.gpu,memory.used,power.draw
--format=csv -l 60` logs, one per node and month: a line per GPU and sample, the header again
where the tool restarted after the node was down. The line format is shared with the benchmark
generator.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from simulator.site import GPU_NAMES, Layout
from simulator.telemetry import DaySamples, Telemetry
from simulator.writers import flat

SMI_HEADER = (
    "timestamp, index, uuid, name, utilization.gpu [%], memory.used [MiB], power.draw [W]\n"
)


def nvidia_smi_lines(
    ts: np.ndarray,
    gpu_index: np.ndarray,
    uuids: pa.Array,
    names: pa.Array,
    util: np.ndarray,
    memory: np.ndarray,
    power: np.ndarray,
    power_missing: np.ndarray | None = None,
    staggered: bool = True,
) -> pa.Array:
    """One log line per sample, ordered as given: `2026/11/01 00:00:00.103, 3, GPU-..., NVIDIA
    A100-SXM4-80GB, 87 %, 40960 MiB, 301.25 W` (`[N/A]` where `power_missing`). ``staggered``:
    the milliseconds grow with the GPU index, as nvidia-smi queries the GPUs one after another
    (else `.000`)."""
    stamp = pc.strftime(pa.array(ts.astype("datetime64[s]")), format="%Y/%m/%d %H:%M:%S")
    if staggered:
        millis = pa.array([f".{100 + 3 * g:03d}" for g in range(16)]).take(pa.array(gpu_index))
    else:
        millis = pa.scalar(".000")
    cents = np.round(power * 100).astype(np.int64)
    watts = pc.binary_join_element_wise(
        pc.cast(pa.array(cents // 100), pa.string()),
        pc.utf8_lpad(pc.cast(pa.array(cents % 100), pa.string()), 2, "0"),
        ".",
    )
    watts = pc.binary_join_element_wise(watts, " W", "")
    if power_missing is not None:
        watts = pc.if_else(pa.array(power_missing), pa.scalar("[N/A]"), watts)

    def with_unit(values: np.ndarray, unit: str) -> pa.Array:
        text = pc.cast(pa.array(np.round(values).astype(np.int64)), pa.string())
        return pc.binary_join_element_wise(text, unit, "")

    lines = pc.binary_join_element_wise(
        pc.binary_join_element_wise(stamp, millis, ""),
        pc.cast(pa.array(gpu_index), pa.string()),
        uuids,
        names,
        with_unit(util, " %"),
        with_unit(memory, " MiB"),
        watts,
        ", ",
    )
    return flat(lines)


def append_log(
    log,
    tel: Telemetry,
    day: DaySamples,
    node: str,
    last_seen: dict,
    day_number: int,
    layout: Layout,
) -> int:
    """Append a day of one node's `nvidia-smi -l 60` log: a line per GPU and sample, time
    first; the header again where the tool restarted after the node was down."""
    select = np.flatnonzero(np.isin(day.row, np.flatnonzero(tel.rows.node == node)))
    if not len(select):
        return 0
    gpu = tel.rows.gpu_index[day.row[select]]
    order = select[np.lexsort((gpu, day.ts[select]))]
    ts, rows = day.ts[order], day.row[order]
    gpu = tel.rows.gpu_index[rows]
    # one GPU of the first node fails to read its power for a day: nvidia-smi writes [N/A]
    missing = (node == layout.smi_nodes[0]) & (gpu == 6) & (day_number == 2)
    names = pa.array([GPU_NAMES[m] for m in tel.rows.model])
    lines = nvidia_smi_lines(
        ts,
        gpu,
        pa.array(tel.rows.uuid).take(pa.array(rows)),
        names.take(pa.array(rows)),
        day.util[order],
        day.memory[order],
        day.power[order],
        missing,
    ).to_pylist()
    moments = np.unique(ts)
    previous = np.concatenate(
        [[last_seen[node] if last_seen[node] is not None else moments[0]], moments[:-1]]
    )
    restarts = set(moments[(moments - previous) > 10 * layout.step_s].tolist())
    if last_seen[node] is None:
        log.write(SMI_HEADER)
    first_line = {t: i for i, t in reversed(list(enumerate(ts.tolist())))}
    cut = sorted(first_line[t] for t in restarts) + [len(lines)]
    log.write("".join(line + "\n" for line in lines[: cut[0]]))
    for begin, end in zip(cut, cut[1:], strict=False):
        log.write(SMI_HEADER + "".join(line + "\n" for line in lines[begin:end]))
    last_seen[node] = int(moments[-1])
    return len(lines)
