"""A run's changes switch as one: the warehouse and the month reports it rebuilt, or nothing.

A run never writes the live warehouse. Its first warehouse connection copies the live file to
a working copy named after the run (`<stem>.run-<run id>@<host>@<pid>.duckdb` beside it) and
every step of the run reads and writes that copy; the reports go to the run's staging folders
(pipelines/defs/reports/publish.py). When every step has succeeded the run commits:

1. it writes a commit record, `<warehouse>.commit.json`, naming the working copy and the
   staging folders to publish (written aside, synced, renamed: it is there whole or not at all);
2. it swaps each staging folder with its month folder, then renames the working copy over the
   live warehouse;
3. it removes the record.

The record is the commit point. A kill before it leaves the previous reports and the live
warehouse as they were (the working copy and staging folders are a dead run's leftovers, removed
by the next run); a kill after it is rolled forward by the next run before anything else
(`finish_commit`), so the reports and the warehouse always switch together. A run that fails
commits nothing; its working copy is kept as `<stem>_failed.duckdb` to look into.

Readers may hold the live warehouse open read-only at any time: a run only copies it (holding a
read-only connection meanwhile, so no writer changes it under the copy) and renames a new file
over it, so a reader never delays a run and reads the generation it opened until it reconnects.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb

from pipelines.checkpoints import checkpoint
from pipelines.defs.reports.publish import publish_month
from pipelines.leftovers import owned_name, remove
from pipelines.locking import connect_waiting

MANIFEST = "manifest.json"


def record_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.name + ".commit.json")


def failed_copy(warehouse: Path) -> Path:
    """Where the working copy of the last failed run is kept."""
    return warehouse.with_name(f"{warehouse.stem}_failed{warehouse.suffix}")


def working_copies(warehouse: Path) -> list[Path]:
    """Working copies of runs (live or dead), with their WAL files and spill folders."""
    return sorted(warehouse.parent.glob(f"{warehouse.stem}.run-*@*"))


def start_working_copy(warehouse: Path, run_id: str, wait_s: float) -> Path:
    """Copy the live warehouse to this run's working copy; returns its path.

    A read-only connection is held during the copy: it waits for (and then keeps out) any
    process writing the live file, while readers hold it alongside. The live file's WAL, if a
    writer left one, goes with it and is replayed when the copy is opened.
    """
    work = warehouse.with_name(owned_name(f"{warehouse.stem}.run-{run_id}", warehouse.suffix))
    if not warehouse.exists():
        return work  # the first run: DuckDB creates the copy, the commit brings it live
    live = connect_waiting(warehouse, wait_s, read_only=True)
    try:
        _copy_synced(warehouse, work)
        wal = warehouse.with_name(warehouse.name + ".wal")
        if wal.exists():
            _copy_synced(wal, work.with_name(work.name + ".wal"))
    finally:
        live.close()
    return work


def commit(warehouse: Path, work: Path, months: list[tuple[Path, Path]], run_id: str) -> None:
    """Publish `months` (staging folder, month folder) and make `work` the live warehouse,
    as one switch (see the module doc)."""
    _checkpointed(work)
    record = {
        "run_id": run_id,
        "working_copy": work.name,
        "months": [{"staging": str(staging), "folder": str(folder)} for staging, folder in months],
    }
    path = record_path(warehouse)
    partial = path.with_name(owned_name(path.name, ".partial"))
    partial.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    _sync_file(partial)
    checkpoint("before_commit")
    os.replace(partial, path)
    _sync_folder(path.parent)
    _roll_forward(warehouse, record)


def finish_commit(warehouse: Path) -> bool:
    """Complete the commit a killed run recorded but did not finish; True if there was one.
    Called under the run lock, before dead runs' leftovers are removed."""
    path = record_path(warehouse)
    if not path.exists():
        return False
    _roll_forward(warehouse, json.loads(path.read_text(encoding="utf-8")))
    return True


def _roll_forward(warehouse: Path, record: dict) -> None:
    """Steps 2 and 3 of a commit; each step can be repeated after a kill."""
    for month in record["months"]:
        staging, folder = Path(month["staging"]), Path(month["folder"])
        if not staging.exists():
            continue
        if published_by(staging) == record["run_id"]:
            publish_month(staging, folder)
        else:  # swapped already: the staging folder holds the previous generation
            remove(staging)
    checkpoint("during_commit")
    work = warehouse.with_name(record["working_copy"])
    if work.exists():
        # a WAL left beside the previous file (a writer outside the runs) is in the copy
        # already; beside the new file it would be replayed into it
        warehouse.with_name(warehouse.name + ".wal").unlink(missing_ok=True)
        os.replace(work, warehouse)
        _sync_folder(warehouse.parent)
    record_path(warehouse).unlink(missing_ok=True)


def keep_failed(warehouse: Path, work: Path) -> None:
    """A failed run's working copy, kept as `<stem>_failed.duckdb` (replacing the previous)."""
    if work.exists():
        _checkpointed(work)
        os.replace(work, failed_copy(warehouse))


def published_by(folder: Path) -> str | None:
    """The Dagster run id in a month folder's manifest.json (None: no readable manifest)."""
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["dagster_run_id"]
    except (OSError, ValueError, KeyError):
        return None


def _checkpointed(database: Path) -> None:
    """Fold the WAL into the file, so that renaming the file alone moves the whole database."""
    if database.exists():
        con = duckdb.connect(str(database))
        try:
            con.execute("checkpoint")
        finally:
            con.close()
    # the spill folder DuckDB made beside the copy is no part of the database
    remove(database.with_name(database.name + ".tmp"))


def _copy_synced(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)
    _sync_file(target)


def _sync_file(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def _sync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
