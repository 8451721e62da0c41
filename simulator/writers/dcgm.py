"""DCGM exporter metrics as the JSON body of Prometheus `/api/v1/query_range`, a file per day
and metric. `atlas`: GPU_UTIL (A100 nodes) and GR_ENGINE_ACTIVE (H100 and MIG nodes: DCGM has no
GPU_UTIL under MIG) at the scrape's step, FB_USED at 5 minutes, one series per GPU, the nodes
without DCGM logging with nvidia-smi instead; `kube`: GR_ENGINE_ACTIVE and FB_USED labelled
with the pod holding the GPU (a MIG instance its own series, a time-sliced GPU one series with
no pod). The body functions are shared with the benchmark generator.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from simulator.clock import fmt_date
from simulator.kube import Pod
from simulator.site import A100, H100, KubeLayout, Layout
from simulator.telemetry import (
    DaySamples,
    Telemetry,
    atlas_telemetry,
    kube_telemetry,
    per_gpu_series,
    productive_share,
    started,
    telemetry_day,
)
from simulator.workload import Job
from simulator.writers import flat
from simulator.writers.nvidia_smi import append_log


def value_text(values: np.ndarray, decimals: int) -> pa.Array:
    """Sample values as Prometheus writes them (strings): integers or rounded decimals."""
    if decimals == 0:
        return pc.cast(pa.array(np.round(values).astype(np.int64)), pa.string())
    return pc.cast(pa.array(np.round(values, decimals)), pa.string())


def series_values(ts: np.ndarray, values: pa.Array, offsets: np.ndarray) -> list[str]:
    """The `values` text of each series of a query_range body, `[1793491200,"87"],...`: series
    k holds the points `offsets[k]:offsets[k+1]` of (`ts` epoch seconds, `values` text)."""
    pairs = pc.binary_join_element_wise(
        "[", pc.cast(pa.array(ts), pa.string()), ',"', values, '"]', ""
    )
    lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), flat(pairs))
    return [text or "" for text in pc.binary_join(lists, ",").to_pylist()]


def query_range_document(series: Iterable[tuple[str, str]]) -> str:
    """A `/api/v1/query_range` response body of (labels as JSON, `series_values` text) series,
    in the order given."""
    result = ",".join(f'{{"metric":{metric},"values":[{text}]}}' for metric, text in series)
    return '{"status":"success","data":{"resultType":"matrix","result":[' + result + "]}}\n"


def query_range_body(
    labels: list[dict[str, str]], ts: np.ndarray, values: pa.Array, offsets: np.ndarray
) -> str:
    """The body Prometheus returns for series k with `labels[k]` and the points
    `offsets[k]:offsets[k+1]` of (`ts` epoch seconds, `values` text): series sorted by their
    label sets, labels compact with sorted keys."""
    texts = series_values(ts, values, offsets)
    series = sorted(
        (sorted(label.items()), json.dumps(label, separators=(",", ":"), sort_keys=True), text)
        for label, text in zip(labels, texts, strict=True)
    )
    return query_range_document((metric, text) for _, metric, text in series)


# --------------------------------------------------------------------------------------------
# the month's files

DCGM_UTIL = {A100: "DCGM_FI_DEV_GPU_UTIL", H100: "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
# Memory changes slowly: its query_range step is 5 minutes (utilisation keeps the scrape's
# 60 s). This keeps `make demo` within its time budget: ~18 M samples instead of ~29 M.
FB_USED_STEP_S = 300
GR_ENGINE_ACTIVE, FB_USED = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED"


def _dcgm_body(
    tel: Telemetry,
    day: DaySamples,
    select: np.ndarray,
    metric: str,
    values: np.ndarray,
    decimals: int,
    pod_labels: list[dict] | None = None,
) -> tuple[str, int]:
    """The query_range body of one metric over the selected samples, and its point count.

    Without ``pod_labels`` a GPU is one series; with them (Kubernetes) each pod that held the
    GPU makes a series of its own, as the exporter's `pod` label changes with the holder.
    """
    row, ts, vals = day.row[select], day.ts[select], values[select]
    holder = day.job[select] if pod_labels is not None else np.full(len(row), -1)
    order = np.lexsort((ts, holder, row))
    row, ts, vals, holder = row[order], ts[order], vals[order], holder[order]
    starts = np.flatnonzero(
        np.concatenate([[True], (row[1:] != row[:-1]) | (holder[1:] != holder[:-1])])
    )
    offsets = np.append(starts, len(row))
    labels = []
    for first in starts:
        label = {"__name__": metric, **tel.rows.labels[row[first]]}
        if holder[first] >= 0 and pod_labels is not None:
            label |= pod_labels[holder[first]]
        labels.append(label)
    body = query_range_body(labels, ts, value_text(vals, decimals), offsets)
    return body, len(row)


def write_atlas_telemetry(folder: Path, jobs: list[Job], layout: Layout, seed: int) -> dict:
    """DCGM query_range bodies (a file per day and metric) for most nodes, nvidia-smi logs for
    the nodes in ``layout.smi_nodes``."""
    dcgm, smi = folder / "dcgm", folder / "nvidia-smi"
    dcgm.mkdir(parents=True, exist_ok=True)
    smi.mkdir(parents=True, exist_ok=True)
    tel = atlas_telemetry(jobs, layout, seed)
    rows = tel.rows
    on_smi = np.isin(rows.node, layout.smi_nodes)
    # DCGM has no GPU_UTIL for a MIG GPU: its MIG nodes report GR_ENGINE_ACTIVE like the H100s
    engine_active = (rows.model == H100) | (rows.mode == "mig")
    metrics = (
        (DCGM_UTIL[A100], ~on_smi & ~engine_active, "util", 1.0, 0, layout.step_s),
        (GR_ENGINE_ACTIVE, ~on_smi & engine_active, "util", 0.01, 4, layout.step_s),
        (FB_USED, ~on_smi, "memory", 1.0, 0, max(layout.step_s, FB_USED_STEP_S)),
    )
    logs = {
        node: (smi / f"{node}_{layout.month}.csv").open("w", encoding="utf-8", newline="\n")
        for node in layout.smi_nodes
    }
    last_seen: dict[str, int | None] = dict.fromkeys(layout.smi_nodes)
    n_days = (layout.month_end - layout.month_start) // 86400
    files = points = smi_lines = busy = productive = 0
    try:
        for day in range(n_days):
            samples = telemetry_day(tel, day, layout, np.random.default_rng([seed, 3, day]))
            busy, productive = busy + samples.busy, productive + samples.productive
            samples = per_gpu_series(tel, samples)
            date = fmt_date(layout.month_start + day * 86400)
            for metric, wanted, column, scale, decimals, step in metrics:
                select = wanted[samples.row] & (samples.ts % step == 0)
                if not select.any():
                    continue
                values = getattr(samples, column) * scale
                body, count = _dcgm_body(tel, samples, select, metric, values, decimals)
                name = metric.removeprefix("DCGM_FI_").lower()
                (dcgm / f"dcgm_{name}_{date}.json").write_text(body, encoding="utf-8")
                files, points = files + 1, points + count
            for node, log in logs.items():
                smi_lines += append_log(log, tel, samples, node, last_seen, day, layout)
    finally:
        for log in logs.values():
            log.close()
    return {
        "dcgm_files": files,
        "dcgm_points": points,
        "nvidia_smi_files": len(logs),
        "nvidia_smi_lines": smi_lines,
        "productive_share_est": productive_share(rows, busy, productive),
    }


def write_kube_telemetry(
    folder: Path, pods: list[Pod], layout: Layout, kl: KubeLayout, seed: int
) -> dict:
    """DCGM GR_ENGINE_ACTIVE and FB_USED, a file per day and metric, with the labels of the pod
    holding each GPU or MIG instance (a time-sliced GPU's series has none)."""
    dcgm = folder / "dcgm"
    dcgm.mkdir(parents=True, exist_ok=True)
    tel = kube_telemetry(pods, layout, kl, seed)
    rows = tel.rows
    pod_labels = [
        {"container": p.container, "namespace": p.namespace, "pod": p.name} for p in started(pods)
    ]
    n_days = (layout.month_end - layout.month_start) // 86400
    files = points = busy = productive = 0
    for day in range(n_days):
        samples = telemetry_day(tel, day, layout, np.random.default_rng([seed, 13, day]))
        busy, productive = busy + samples.busy, productive + samples.productive
        samples = per_gpu_series(tel, samples)
        date = fmt_date(layout.month_start + day * 86400)
        for metric, column, scale, decimals, step in (
            (GR_ENGINE_ACTIVE, "util", 0.01, 4, layout.step_s),
            (FB_USED, "memory", 1.0, 0, max(layout.step_s, FB_USED_STEP_S)),
        ):
            values = getattr(samples, column) * scale
            select = samples.ts % step == 0
            body, count = _dcgm_body(tel, samples, select, metric, values, decimals, pod_labels)
            name = metric.removeprefix("DCGM_FI_").lower()
            (dcgm / f"dcgm_{name}_{date}.json").write_text(body, encoding="utf-8")
            files, points = files + 1, points + count
    mig = rows.mode == "mig"
    return {
        "dcgm_files": files,
        "dcgm_points": points,
        "productive_share_est": productive_share(rows, busy, productive),
        "mig_productive_share_est": productive_share(rows, busy * mig, productive * mig),
    }
