"""What every connection gets (prepare_connection) and what a run keeps between its steps."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest

from pipelines.defs.resources import prepare_connection
from tests.conftest import resource_for


def money(con: duckdb.DuckDBPyConnection) -> object:
    return con.execute("select money(123)").fetchall()[0][0]


def another_versions_macros(path) -> None:
    """A warehouse whose macros an older release made: one it no longer has, one changed."""
    con = duckdb.connect(str(path))
    con.execute("create macro dropped_since(x) as x + 1")
    con.execute("create macro money(cents) as 'old money'")
    con.execute("create macro chargeback_macros_version() as 'older'")
    con.close()


def test_the_macros_are_made_once_per_database_and_again_when_their_sql_changes(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    another_versions_macros(path)
    con = prepare_connection(duckdb.connect(str(path)))
    assert money(con) == Decimal("1.23")
    with pytest.raises(duckdb.CatalogException, match="dropped_since"):
        con.execute("select dropped_since(1)")
    con.execute("create macro added_by_hand(x) as x")  # a current version is left as it is
    con.close()

    con = prepare_connection(duckdb.connect(str(path)))
    assert con.execute("select added_by_hand(7)").fetchall() == [(7,)]
    con.close()
    # they are the database's: a connection that does not prepare itself has them
    con = duckdb.connect(str(path), read_only=True)
    assert money(con) == Decimal("1.23")
    con.close()


def test_a_read_only_database_of_another_version_gets_temporary_macros(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    another_versions_macros(path)
    con = prepare_connection(duckdb.connect(str(path), read_only=True))
    assert money(con) == Decimal("1.23")
    con.close()
    con = duckdb.connect(str(path), read_only=True)
    assert money(con) == "old money"  # the file as it was
    con.close()


def test_a_run_gives_back_the_memory_of_its_steps(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    chargeback = resource_for(tmp_path)
    chargeback._run_connection = duckdb.connect(str(path))

    def cached() -> int:
        [(size,)] = chargeback._run_connection.execute(
            "select coalesce(sum(memory_usage_bytes), 0) from duckdb_memory()"
        ).fetchall()
        return size

    # a step writes and reads a table, and closes its connection: the run's keeps its blocks
    con = duckdb.connect(str(path))
    con.execute("create table t as select range as a, md5(a::varchar) from range(200_000)")
    con.execute("checkpoint")
    con.execute("select count(distinct a) from t").fetchall()
    con.close()
    assert cached() > 2**21
    chargeback._end_step()
    assert cached() < 2**20  # below the 1 MB that evicted them
    assert chargeback._run_connection.execute(
        "select current_setting('memory_limit')"
    ).fetchall() == [("953.6 MiB",)]  # the resource's 1GB again
    chargeback._close_run_connection()
