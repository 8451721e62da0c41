"""Governance evidence: quota compliance, queue and service, failures, capacity verdict."""

from collections.abc import Sequence

import dagster as dg

from pipelines.defs.attribution.assets import capacity_buckets, job_gpu_hours, job_time_buckets
from pipelines.defs.costing.assets import job_usage, quota_steps
from pipelines.defs.ingest.assets import catalog, stg_jobs
from pipelines.defs.monthly import MonthRun, materialize_months, monthly_sql_asset, sql_description
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.resources import ChargebackResource
from pipelines.sql import replace_month
from pipelines.sql import run as run_sql

GROUP = "governance"


def checked_sql_asset(
    table: str,
    sql_name: str,
    deps: Sequence[str | dg.AssetsDefinition],
    checks: Sequence[str],
) -> dg.AssetsDefinition:
    """`monthly_sql_asset` plus checks run on the months it just built, in the same step.

    Each check is `sql/checks/<name>.sql`, returning one row per violation; a violation fails
    the check (severity ERROR, blocking: nothing downstream of the table runs).
    """
    specs = [
        dg.AssetCheckSpec(
            name, asset=table, blocking=True, description=sql_description(f"checks/{name}")
        )
        for name in checks
    ]

    @dg.asset(
        name=table,
        deps=deps,
        partitions_def=monthly_partition,
        backfill_policy=single_run,
        group_name=GROUP,
        description=sql_description(sql_name),
        kinds={"duckdb", "sql"},
        check_specs=specs,
    )
    def _asset(
        context: dg.AssetExecutionContext, chargeback: ChargebackResource
    ) -> dg.MaterializeResult:
        found: dict[str, list[dict]] = {name: [] for name in checks}
        months: list[str] = []

        def step(run: MonthRun) -> dict[str, int]:
            rows = replace_month(run.con, table, sql_name, run.params)
            months.append(run.month.label)
            for name in checks:
                cursor = run_sql(run.con, f"checks/{name}", run.params)
                columns = [c[0] for c in cursor.description]
                found[name] += [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
            return {table: rows}

        result = materialize_months(context, chargeback, step)
        return dg.MaterializeResult(
            metadata=result.metadata,
            check_results=[
                dg.AssetCheckResult(
                    check_name=name,
                    passed=not violations,
                    severity=dg.AssetCheckSeverity.ERROR,
                    metadata={
                        "months": ", ".join(months),
                        "violations": len(violations),
                        "first_violations": dg.MetadataValue.json(
                            [{k: str(v) for k, v in row.items()} for row in violations[:20]]
                        ),
                    },
                )
                for name, violations in found.items()
            ],
        )

    return _asset


quota_compliance = checked_sql_asset(
    "quota_compliance",
    "marts/quota_compliance",
    [catalog, quota_steps],
    ["quota_compliance_ties_out"],
)
queue_stats = monthly_sql_asset(
    "queue_stats", "marts/queue_stats", [job_usage, job_gpu_hours], GROUP
)
failure_stats = monthly_sql_asset(
    "failure_stats", "marts/failure_stats", [catalog, stg_jobs, job_gpu_hours], GROUP
)
capacity_evidence = monthly_sql_asset(
    "capacity_evidence",
    "marts/capacity_evidence",
    [capacity_buckets, queue_stats, quota_compliance],
    GROUP,
)
utilization_daily = checked_sql_asset(
    "utilization_daily",
    "marts/utilization_daily",
    [catalog, job_gpu_hours, job_usage, job_time_buckets],
    ["utilization_daily_ties_out"],
)
