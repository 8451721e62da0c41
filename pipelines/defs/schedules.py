"""The jobs and their schedules: the telemetry rollup every day at 01:00 UTC for the day just
ended, and the month just ended once every UTC day of it is rolled up: at 03:00 UTC on the 1st
for a billing timezone of UTC or east of it, on the 2nd for one west of UTC (its month ends
on the 1st in UTC, so its last UTC day, the 1st, is rolled up at 01:00 on the 2nd).

A run holds assets of one partitioning only, so the daily rollup is its own job; the monthly
job reads the days the daily schedule rolled up (a late day: re-run it, then the month).
The rollup's fan-out job runs its day on a Celery worker, one run per day of a backfill.
"""

import datetime as dt
import os

import dagster as dg
from dagster_celery import celery_executor

from pipelines.defs.partitions import FIRST_DAY
from pipelines.defs.resources import ChargebackResource
from pipelines.months import BillingMonth

ROLLUP = dg.AssetSelection.assets("gpu_sample_rollup")

chargeback_job = dg.define_asset_job(
    "chargeback_job",
    selection=dg.AssetSelection.all() - ROLLUP,
    description="Every monthly asset of one billing month, from the landed exports to the "
    "workbook (the month's days must be rolled up: telemetry_rollup_job).",
)

telemetry_rollup_job = dg.define_asset_job(
    "telemetry_rollup_job",
    selection=ROLLUP,
    description="The GPU telemetry of one UTC day (or a range of days) as Parquet rollups.",
)

# UTC day D is rolled up at ROLLUP_HOUR on D+1; a month is run at MONTH_HOUR, which leaves the
# rollup of its last day two hours.
ROLLUP_HOUR = 1
MONTH_HOUR = 3

telemetry_daily_schedule = dg.build_schedule_from_partitioned_job(
    telemetry_rollup_job,
    name="telemetry_daily_schedule",
    hour_of_day=ROLLUP_HOUR,
)


def rolled_up_at(month: BillingMonth) -> dt.datetime:
    """When the daily schedule rolls up the month's last UTC day: the month can run after."""
    last_day = month.utc_days()[-1] + dt.timedelta(days=1)
    return dt.datetime.combine(last_day, dt.time(ROLLUP_HOUR), tzinfo=dt.UTC)


def _utc(instant: dt.datetime) -> str:
    return f"{instant:%Y-%m-%d %H:%M} UTC"


# Ticks on the 1st and the 2nd: a month's last UTC day is the last day of the month (UTC and
# east of it) or the 1st (west of it: UTC-12 ends the month at 12:00 UTC on the 1st), so
# every month is rolled up by 01:00 on the 2nd. The month is requested at the first of the
# two ticks after its rollup: a schedule's run key keeps one run per tick, not per key (the
# daemon looks for a run with the same key *and* tick time), so the 2nd skips a month the 1st
# requested. The billing timezone is the catalog's, read at each tick like a run reads it.
@dg.schedule(
    name="chargeback_monthly_schedule",
    cron_schedule=f"0 {MONTH_HOUR} 1,2 * *",
    execution_timezone="UTC",
    job=chargeback_job,
    description="The billing month just ended, once the daily schedule has rolled up its "
    "last UTC day: the 1st at 03:00 UTC (billing timezone UTC or east of it) or the 2nd "
    "(west of UTC).",
)
def chargeback_monthly_schedule(
    context: dg.ScheduleEvaluationContext, chargeback: ChargebackResource
) -> dg.RunRequest | dg.SkipReason:
    tick = context.scheduled_execution_time.astimezone(dt.UTC)
    first_tick = tick.replace(day=1, hour=MONTH_HOUR, minute=0, second=0, microsecond=0)
    timezone = chargeback.catalog().settings.billing_timezone
    month = BillingMonth.of(first_tick.date() - dt.timedelta(days=1), timezone)
    if month.first_day < dt.date.fromisoformat(FIRST_DAY):
        return dg.SkipReason(f"{month.label} is before the first month, {FIRST_DAY[:7]}")
    ready = rolled_up_at(month)
    last_day = month.utc_days()[-1].isoformat()
    if ready > tick:
        return dg.SkipReason(
            f"{month.label} waits for its last UTC day, {last_day}, rolled up at "
            f"{_utc(ready)} (billing timezone {timezone})"
        )
    if tick > first_tick and ready <= first_tick:
        return dg.SkipReason(
            f"{month.label} was requested at the {_utc(first_tick)} tick (its last UTC day, "
            f"{last_day}, was rolled up at {_utc(ready)})"
        )
    # the partition's tags and config are the job's, added when the tick is evaluated: the
    # run is the one build_schedule_from_partitioned_job requested
    key = month.partition_key
    return dg.RunRequest(job_name=chargeback_job.name, partition_key=key, run_key=key)


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
