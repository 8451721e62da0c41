"""The jobs and their schedules: the telemetry rollup every day at 01:00 UTC for the day just
ended, and the month on the 1st at 03:00 UTC for the month just ended.

A run holds assets of one partitioning only, so the daily rollup is its own job; the monthly
job reads the days the daily schedule rolled up (a late day: re-run it, then the month).
"""

import dagster as dg

ROLLUP = dg.AssetSelection.assets("gpu_sample_rollup")

chargeback_job = dg.define_asset_job(
    "chargeback_job",
    selection=dg.AssetSelection.all() - ROLLUP,
    description="Every monthly asset of one billing month, from the landed exports to the "
    "workbook (the month's days must be rolled up: telemetry_rollup_job).",
)

chargeback_monthly_schedule = dg.build_schedule_from_partitioned_job(
    chargeback_job,
    name="chargeback_monthly_schedule",
    day_of_month=1,
    hour_of_day=3,
)

telemetry_rollup_job = dg.define_asset_job(
    "telemetry_rollup_job",
    selection=ROLLUP,
    description="The GPU telemetry of one UTC day (or a range of days) as Parquet rollups.",
)

telemetry_daily_schedule = dg.build_schedule_from_partitioned_job(
    telemetry_rollup_job,
    name="telemetry_daily_schedule",
    hour_of_day=1,
)
