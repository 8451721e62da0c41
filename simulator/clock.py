"""Time in the simulator: integer seconds since 1970-01-01, naive UTC, and how the exports
print it."""

from __future__ import annotations

import functools
from datetime import date, datetime, timedelta

EPOCH = datetime(1970, 1, 1)


def epoch(dt: datetime) -> int:
    return int((dt - EPOCH).total_seconds())


@functools.lru_cache(maxsize=1 << 16)  # the exports print the same instants many times
def fmt_ts(ts: int | None) -> str:
    """Epoch seconds as sacct / ISO text without zone (`2026-11-01T12:00:00`)."""
    return "" if ts is None else (EPOCH + timedelta(seconds=ts)).strftime("%Y-%m-%dT%H:%M:%S")


def fmt_date(ts: int) -> str:
    return (EPOCH + timedelta(seconds=ts)).strftime("%Y-%m-%d")


def month_bounds(month: str) -> tuple[datetime, datetime]:
    """First instant of the month and of the next one."""
    start = datetime.strptime(month, "%Y-%m")
    return start, (start + timedelta(days=32)).replace(day=1)


def date_of(ts: int) -> date:
    """The UTC day of an instant."""
    return (EPOCH + timedelta(seconds=ts)).date()


def add_months(month: str, count: int) -> str:
    """`add_months("2026-11", -2) == "2026-09"`."""
    year, number = divmod(int(month[:4]) * 12 + int(month[5:7]) - 1 + count, 12)
    return f"{year:04d}-{number + 1:02d}"


def months_between(earlier: int, later: int) -> int:
    """Calendar months from the month of ``earlier`` to that of ``later`` (0: the same)."""
    a, b = EPOCH + timedelta(seconds=earlier), EPOCH + timedelta(seconds=later)
    return (b.year - a.year) * 12 + b.month - a.month
