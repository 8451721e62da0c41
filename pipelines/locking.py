"""One monthly run at a time on a warehouse, and a wait with a message for a held lock.

DuckDB lets one process open a database file for writing, and none while another process
holds it, even read-only. Two locks, both waited for with one message
("warehouse <path> is in use by pid N; waiting up to S s") for up to CHARGEBACK_LOCK_WAIT_S:

- the run lock, an flock on `<warehouse>.lock` taken at a run's first warehouse connection and
  held until the run ends (`ChargebackResource`). A monthly run works on its own copy of the
  warehouse, taken at its first step and made live at its end; without the lock a second run
  could copy the warehouse meanwhile, and the later commit would drop the earlier run's work.
- DuckDB's own lock on the file, held by any process that has it open (a BI tool reading the
  live warehouse: it should read the published copy instead, see the README).

After the wait the run stops with one line naming the holder (`WarehouseBusy`) instead of
DuckDB's traceback. The kernel drops an flock when its process dies, so a killed run leaves no
stale lock.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import dagster as dg
import duckdb

from pipelines.progress import PROGRESS

T = TypeVar("T")
_POLL_S = 0.5
_DUCKDB_LOCKED = "Could not set lock on file"


class WarehouseBusy(dg.Failure):
    """The warehouse stayed in use for the whole wait."""

    def __init__(self, message: str):
        super().__init__(description=message, allow_retries=False)


def lock_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.name + ".lock")


# Run locks this process holds: lock file -> [descriptor, holders]. An flock is held per open
# file description, so a second resource object of the same process (a test that queries
# between runs) would otherwise wait for the first.
_HELD: dict[Path, list[int]] = {}


def acquire_run_lock(warehouse: Path, wait_s: float) -> None:
    """Take the run lock of `warehouse`, waiting up to `wait_s` for the run that holds it."""
    path = lock_path(warehouse).resolve()
    if path in _HELD:
        _HELD[path][1] += 1
        return
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def attempt() -> tuple[bool | None, int | None]:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None, _pid_in(path)
        return True, None

    try:
        wait_for(warehouse, wait_s, attempt)
    except BaseException:
        os.close(descriptor)
        raise
    # the holder's pid, for the message of the next run that waits
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    _HELD[path] = [descriptor, 1]


def release_run_lock(warehouse: Path) -> None:
    path = lock_path(warehouse).resolve()
    held = _HELD.get(path)
    if held is None:
        return
    held[1] -= 1
    if held[1] == 0:
        del _HELD[path]
        os.close(held[0])  # closing the descriptor drops the flock


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):  # the holder has not written it yet
        return None


def connect_waiting(
    warehouse: Path, wait_s: float, read_only: bool = False
) -> duckdb.DuckDBPyConnection:
    """`duckdb.connect(warehouse)`, waiting up to `wait_s` while another process holds it (any
    process for a writer; a writer for a reader)."""

    def attempt() -> tuple[duckdb.DuckDBPyConnection | None, int | None]:
        try:
            return duckdb.connect(str(warehouse), read_only=read_only), None
        except duckdb.IOException as error:
            if _DUCKDB_LOCKED not in str(error):
                raise
            holder = re.search(r"\(PID (\d+)\)", str(error))
            return None, int(holder[1]) if holder else None

    return wait_for(warehouse, wait_s, attempt)


def wait_for(
    warehouse: Path, wait_s: float, attempt: Callable[[], tuple[T | None, int | None]]
) -> T:
    """Call `attempt` (a value, or None and the pid holding the warehouse) until it gives a
    value; says once per holder that it waits; stops with `WarehouseBusy` after `wait_s`."""
    deadline = time.monotonic() + wait_s
    warehouse = warehouse.resolve()
    announced: list[int | None] = []
    while True:
        value, holder = attempt()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise WarehouseBusy(
                f"warehouse {warehouse} is still in use by pid {holder} after {wait_s:g} s: "
                "stopped (CHARGEBACK_LOCK_WAIT_S sets the wait)"
            )
        if holder not in announced:
            announced.append(holder)
            message = f"warehouse {warehouse} is in use by pid {holder}; waiting up to {wait_s:g} s"
            dg.get_dagster_logger().warning(message)  # the run's log in the Dagster UI
            PROGRESS.warning(message)  # the terminal of `chargeback run`
        time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))
