"""How the reports name a billing month, and the one timestamp their files carry."""

from __future__ import annotations

import datetime as dt
from typing import Protocol

_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def month_name(first_day: dt.date) -> str:
    """`November 2026`."""
    return f"{_MONTH_NAMES[first_day.month - 1]} {first_day.year}"


def period_end(first_day: dt.date) -> dt.datetime:
    """The end of the billing period (the first day of the next month). Reports show it as the
    period's end and stamp it into their files for 'now', so their bytes depend on data only."""
    year, month0 = divmod(first_day.year * 12 + first_day.month, 12)
    return dt.datetime(year, month0 + 1, 1)


class BillingPeriod(Protocol):
    """A billing month as the reports read it (the pipeline's BillingMonth): the first day,
    the label `YYYY-MM` and the period's naive UTC bounds [start, end)."""

    @property
    def first_day(self) -> dt.date: ...

    @property
    def label(self) -> str: ...

    @property
    def start(self) -> dt.datetime: ...

    @property
    def end(self) -> dt.datetime: ...
