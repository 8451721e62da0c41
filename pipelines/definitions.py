"""The Dagster code location: collects the definitions, nothing else.

Every warehouse table is an asset built by the step that declares it, in the stage modules
under pipelines/defs/ (listed here in the order a month flows through them); the reports
are assets of their own.
"""

import dagster as dg

from pipelines.defs.attribution import assets as attribution
from pipelines.defs.costing import assets as costing
from pipelines.defs.costing.close_job import close_month_job, ledger_tables
from pipelines.defs.governance import assets as governance
from pipelines.defs.ingest import assets as ingest
from pipelines.defs.quality import assets as quality
from pipelines.defs.reports import assets as reports
from pipelines.defs.reports import department_assets
from pipelines.defs.resources import ChargebackResource
from pipelines.defs.schedules import (
    chargeback_job,
    chargeback_monthly_schedule,
    telemetry_daily_schedule,
    telemetry_rollup_fanout_job,
    telemetry_rollup_job,
)
from pipelines.defs.trends import assets as trends
from pipelines.defs.warehouse import in_flow_order

# The steps that build the warehouse tables, each after the tables it reads.
TABLE_STEPS = in_flow_order([
    *ingest.STEPS, *attribution.STEPS, *costing.STEPS, *governance.STEPS, *costing.LAST_STEPS,
    *trends.STEPS, *quality.STEPS,
])  # fmt: skip

all_assets = [
    *(step.asset() for step in TABLE_STEPS),
    ingest.gpu_sample_rollup,
    *dg.load_assets_from_modules([reports, department_assets]),
]

defs = dg.Definitions(
    assets=[*all_assets, *ledger_tables],
    jobs=[chargeback_job, telemetry_rollup_job, telemetry_rollup_fanout_job, close_month_job],
    schedules=[chargeback_monthly_schedule, telemetry_daily_schedule],
    resources={"chargeback": ChargebackResource.from_env()},
    # One small month runs in seconds in-process; the multiprocess executor would spend ~10 s
    # starting processes, and DuckDB allows one writer per file anyway.
    executor=dg.in_process_executor,
)
