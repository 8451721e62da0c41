"""Run the SQL files in `sql/` against DuckDB with bound parameters.

Every statement lives in a file named after the table it builds; values are always bound
(`$month_start`), never formatted into SQL text. `replace_month` is the one way a monthly
table is rewritten: delete the month and insert it again, in one transaction. `tables_read`
says which tables a file's select reads (the asset graph's lines come from it).
"""

from __future__ import annotations

import json
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


@cache
def tables_read(name: str) -> frozenset[str]:
    """The tables the select in `sql/<name>.sql` reads (`select_reads`), parsed once per file
    and process."""
    try:
        return select_reads(sql_text(name))
    except ValueError as error:
        raise ValueError(f"sql/{name}.sql: {error}") from None


def select_reads(sql: str) -> frozenset[str]:
    """The tables a select reads, found by DuckDB's own parser: each table a FROM or a JOIN
    names, in subqueries too; not a CTE where it is in scope (each CTE sees those before it,
    so a CTE named like a table reads that table in its own body, as DuckDB binds it), nor a
    table function (`read_parquet($files)`). Temporary tables a step writes for its SQL count
    too: the caller keeps the names it knows. 2-3 ms a file of sql/, most of it DuckDB's
    parser and the tree's JSON."""
    [(tree,)] = _parser().execute("select json_serialize_sql($sql)", {"sql": sql}).fetchall()
    parsed = json.loads(tree)
    if parsed["error"]:
        raise ValueError(parsed["error_message"])
    found: set[str] = set()
    _base_tables(parsed["statements"], frozenset(), found)
    return frozenset(found)


def _base_tables(node: Any, ctes: frozenset[str], found: set[str]) -> None:
    """Add to `found` the tables `node` (a part of the parse tree) reads; `ctes`: the CTE names
    in scope there."""
    if isinstance(node, list):
        for item in node:
            _base_tables(item, ctes, found)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "BASE_TABLE" and node["table_name"].lower() not in ctes:
        found.add(node["table_name"].lower())
    if node.get("type") == "RECURSIVE_CTE_NODE":  # its recursive part reads itself
        ctes |= {node["cte_name"].lower()}
    # each CTE sees the ones before it; the query's body sees them all
    for cte in node.get("cte_map", {}).get("map", []):
        _base_tables(cte["value"], ctes, found)
        ctes |= {cte["key"].lower()}
    for key, value in node.items():
        if key != "cte_map":
            _base_tables(value, ctes, found)


@cache
def _parser() -> duckdb.DuckDBPyConnection:
    """An empty in-memory database: parsing needs no tables."""
    return duckdb.connect()


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
