"""Reading the scheduler exports, as the `scheduler_exports` step does: seconds and peak RSS.

    .venv/bin/python benchmarks/scheduler_load.py /tmp/chargeback-bench/g10000-d30-i15-j2000000

The data folder is one `benchmarks/run.py` generated (its landing and catalog; the 10,000-GPU
month has a 336 MB jobs.csv of 2 M jobs). Each measurement runs in its own process, so that its
peak RSS is its own:

    read_table   the fast CSV path alone (pipelines/formats/canonical.py read_table) on each
                 export: Arrow's CSV reader and the checks that its rows pair up with lines
    read         read_scheduler_exports into an in-memory DuckDB with DuckDB's memory_limit
                 (the exports' raw tables: the step's first half)
    step         the whole `scheduler_exports` step (after the catalog's) on that DuckDB: the
                 raw tables, then the staging SQL that types and checks every row

Not run by pytest.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def measure(name: str, data: Path, memory_limit: str) -> dict:
    """One measurement in this process (`_measure` child)."""
    import run  # noqa: PLC0415  (benchmarks/ is not a package; the child's own import)

    from pipelines.defs.ingest import assets
    from pipelines.defs.ingest.loading import read_scheduler_exports
    from pipelines.defs.monthly import MonthRun
    from pipelines.landing import discover

    chargeback = run._resource(data, memory_limit)
    catalog = chargeback.catalog()
    began = time.perf_counter()
    if name == "read_table":
        rows = 0
        for export in discover(Path(chargeback.landing_dir), "scheduler"):
            settings = catalog.cluster(export.cluster)
            table = export.format.read_table(export.path, settings)
            rows += table.num_rows if table is not None else 0
    elif name == "read":
        with chargeback.scratch() as con:
            read_scheduler_exports(con, Path(chargeback.landing_dir), catalog)
            [(rows,)] = con.execute(
                "select (select count(*) from raw_jobs) + (select count(*) from raw_allocations)"
            ).fetchall()
    else:
        with chargeback.scratch() as con:  # with the project's macros, as a run's
            month = run._billing_month(chargeback)
            month_run = MonthRun(
                con, month, month.params(catalog.settings), catalog, chargeback.folders, "bench"
            )
            assets.catalog.build(month_run)
            counts = assets.scheduler_exports.build(month_run)
            rows = counts["stg_job_records"] + counts["stg_allocation_records"]
    seconds = time.perf_counter() - began
    return {"seconds": round(seconds, 2), "rows": rows, "peak_rss_mib": run.peak_rss_kib() // 1024}


def main() -> None:
    if sys.argv[1:2] == ["_measure"]:
        name, data, memory_limit = sys.argv[2:5]
        print("RESULT " + json.dumps(measure(name, Path(data), memory_limit)), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--memory-limit", default="2GB")
    args = parser.parse_args()
    print(f"{'measurement':12} {'seconds':>8} {'rows':>10} {'peak RSS MiB':>13}")
    for name in ("read_table", "read", "step"):
        out = subprocess.run(
            [sys.executable, __file__, "_measure", name, str(args.data), args.memory_limit],
            capture_output=True, text=True, check=True, cwd=REPO,
        ).stdout  # fmt: skip
        result = json.loads(out.split("RESULT ", 1)[1])
        print(
            f"{name:12} {result['seconds']:8.2f} {result['rows']:10,} {result['peak_rss_mib']:13,}"
        )


if __name__ == "__main__":
    main()
