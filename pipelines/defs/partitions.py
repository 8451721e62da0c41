"""Billing months and telemetry days as Dagster partitions."""

import datetime as dt
import os
import warnings

import dagster as dg

from pipelines.months import BillingMonth, parse_month

# BackfillPolicy is "beta" in Dagster 1.13 but it is the documented way to run a range of
# months in one run; the warning would print on every load.
warnings.filterwarnings("ignore", category=dg.BetaWarning)


def _first_day() -> str:
    """The first day of CHARGEBACK_FIRST_MONTH: partitions are fixed when the definitions load."""
    text = os.environ.get("CHARGEBACK_FIRST_MONTH", "2024-01")
    try:
        return parse_month(text).isoformat()
    except ValueError as error:
        raise ValueError(f"CHARGEBACK_FIRST_MONTH {error}") from None


FIRST_DAY = _first_day()

# Keys are YYYY-MM-01; history can be backfilled from CHARGEBACK_FIRST_MONTH.
monthly_partition = dg.MonthlyPartitionsDefinition(start_date=FIRST_DAY, timezone="UTC")

# The telemetry rollup runs per UTC day (keys YYYY-MM-DD): days write Parquet only, so they can
# run in parallel processes, and a day that lands late re-runs alone.
daily_partition = dg.DailyPartitionsDefinition(start_date=FIRST_DAY, timezone="UTC")

# A backfill of many months (or days) runs as one run: each asset loops over the partitions of
# the window, so the DuckDB file has one writer and the months run in order.
single_run = dg.BackfillPolicy.single_run()


def window_months(window: dg.TimeWindow, timezone: str) -> list[BillingMonth]:
    """The billing months of a monthly partition window (one, or several in a backfill run),
    in the billing timezone."""
    last = window.end.date() - dt.timedelta(days=1)
    return BillingMonth.range(window.start.date(), last, timezone)
