"""Close a billing month: issue its charge lines so later re-runs can only add corrections.

    chargeback close --month 2026-11 --by "finance@example.com"

The month must have been run (its charge_lines exist). Afterwards, re-running the month leaves
the issued lines as they are and adds 'Correction' lines for any difference (see
sql/marts/charge_lines.sql).
"""

from __future__ import annotations

import datetime as dt
import sys

import duckdb

from pipelines.months import month_label
from pipelines.sql import run


class CloseError(ValueError):
    """The month cannot be closed (already closed, or not run yet)."""


def close_month(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date, closed_by: str
) -> tuple[int, str]:
    """Record the month's current charge lines as issued; returns (lines, total amount)."""
    run(con, "marts/closed_months")
    run(con, "marts/issued_charge_lines")
    label = month_label(billing_month)
    month = {"billing_month": billing_month}
    closed = con.execute(
        "select closed_at, closed_by from closed_months where billing_month = $billing_month",
        month,
    ).fetchone()
    if closed:
        raise CloseError(
            f"{label} is already closed (at {closed[0]:%Y-%m-%d %H:%M} by {closed[1]})"
        )
    lines, total = con.execute(
        "select count(*), coalesce(sum(amount), 0) from charge_lines "
        "where billing_month = $billing_month",
        month,
    ).fetchone()
    if lines == 0:
        raise CloseError(f"{label} has no charge lines: run the month before closing it")
    con.execute("begin transaction")
    try:
        con.execute(
            "insert into issued_charge_lines by name "
            "select * exclude (billing_month), billing_month, current_timestamp::timestamp "
            "as issued_at from computed_charge_lines where billing_month = $billing_month",
            month,
        )
        con.execute(
            "insert into closed_months values "
            "($billing_month, current_timestamp::timestamp, $closed_by, $lines, $total)",
            {**month, "closed_by": closed_by, "lines": lines, "total": total},
        )
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    return lines, str(total)


def main(argv: list[str] | None = None) -> int:
    """`python -m pipelines.close`: the former spelling of `chargeback close` (which it runs;
    without --by, the closer is recorded as 'platform-team')."""
    from pipelines.cli import main as chargeback

    argv = list(sys.argv[1:] if argv is None else argv)
    if not any(arg == "--by" or arg.startswith("--by=") for arg in argv):
        argv += ["--by", "platform-team"]
    return chargeback(["close", *argv])


if __name__ == "__main__":
    sys.exit(main())
