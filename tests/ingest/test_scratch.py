"""The scratch DuckDB of the daily rollup spills to disk instead of failing."""

from __future__ import annotations

from tests.conftest import resource_for


def test_a_scratch_connection_spills_on_a_fresh_telemetry_folder(tmp_path):
    # 1.5 M rows of 60 bytes in a 64 MB memory limit: DuckDB must spill, and the telemetry folder
    # (where its spill folder goes) does not exist yet, as on a first run
    chargeback = resource_for(tmp_path).model_copy(update={"duckdb_memory_limit": "64MB"})
    assert not chargeback.telemetry_dir.exists()
    with chargeback.scratch() as con:
        con.execute(
            "create table t as select range as v, repeat('x', 50) || range as s from range(1500000)"
        )
        rows = con.execute("select count(*), sum(v) from (select * from t order by s)").fetchone()
        spilled = list((chargeback.telemetry_dir / ".spill").rglob("*"))
    assert rows == (1_500_000, 1_500_000 * 1_499_999 // 2)
    assert spilled, "nothing was spilled: the test no longer covers the spill folder"
    # the spill folder goes with the connection
    assert list((chargeback.telemetry_dir / ".spill").iterdir()) == []
