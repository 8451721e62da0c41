"""Generate a realistic, deterministic demo month of GPU cluster exports for two clusters.

`atlas` (Slurm, 34 nodes x 8 GPUs, A100 and H100) is simulated from a few days before the billing
month up to the export time (06:00 on the first day of the next month): jobs, job arrays and a
heterogeneous job are submitted, placed by a simple scheduler onto free GPUs (no GPU is ever held
by two jobs at once), hit an outage, run over the month boundaries, and leave GPU telemetry behind.
Two of its A100 nodes are MIG-partitioned: gpu-m01 into 7 x 1g.10gb per GPU (Jupyter sessions,
a quarter of them forgotten, and short batch work; a workshop on the 10th fills a GPU), gpu-m02
into 2 x 3g.40gb (fine-tuning and evaluation; the seventh compute slice of each GPU is never
allocated). Their jobs ask for one instance by gres type (`--gres=gpu:a100_1g.10gb:1`): 1/7 or
3/7 of a GPU.
`kube` (Kubernetes, 7 nodes x 8 GPUs) runs training pods queued by Kueue, inference deployments,
notebooks and batch pods on MIG slices (kube-m01: 7 x 1g.10gb per A100), and on kube-ts01, whose
A100s are time-sliced into 4 replicas each (a sharing pool in settings.yaml), notebooks,
development servers and a playground deployment asking for one `nvidia.com/gpu` (1/4 of a GPU),
up to four on a GPU at once (a course on the 10th fills one).

The month shows each capacity verdict (`capacity_evidence`): the A100 pools carry the waste
(forgotten notebooks, on whole GPUs, MIG slices and time-sliced replicas alike, jobs waiting on
data) and bio's barely used guarantee of 30 % of the pool, so both A100 rows say `govern first`;
atlas's H100 partition takes only tuned batch work (no interactive sessions, data staged on
local NVMe, jobs smoke-tested on A100 first, assist's retraining cron) and stays saturated with
long waits: `expansion justified`; kube's H100 pool (inference replicas serving steady traffic,
Kueue training) is moderately allocated with modest waste: `hold`. `make demo` (seed 7, rate
card) bills the month 509,839.11 USD: atlas 433,151.35, kube 76,687.76.

By default the month is written in the formats the sites really export (`--format real`):

    <out>/landing/scheduler/atlas/sacct-<YYYY-MM-DD>.log    daily `sacct --parsable2` dumps, each
        covering two days (so they overlap), headerless in the Open XDMoD field order until the
        15th, with the collector's header (its own order) from the 16th; one dump sent twice;
        job steps, array tasks and pending array records, a het job, `CANCELLED by <uid>`,
        lower-case gres types (`gres/gpu:a100=4`), MIG instances as the untyped count plus the
        typed profile (`gres/gpu:a100_3g.40gb=1,gres/gpu=1`), three malformed lines
    <out>/landing/telemetry/atlas/dcgm/dcgm_<metric>_<YYYY-MM-DD>.json   Prometheus query_range
        bodies: GPU_UTIL (A100 nodes) and GR_ENGINE_ACTIVE (H100 and MIG nodes: DCGM has no
        GPU_UTIL under MIG) at a 60 s step, FB_USED at 5 minutes (keeps `make demo` within its
        time: ~19 M samples, not ~31 M); the MIG nodes one series per GPU (its instances'
        slice-weighted activity and summed memory: atlas's Prometheus keeps per-GPU series)
    <out>/landing/telemetry/atlas/nvidia-smi/<node>_<YYYY-MM>.csv   the nodes without DCGM
    <out>/landing/scheduler/kube/pods-<YYYY-MM-DDTHH-MM-SSZ>.json   `kubectl get pods -A -o json`
        every 6 hours; a terminated pod stays listed for 12 h (Job TTL / Kueue finalizer), so its
        final state is always seen
    <out>/landing/telemetry/kube/dcgm/dcgm_<metric>_<YYYY-MM-DD>.json   GR_ENGINE_ACTIVE (60 s)
        and FB_USED (5 min) with the `pod` / `namespace` labels of the pod holding the GPU (one
        series per GPU and pod, as Prometheus returns them); the MIG node reports per GPU
        instance (`GPU_I_ID`, `GPU_I_PROFILE`); a time-sliced GPU is one series with no pod
        labels (the exporter cannot tell its replicas apart)
    <out>/landing/scheduler/atlas/sacctmgr-{assoc,qos}-<YYYY-MM-DD>.psv   `sacctmgr show assoc|qos
        --parsable2` at the export time: the catalog's quotas as GrpTRES GPU limits, with
        drift on purpose (simulator/writers/quotas.py names each disagreement)
    <out>/landing/scheduler/kube/kueue-objects-<YYYY-MM-DD>.json   Kueue ResourceFlavors,
        ClusterQueues (one per tenant, cohort `gpu`) and LocalQueues, with drift on purpose
    <out>/catalog/settings.yaml, tenants.yaml, rates.yaml, quotas.yaml, budgets.yaml,
                  outages.yaml, nodes.csv            both clusters; settings.yaml declares
                  kube-ts* a time-slicing pool of 4 replicas (MIG needs no declaration)

Neither scheduler exports GPU indices. The pipeline then assigns them lowest-free-first in start
order (`pipelines/defs/ingest/loading.py::assign_gpu_indices`, Slurm's and the device plugin's
default; a MIG instance or replica to the lowest GPU with room for its share); the demo places
its GPUs by that same rule, over exactly the jobs the exports list (the first sacct dump also
covers the day before the month, the first pod list pods ended in the 12 hours before), so
every sample lands on the jobs that really held the GPU. Every GPU of a shared node is cut
alike (one MIG profile per node), so that rule is also a placement the hardware allows.

`--format canonical` writes `atlas` alone in the canonical formats of DESIGN.md instead:

    <out>/landing/scheduler/atlas/jobs-<M>-part1.csv, jobs-<M>-part2.csv, allocations-<M>.csv
        (a MIG job's `gpus` is its fraction of a GPU, `0.14285714285714285`; its allocation row
        the GPU holding its instance)
    <out>/landing/telemetry/atlas/gpu-samples-<YYYY-MM-DD>.parquet   (one file per day of M; a
        MIG GPU is one device)

`--history-months N` (`make demo`: 2) simulates the N months before the month in the same run,
from six days before the first of them: jobs and pods run across the month boundaries, each
month's exports show them as of that month's export time, and GPU indices are numbered over
every job any export lists (as the pipeline replays them). Counts of submissions stay the
month's density less 10 % a month back (`Layout.demand_at`); the history months sample at 5
minutes and share the month's catalog (its budgets repeated for each); the month's incidents
happen in the month only.

`--small` (atlas 6 nodes, kube 3 nodes, 5-minute samples) has every case of the full month and
is written in a few seconds. `--gzip` then compresses every text export to `<name>.gz`, as
sites often ship them (Parquet stays as it is). Same month, seed, size, format and `--gzip`
give byte-identical files.
Usage:

    python -m simulator --month 2026-11 --out data [--seed 7] [--history-months 2] [--small]
        [--format canonical] [--gzip]
        [--cost-mode full_recovery [--idle-sharing weighted|even|reserved_quota_first|platform]]
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import random
import shutil
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from pipelines.catalog import Settings
from simulator import catalog, figures, kube, scheduler, site, workload
from simulator.site import A100, CLUSTER, GPUS_PER_NODE, KUBE, SACCT_LOOKBACK_S
from simulator.writers import canonical, dcgm, kubernetes, slurm
from simulator.writers import quotas as quota_configs

# the values settings.yaml accepts (pipelines.catalog.Settings)
COST_MODES = get_args(Settings.model_fields["cost_mode"].annotation)
IDLE_SHARING = get_args(Settings.model_fields["idle_sharing"].annotation)

FORMATS = ("real", "canonical")


def generate_demo(
    out_dir: Path,
    month: str = "2026-11",
    seed: int = 7,
    small: bool = False,
    export_format: str = "real",
    cost_mode: str = "rate_card",
    idle_sharing: str = "weighted",
    history_months: int = 0,
) -> dict:
    """Write ``<out_dir>/landing`` and ``<out_dir>/catalog`` for one demo month, and for the
    ``history_months`` months before it (one simulation over all of them: jobs run across
    the month boundaries; the month's events happen in the month itself).

    ``export_format`` 'real' writes both clusters as sites export them (sacct dumps, pod
    lists, DCGM and nvidia-smi telemetry); 'canonical' writes `atlas` alone in the canonical
    CSV / Parquet formats. Both folders are wiped and rewritten; nothing else under
    ``out_dir`` is touched. Returns counts and headline figures of what was written.
    """
    if export_format not in FORMATS:
        raise ValueError(f"export_format must be one of {FORMATS}, not {export_format!r}")
    if history_months < 0:
        raise ValueError(f"history_months must be 0 or more, not {history_months}")
    out_dir = Path(out_dir)
    layout = site.make_layout(month, small, history_months)
    all_jobs = workload.job_requests(random.Random(seed * 1000 + 1), layout)
    scheduler.schedule(random.Random(seed * 1000 + 2), all_jobs, layout)
    scheduler.schedule_mig(random.Random(seed * 1000 + 3), all_jobs, layout)
    jobs = scheduler.exported_jobs(all_jobs, layout)
    # GPUs numbered over every job the exports list: the first sacct dump also covers the day
    # before the first month; the canonical files list the month's jobs
    real = export_format == "real"
    listed_after = layout.first_month_start - (SACCT_LOOKBACK_S + 1 if real else 0)
    scheduler.lowest_free_first(
        [job for job in all_jobs if job.partition is None], layout, listed_after
    )
    partitions = {n.name: n.partition for n in layout.nodes if n.partition}
    scheduler.renumber_shared(all_jobs, layout, partitions, listed_after)
    kl = site.make_kube_layout(layout) if real else None
    pods = kube.simulate_month(seed, layout, kl) if real else []

    quotas = catalog.quotas_for(jobs + pods, layout)
    vision_limit = next(
        q["limit_gpus"] for q in quotas if (q["tenant"], q["pool"]) == ("vision", A100)
    )
    vision_peak = figures.concurrency(jobs, layout)["vision", A100][1]
    figures.verify_jobs(jobs, layout, vision_peak, vision_limit)
    if real:
        figures.verify_pods(pods, layout)

    for folder in ("landing", "catalog"):
        if (out_dir / folder).exists():
            shutil.rmtree(out_dir / folder)
    landing = out_dir / "landing"
    summary: dict = {"month": month, "seed": seed, "small": small, "format": export_format}
    exports = _MonthExports(landing, all_jobs, jobs, pods, quotas, kl, seed, real)
    written = _write_exports(exports, layout.month_views())
    atlas = {"jobs": len(jobs)} | written[CLUSTER]
    catalog.write_catalog(
        out_dir / "catalog", jobs + pods, quotas, layout, seed, kl, cost_mode, idle_sharing
    )

    atlas |= figures.cluster_figures(jobs, layout, figures.capacity_gpu_hours(layout))
    states = Counter(job.state for job in jobs)
    atlas |= {
        "nodes": len(layout.nodes),
        "mig_jobs": dict(
            sorted(Counter(j.partition.profile for j in jobs if j.partition and j.start).items())
        ),
        "vision_peak_a100_gpus": vision_peak,
        "vision_limit_a100_gpus": vision_limit,
        "states": dict(sorted(states.items())),
    }
    summary[CLUSTER] = atlas
    if real:
        kube_summary = {
            "pods": sum(1 for p in pods if p.gpus),
            "system_pods": sum(1 for p in pods if not p.gpus),
        }
        kube_summary |= written[KUBE]
        month_h = (layout.month_end - layout.month_start) / 3600
        kube_summary |= figures.cluster_figures(
            pods, layout, len(kl.nodes) * GPUS_PER_NODE * month_h
        )
        kube_summary |= {
            "nodes": len(kl.nodes),
            "mig_pods": sum(1 for p in pods if p.slices and figures.month_seconds(p, layout)),
            "time_sliced_pods": sum(
                1 for p in pods if p.pool == "TS" and p.whole and figures.month_seconds(p, layout)
            ),
            "states": dict(sorted(Counter(p.state for p in pods if p.gpus).items())),
        }
        summary[KUBE] = kube_summary
    return summary


def _listed(jobs: list, view: site.Layout) -> list:
    """The jobs a month's exports list: all but those over before the month (at the final
    export's state; `scheduler.exported_jobs` picks the same for the last month)."""
    return [job for job in jobs if job.end is None or job.end > view.month_start]


@dataclass(frozen=True)
class _MonthExports:
    """What every month's exports are written from: the one simulation of all the months."""

    landing: Path
    all_jobs: list
    jobs: list  # the month's, as its export shows them
    pods: list
    quotas: list[dict]
    kube_layout: site.KubeLayout | None
    seed: int
    real: bool


def _write_month(exports: _MonthExports, view: site.Layout) -> dict[str, list[dict]]:
    """Every export of one month (``view``): per cluster, the figures of each writer in turn."""
    landing, seed, kl = exports.landing, exports.seed, exports.kube_layout
    slurm_dir, atlas_dir = landing / "scheduler" / CLUSTER, landing / "telemetry" / CLUSTER
    pods_dir, kube_dir = landing / "scheduler" / KUBE, landing / "telemetry" / KUBE
    atlas_jobs = _listed(exports.all_jobs, view)
    if not exports.real:
        return {
            CLUSTER: [
                canonical.write_scheduler(slurm_dir, atlas_jobs, view),
                canonical.write_telemetry(atlas_dir, atlas_jobs, view, seed),
            ],
            KUBE: [],
        }
    return {
        CLUSTER: [
            slurm.write_dumps(slurm_dir, exports.all_jobs, view, seed),
            quota_configs.write_slurm_quotas(
                slurm_dir, CLUSTER, exports.jobs, exports.quotas, view
            ),
            dcgm.write_atlas_telemetry(atlas_dir, atlas_jobs, view, seed),
        ],
        KUBE: [
            # a month's last two pod lists (00:00 and 06:00 on the next month's first day) are
            # the next month's first two, written by both with the same bytes
            kubernetes.write_snapshots(pods_dir, exports.pods, view, kl),
            quota_configs.write_kueue_objects(pods_dir, exports.pods, exports.quotas, view),
            dcgm.write_kube_telemetry(kube_dir, exports.pods, view, kl, seed),
        ],
    }


def _write_months(exports: _MonthExports, views: list[site.Layout]) -> list[dict]:
    return [_write_month(exports, view) for view in views]


def _write_exports(exports: _MonthExports, views: list[site.Layout]) -> dict[str, dict]:
    """Write the exports of every month of ``views``: the history months in a process of
    their own (given the simulation) while this one writes the month, which takes about as
    long. Per cluster, the figures are the month's, with each count of the history months
    added under `history_<name>`."""
    *history, last = views
    if history:
        spawn = multiprocessing.get_context("spawn")  # no fork of a process with threads
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            earlier = pool.submit(_write_months, exports, history)
            month = _write_month(exports, last)
            written = earlier.result()
    else:
        month, written = _write_month(exports, last), []
    figures: dict[str, dict] = {}
    for cluster, writers in month.items():
        figures[cluster] = {}
        for number, counts in enumerate(writers):
            figures[cluster] |= counts
            for other in written:
                for name, value in other[cluster][number].items():
                    if isinstance(value, int):
                        key = f"history_{name}"
                        figures[cluster][key] = figures[cluster].get(key, 0) + value
    return figures


def gzip_landing(landing: Path) -> int:
    """Replace every text export under `landing` (all but Parquet) by `<name>.gz`; returns the
    files compressed. No name or time goes into the gzip header, so output stays reproducible.
    """
    count = 0
    for path in sorted(p for p in landing.rglob("*") if p.is_file()):
        if path.suffix in (".parquet", ".gz"):
            continue
        target = path.with_name(path.name + ".gz")
        with (
            path.open("rb") as source,
            target.open("wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as compressed,
        ):
            shutil.copyfileobj(source, compressed)
        path.unlink()
        count += 1
    return count


def _history_months(text: str) -> int:
    months = int(text)
    if months < 0:
        raise argparse.ArgumentTypeError(f"{text}: 0 or more months")
    return months


def main(argv: list[str] | None = None) -> None:
    """Command line: generate the demo and print its summary as JSON."""
    parser = argparse.ArgumentParser(
        prog="python -m simulator", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--month", default="2026-11", help="billing month YYYY-MM")
    parser.add_argument("--out", type=Path, default=Path("data"), help="output folder")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--history-months",
        type=_history_months,
        default=0,
        help="months before --month simulated with it (the demo's trend: `make demo` takes 2)",
    )
    parser.add_argument(
        "--small", action="store_true", help="6 + 3 nodes, ~900 jobs and pods, 5-min samples"
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="real",
        help="real: sacct, pod lists, DCGM, nvidia-smi for atlas and kube (default); "
        "canonical: atlas alone as canonical CSV / Parquet",
    )
    parser.add_argument(
        "--gzip",
        action="store_true",
        help="compress every text export to <name>.gz (Parquet stays as it is)",
    )
    parser.add_argument(
        "--cost-mode",
        choices=COST_MODES,
        default="rate_card",
        help="settings.yaml cost_mode (full_recovery adds each cluster's monthly overhead)",
    )
    parser.add_argument(
        "--idle-sharing",
        choices=IDLE_SHARING,
        default="weighted",
        help="settings.yaml idle_sharing, the full_recovery policy for idle capacity",
    )
    args = parser.parse_args(argv)
    began = time.perf_counter()
    summary = generate_demo(
        args.out,
        month=args.month,
        seed=args.seed,
        small=args.small,
        export_format=args.format,
        cost_mode=args.cost_mode,
        idle_sharing=args.idle_sharing,
        history_months=args.history_months,
    )
    if args.gzip:
        summary["gzipped_files"] = gzip_landing(args.out / "landing")
    summary["seconds"] = round(time.perf_counter() - began, 1)
    print(json.dumps(summary, indent=2, ensure_ascii=False))
