"""The scratch DuckDB of the daily rollup spills to disk instead of failing, into a folder of
its own machine: never the rollup folder, which several machines may share."""

from __future__ import annotations

import pytest

from tests.conftest import resource_for


@pytest.mark.parametrize("spill_dir", [None, "local/spill"])
def test_a_scratch_connection_spills_to_its_local_folder(tmp_path, spill_dir):
    # 1.5 M rows of 60 bytes in a 64 MB memory limit: DuckDB must spill, and neither the spill
    # folder nor the rollup folder exists yet, as on a worker's first day
    chargeback = resource_for(tmp_path).model_copy(
        update={
            "duckdb_memory_limit": "64MB",
            "rollup_dir": str(tmp_path / "shared/rollups"),
            "spill_dir": spill_dir and str(tmp_path / spill_dir),
        }
    )
    # unset (CHARGEBACK_SPILL_DIR): beside the warehouse, on the machine's own disk
    spill = tmp_path / (spill_dir or "warehouse_spill")
    assert chargeback.spill_root == spill
    assert not spill.exists()
    with chargeback.scratch() as con:
        con.execute(
            "create table t as select range as v, repeat('x', 50) || range as s from range(1500000)"
        )
        rows = con.execute("select count(*), sum(v) from (select * from t order by s)").fetchone()
        spilled = list(spill.rglob("*"))
    assert rows == (1_500_000, 1_500_000 * 1_499_999 // 2)
    assert spilled, "nothing was spilled: the test no longer covers the spill folder"
    assert not chargeback.telemetry_dir.exists()  # nothing went to the shared folder
    # the spill folder goes with the connection
    assert list(spill.iterdir()) == []


def test_the_days_cursors_do_not_keep_insertion_order(tmp_path):
    # the days run on cursors of the scratch connection, which must have its settings: large
    # copies stream when no statement orders them
    with resource_for(tmp_path).scratch() as con:
        cursor = con.cursor()
        assert cursor.execute("select current_setting('preserve_insertion_order')").fetchone() == (
            False,
        )
        cursor.close()
