"""Billing months and telemetry days as Dagster partitions."""

import datetime as dt
import os
import warnings
from typing import Any

import dagster as dg

from pipelines.months import BillingMonth

# BackfillPolicy is "beta" in Dagster 1.13 but it is the documented way to run a range of
# months in one run; the warning would print on every load.
warnings.filterwarnings("ignore", category=dg.BetaWarning)

FIRST_DAY = os.environ.get("CHARGEBACK_FIRST_MONTH", "2024-01") + "-01"

# Keys are YYYY-MM-01; history can be backfilled from CHARGEBACK_FIRST_MONTH.
monthly_partition = dg.MonthlyPartitionsDefinition(start_date=FIRST_DAY, timezone="UTC")

# The telemetry rollup runs per UTC day (keys YYYY-MM-DD): days write Parquet only, so they can
# run in parallel processes, and a day that lands late re-runs alone.
daily_partition = dg.DailyPartitionsDefinition(start_date=FIRST_DAY, timezone="UTC")

# A backfill of many months (or days) runs as one run: each asset loops over the partitions of
# the window, so the DuckDB file has one writer and the months run in order.
single_run = dg.BackfillPolicy.single_run()


def window_months(window: dg.TimeWindow, settings: Any) -> list[BillingMonth]:
    """The billing months of a monthly partition window (one, or several in a backfill run),
    in the catalog's billing timezone (`settings`: settings.yaml)."""
    last = window.end.date() - dt.timedelta(days=1)
    return BillingMonth.between(window.start.date(), last, settings.billing_timezone)
