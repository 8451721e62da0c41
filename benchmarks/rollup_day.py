"""One UTC day's telemetry rollup, statement by statement: seconds and peak RSS of each.

    .venv/bin/python benchmarks/rollup_day.py /tmp/chargeback-bench/g1000-d30-i60-j200000 \\
        --day 2026-11-15 [--memory-limit 2GB]

With `--days N --at-once K`: N days from --day in one run, K at once (telemetry.days_at_once
forced), and only the run's seconds a day and peak RSS, not each statement's.

The data folder is one `benchmarks/run.py` generated (its landing and catalog). The day is
rolled up by the pipeline's own code (`roll_up_days`) into `<data>/rollup_day/` (its span
cache kept between runs, so that a second run times the day alone); each statement of
`_roll_up_day` (sql/rollup/*.sql) is timed, each chunk's (node_chunks) in turn, and the
process's RSS sampled every 5 ms (run.RssSampler).
Not run by pytest.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import run  # noqa: E402  (benchmarks/ is not a package)

from pipelines.defs.ingest import telemetry  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--day", type=dt.date.fromisoformat, required=True)
    parser.add_argument("--memory-limit", default="2GB")
    parser.add_argument("--days", type=int, default=1, help="days from --day, in one run")
    parser.add_argument("--at-once", type=int, default=None, help="days rolled up at once")
    args = parser.parse_args()

    out = args.data / "rollup_day"
    for stale in out.glob("*"):
        if stale.name != "spans":
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    chargeback = run._resource(args.data, args.memory_limit, rollup_dir=str(out))
    if args.days > 1:
        days = [args.day + dt.timedelta(days=k) for k in range(args.days)]
        _days_at_once(chargeback, days, args.at_once)
        return
    # every 5 ms: a statement of the 1,000-GPU day takes 0.05-0.3 s
    rss = run.RssSampler(interval_s=0.005)
    timed: list[tuple[str, float, int]] = []
    # the timed steps running, a thread's own (a day's chunk files are written on a thread of
    # their own): a step inside another is not listed
    threads = threading.local()

    def timing(step, name_at: int):
        """`step` timed, named by its argument `name_at` (the SQL file)."""

        def timed_step(con, *step_args, **kwargs):
            running = threads.__dict__.setdefault("running", [])
            running.append(step_args[name_at])
            began = time.time()
            try:
                result = step(con, *step_args, **kwargs)
            finally:
                running.pop()
            ended = time.time()
            if not running:
                timed.append((step_args[name_at], ended - began, rss.peak_between(began, ended)))
            return result

        return timed_step

    # create_table(con, table, name, ...), _copy(con, name, ...), run(con, name, ...),
    # _add_rows(con, table, name, ...) and _write_table(con, table, ...)
    telemetry.create_table = timing(telemetry.create_table, 1)
    telemetry._copy = timing(telemetry._copy, 0)
    telemetry.run = timing(telemetry.run, 0)
    telemetry._add_rows = timing(telemetry._add_rows, 1)
    telemetry._write_table = timing(telemetry._write_table, 0)
    began = time.perf_counter()
    counts = telemetry.roll_up_days(chargeback, chargeback.catalog(), [args.day])
    total = time.perf_counter() - began
    rss.stop()
    print(f"{args.day}: {counts[args.day.isoformat()]}, DuckDB memory_limit {args.memory_limit}")
    print(f"{'seconds':>8} {'peak RSS MiB':>13}  statement")
    for name, seconds, peak_mib in timed:
        print(f"{seconds:8.2f} {peak_mib:13,}  {name}")
    print(f"{total:8.2f} {'':13}  the whole run (spans and setup included)")


def _days_at_once(chargeback, days: list[dt.date], at_once: int | None) -> None:
    """Roll up `days` in one run, `at_once` at a time (default: as the pipeline decides)."""
    if at_once is not None:
        telemetry.days_at_once = lambda estimated, days: at_once
    rss = run.RssSampler(interval_s=0.01)
    began = time.perf_counter()
    telemetry.roll_up_days(chargeback, chargeback.catalog(), days)
    seconds = time.perf_counter() - began
    rss.stop()
    how_many = at_once or "as the pipeline decides"
    print(
        f"{len(days)} days from {days[0]}, at once: {how_many}; "
        f"{seconds:.1f} s, {seconds / len(days):.1f} s a day, peak RSS "
        f"{rss.peak_between(0, time.time() + 1):,} MiB"
    )


if __name__ == "__main__":
    main()
