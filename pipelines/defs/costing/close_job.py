"""The Dagster job that closes a billing month (`chargeback close` runs it), and the two
tables it writes, shown in the asset graph: `closed_months` and `issued_charge_lines`
(sql/marts/). They are not materialised by a run of the month (which would close it): only
this job records their materialisation, for the month it closed.
In the graph they are the ledger a month's run reads, upstream of the charges: the close copies
computed_charge_lines into issued_charge_lines, but a later run of a closed month restates it
from the issued lines (job_line_cents, computed_charge_lines, charge_lines), and the graph can
hold only one of the two edges."""

import dagster as dg

from pipelines.close import close_month
from pipelines.defs.partitions import monthly_partition
from pipelines.defs.resources import ChargebackResource
from pipelines.defs.warehouse import sql_description
from pipelines.months import parse_month

GROUP = "close"

ledger_tables = [
    dg.AssetSpec(
        table,
        deps=upstream,
        group_name=GROUP,
        description=sql_description(f"marts/{table}"),
        kinds={"duckdb", "sql"},
        partitions_def=monthly_partition,
    )
    for table, upstream in (
        ("issued_charge_lines", []),
        ("closed_months", ["issued_charge_lines"]),
    )
]


class CloseMonthConfig(dg.Config):
    month: str  # YYYY-MM
    closed_by: str = "platform-team"


@dg.op
def close_billing_month(
    context: dg.OpExecutionContext, config: CloseMonthConfig, chargeback: ChargebackResource
) -> tuple[int, str]:
    """Issue the month's charge lines; later re-runs of the month only add corrections.
    Returns the lines issued and their total."""
    first_day = parse_month(config.month)
    with chargeback.connect() as con:
        lines, total = close_month(con, first_day, config.closed_by)
    context.log.info(f"closed {config.month}: {lines} charge lines issued, total {total}")
    for spec in ledger_tables:
        context.log_event(
            dg.AssetMaterialization(  # partitioned by the month's first day, as every asset
                spec.key, partition=first_day.isoformat(), metadata={"lines": lines, "total": total}
            )
        )
    return lines, total


@dg.job(description="Close a billing month: its charges are issued and never change again.")
def close_month_job():
    close_billing_month()
