"""Asset checks for the invariants of DESIGN.md. Blocking ones stop the reports going out.

Each check runs the SQL in `sql/checks/<name>.sql`, which returns one row per violation, for
the billing months of its partition window (a backfill checks every month it built).
"""

import warnings

import dagster as dg

from pipelines.defs.attribution.assets import capacity_buckets, gpu_capacity
from pipelines.defs.costing.assets import charge_lines, job_usage, tenant_month
from pipelines.defs.governance.telemetry_labels import telemetry_label_checks
from pipelines.defs.partitions import monthly_partition, window_months
from pipelines.defs.reports.assets import data_quality
from pipelines.defs.resources import ChargebackResource
from pipelines.sql import run

# A check partitioned like its asset is "preview" in Dagster 1.13 (dagster is pinned exactly, so
# a patch release cannot change it under us); the warning would print on every load.
warnings.filterwarnings("ignore", category=dg.PreviewWarning)


def violations(
    context: dg.AssetCheckExecutionContext, chargeback: ChargebackResource, name: str
) -> tuple[list[dict], list[str]]:
    """The rows `sql/checks/<name>.sql` returns for each billing month of the check's
    partition window (the run's months: a backfill checks every month it built)."""
    found: list[dict] = []
    settings = chargeback.catalog().settings
    months = window_months(context.partition_time_window, settings.billing_timezone)
    with chargeback.connect() as con:
        for month in months:
            cursor = run(con, f"checks/{name}", month.params(settings))
            columns = [c[0] for c in cursor.description]
            found += [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    return found, [month.label for month in months]


def _result(
    found: list[dict],
    months: list[str],
    severity=dg.AssetCheckSeverity.ERROR,
    **metadata: dg.MetadataValue,
):
    return dg.AssetCheckResult(
        passed=not found,
        severity=severity,
        metadata={
            "months": ", ".join(months),
            "violations": len(found),
            "first_violations": dg.MetadataValue.json(
                [{k: str(v) for k, v in row.items()} for row in found[:20]]
            ),
            **metadata,
        },
    )


@dg.asset_check(asset=capacity_buckets, blocking=True, partitions_def=monthly_partition)
def capacity_buckets_sum_to_capacity(
    context: dg.AssetCheckExecutionContext, chargeback: ChargebackResource
) -> dg.AssetCheckResult:
    """Per cluster and GPU model, the eight waste buckets sum exactly (in GPU-milliseconds) to
    the capacity; a model with job time but no capacity fails when the inventory is known."""
    return _result(*violations(context, chargeback, "capacity_buckets_sum_to_capacity"))


@dg.asset_check(asset=gpu_capacity, partitions_def=monthly_partition)
def gpus_never_oversubscribed(
    context: dg.AssetCheckExecutionContext, chargeback: ChargebackResource
) -> dg.AssetCheckResult:
    """The GPU-equivalents held on one physical GPU never exceed 1 at any time; the GPUs where
    they do are listed with the jobs that held them then (their excess also breaks
    capacity_buckets_sum_to_capacity, which blocks the reports). A GPU shared by declaration
    (settings.yaml `sharing`) holds 1/replicas per job: only undeclared overlap lands here."""
    return _result(*violations(context, chargeback, "gpus_never_oversubscribed"))


@dg.asset_check(asset=tenant_month, blocking=True, partitions_def=monthly_partition)
def charges_tie_out(
    context: dg.AssetCheckExecutionContext, chargeback: ChargebackResource
) -> dg.AssetCheckResult:
    """Charge lines sum to each tenant's amount, tenants to the month total, and the total is
    the exact priced usage rounded to the cent; no line is more than a cent from its exact
    amount."""
    return _result(*violations(context, chargeback, "charges_tie_out"))


@dg.asset_check(asset=charge_lines, blocking=True, partitions_def=monthly_partition)
def cluster_cost_recovered(
    context: dg.AssetCheckExecutionContext, chargeback: ChargebackResource
) -> dg.AssetCheckResult:
    """In full_recovery, each cluster's charge lines (tenants and platform, credits negative)
    add up exactly, to the cent, to the cluster's cost (nodes' monthly_cost prorated plus
    overhead), and so does each cluster × GPU model pool. Nothing to check in rate_card."""
    return _result(*violations(context, chargeback, "cluster_cost_recovered"))


@dg.asset_check(asset=job_usage, partitions_def=monthly_partition)
def every_account_mapped(
    context: dg.AssetCheckExecutionContext, chargeback: ChargebackResource
) -> dg.AssetCheckResult:
    """Every scheduler account maps to a tenant; the unmapped ones are listed (a warning: their
    usage is billed to the 'unmapped' tenant so nothing is lost)."""
    found, months = violations(context, chargeback, "every_account_mapped")
    result = _result(found, months, dg.AssetCheckSeverity.WARN)
    return dg.AssetCheckResult(
        passed=result.passed,
        severity=result.severity,
        metadata={
            **result.metadata,
            "unmapped_accounts": ", ".join(sorted({str(row["account"]) for row in found})),
        },
    )


@dg.asset_check(asset=data_quality, blocking=True, partitions_def=monthly_partition)
def rows_reconcile(
    context: dg.AssetCheckExecutionContext, chargeback: ChargebackResource
) -> dg.AssetCheckResult:
    """For every input file, rows read = rows loaded + rows rejected, and every rejected row is
    in the rejects table."""
    return _result(*violations(context, chargeback, "rows_reconcile"))


@dg.asset_check(asset=data_quality, blocking=True, partitions_def=monthly_partition)
def no_file_mostly_rejected(
    context: dg.AssetCheckExecutionContext, chargeback: ChargebackResource
) -> dg.AssetCheckResult:
    """No input file loses more than half of its rows to rejects: such a file was misread as a
    whole (wrong field order, line endings, format), and a month billed without it would look
    complete. The files are listed with their first reject's reason."""
    return _result(*violations(context, chargeback, "no_file_mostly_rejected"))


@dg.asset_check(asset=telemetry_label_checks, partitions_def=monthly_partition)
def telemetry_labels_agree_with_scheduler(
    context: dg.AssetCheckExecutionContext, chargeback: ChargebackResource
) -> dg.AssetCheckResult:
    """The DCGM hpc_job / pod / namespace labels of the samples name the job the scheduler
    says held the GPU; the disagreements are listed by kind (a warning: attribution follows
    the scheduler, the labels are evidence that its GPU placement may be wrong)."""
    found, months = violations(context, chargeback, "telemetry_labels_agree_with_scheduler")
    hours: dict[str, float] = {}
    for row in found:
        hours[row["kind"]] = hours.get(row["kind"], 0.0) + row["gpu_hours"]
    by_kind = {kind: round(value, 6) for kind, value in sorted(hours.items())}
    return _result(
        found,
        months,
        dg.AssetCheckSeverity.WARN,
        gpu_hours_by_kind=dg.MetadataValue.json(by_kind),
    )


checks = [
    capacity_buckets_sum_to_capacity,
    gpus_never_oversubscribed,
    charges_tie_out,
    cluster_cost_recovered,
    every_account_mapped,
    rows_reconcile,
    no_file_mostly_rejected,
    telemetry_labels_agree_with_scheduler,
]
