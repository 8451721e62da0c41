"""Reports: the finance workbook, the FOCUS export, the idle-GPU notices and the manifest of
each billing month.

The report assets write into the run's staging folder of the month (`staged_report`);
`month_manifest`, the last of them, describes it in manifest.json, and the run's commit
publishes the folder as a whole (pipelines/commit.py, publish.py).
"""

from collections.abc import Callable, Sequence, Set
from pathlib import Path

import dagster as dg

from pipelines.defs.monthly import MonthRun, materialize_months
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.reports.publish import (
    REPORT_FILES,
    carry_over,
    month_files,
    month_staging,
    report_files,
    report_of,
)
from pipelines.defs.resources import ChargebackResource
from pipelines.landing import discover, sha256_each
from pipelines.reports.exports import (
    catalog_version,
    folder_name,
    report_parameters,
    sha256_of,
    write_focus_csv,
    write_manifest,
    write_notices_csv,
)
from pipelines.reports.finance_workbook import write_chargeback_workbook
from pipelines.version import code_version

GROUP = "reports"


def report_asset(
    deps: Sequence[str | dg.AssetsDefinition], kinds: set[str]
) -> Callable[[Callable[..., dg.MaterializeResult]], dg.AssetsDefinition]:
    """The decorator of a report asset: partitioned by billing month (a backfill's months in
    one run), in the reports group."""
    return dg.asset(
        deps=deps,
        partitions_def=monthly_partition,
        backfill_policy=single_run,
        group_name=GROUP,
        kinds=kinds,
    )


def _landing_files(landing: Path) -> list[dict[str, str]]:
    """Every scheduler and telemetry export in `landing`: its file name, cluster, format and
    sha256."""
    exports = [export for area in ("scheduler", "telemetry") for export in discover(landing, area)]
    return [
        {"file": export.name, "cluster": export.cluster, "format": export.format.name,
         "sha256": sha256}
        for export, sha256 in zip(exports, sha256_each(exports), strict=True)
    ]  # fmt: skip


@report_asset(
    deps=[
        "charge_lines",
        "tenant_month",
        "job_usage",
        "cost_views",
        "capacity_buckets",
        "data_quality",
        "rejects",
        "quota_compliance",
        "queue_stats",
        "submission_stats",
        "failure_stats",
        "availability",
        "incidents",
        "capacity_evidence",
        "utilization_daily",
        "month_trends",
        "demand_forecast",
        "charge_line_coverage",
        "cost_pools",
        "quota_drift",
        "telemetry_coverage",
        "user_efficiency",
        "stg_jobs",  # the Audit sheet's row counts
        "job_gpu_hours",
    ],  # fmt: skip
    kinds={"excel"},
)
def chargeback_workbook(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """The finance workbook `<reports>/YYYY-MM/chargeback-YYYY-MM.xlsx` of each billing month:
    Summary, Charges, Job lines, Waste (by model, by tenant), Cost views, Users, Quota, Budget,
    Quota drift, Queue & Service, Submissions, Failures, Reliability, Incidents, Capacity (by
    day, by pool), Trends, Data quality, Rejected rows, Definitions, Audit (input files with
    sha256, catalog and code version)."""

    def step(run: MonthRun) -> dict[str, int]:
        parameters = report_parameters(
            run.month,
            run.catalog,
            {
                "landing_dir": folder_name(run.folders.landing),
                "catalog_dir": folder_name(run.folders.catalog),
            },
        )
        name = f"chargeback-{run.month.label}.xlsx"
        out = staged_report(context, run, name)
        summary = write_chargeback_workbook(
            run.con, run.month.first_day, parameters, out,
            inputs=_landing_files(run.folders.landing),
            catalog_version=catalog_version(run.folders.catalog),
        )  # fmt: skip
        published = run.folders.reports / run.month.label / name
        context.add_output_metadata(
            {f"path_{run.month.label}": dg.MetadataValue.path(str(published))}
        )
        return {"charge_lines": summary["charge_lines"], "job_lines": summary["job_lines"]}

    return materialize_months(context, chargeback, step)


MONTH_MANIFEST = dg.AssetKey("month_manifest")


def assets_of_run(context: dg.AssetExecutionContext) -> Set[dg.AssetKey]:
    """The assets this run materialises. (Not `context.run.asset_selection`: an in-process
    run of a selection, `dg.materialize`, records an empty one.)"""
    return context.job_def.asset_layer.selected_asset_keys


def staged_report(context: dg.AssetExecutionContext, run: MonthRun, name: str) -> Path:
    """`<name>` in this run's staging folder of the month, published with its manifest."""
    label = run.month.label
    if MONTH_MANIFEST not in assets_of_run(context):
        context.log.warning(
            f"{name} of {label} is not published: month_manifest, which a month's reports "
            "need to be published as a whole, is not in this run"
        )
    return month_staging(run.folders.reports, label, run.run_id) / name


@report_asset(deps=["charge_lines", "charge_line_coverage"], kinds={"csv"})
def focus_export(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """`<reports>/YYYY-MM/focus-YYYY-MM.csv`: one row per charge line in FinOps FOCUS columns
    (BilledCost, EffectiveCost, ListCost, ConsumedQuantity/Unit, Charge/BillingPeriodStart/End,
    ChargeCategory, ChargeClass, SubAccountId/Name, ResourceId, SkuPriceId, Tags, ...)."""

    def step(run: MonthRun) -> dict[str, int]:
        out = staged_report(context, run, f"focus-{run.month.label}.csv")
        return {"focus_rows": write_focus_csv(run.con, run.params, out)}

    return materialize_months(context, chargeback, step)


@report_asset(deps=["user_efficiency", "catalog_tenants"], kinds={"csv"})
def notices_export(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """`<reports>/YYYY-MM/notices-YYYY-MM.csv`: one row per user whose jobs held GPUs idle or
    zombie for more than settings.yaml notice_idle_gpu_hours in the month, with the address to
    write to, the user's figures and idlest jobs (user_efficiency), for a mail merge."""

    def step(run: MonthRun) -> dict[str, int]:
        out = staged_report(context, run, f"notices-{run.month.label}.csv")
        return {"notices": write_notices_csv(run.con, run.params, out)}

    return materialize_months(context, chargeback, step)


_MANIFEST_TABLES = (
    "stg_jobs", "job_gpu_hours", "job_usage", "capacity_buckets", "charge_lines",
    "tenant_month", "rejects", "data_quality",
)  # fmt: skip


def reports_kept(context: dg.AssetExecutionContext, published: Path, label: str) -> list[str]:
    """The report steps whose published files of month `label` this run keeps: the steps it
    does not run whose tables it does not rebuild either (their files still describe the
    warehouse). A step made from a table the run rebuilds loses its files, said in the log."""
    in_run = assets_of_run(context)
    graph = context.job_def.asset_layer.asset_graph
    kept = []
    for step in REPORT_FILES:
        key = dg.AssetKey(step)
        if key in in_run:
            continue
        made_from = graph.get_ancestor_asset_keys(key)
        rebuilt = sorted(parent.to_user_string() for parent in made_from & in_run)
        if not rebuilt:
            kept.append(step)
            continue
        dropped = [name for name in report_files(step, label) if (published / name).exists()]
        if dropped:
            more = f" and {len(rebuilt) - 3} more" if len(rebuilt) > 3 else ""
            context.log.warning(
                f"{label}: {', '.join(dropped)} not published again: this run rebuilds "
                f"{', '.join(rebuilt[:3])}{more}, which {step} is made from, but not {step}; "
                f"add {step} to the run to publish its files"
            )
    return kept


@report_asset(
    # every report of the month: they must be in the staging folder before it is published
    deps=[
        chargeback_workbook,
        focus_export,
        notices_export,
        "department_reports",
        "organisation_page",
        "data_quality",
    ],  # fmt: skip
    kinds={"json"},
)
def month_manifest(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """`<reports>/YYYY-MM/manifest.json`, the audit record of a month's run: every input file
    with its sha256 and row counts, the catalog version, the parameters, the code version, the
    Dagster run id, the month's table row counts and `outputs`: every file of the month folder
    but the manifest (path relative to the folder, sha256, bytes, the report step that wrote it
    and whether it was carried over from the previous generation), in path order.

    Written last into the run's staging folder of the month: when the run ends with every step
    succeeded, the folder replaces `<reports>/YYYY-MM/` as a whole, together with the run's
    warehouse (pipelines/commit.py), so the manifest always describes the files beside it.
    The files of report steps this run did not run are carried over from the published folder,
    unless the run rebuilt a table they are made from (`reports_kept`)."""

    def step(run: MonthRun) -> dict[str, int]:
        month = {"billing_month": run.month.first_day}
        counts = {
            subject: {"rows_read": read, "rows_loaded": loaded, "rows_rejected": rejected,
                      "duplicates_folded": folded}
            for subject, read, loaded, rejected, folded in run.con.execute(
                "select subject, rows_read, rows_loaded, rows_rejected, duplicates_folded "
                "from data_quality where billing_month = $billing_month and category = 'file'",
                month,
            ).fetchall()
        }  # fmt: skip
        inputs = [
            {**landed, **counts.get(landed["file"], {})}
            for landed in _landing_files(run.folders.landing)
        ]
        label = run.month.label
        published = run.folders.reports / label
        folder = month_staging(run.folders.reports, label, context.run.run_id)
        carried = carry_over(published, folder, label, reports_kept(context, published, label))
        outputs = [
            {"file": name, "sha256": sha256_of(folder / name),
             "bytes": (folder / name).stat().st_size, "report": report_of(name, label),
             "carried_over": name.split("/", 1)[0] in carried}
            for name in month_files(folder)
        ]  # fmt: skip
        tables = {
            table: run.con.execute(
                f"select count(*) from {table} where billing_month = $billing_month", month
            ).fetchall()[0][0]
            for table in _MANIFEST_TABLES
        }
        [(total,)] = run.con.execute(
            "select coalesce(sum(amount), 0) from charge_lines "
            "where billing_month = $billing_month",
            month,
        ).fetchall()
        write_manifest(folder / "manifest.json", {
            "billing_month": run.month.label,
            "period_utc": [run.month.start.isoformat(), run.month.end.isoformat()],
            "dagster_run_id": context.run.run_id,
            "code_version": code_version(),
            "parameters": run.catalog.settings.model_dump(mode="json"),
            "catalog": {"dir": folder_name(run.folders.catalog),
                        "version": catalog_version(run.folders.catalog)},
            "inputs": inputs,
            "tables": tables,
            "total_charged": {"amount": str(total), "currency": run.catalog.settings.currency},
            "outputs": outputs,
        })  # fmt: skip
        return {"inputs": len(inputs)}

    return materialize_months(context, chargeback, step)
