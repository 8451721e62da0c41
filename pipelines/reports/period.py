"""How the reports name a billing month, and the one timestamp their files carry."""

from __future__ import annotations

import datetime as dt

from pipelines.months import first_of_next_month

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
    return dt.datetime.combine(first_of_next_month(first_day), dt.time())
