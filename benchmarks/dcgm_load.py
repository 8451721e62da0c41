"""Time the DCGM (Prometheus query_range JSON) converter on a generated month, per layout.

Generates a month of DCGM exporter data for `--gpus` GPUs (8 per node) sampled every `--step`
seconds as Prometheus would return it, one `/api/v1/query_range` body per day and metric
(`per-metric`, the usual export: one query per metric) or per day with all four metrics
(`combined`), then converts every file with `pipelines.formats.dcgm.to_parquet` as the
pipeline does (in one process, CONVERSION_THREADS files at once: DuckDB parses one JSON body on
one thread; `--threads 1` gives one file after the other) and prints, per layout:

    samples/s   GPU-timestamps converted per second (a sample: one GPU at one timestamp with
                its four metrics, whichever layout carries them): the issue's measure
    points/s    metric values read per second (4 per sample)
    rows/s      canonical rows written per second (per-metric: a row per point; combined: a row
                per sample)

Each layout is converted in its own Python process, so that its peak RSS (VmHWM) is its own;
CPU-seconds (all threads) are printed too: on the shared machine they say more than the wall
time. The figures are merged into benchmarks/results/latest.json under `dcgm_load`.

    .venv/bin/python benchmarks/dcgm_load.py                      # 256 GPUs, 30 days, 60 s
    .venv/bin/python benchmarks/dcgm_load.py --layout combined --days 7
    .venv/bin/python benchmarks/dcgm_load.py --baseline /tmp/old/dcgm.py
    .venv/bin/python benchmarks/dcgm_load.py --threads 1          # one file after the other

`--baseline FILE` times another copy of the converter module (a dcgm.py of an earlier commit:
`git show main:pipelines/formats/dcgm.py > /tmp/old/dcgm.py`) on the same files, right before
the current one for each layout, and reports the ratio: on this noisy machine only runs
seconds apart compare. Generated files are deterministic (the same seed gives the same files)
and cached under `--work` by their parameters. Not run by pytest.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402  (after the repository is on the path, as the imports below)
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from pipelines.catalog import ClusterSettings  # noqa: E402
from pipelines.defs.ingest.telemetry import CONVERSION_THREADS  # noqa: E402
from pipelines.formats import dcgm  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "latest.json"
SECTION = "dcgm_load"
LAYOUTS = ("per-metric", "combined")
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


def month_files(work: Path, args: argparse.Namespace, layout: str) -> tuple[Path, dict]:
    """The generated files of a layout, from the cache under `work` when they are there."""
    folder = work / f"g{args.gpus}-d{args.days}-s{args.step}-seed{args.seed}-{layout}"
    stamp = folder / "generated.json"  # written last: a folder without it is incomplete
    if stamp.exists():
        return folder, json.loads(stamp.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("dcgm_*.json"):
        old.unlink()
    started = time.perf_counter()
    points = write_month(folder, args.gpus, args.days, args.step, layout, args.seed)
    files = sorted(folder.glob("dcgm_*.json"))
    info = {
        "files": len(files),
        "points": points,
        "samples": args.gpus * args.days * (86_400 // args.step),
        "mib": round(sum(f.stat().st_size for f in files) / 2**20, 1),
    }
    stamp.write_text(json.dumps(info))
    print(
        f"generated {layout}: {info['files']} files, {points:,} points, {info['mib']:,.0f} MiB "
        f"in {time.perf_counter() - started:.1f} s ({folder})",
        flush=True,
    )
    return folder, info


def peak_rss_mib() -> int:
    """This process's peak resident memory (VmHWM; not ru_maxrss, which Linux carries across
    exec from the parent)."""
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return round(kib / 1024)


def convert_all(folder: Path, converter: str | None, threads: int) -> dict:
    """In a child process: convert every file of `folder` with `to_parquet` of the current
    module, or of the module file `converter`, `threads` files at once (the pipeline converts
    CONVERSION_THREADS at once)."""
    module = dcgm
    if converter:
        spec = importlib.util.spec_from_file_location("dcgm_baseline", converter)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    out = folder / "converted"
    out.mkdir(exist_ok=True)
    files = sorted(folder.glob("dcgm_*.json"))
    started, cpu_started = time.perf_counter(), time.process_time()

    def convert(path: Path) -> int:
        return module.to_parquet(path, out / f"{path.stem}.parquet", ClusterSettings())

    with ThreadPoolExecutor(max_workers=threads) as pool:
        rows = sum(pool.map(convert, files))
    return {
        "seconds": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu_started,  # all threads of this process
        "rows": rows,
        "peak_rss_mib": peak_rss_mib(),
    }


def measure(folder: Path, info: dict, converter: str | None, threads: int) -> dict:
    """Convert the layout's files in a fresh process; its figures."""
    load = os.getloadavg()[0]
    proc = subprocess.run(
        [sys.executable, __file__, "_convert", str(folder), converter or "", str(threads)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"conversion failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    run = json.loads(lines[-1].removeprefix("RESULT "))
    seconds = run["seconds"]
    return {
        "seconds": round(seconds, 2),
        "cpu_s": round(run["cpu_s"], 2),
        "samples_per_s": round(info["samples"] / seconds),
        "points_per_s": round(info["points"] / seconds),
        "rows_per_s": round(run["rows"] / seconds),
        "mib_per_s": round(info["mib"] / seconds, 1),
        "rows": run["rows"],
        "peak_rss_mib": run["peak_rss_mib"],
        "load_avg": round(load, 2),
    }


def show(label: str, layout: str, m: dict) -> None:
    print(
        f"  {label:<8} {layout:<10} {m['seconds']:6.1f} s ({m['cpu_s']:5.1f} CPU-s): "
        f"{m['samples_per_s'] / 1e6:5.2f} M samples/s, {m['points_per_s'] / 1e6:5.2f} M points/s,"
        f" {m['rows_per_s'] / 1e6:5.2f} M rows/s; peak RSS {m['peak_rss_mib']:,} MiB"
        f" (load {m['load_avg']:.1f})",
        flush=True,
    )


def save(section: dict) -> None:
    """Merge this benchmark's section into latest.json, leaving the other sections as they are."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    latest = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    latest[SECTION] = section
    RESULTS.write_text(json.dumps(latest, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)} ({SECTION})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--step", type=int, default=60, help="sample spacing, seconds")
    parser.add_argument("--layout", choices=(*LAYOUTS, "both"), default="both")
    parser.add_argument("--seed", type=int, default=20261101)
    parser.add_argument(
        "--work",
        type=Path,
        default=Path("/tmp/chargeback-bench/dcgm"),
        help="where generated files go (cached by parameters)",
    )
    parser.add_argument("--baseline", type=Path, help="a converter module file to compare with")
    parser.add_argument("--no-save", action="store_true", help="do not write latest.json")
    parser.add_argument(
        "--threads",
        type=int,
        default=CONVERSION_THREADS,
        help=f"files converted at once (default: the pipeline's, {CONVERSION_THREADS} here)",
    )
    args = parser.parse_args()

    layouts = LAYOUTS if args.layout == "both" else (args.layout,)
    results = {}
    for layout in layouts:
        folder, info = month_files(args.work, args, layout)
        print(
            f"{layout}: {info['files']} files, {info['samples']:,} samples, "
            f"{info['points']:,} points, {info['mib']:,.0f} MiB",
            flush=True,
        )
        result = {**info}
        if args.baseline:
            result["baseline"] = measure(folder, info, str(args.baseline.resolve()), args.threads)
            show("baseline", layout, result["baseline"])
        result["current"] = measure(folder, info, None, args.threads)
        show("current", layout, result["current"])
        if args.baseline:
            result["speedup_x"] = round(
                result["baseline"]["seconds"] / result["current"]["seconds"], 2
            )
            print(f"  speedup {result['speedup_x']:.2f}x", flush=True)
        results[layout] = result
    if not args.no_save:
        save(
            {
                "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
                "command": " ".join(["benchmarks/dcgm_load.py", *sys.argv[1:]]),
                "gpus": args.gpus,
                "days": args.days,
                "step_s": args.step,
                "threads": args.threads,
                "target_samples_per_s": 1_000_000,
                "layouts": results,
            }
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_convert":
        result = convert_all(Path(sys.argv[2]), sys.argv[3] or None, int(sys.argv[4]))
        print("RESULT " + json.dumps(result), flush=True)
    else:
        main()
