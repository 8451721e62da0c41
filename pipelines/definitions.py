"""The Dagster code location: collects the definitions, nothing else."""

import dagster as dg

from pipelines.defs.attribution import assets as attribution
from pipelines.defs.checks import checks
from pipelines.defs.costing import assets as costing
from pipelines.defs.costing.close_job import close_month_job
from pipelines.defs.governance import assets as governance
from pipelines.defs.governance import telemetry_labels
from pipelines.defs.ingest import assets as ingest
from pipelines.defs.reports import assets as reports
from pipelines.defs.reports import department_assets
from pipelines.defs.resources import ChargebackResource
from pipelines.defs.schedules import (
    chargeback_job,
    chargeback_monthly_schedule,
    telemetry_daily_schedule,
    telemetry_rollup_job,
)

all_assets = dg.load_assets_from_modules(
    [ingest, attribution, costing, governance, telemetry_labels, reports, department_assets]
)

defs = dg.Definitions(
    assets=all_assets,
    asset_checks=checks,
    jobs=[chargeback_job, telemetry_rollup_job, close_month_job],
    schedules=[chargeback_monthly_schedule, telemetry_daily_schedule],
    resources={"chargeback": ChargebackResource.from_env()},
    # One small month runs in seconds in-process; the multiprocess executor would spend ~10 s
    # starting processes, and DuckDB allows one writer per file anyway.
    executor=dg.in_process_executor,
)
