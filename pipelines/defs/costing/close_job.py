"""The Dagster job that closes a billing month (`chargeback close` runs it)."""

import dagster as dg

from pipelines.close import close_month
from pipelines.defs.resources import ChargebackResource
from pipelines.months import parse_month


class CloseMonthConfig(dg.Config):
    month: str  # YYYY-MM
    closed_by: str = "platform-team"


@dg.op
def close_billing_month(
    context: dg.OpExecutionContext, config: CloseMonthConfig, chargeback: ChargebackResource
) -> tuple[int, str]:
    """Issue the month's charge lines; later re-runs of the month only add corrections.
    Returns the lines issued and their total."""
    with chargeback.connect() as con:
        lines, total = close_month(con, parse_month(config.month), config.closed_by)
    context.log.info(f"closed {config.month}: {lines} charge lines issued, total {total}")
    return lines, total


@dg.job(description="Close a billing month: its charges are issued and never change again.")
def close_month_job():
    close_billing_month()
