"""The monthly schedule requests the month just ended once the daily schedule has rolled up
every UTC day of it, whatever the catalog's billing timezone: the 1st at 03:00 UTC for UTC
and zones east of it, the 2nd at 03:00 UTC for zones west of it (their month's last UTC day
is the 1st, rolled up at 01:00 on the 2nd)."""

import datetime as dt
from pathlib import Path

import dagster as dg
import pytest

from pipelines.definitions import defs
from pipelines.defs.schedules import chargeback_job
from tests.conftest import resource_for, write

DEC_1 = dt.datetime(2026, 12, 1, 3, 0, tzinfo=dt.UTC)
DEC_2 = dt.datetime(2026, 12, 2, 3, 0, tzinfo=dt.UTC)


def tick(root: Path, billing_timezone: str, at: dt.datetime):
    """The monthly schedule's tick at `at` with a catalog in `billing_timezone`."""
    write(root / "catalog/settings.yaml", f"billing_timezone: {billing_timezone}\n")
    write(root / "catalog/tenants.yaml", "tenants: []\n")
    write(root / "catalog/rates.yaml", "rates: []\n")
    schedule = defs.resolve_schedule_def("chargeback_monthly_schedule")
    # the resource has a teardown (the end of a run): Dagster opens it in a context manager
    with dg.build_schedule_context(
        scheduled_execution_time=at,
        resources={"chargeback": resource_for(root)},
        repository_def=defs.get_repository_def(),
    ) as context:
        return schedule.evaluate_tick(context)


def requested(data) -> list[tuple[str | None, str | None]]:
    return [(request.partition_key, request.run_key) for request in data.run_requests or []]


def test_the_schedule_ticks_on_the_1st_and_the_2nd_at_3_utc():
    schedule = defs.resolve_schedule_def("chargeback_monthly_schedule")
    assert schedule.cron_schedule == "0 3 1,2 * *"
    assert schedule.execution_timezone == "UTC"
    assert schedule.job_name == "chargeback_job"


@pytest.mark.parametrize("billing_timezone", ["UTC", "Asia/Tokyo"])
def test_utc_and_east_of_it_run_on_the_1st(tmp_path, billing_timezone):
    """November's last UTC day is Nov 30 (Tokyo's November ends at 15:00 UTC that day),
    rolled up at 01:00 on Dec 1: the 1st's tick requests it, as before."""
    first = tick(tmp_path, billing_timezone, DEC_1)
    assert requested(first) == [("2026-11-01", "2026-11-01")]
    assert first.skip_message is None


@pytest.mark.parametrize("billing_timezone", ["UTC", "Asia/Tokyo"])
def test_the_2nd_skips_a_month_the_1st_requested(tmp_path, billing_timezone):
    """A schedule's run key keeps one run per tick only (the daemon looks for a run of the
    same key and tick time): the 2nd's tick must not request the month again."""
    second = tick(tmp_path, billing_timezone, DEC_2)
    assert requested(second) == []
    assert second.skip_message == (
        "2026-11 was requested at the 2026-12-01 03:00 UTC tick (its last UTC day, "
        "2026-11-30, was rolled up at 2026-12-01 01:00 UTC)"
    )


def test_west_of_utc_runs_on_the_2nd_once_its_last_utc_day_is_rolled_up(tmp_path):
    """New York's November ends at 05:00 UTC on Dec 1: the run needs UTC day 2026-12-01,
    rolled up at 01:00 on Dec 2."""
    first = tick(tmp_path, "America/New_York", DEC_1)
    assert requested(first) == []
    assert first.skip_message == (
        "2026-11 waits for its last UTC day, 2026-12-01, rolled up at 2026-12-02 01:00 UTC "
        "(billing timezone America/New_York)"
    )
    second = tick(tmp_path, "America/New_York", DEC_2)
    assert requested(second) == [("2026-11-01", "2026-11-01")]
    assert second.skip_message is None


@pytest.mark.parametrize(
    ("billing_timezone", "at"),
    [("UTC", DEC_1), ("Asia/Tokyo", DEC_1), ("America/New_York", DEC_2)],
)
def test_the_run_is_the_one_of_the_partitioned_job(tmp_path, billing_timezone, at):
    """The run is the one build_schedule_from_partitioned_job's schedule requested (the
    schedule before billing timezones west of UTC): the month's partition key, run key, tags
    and config, so the UI and backfills see the same run."""
    [request] = tick(tmp_path, billing_timezone, at).run_requests
    job = defs.resolve_job_def("chargeback_job")
    partitioned = dg.build_schedule_from_partitioned_job(
        chargeback_job, name="chargeback_monthly_schedule", day_of_month=1, hour_of_day=3
    ).resolve(job)
    [expected] = partitioned.evaluate_tick(
        dg.build_schedule_context(scheduled_execution_time=DEC_1)
    ).run_requests
    assert request == expected
    assert request.partition_key == request.run_key == request.tags["dagster/partition"]
    assert request.partition_key == "2026-11-01"


def test_no_month_before_the_first_one(tmp_path):
    """The partitions start at CHARGEBACK_FIRST_MONTH (2016-01 in the tests): the tick of
    January 2016 has no month just ended to run."""
    first = tick(tmp_path, "UTC", dt.datetime(2016, 1, 1, 3, 0, tzinfo=dt.UTC))
    assert requested(first) == []
    assert first.skip_message == "2015-12 is before the first month, 2016-01"
