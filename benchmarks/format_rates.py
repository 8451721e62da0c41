"""Read rate of each export format's reader on a landing folder (default: the demo month).

Every file under `<landing>/scheduler/` and `<landing>/telemetry/` is recognised as the
pipeline does (`pipelines.landing.discover`) and read by its format's reader alone: scheduler
rows through `read_rows`, telemetry through `to_parquet` (formats DuckDB reads in place are
skipped: they have no reader of ours). Prints rows, MB and rows/s per format. Typing,
validation and the warehouse load happen later in SQL, for every format alike, and are not in
these figures.

    .venv/bin/python benchmarks/format_rates.py                    # generates the demo month
    .venv/bin/python benchmarks/format_rates.py --landing data/landing --catalog data/catalog

Not run by pytest.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipelines.catalog import ClusterSettings, load_catalog  # noqa: E402
from pipelines.landing import discover  # noqa: E402


def measure(landing: Path, catalog_dir: Path) -> dict[str, dict[str, float]]:
    settings = load_catalog(catalog_dir).settings
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    with tempfile.TemporaryDirectory() as scratch:
        for area in ("scheduler", "telemetry"):
            for export in discover(landing, area):
                cluster_settings = settings.clusters.get(export.cluster, ClusterSettings())
                began = time.process_time()
                if export.format.read_rows is not None:
                    rows = sum(1 for _ in export.format.read_rows(export.path, cluster_settings))
                elif export.format.to_parquet is not None:
                    out = Path(scratch) / f"{len(totals)}-{export.path.name}.parquet"
                    rows = export.format.to_parquet(export.path, out, cluster_settings)
                else:
                    continue
                figures = totals[export.format.name]
                figures["cpu_s"] += time.process_time() - began
                figures["rows"] += rows
                figures["files"] += 1
                figures["mb"] += export.path.stat().st_size / 1e6
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--landing", type=Path, help="landing folder (default: demo month)")
    parser.add_argument("--catalog", type=Path, help="catalog folder of --landing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.landing is None:
            from simulator.demo import generate_demo

            generate_demo(Path(tmp), month="2026-11", seed=7)
            args.landing, args.catalog = Path(tmp) / "landing", Path(tmp) / "catalog"
        totals = measure(args.landing, args.catalog)
    # CPU seconds, not wall time: the machines are shared
    print(f"{'format':<22}{'files':>7}{'MB':>9}{'rows':>12}{'CPU s':>8}{'rows/s':>11}")
    for name, f in sorted(totals.items()):
        rate = f["rows"] / f["cpu_s"] if f["cpu_s"] else float("nan")
        print(
            f"{name:<22}{f['files']:>7.0f}{f['mb']:>9.1f}{f['rows']:>12,.0f}"
            f"{f['cpu_s']:>8.1f}{rate:>11,.0f}"
        )


if __name__ == "__main__":
    main()
