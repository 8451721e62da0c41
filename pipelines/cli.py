"""`chargeback`: one command runs a month, one closes it (DESIGN.md "Orchestration").

    chargeback run --month 2026-11                 the month's telemetry days, then the month
    chargeback run --from 2026-09 --to 2026-11     a range of months, in one run of each kind
    chargeback close --month 2026-11 --by finance@example.com

They drive the same Dagster assets, jobs and checks as the UI, schedule and backfills, in this
process, and record their runs in DAGSTER_HOME (default: `dagster_home` beside the warehouse),
where `make ui` shows them. Progress goes to the terminal (telemetry day k of n with its rows
per second, then each monthly step); the last line says what was charged, whether every check
passed, and where the reports are. A refused input, a catalog mistake or a blocking check ends
the command with one line naming it and a non-zero exit: 2 for a wrong argument (nothing is
touched), 1 for a run that did not complete. When other checks failed too, each gets a line
before it (the cause before what it broke, `_failed_run_lines`). A completed run's failed
checks that do not block get a line each too (`_completed_run_lines`), and its summary names them
apart from the warnings.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from pipelines.months import BillingMonth, first_days, month_label, parse_month
from pipelines.progress import PROGRESS

EXIT_FAILED = 1
EXIT_USAGE = 2
# Dagster's console log of every event stays in the run (the UI shows it); the terminal gets
# the progress lines and the outcome
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


class UsageError(ValueError):
    """A wrong argument or setting: reported in one line before anything is touched."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chargeback", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="roll up the telemetry days and run billing months")
    run.add_argument("--month", help="the billing month, YYYY-MM")
    run.add_argument("--from", dest="first", help="the first month of a range, YYYY-MM")
    run.add_argument("--to", dest="last", help="the last month of a range, YYYY-MM")
    close = commands.add_parser("close", help="issue a month's charges (re-runs add corrections)")
    close.add_argument("--month", required=True, help="the billing month, YYYY-MM")
    close.add_argument("--by", required=True, help="who closes it (recorded with the month)")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            first, last = _month_range(args.month, args.first, args.last)
            return run_months(first, last)
        return close_month(_month("--month", args.month), args.by)
    except UsageError as error:
        print(f"chargeback: error: {error}", file=sys.stderr)
        return EXIT_USAGE


def _month(option: str, text: str) -> dt.date:
    try:
        return parse_month(text)
    except ValueError as error:
        raise UsageError(f"{option} {error}") from None


def _month_range(month: str | None, first: str | None, last: str | None) -> tuple[dt.date, dt.date]:
    if month is not None and (first or last):
        raise UsageError("give --month, or --from and --to, not both")
    if month is not None:
        single = _month("--month", month)
        return single, single
    if first is None or last is None:
        raise UsageError("give --month YYYY-MM, or --from YYYY-MM and --to YYYY-MM")
    start, end = _month("--from", first), _month("--to", last)
    if end < start:
        raise UsageError(f"--to {last} is before --from {first}")
    return start, end


def run_months(first: dt.date, last: dt.date) -> int:
    """Roll up every telemetry day the months overlap (one run), then the months (a second
    run: a Dagster run holds one partitioning), each with every check."""
    # imported here, like Dagster below: `--help` and argument errors answer at once
    from pipelines.catalog import CatalogError
    from pipelines.defs.partitions import monthly_partition
    from pipelines.landing import LandingError, discover

    chargeback = _resource()
    _check_folders(chargeback, need_warehouse=False)
    partitions = set(monthly_partition.get_partition_keys())
    for first_day in first_days(first, last):
        if first_day.isoformat() not in partitions:
            raise UsageError(_not_a_partition(first_day, monthly_partition))
    try:
        catalog = chargeback.catalog()
        exports = [e for area in ("scheduler", "telemetry") for e in discover(
            Path(chargeback.landing_dir), area)]  # fmt: skip
    except (CatalogError, LandingError) as error:
        print(f"chargeback: {error}", file=sys.stderr)
        return EXIT_FAILED
    months = BillingMonth.range(first, last, catalog.settings.billing_timezone)
    days = sorted({day for month in months for day in month.utc_days()})
    label = _label(months)
    with _instance(chargeback) as instance:
        return _run(instance, chargeback, catalog, exports, months, days, label)


def _run(instance, chargeback, catalog, exports, months, days, label) -> int:
    """The two runs of `run_months` on `instance`; returns the exit code."""
    import dagster as dg

    from pipelines.commit import failed_copy
    from pipelines.definitions import all_assets
    from pipelines.defs.schedules import ROLLUP

    resources = {"chargeback": chargeback}
    _show_progress()
    print(f"chargeback run {label}: {len(exports)} export files; telemetry of {len(days)} days")
    rollup = dg.materialize(
        all_assets,
        selection=ROLLUP,
        instance=instance,
        resources=resources,
        tags=_range_tags(days[0].isoformat(), days[-1].isoformat()),
        run_config=QUIET,
        raise_on_error=False,
    )
    if not rollup.success:
        print(f"chargeback: {_failure(rollup)} (Dagster run {rollup.run_id})", file=sys.stderr)
        return EXIT_FAILED
    print(f"monthly run {label}")
    monthly = dg.materialize(
        all_assets,
        selection=dg.AssetSelection.all() - ROLLUP,
        instance=instance,
        resources=resources,
        tags=_range_tags(months[0].partition_key, months[-1].partition_key),
        run_config=QUIET,
        raise_on_error=False,
    )
    blocking = {spec.name for step in all_assets for spec in step.check_specs if spec.blocking}
    evaluations = monthly.get_asset_check_evaluations()
    failed = [e for e in evaluations if not e.passed]
    blocked = [e for e in failed if e.check_name in blocking]
    if blocked or not monthly.success:
        kept = failed_copy(Path(chargeback.warehouse))
        for line in _failed_run_lines(
            failed,
            blocking,
            failure=None if blocked else _failure(monthly),
            kept=kept if kept.exists() else None,  # the run's tables (pipelines/commit.py)
            run_id=monthly.run_id,
        ):
            print(f"chargeback: {label}: {line}", file=sys.stderr)
        return EXIT_FAILED
    unpublished = _unpublished(chargeback, months, monthly.run_id)
    if unpublished:
        print(
            f"chargeback: {label}: the run succeeded but did not publish {unpublished} "
            f"(its commit failed: see Dagster run {monthly.run_id})",
            file=sys.stderr,
        )
        return EXIT_FAILED
    for line in _completed_run_lines(failed):
        print(f"chargeback: {label}: {line}", file=sys.stderr)
    print(_summary(chargeback, months, evaluations, failed, catalog.settings.currency))
    return 0


def _unpublished(chargeback, months: list[BillingMonth], run_id: str) -> str | None:
    """What a successful run left unpublished (None: all): the run commits at its very end
    (pipelines/commit.py), where a failure is only logged by Dagster."""
    from pipelines.commit import published_by, record_path

    if record_path(Path(chargeback.warehouse)).exists():
        return "its warehouse and reports"
    for month in months:
        folder = Path(chargeback.reports_dir) / month.label
        if published_by(folder) != run_id:
            return f"{folder}/"
    return None


def close_month(month: dt.date, closed_by: str) -> int:
    """Issue `month`'s charge lines through `close_month_job` (recorded in DAGSTER_HOME)."""
    from pipelines.commit import record_path
    from pipelines.definitions import defs

    chargeback = _resource()
    _check_folders(chargeback, need_warehouse=True)
    label = month_label(month)
    with _instance(chargeback) as instance:
        result = defs.get_job_def("close_month_job").execute_in_process(
            run_config={
                "ops": {
                    "close_billing_month": {"config": {"month": label, "closed_by": closed_by}}
                },
                **QUIET,
            },
            instance=instance,
            resources={"chargeback": chargeback},
            raise_on_error=False,
        )
    if not result.success:
        print(f"chargeback: {_failure(result)}", file=sys.stderr)
        return EXIT_FAILED
    if record_path(Path(chargeback.warehouse)).exists():
        print(f"chargeback: closing {label} was not committed (see Dagster run {result.run_id})",
              file=sys.stderr)  # fmt: skip
        return EXIT_FAILED
    lines, total = result.output_for_node("close_billing_month")
    print(f"closed {label} by {closed_by}: {lines} charge lines issued, total {total}")
    return 0


def _resource():
    """The resource with this process's CHARGEBACK_* settings, read now: the command uses the
    paths itself, before and after its runs."""
    from pydantic import ValidationError

    from pipelines.defs.resources import ENVIRONMENT, ChargebackResource

    try:
        return ChargebackResource.from_env_now()
    except ValidationError as error:
        first = error.errors()[0]
        variable = ENVIRONMENT[first["loc"][0]]
        message = first["msg"][:1].lower() + first["msg"][1:]
        raise UsageError(f"{variable} {os.environ[variable]}: {message}") from None


def _check_folders(chargeback, need_warehouse: bool) -> None:
    """Wrong paths stop before anything is created (no empty warehouse at a mistyped path)."""
    warehouse = Path(chargeback.warehouse)
    if need_warehouse and not warehouse.is_file():
        raise UsageError(f"warehouse {warehouse} does not exist (CHARGEBACK_WAREHOUSE)")
    if not warehouse.parent.is_dir():
        raise UsageError(
            f"the warehouse's folder {warehouse.parent} does not exist (CHARGEBACK_WAREHOUSE)"
        )
    if need_warehouse:
        return
    for variable, folder in (
        ("CHARGEBACK_LANDING_DIR", chargeback.landing_dir),
        ("CHARGEBACK_CATALOG_DIR", chargeback.catalog_dir),
    ):
        if not Path(folder).is_dir():
            raise UsageError(f"folder {folder} does not exist ({variable})")


def _label(months: list[BillingMonth]) -> str:
    first, last = months[0].label, months[-1].label
    return first if first == last else f"{first}..{last}"


def _not_a_partition(first_day: dt.date, partitions) -> str:
    label = month_label(first_day)
    keys = partitions.get_partition_keys()
    if keys and first_day > parse_month(keys[-1]):
        latest = month_label(parse_month(keys[-1]))
        return f"{label} has not ended yet (the latest month that can run is {latest})"
    first = month_label(partitions.start)
    return f"{label} is before the first month {first} (CHARGEBACK_FIRST_MONTH)"


def _range_tags(first: str, last: str) -> dict[str, str]:
    return {
        "dagster/asset_partition_range_start": first,
        "dagster/asset_partition_range_end": last,
    }


def _instance(chargeback):
    """The Dagster instance of DAGSTER_HOME (created if missing); unset, `dagster_home` beside
    the warehouse (the folder `make demo` and `make ui` use). Dagster's telemetry is off."""
    from dagster import DagsterInstance

    home = Path(
        os.environ.get("DAGSTER_HOME")
        or Path(chargeback.warehouse).resolve().parent / "dagster_home"
    )
    if not home.is_absolute():
        raise UsageError(f"DAGSTER_HOME {home} is not an absolute path")
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists():
        settings.write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return DagsterInstance.from_config(str(home))


def _show_progress() -> None:
    """The assets' progress lines (`pipelines.progress`) on the terminal, one per line."""
    if not PROGRESS.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("  %(message)s"))
        PROGRESS.addHandler(handler)
        PROGRESS.setLevel(logging.INFO)
        PROGRESS.propagate = False


def _failure(result) -> str:
    """The innermost error of the run's first failed step, as one line: the project's own
    errors (catalog, landing, a stopped step) say everything in their message."""
    for event in result.all_events:
        if event.event_type_value != "STEP_FAILURE":
            continue
        error = event.step_failure_data.error
        while error.cause is not None:
            error = error.cause
        message = error.message.strip().splitlines()[0] if error.message.strip() else ""
        message = message.removeprefix(f"{error.cls_name}: ")
        message = re.sub(r"^[\w.]+Error: ", "", message)
        if error.cls_name in (
            "CatalogError",
            "LandingError",
            "Failure",
            "CloseError",
            "WarehouseBusy",
        ):
            return f"{event.step_key}: {message}"
        return f"{event.step_key}: {error.cls_name}: {message}"
    return "the run failed (see the Dagster run for details)"


def _failed_run_lines(
    failed: list, blocking: set[str], failure: str | None, kept: Path | None, run_id: str
) -> list[str]:
    """What a run that did not complete prints: one line per failed check of severity ERROR
    with its first violation (warnings are for the summary of a run that completes), then what
    became of the run on the last line: the reports not written (a blocking check failed) or
    `failure` (the failed step), where its tables were `kept`, its Dagster run.

    The cause comes before what it broke: a failed blocking check stops every step below it, so
    the other failed checks are upstream of it (two jobs on one GPU, gpus_never_oversubscribed,
    before the capacity buckets that cannot add up) or beside it; each kind in the order of the
    asset graph."""
    import dagster as dg

    errors = _upstream_first([e for e in failed if e.severity == dg.AssetCheckSeverity.ERROR])
    errors.sort(key=lambda e: e.check_name in blocking)  # stable: the graph order stays
    lines = [f"check {e.check_name} failed: {_violations(e)}" for e in errors]
    if failure is None:
        lines[-1] += "; the month's reports were not written"
    else:
        lines.append(failure)
    if kept is not None:
        lines[-1] += f"; the run's tables are in {kept}"
    lines[-1] += f" (Dagster run {run_id})"
    return lines


def _completed_run_lines(failed: list) -> list[str]:
    """What a completed run prints besides its summary: a line per failed check of severity
    ERROR that does not block (two jobs on one GPU), with its first violation, in the order of
    the asset graph. It is an error all the same, only not one that stops the reports."""
    import dagster as dg

    errors = _upstream_first([e for e in failed if e.severity == dg.AssetCheckSeverity.ERROR])
    return [
        f"check {e.check_name} failed: {_violations(e)}; the reports were written" for e in errors
    ]


def _upstream_first(evaluations: list) -> list:
    """The check evaluations in the order of the asset graph: a check of a table before the
    checks of the tables made from it (an ancestor has fewer ancestors), then by name."""
    from pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    return sorted(
        evaluations,
        key=lambda e: (len(graph.get_ancestor_asset_keys(e.asset_key)), e.check_name),
    )


def _violations(evaluation) -> str:
    metadata = evaluation.metadata
    count = metadata["violations"].value if "violations" in metadata else "?"
    first = metadata["first_violations"].value[:1] if "first_violations" in metadata else []
    where = "; first: " + ", ".join(f"{k}={v}" for k, v in first[0].items()) if first else ""
    return f"{count} violation(s){where}"


def _checks_text(evaluations: list, failed: list) -> str:
    """`10 checks passed`, or how many passed and the names of those that did not: the failed
    ones of severity ERROR (shown, not blocking) apart from the warnings."""
    import dagster as dg

    if not failed:
        return f"{len(evaluations)} checks passed"
    names = {
        kind: ", ".join(sorted({e.check_name for e in failed if e.severity == severity}))
        for kind, severity in (
            ("failed", dg.AssetCheckSeverity.ERROR),
            ("warnings", dg.AssetCheckSeverity.WARN),
        )
    }
    found = "; ".join(f"{kind}: {listed}" for kind, listed in names.items() if listed)
    return f"{len(evaluations) - len(failed)} of {len(evaluations)} checks passed ({found})"


def _summary(chargeback, months, evaluations, failed, currency: str) -> str:
    import duckdb

    labels = [month.label for month in months]
    con = duckdb.connect(chargeback.warehouse, read_only=True)
    try:
        total, tenants = con.execute(
            "select coalesce(sum(amount), 0), count(distinct tenant_id) from charge_lines "
            "where billing_month between $first_month and $last_month",
            {"first_month": months[0].first_day, "last_month": months[-1].first_day},
        ).fetchone()
    finally:
        con.close()
    checks = _checks_text(evaluations, failed)
    folders = [str(Path(chargeback.reports_dir) / label) + "/" for label in labels]
    where = folders[0] if len(folders) == 1 else f"{folders[0]} .. {folders[-1]}"
    tenants_text = f"{tenants} tenant" + ("s" if tenants != 1 else "")
    return (
        f"{_label(months)}: charged {currency} {total:,.2f} to {tenants_text}; {checks}; "
        f"reports in {where}"
    )


if __name__ == "__main__":
    sys.exit(main())
