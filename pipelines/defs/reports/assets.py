"""Reports: the data-quality marts and the finance workbook of each billing month."""

from pathlib import Path

import dagster as dg

from pipelines.defs.attribution.assets import capacity_buckets, gpu_capacity, job_time_buckets
from pipelines.defs.costing.assets import charge_lines, job_usage, tenant_month
from pipelines.defs.ingest.assets import gpu_samples, stg_jobs
from pipelines.defs.monthly import monthly_sql_asset, run_months
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.reports.workbook import write_chargeback_workbook
from pipelines.defs.resources import ChargebackResource
from pipelines.version import code_version

GROUP = "reports"

rejects = monthly_sql_asset("rejects", "marts/rejects", [stg_jobs, gpu_samples], GROUP)
data_quality = monthly_sql_asset(
    "data_quality",
    "marts/data_quality",
    [rejects, job_usage, job_time_buckets, gpu_capacity],
    GROUP,
)


@dg.asset(
    deps=[charge_lines, tenant_month, job_usage, capacity_buckets, data_quality, rejects],
    partitions_def=monthly_partition,
    backfill_policy=single_run,
    group_name=GROUP,
    kinds={"excel"},
)
def chargeback_workbook(context: dg.AssetExecutionContext, chargeback: ChargebackResource):
    """The finance workbook `<reports>/YYYY-MM/chargeback-YYYY-MM.xlsx` of each billing month:
    Summary, Charges, Job lines, Waste, Data quality, Definitions."""

    def step(con, month, params, chargeback, catalog):
        settings = catalog.settings
        parameters = {
            "billing_month": month.label,
            "period_start_utc": month.start.isoformat(sep=" "),
            "period_end_utc": month.end.isoformat(sep=" "),
            "billing_timezone": settings.billing_timezone,
            "currency": settings.currency,
            "cost_mode": settings.cost_mode,
            "idle_threshold_pct": str(settings.idle_threshold_pct),
            "zombie_min_hours": str(settings.zombie_min_hours),
            "landing_dir": chargeback.landing_dir,
            "catalog_dir": chargeback.catalog_dir,
            # the run id stays out: the same inputs and code must give the same bytes
            "code_version": code_version(),
        }
        out = Path(chargeback.reports_dir) / month.label / f"chargeback-{month.label}.xlsx"
        out.parent.mkdir(parents=True, exist_ok=True)
        summary = write_chargeback_workbook(con, month.first_day, parameters, out)
        context.add_output_metadata({f"path_{month.label}": dg.MetadataValue.path(str(out))})
        return {"charge_lines": summary["charge_lines"], "job_lines": summary["job_lines"]}

    return run_months(context, chargeback, step)
