"""Close a billing month: issue its charge lines so later re-runs can only add corrections.

    python -m pipelines.close --month 2026-11 --by "finance@example.com"

The month must have been run (its charge_lines exist). Afterwards, re-running the month leaves
the issued lines as they are and adds 'Correction' lines for any difference (see
sql/marts/charge_lines.sql).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

import duckdb

from pipelines.sql import run


class CloseError(ValueError):
    """The month cannot be closed (already closed, or not run yet)."""


def close_month(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date, closed_by: str
) -> tuple[int, str]:
    """Record the month's current charge lines as issued; returns (lines, total amount)."""
    run(con, "ddl/closed_months")
    run(con, "ddl/issued_charge_lines")
    label = billing_month.strftime("%Y-%m")
    closed = con.execute(
        "select closed_at, closed_by from closed_months where billing_month = ?", [billing_month]
    ).fetchone()
    if closed:
        raise CloseError(
            f"{label} is already closed (at {closed[0]:%Y-%m-%d %H:%M} by {closed[1]})"
        )
    lines, total = con.execute(
        "select count(*), coalesce(sum(amount), 0) from charge_lines where billing_month = ?",
        [billing_month],
    ).fetchone()
    if lines == 0:
        raise CloseError(f"{label} has no charge lines: run the month before closing it")
    con.execute("begin transaction")
    try:
        con.execute(
            "insert into issued_charge_lines by name "
            "select * exclude (billing_month), billing_month, current_timestamp::timestamp "
            "as issued_at from computed_charge_lines where billing_month = ?",
            [billing_month],
        )
        con.execute(
            "insert into closed_months values (?, current_timestamp::timestamp, ?, ?, ?)",
            [billing_month, closed_by, lines, total],
        )
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    return lines, str(total)


def main(argv: list[str] | None = None) -> int:
    from pipelines.defs.resources import ChargebackResource
    from pipelines.locking import WarehouseBusy

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--month", required=True, help="YYYY-MM")
    parser.add_argument("--by", default="platform-team", help="who closes it (recorded)")
    args = parser.parse_args(argv)
    billing_month = dt.date.fromisoformat(args.month + "-01")
    chargeback = ChargebackResource.from_env()
    try:
        with chargeback.connect() as con:
            lines, total = close_month(con, billing_month, args.by)
            # readers see the closed month in the published copy without waiting for a run
            chargeback.publish_warehouse(con)
    except (CloseError, WarehouseBusy) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"closed {args.month}: {lines} charge lines issued, total {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
