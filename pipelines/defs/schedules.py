"""The jobs and their schedules: the telemetry rollup every day at 01:00 UTC for the day just
ended, and the month on the 1st at 03:00 UTC for the month just ended.

A run holds assets of one partitioning only, so the daily rollup is its own job; the monthly
job reads the days the daily schedule rolled up (a late day: re-run it, then the month).
The rollup's fan-out job runs its day on a Celery worker, one run per day of a backfill.
"""

import os

import dagster as dg
from dagster_celery import celery_executor

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

# The Celery broker (Redis) of the fan-out job, also its result backend. Set, the variable is
# read when a run starts, in its process (as the resource's settings); unset, Redis on this
# machine (`make workers`).
CELERY_BROKER = "CHARGEBACK_CELERY_BROKER"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
_broker = {"env": CELERY_BROKER} if CELERY_BROKER in os.environ else DEFAULT_BROKER

telemetry_rollup_fanout_job = dg.define_asset_job(
    "telemetry_rollup_fanout_job",
    selection=ROLLUP,
    description="The telemetry rollup of a UTC day on a Celery worker: a backfill of this job "
    "(`dagster job backfill`) is one run per day, so the days spread over the workers. Each "
    "worker writes to the shared rollup folder (CHARGEBACK_ROLLUP_DIR) and spills to its own.",
    executor_def=celery_executor.configured(
        {"broker": _broker, "backend": _broker}, name="celery_redis"
    ),
)
