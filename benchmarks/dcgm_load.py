"""Time the DCGM (Prometheus query_range JSON) converter on a generated month.

Generates a month of DCGM exporter data for `--gpus` GPUs (8 per node) sampled every `--step`
seconds as Prometheus would return it, one `/api/v1/query_range` body per day and metric
(`--layout per-metric`, the usual export: one query per metric) or per day with all four metrics
(`--layout combined`), then converts every file with `pipelines.formats.dcgm.to_parquet` as the
pipeline does and prints rows/s (sample rows written) and points/s (values read). With one file
per metric every point is a row; combined, the four points of a GPU and minute make one row.
Deterministic: the same seed gives the same files. CPU-seconds are printed too: on a busy
machine they say more than the wall time.

    .venv/bin/python benchmarks/dcgm_load.py                      # 256 GPUs, 30 days, 60 s
    .venv/bin/python benchmarks/dcgm_load.py --layout combined --days 7

Not run by pytest. Files go to a temporary folder, removed at the end unless `--keep DIR`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.catalog import ClusterSettings
from pipelines.formats import dcgm

GPUS_PER_NODE = 8
MONTH_START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def day_points(rng: np.random.Generator, gpus: int, day: int, step: int) -> dict[str, np.ndarray]:
    """One day of the four metrics for every GPU: jobs hours long, some of them idle."""
    per_day = 86_400 // step
    first = int(MONTH_START.timestamp()) + day * 86_400
    ts = first + step * np.arange(per_day, dtype=np.int64)
    hours = per_day * step // 3600 + 1
    # each GPU-hour is busy (60-100 %), idle (0-3 %) or unused (0 %)
    state = rng.choice(3, size=(gpus, hours), p=[0.6, 0.15, 0.25])
    hour_of_point = (np.arange(per_day) * step) // 3600
    busy = state[:, hour_of_point]
    noise = rng.random((gpus, per_day))
    util = np.where(busy == 0, 60 + 40 * noise, np.where(busy == 1, 3 * noise, 0.0))
    memory = np.where(busy == 2, 0.0, np.where(busy == 0, 40_000, 2_000) + 30_000 * noise)
    power = 60 + 3.4 * util + 10 * noise
    return {
        "ts": np.broadcast_to(ts, (gpus, per_day)),
        dcgm.GR_ENGINE_ACTIVE: np.round(util / 100 * (0.85 + 0.1 * noise), 6),
        dcgm.GPU_UTIL: np.round(util),
        dcgm.FB_USED: np.round(memory),
        dcgm.POWER_USAGE: np.round(power, 3),
    }


def write_month(folder: Path, gpus: int, days: int, step: int, layout: str, seed: int) -> int:
    """Write the JSON files; returns the number of points written."""
    rng = np.random.default_rng(seed)
    labels = [
        {
            "Hostname": f"gpu-{n // GPUS_PER_NODE:03d}",
            "gpu": str(n % GPUS_PER_NODE),
            "UUID": f"GPU-{seed % 10**8:08d}-{n:04d}",
            "modelName": "NVIDIA A100-SXM4-80GB",
            "DCGM_FI_DRIVER_VERSION": "550.54.15",
        }
        for n in range(gpus)
    ]
    groups = [[m] for m in dcgm.METRICS] if layout == "per-metric" else [list(dcgm.METRICS)]
    written = 0
    for day in range(days):
        data = day_points(rng, gpus, day, step)
        per_day = data["ts"].shape[1]
        offsets = pa.array(np.arange(gpus + 1, dtype=np.int32) * per_day)
        times = pc.cast(pa.array(data["ts"].ravel()), pa.string())
        for metrics in groups:
            series = []
            for metric in metrics:
                # Prometheus sends each value as a string: [1793491200,"87"]
                values = pc.cast(pa.array(data[metric].ravel()), pa.string())
                pairs = pc.binary_join_element_wise("[", times, ',"', values, '"]', "")
                joined = pc.binary_join(pa.ListArray.from_arrays(offsets, pairs), ",")
                for gpu, text in enumerate(joined.to_pylist()):
                    metric_labels = json.dumps(
                        {"__name__": metric, **labels[gpu]}, separators=(",", ":")
                    )
                    series.append(f'{{"metric":{metric_labels},"values":[{text}]}}')
                written += len(pairs)
            name = "all" if len(metrics) > 1 else metrics[0]
            body = (
                '{"status":"success","data":{"resultType":"matrix","result":['
                + ",".join(series)
                + "]}}"
            )
            (folder / f"dcgm_{day + 1:02d}_{name}.json").write_text(body, encoding="utf-8")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--step", type=int, default=60, help="sample spacing, seconds")
    parser.add_argument("--layout", choices=("per-metric", "combined"), default="per-metric")
    parser.add_argument("--seed", type=int, default=20261101)
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="dcgm_load_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        points = write_month(folder, args.gpus, args.days, args.step, args.layout, args.seed)
        files = sorted(folder.glob("dcgm_*.json"))
        size = sum(f.stat().st_size for f in files)
        print(
            f"generated {len(files)} files, {points:,} points, {size / 2**20:,.0f} MiB "
            f"in {time.perf_counter() - started:.1f} s"
        )
        out = folder / "converted"
        out.mkdir(exist_ok=True)
        rows = 0
        started, cpu_started = time.perf_counter(), time.process_time()
        for path in files:
            rows += dcgm.to_parquet(path, out / f"{path.stem}.parquet", ClusterSettings())
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu_started  # all threads; tells apart a busy machine
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
        print(
            f"to_parquet: {rows:,} sample rows from {points:,} points in {seconds:.1f} s "
            f"({cpu:.1f} CPU-s): {rows / seconds:,.0f} rows/s, {points / seconds:,.0f} points/s, "
            f"{size / 2**20 / seconds:,.0f} MiB/s; peak RSS {peak:,.0f} MiB"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
