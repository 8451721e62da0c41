"""The billing month, one value for every stage: assets, checks, report writers and the CLI.

A billing month is a calendar month in the billing timezone (settings.yaml
`billing_timezone`). Its bounds in naive UTC, `[start, end)`, are what the SQL compares
timestamps with; its UTC days are the telemetry rollup partitions its figures come from; its
label `YYYY-MM` names its reports folder; its first day is the `billing_month` column and, as
`YYYY-MM-01`, its Dagster partition key. No Dagster here: a value type and its arithmetic.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol
from zoneinfo import ZoneInfo

_LABEL = re.compile(r"(\d{4})-(\d{2})(?:-01)?")


def first_of_next_month(day: dt.date) -> dt.date:
    return (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)


def first_days(first: dt.date, last: dt.date) -> list[dt.date]:
    """The first days of the months from `first`'s to `last`'s, both included."""
    days, day = [], first.replace(day=1)
    while day <= last:
        days.append(day)
        day = first_of_next_month(day)
    return days


def month_label(day: dt.date) -> str:
    """`YYYY-MM` of the month `day` is in: a month's name in reports, folders and messages."""
    return day.strftime("%Y-%m")


def parse_month(text: str) -> dt.date:
    """`2026-11` (or a partition key `2026-11-01`) as the month's first day; ValueError with
    one line naming the text otherwise."""
    found = _LABEL.fullmatch(text.strip())
    if found is None or not 1 <= int(found[2]) <= 12:
        raise ValueError(f"{text}: not a month (YYYY-MM, e.g. 2026-11)")
    return dt.date(int(found[1]), int(found[2]), 1)


class MonthSettings(Protocol):
    """What the month's SQL parameters take from settings.yaml (pipelines.catalog.Settings)."""

    currency: str
    idle_threshold_pct: Decimal
    zombie_min_hours: Decimal
    silence_min_minutes: Decimal
    cost_mode: str
    idle_sharing: str
    notice_idle_gpu_hours: Decimal


@dataclass(frozen=True)
class BillingMonth:
    """One calendar month in the billing timezone, with its naive UTC bounds `[start, end)`."""

    first_day: dt.date
    timezone: str
    start: dt.datetime
    end: dt.datetime

    @classmethod
    def of(cls, first_day: dt.date, timezone: str) -> BillingMonth:
        zone = ZoneInfo(timezone)

        def utc(day: dt.date) -> dt.datetime:
            local = dt.datetime(day.year, day.month, day.day, tzinfo=zone)
            return local.astimezone(dt.UTC).replace(tzinfo=None)

        first_day = first_day.replace(day=1)
        return cls(first_day, timezone, utc(first_day), utc(first_of_next_month(first_day)))

    @classmethod
    def parse(cls, text: str, timezone: str) -> BillingMonth:
        return cls.of(parse_month(text), timezone)

    @classmethod
    def containing(cls, instant: dt.datetime, timezone: str) -> BillingMonth:
        """The billing month a naive UTC instant falls in."""
        local = instant.replace(tzinfo=dt.UTC).astimezone(ZoneInfo(timezone))
        return cls.of(local.date(), timezone)

    @classmethod
    def range(cls, first: dt.date, last: dt.date, timezone: str) -> list[BillingMonth]:
        """The months from `first`'s to `last`'s, both included, in order."""
        return [cls.of(day, timezone) for day in first_days(first, last)]

    @property
    def label(self) -> str:
        """`YYYY-MM`: the month's name in reports, folders and messages."""
        return month_label(self.first_day)

    @property
    def partition_key(self) -> str:
        return self.first_day.isoformat()

    @property
    def local_start(self) -> dt.datetime:
        """The first instant of the month in the billing timezone (aware)."""
        return self.start.replace(tzinfo=dt.UTC).astimezone(ZoneInfo(self.timezone))

    @property
    def local_end(self) -> dt.datetime:
        """The first instant after the month in the billing timezone (aware)."""
        return self.end.replace(tzinfo=dt.UTC).astimezone(ZoneInfo(self.timezone))

    def next(self) -> BillingMonth:
        return BillingMonth.of(first_of_next_month(self.first_day), self.timezone)

    def previous(self) -> BillingMonth:
        last_day_before = self.first_day - dt.timedelta(days=1)
        return BillingMonth.of(last_day_before, self.timezone)

    def utc_days(self) -> list[dt.date]:
        """The UTC days the month overlaps (one more at an edge outside UTC): the telemetry
        rollup partitions its figures are read from."""
        last = (self.end - dt.timedelta(microseconds=1)).date()
        days, day = [], self.start.date()
        while day <= last:
            days.append(day)
            day += dt.timedelta(days=1)
        return days

    def params(self, settings: MonthSettings) -> MonthParams:
        """The month's SQL parameters with the settings every monthly SQL file may use."""
        return MonthParams(
            billing_month=self.first_day,
            budget_month=self.label,
            month_start=self.start,
            month_end=self.end,
            currency=settings.currency,
            idle_threshold_pct=float(settings.idle_threshold_pct),
            zombie_min_ms=int(settings.zombie_min_hours * 3_600_000),
            silence_min_ms=int(settings.silence_min_minutes * 60_000),
            cost_mode=settings.cost_mode,
            idle_sharing=settings.idle_sharing,
            notice_idle_gpu_hours=settings.notice_idle_gpu_hours,
        )


@dataclass(frozen=True)
class MonthParams:
    """The bound parameters of the monthly SQL files (`$billing_month`, `$month_start` ...)."""

    billing_month: dt.date  # the month's first day: the billing_month column
    budget_month: str  # YYYY-MM, as budgets.yaml names months
    month_start: dt.datetime  # naive UTC, inclusive
    month_end: dt.datetime  # naive UTC, exclusive
    currency: str
    idle_threshold_pct: float
    zombie_min_ms: int
    silence_min_ms: int
    cost_mode: str  # rate_card or full_recovery
    idle_sharing: str  # full_recovery's policy for idle capacity
    notice_idle_gpu_hours: Decimal  # a user past this many idle + zombie GPU-hours is notified

    def sql(self) -> dict[str, Any]:
        """The parameters by name, for `pipelines.sql.run` and DuckDB."""
        return dataclasses.asdict(self)
