"""A held warehouse makes `ChargebackResource.connect()` wait with a message, then stop with one
line (pipelines/locking.py): real holder processes, no Dagster run."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from pipelines.locking import WarehouseBusy
from tests.conftest import resource_for

# Holds the warehouse until its stdin closes: read-only as a BI tool does, or as a run does
HOLD_READ_ONLY = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print("holding", flush=True)
sys.stdin.read()
"""
HOLD_RUN_LOCK = """
import sys
from pathlib import Path
from pipelines.locking import acquire_run_lock
acquire_run_lock(Path(sys.argv[1]), 0)
print("holding", flush=True)
sys.stdin.read()
"""


def hold(script: str, warehouse: Path) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(warehouse)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline() == "holding\n"
    return holder


def release(holder: subprocess.Popen) -> None:
    holder.stdin.close()
    assert holder.wait(timeout=30) == 0


@pytest.fixture
def warehouse(tmp_path) -> Path:
    path = tmp_path / "warehouse.duckdb"
    duckdb.connect(str(path)).close()
    return path


@pytest.mark.parametrize("script", [HOLD_READ_ONLY, HOLD_RUN_LOCK], ids=["reader", "run"])
def test_a_held_warehouse_stops_the_connection_with_one_line(tmp_path, warehouse, script, caplog):
    holder = hold(script, warehouse)
    chargeback = resource_for(tmp_path).model_copy(update={"lock_wait_s": 1.0})
    try:
        with pytest.raises(WarehouseBusy) as stopped, chargeback.connect():
            pass
    finally:
        release(holder)
    assert str(stopped.value) == (
        f"warehouse {warehouse} is still in use by pid {holder.pid} after 1 s: stopped "
        "(CHARGEBACK_LOCK_WAIT_S sets the wait)"
    )
    # once in the run's log (Dagster's logger), once on the terminal of `chargeback run`
    waiting = f"warehouse {warehouse} is in use by pid {holder.pid}; waiting up to 1 s"
    assert [(r.name, r.message) for r in caplog.records] == [
        ("dagster.builtin", waiting),
        ("chargeback.progress", waiting),
    ]
    # released, the warehouse opens at once
    with chargeback.connect() as con:
        assert con.execute("select 42").fetchone() == (42,)


@pytest.mark.parametrize("script", [HOLD_READ_ONLY, HOLD_RUN_LOCK], ids=["reader", "run"])
def test_a_warehouse_released_within_the_wait_opens(tmp_path, warehouse, script, caplog):
    holder = hold(script, warehouse)
    chargeback = resource_for(tmp_path).model_copy(update={"lock_wait_s": 60.0})
    threading.Timer(1.0, release, [holder]).start()
    with chargeback.connect() as con:
        # it opened only once the holder was letting go (its lock goes as it shuts down, a
        # moment before the process has ended: poll() may still see it running)
        assert holder.stdin.closed
        con.execute("create table t as select 1 as x")
    assert holder.wait(timeout=30) == 0
    # once in the run's log (Dagster's logger), once on the terminal of `chargeback run`
    waiting = f"warehouse {warehouse} is in use by pid {holder.pid}; waiting up to 60 s"
    assert [(r.name, r.message) for r in caplog.records] == [
        ("dagster.builtin", waiting),
        ("chargeback.progress", waiting),
    ]
