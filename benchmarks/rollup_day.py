"""One UTC day's telemetry rollup, statement by statement: seconds and peak RSS of each.

    .venv/bin/python benchmarks/rollup_day.py /tmp/chargeback-bench/g1000-d30-i60-j200000 \\
        --day 2026-11-15 [--memory-limit 2GB]

With `--days N --at-once K`: N days from --day in one run, K at once (telemetry.days_at_once
forced), and only the run's seconds a day and peak RSS, not each statement's.

With `--floor`: also the day's floor, best of three, for scale: one statement that reads the
day's samples, finds each one's successor and its series' latest busy sample in one window, and
writes them to Parquet with their covered milliseconds; none of the rollup's checks, counts,
duplicates, metrics, look-ahead, steps, idle runs or sums per series-hour.

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
    parser.add_argument("--floor", action="store_true", help="also time the day's floor")
    args = parser.parse_args()

    out = args.data / "rollup_day"
    for stale in out.glob("*"):
        if stale.name != "spans":
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    chargeback = run._resource(args.data, args.memory_limit, rollup_dir=str(out))
    if args.days > 1:
        days = [args.day + dt.timedelta(days=k) for k in range(args.days)]
        seconds_a_day = _days_at_once(chargeback, days, args.at_once)
        if args.floor:
            _print_floor(chargeback, args.day, {"a day of the run": seconds_a_day})
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
    if args.floor:
        # the statements' sum counts a chunk written while the next is read twice
        statements = sum(seconds for _, seconds, _ in timed)
        _print_floor(chargeback, args.day, {"the run": total, "the statements": statements})


def _print_floor(chargeback, day: dt.date, timed: dict[str, float]) -> None:
    """Time the floor of `day`; print it, and each of `timed`'s seconds as a multiple of it."""
    floor = _floor(chargeback, day)
    multiples = ", ".join(f"{what} {seconds / floor:.1f}x" for what, seconds in timed.items())
    print(
        f"{floor:8.2f} {'':13}  the floor (one read, one window, one write of {day}): {multiples}"
    )


# The floor's statement: a day's valid samples, each with its covered time to the next sample of
# its series and its series' latest busy timestamp (the two things the rollup's window finds)
FLOOR_SQL = """
copy (
    select
        hash(node, gpu_index) as series_key, date_trunc('hour', ts) as hour, ts, util_pct,
        mem_used_mib, power_w,
        (epoch_us(lead(ts) over series_order) - epoch_us(ts)) // 1000 as cover_ms,
        last_value(case when util_pct >= $idle_threshold_pct then ts end ignore nulls)
            over series_order as last_busy_ts
    from read_parquet($files, union_by_name = true)
    where ts >= $day_start and ts < $day_end
    window series_order as (partition by node, gpu_index order by ts rows unbounded preceding)
) to '{target}' (format parquet)
"""


def _floor(chargeback, day: dt.date) -> float:
    """The best of three runs of FLOOR_SQL on the files the rollup of `day` read."""
    landing_dir, telemetry_dir = Path(chargeback.landing_dir), chargeback.telemetry_dir
    catalog = chargeback.catalog()
    sources = telemetry.sample_sources(landing_dir, telemetry_dir, catalog)
    files = telemetry.readable_sample_files(telemetry_dir, [source["path"] for source in sources])
    day_start = dt.datetime.combine(day, dt.time())
    params = {
        "day_start": day_start,
        "day_end": day_start + dt.timedelta(days=1),
        "idle_threshold_pct": float(catalog.settings.idle_threshold_pct),
    }
    target = telemetry_dir.parent / "rollup_floor.parquet"
    with chargeback.scratch() as con:
        spans = telemetry.sample_file_spans(con, files, cache=telemetry_dir / "spans")
        params["files"] = telemetry.files_of_day(files, spans, day, [])
        best = float("inf")
        for _ in range(3):
            began = time.perf_counter()
            con.execute(FLOOR_SQL.format(target=target.as_posix()), params)
            best = min(best, time.perf_counter() - began)
    target.unlink()
    return best


def _days_at_once(chargeback, days: list[dt.date], at_once: int | None) -> float:
    """Roll up `days` in one run, `at_once` at a time (default: as the pipeline decides);
    returns the seconds a day."""
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
        f"{seconds:.1f} s, {seconds / len(days):.2f} s a day, peak RSS "
        f"{rss.peak_between(0, time.time() + 1):,} MiB"
    )
    return seconds / len(days)


if __name__ == "__main__":
    main()
