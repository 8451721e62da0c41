"""The billing month type (pipelines/months.py): bounds in and out of UTC, days, steps."""

import datetime as dt
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from pipelines.months import BillingMonth, first_days, month_label, parse_month

D, T = dt.date, dt.datetime
REPO = Path(__file__).resolve().parents[1]


def test_the_month_type_needs_no_dagster():
    code = "import sys, pipelines.months; print(sorted(m for m in sys.modules if 'dagster' in m))"
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert found.stdout == "[]\n"


def test_a_utc_month():
    november = BillingMonth.parse("2026-11", "UTC")
    assert (november.first_day, november.start, november.end) == (
        D(2026, 11, 1), T(2026, 11, 1), T(2026, 12, 1),
    )  # fmt: skip
    assert (november.label, november.partition_key) == ("2026-11", "2026-11-01")
    days = november.utc_days()
    assert (len(days), days[0], days[-1]) == (30, D(2026, 11, 1), D(2026, 11, 30))


def test_a_month_west_of_utc_crosses_a_dst_change():
    # New York: EDT (UTC-4) on Nov 1 until 2:00, EST (UTC-5) on Dec 1
    november = BillingMonth.parse("2026-11", "America/New_York")
    assert (november.start, november.end) == (T(2026, 11, 1, 4), T(2026, 12, 1, 5))
    assert november.local_start.isoformat() == "2026-11-01T00:00:00-04:00"
    assert november.local_end.isoformat() == "2026-12-01T00:00:00-05:00"
    # its last hours are in December 1 UTC: one more rollup day
    days = november.utc_days()
    assert (len(days), days[0], days[-1]) == (31, D(2026, 11, 1), D(2026, 12, 1))


def test_a_month_with_the_spring_dst_change_is_an_hour_short():
    # Berlin: CET (UTC+1) on March 1, CEST (UTC+2) from March 28, 2027
    march = BillingMonth.parse("2027-03", "Europe/Berlin")
    assert (march.start, march.end) == (T(2027, 2, 28, 23), T(2027, 3, 31, 22))
    assert march.end - march.start == dt.timedelta(hours=31 * 24 - 1)
    assert march.local_start.utcoffset() == dt.timedelta(hours=1)
    assert march.local_end.utcoffset() == dt.timedelta(hours=2)
    # the autumn change gives the hour back
    november = BillingMonth.parse("2026-11", "America/New_York")
    assert november.end - november.start == dt.timedelta(hours=30 * 24 + 1)


def test_a_month_east_of_utc_starts_the_day_before_in_utc():
    # Tokyo (UTC+9): March 1 00:00 JST is Feb 28 15:00 UTC
    march = BillingMonth.parse("2027-03", "Asia/Tokyo")
    assert (march.start, march.end) == (T(2027, 2, 28, 15), T(2027, 3, 31, 15))
    days = march.utc_days()
    assert (len(days), days[0], days[-1]) == (32, D(2027, 2, 28), D(2027, 3, 31))


def test_utc_days_at_a_half_hour_offset():
    # Kolkata (UTC+5:30): both edges fall inside a UTC day, each counts once
    november = BillingMonth.parse("2026-11", "Asia/Kolkata")
    assert (november.start, november.end) == (T(2026, 10, 31, 18, 30), T(2026, 11, 30, 18, 30))
    days = november.utc_days()
    assert (len(days), days[0], days[-1]) == (31, D(2026, 10, 31), D(2026, 11, 30))
    assert days == sorted(set(days))


def test_next_and_previous_across_the_year():
    december = BillingMonth.parse("2026-12", "Europe/Berlin")
    assert december.next() == BillingMonth.parse("2027-01", "Europe/Berlin")
    assert december.next().previous() == december
    assert BillingMonth.parse("2027-01", "UTC").previous().label == "2026-12"
    # a month's end is the next month's start, in any timezone
    assert december.end == december.next().start == T(2026, 12, 31, 23)


def test_the_month_containing_an_instant_is_that_of_the_billing_timezone():
    # 2026-11-30 23:30 UTC is already December 1 in Berlin
    instant = T(2026, 11, 30, 23, 30)
    assert BillingMonth.containing(instant, "UTC").label == "2026-11"
    assert BillingMonth.containing(instant, "Europe/Berlin").label == "2026-12"


def test_months_between_two_days():
    assert first_days(D(2026, 11, 15), D(2027, 2, 1)) == [
        D(2026, 11, 1), D(2026, 12, 1), D(2027, 1, 1), D(2027, 2, 1),
    ]  # fmt: skip
    months = BillingMonth.range(D(2026, 12, 1), D(2027, 1, 31), "Asia/Tokyo")
    assert [month.label for month in months] == ["2026-12", "2027-01"]
    assert months[0].end == months[1].start  # contiguous, in the billing timezone
    assert BillingMonth.range(D(2027, 1, 1), D(2026, 12, 1), "UTC") == []
    assert month_label(D(2026, 1, 31)) == "2026-01"


def test_sql_parameters_are_typed_and_named():
    class Settings:
        currency, idle_threshold_pct, zombie_min_hours = "EUR", 5, 1.5
        silence_min_minutes = 12.5
        cost_mode, idle_sharing = "full_recovery", "even"
        notice_idle_gpu_hours = Decimal("12.5")

    params = BillingMonth.parse("2026-11", "America/New_York").params(Settings())
    assert params.sql() == {
        "billing_month": D(2026, 11, 1),
        "budget_month": "2026-11",
        "month_start": T(2026, 11, 1, 4),
        "month_end": T(2026, 12, 1, 5),
        "currency": "EUR",
        "idle_threshold_pct": 5.0,
        "zombie_min_ms": 5_400_000,
        "silence_min_ms": 750_000,
        "cost_mode": "full_recovery",
        "idle_sharing": "even",
        "notice_idle_gpu_hours": Decimal("12.5"),
    }


@pytest.mark.parametrize("text", ["2016-13", "december", "2026-1", "2026-11-02", ""])
def test_what_is_not_a_month_is_one_line_naming_it(text):
    with pytest.raises(ValueError) as error:
        parse_month(text)
    assert str(error.value) == f"{text}: not a month (YYYY-MM, e.g. 2026-11)"


def test_a_partition_key_is_a_month_too():
    assert parse_month("2026-11-01") == parse_month(" 2026-11 ") == D(2026, 11, 1)
