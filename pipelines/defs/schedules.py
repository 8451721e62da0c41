"""The monthly job and its schedule: on the 1st at 03:00 UTC, the month just ended."""

import dagster as dg

chargeback_job = dg.define_asset_job(
    "chargeback_job",
    selection=dg.AssetSelection.all(),
    description="Every asset of one billing month, from the landed exports to the workbook.",
)

chargeback_monthly_schedule = dg.build_schedule_from_partitioned_job(
    chargeback_job,
    name="chargeback_monthly_schedule",
    day_of_month=1,
    hour_of_day=3,
)
