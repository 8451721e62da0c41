"""Run the SQL files in `sql/` against DuckDB with bound parameters.

Every statement lives in a file named after the table it builds; values are always bound
(`$month_start`), never formatted into SQL text. `replace_month` is the one way a monthly
table is rewritten: delete the month and insert it again, in one transaction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import duckdb

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")


@cache
def sql_text(name: str) -> str:
    """The text of `sql/<name>.sql`, e.g. `sql_text("marts/charge_lines")`."""
    return (SQL_DIR / f"{name}.sql").read_text()


class SqlParams(Protocol):
    """A typed set of parameters (pipelines.months.MonthParams) that gives them by name."""

    def sql(self) -> dict[str, Any]: ...


Params = Mapping[str, Any] | SqlParams


def by_name(params: Params) -> Mapping[str, Any]:
    return params if isinstance(params, Mapping) else params.sql()


def bind(sql: str, params: Params) -> dict[str, Any]:
    """Keep only the parameters the statement uses: DuckDB rejects unused ones."""
    params = by_name(params)
    used = set(_PARAM.findall(_strip_comments(sql)))
    missing = used - params.keys()
    if missing:
        raise KeyError(f"SQL parameters not provided: {sorted(missing)}")
    return {key: params[key] for key in used}


def run(con: duckdb.DuckDBPyConnection, name: str, params: Params | None = None):
    """Execute one SQL file with its parameters and return the cursor."""
    sql = sql_text(name)
    return con.execute(sql, bind(sql, params or {}))


def replace_month(con: duckdb.DuckDBPyConnection, table: str, name: str, params: Params) -> int:
    """Replace one billing month of `table` with the rows of the select in `sql/<name>.sql`.

    The table is created from the select's shape on first use; a column the select has and a
    warehouse of an earlier release lacks is added (NULL in the months built before: re-run
    them to fill it). Returns the rows inserted for this month (not the table's total).
    """
    sql = sql_text(name)
    bound = bind(sql, params)
    month = {"billing_month": by_name(params)["billing_month"]}
    con.execute("begin transaction")
    try:
        shape = f"{table}_shape"
        # the select's columns and types, without running it
        con.execute(f"create or replace temp table {shape} as select * from ({sql}) limit 0", bound)
        con.execute(f"create table if not exists {table} as from {shape}")
        added = con.execute(
            "select column_name, data_type from information_schema.columns "
            "where table_name = $shape and table_catalog = 'temp' and column_name not in ("
            "    select column_name from information_schema.columns "
            "    where table_name = $table and table_catalog <> 'temp'"
            ") order by ordinal_position",
            {"shape": shape, "table": table},
        ).fetchall()
        for column, data_type in added:
            con.execute(f'alter table {table} add column "{column}" {data_type}')
        con.execute(f"drop table {shape}")
        con.execute(f"delete from {table} where billing_month = $billing_month", month)
        con.execute(f"insert into {table} by name {sql}", bound)
        inserted = con.execute(
            f"select count(*) from {table} where billing_month = $billing_month", month
        ).fetchone()[0]
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    return inserted


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


def create_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    name: str,
    params: Params | None = None,
    *,
    temporary: bool = False,
) -> int:
    """Replace a whole (not monthly) table with the select in `sql/<name>.sql`; returns its rows."""
    sql = sql_text(name)
    kind = "temp table" if temporary else "table"
    con.execute(f"create or replace {kind} {table} as {sql}", bind(sql, params or {}))
    [(rows,)] = con.execute(f"select count(*) from {table}").fetchall()
    return rows
