"""Load Python-side rows (catalog entries, parsed export rows) into DuckDB tables.

The rows arrive as an Arrow table with an explicit schema, so types never depend on the data.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa


def write_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: list[dict],
    schema: pa.Schema,
    *,
    temporary: bool = False,
) -> int:
    """Replace `table` with `rows` (dicts keyed by the schema's column names); `temporary`:
    a table of this connection only, never written to the database file."""
    return write_arrow(con, table, pa.Table.from_pylist(rows, schema=schema), temporary=temporary)


def write_arrow(
    con: duckdb.DuckDBPyConnection, table: str, data: pa.Table, *, temporary: bool = False
) -> int:
    """Replace `table` with the Arrow table `data` (its schema gives the column types)."""
    kind = "temp table" if temporary else "table"
    statement = f"create or replace {kind} {table} as select * from incoming_rows"
    return _from_arrow(con, statement, data)


def write_rows(
    con: duckdb.DuckDBPyConnection, table: str, rows: list[dict], schema: pa.Schema
) -> int:
    """Rows of the warehouse table `table` made in Python (from the catalog, the landing
    folder), as the temporary table `<table>_rows` that `sql/staging/<table>.sql` selects from."""
    return write_table(con, f"{table}_rows", rows, schema, temporary=True)


def append_arrow(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table) -> int:
    """Add the rows of the Arrow table `data` (the columns of `table`, in its order) to
    `table`."""
    return _from_arrow(con, f"insert into {table} select * from incoming_rows", data)


def _from_arrow(con: duckdb.DuckDBPyConnection, statement: str, data: pa.Table) -> int:
    """Run `statement`, which reads `data` as `incoming_rows`; returns its rows."""
    con.register("incoming_rows", data)
    try:
        con.execute(statement)
    finally:
        con.unregister("incoming_rows")
    return data.num_rows
