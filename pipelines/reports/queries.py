"""The report queries: `sql/reports/<name>.sql`, small selects on the public marts with the
month (and the department) always bound by name, read as named rows (`row.amount`, never
`row[11]`). A row is a named tuple, so a table can take a query's rows as they come.
"""

from __future__ import annotations

import datetime as dt
from collections import namedtuple
from collections.abc import Mapping
from functools import cache
from typing import Any

import duckdb

from pipelines.reports.streamed_sheet import RowsQuery
from pipelines.sql import bind, sql_text


def fetch(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> list[Any]:
    """The rows of `sql/reports/<name>.sql` as named tuples, fields named as its columns."""
    sql = sql_text(f"reports/{name}")
    cursor = con.execute(sql, bind(sql, params))
    row = _row_type(name, tuple(column[0] for column in cursor.description))
    return [row._make(values) for values in cursor.fetchall()]


def fetch_one(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> Any:
    """The one row of `sql/reports/<name>.sql`."""
    [row] = fetch(con, name, **params)
    return row


def fetch_if_table(
    con: duckdb.DuckDBPyConnection, table: str, name: str, **params: Any
) -> list[Any] | None:
    """The rows of `sql/reports/<name>.sql`, or None when the warehouse has no `table`: the
    marts newer than the warehouse of some closed months may be missing."""
    return fetch(con, name, **params) if table_exists(con, table) else None


def table_exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return fetch_one(con, "table_exists", table=table).table_exists


def month_rows(con: duckdb.DuckDBPyConnection, table: str, billing_month: dt.date) -> int:
    """The rows `table` holds for the month."""
    return fetch_one(con, "month_rows", table=table, billing_month=billing_month).month_rows


def has_month(con: duckdb.DuckDBPyConnection, table: str, billing_month: dt.date) -> bool:
    """Whether an optional mart exists and was built for the month."""
    return table_exists(con, table) and month_rows(con, table, billing_month) > 0


def rows_query(
    con: duckdb.DuckDBPyConnection, name: str, order_by: str, **params: Any
) -> RowsQuery:
    """`sql/reports/<name>.sql` as the rows a streamed sheet writes, in `order_by`."""
    sql = sql_text(f"reports/{name}")
    return RowsQuery(con, sql, bind(sql, params), order_by)


def report_currency(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date, parameters: Mapping[str, str]
) -> str:
    """The one currency of a report: SUM over mixed currencies would be a wrong total."""
    found = [row.currency for row in fetch(con, "currencies", billing_month=billing_month)]
    currency = parameters.get("currency") or (found[0] if found else "")
    others = [c for c in found if c != currency]
    if others:
        raise ValueError(
            f"{billing_month:%Y-%m}: the marts hold amounts in {', '.join(found)}, "
            f"the workbook currency is {currency!r}; refusing to add up mixed currencies"
        )
    return currency


@cache
def _row_type(name: str, fields: tuple[str, ...]) -> type:
    return namedtuple(f"{name.title().replace('_', '')}Row", fields)  # noqa: PYI024
