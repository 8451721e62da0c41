"""Where everything lives, decided in one place: the environment variables of DESIGN.md."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import dagster as dg
import duckdb
from pydantic import Field, PrivateAttr

from pipelines.catalog import Catalog, load_catalog
from pipelines.commit import (
    MANIFEST,
    commit,
    finish_commit,
    keep_failed,
    record_path,
    start_working_copy,
    working_copies,
)
from pipelines.defs.reports.publish import STAGING, clean_staging
from pipelines.leftovers import owned_name, owned_stem, remove, remove_dead, remove_if_empty
from pipelines.locking import acquire_run_lock, connect_waiting, release_run_lock
from pipelines.sql import sql_text

MACROS = (
    "macros/known",
    "macros/has_offset",
    "macros/to_utc",
    "macros/hour_earlier_offset",
    "macros/to_utc_first",
    "macros/normal_state",
    "macros/plausible_time",
    "macros/unparsed",
    # the unit constants first: the macros after them use them
    "macros/whole_gpu",
    "macros/ms_per_second",
    "macros/ms_per_minute",
    "macros/ms_per_hour",
    "macros/ms_per_day",
    "macros/units_per_gpu_hour",
    "macros/numerator_per_cent",
    "macros/gpu_hours",
    "macros/gpu_units",
    "macros/util_milli_pct",
    "macros/whole_mib",
    "macros/milliwatts",
    "macros/mw_units_per_kwh",
    "macros/cents_half_up",
    "macros/largest_remainder",
    "macros/money",
    "macros/expand_allocation_pct",
    "macros/charge_type_order",
    "macros/rate_applies",
    "macros/rate_precedence",
    "macros/mapping_applies",
    "macros/series_key",
    "macros/util_rank",
    "macros/unix_ms",
    "macros/sample_cover_ms",
    "macros/silence_floor_ms",
)


# the macro holding the hash of the macros' SQL in a database that has them (prepare_connection)
VERSION_MACRO = "chargeback_macros_version"


def prepare_connection(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """UTC session time and the project's SQL macros: what every SQL file expects.

    The macros live in the database (the warehouse, a run's working copy, a scratch DuckDB),
    created once and again only when their SQL changes: `chargeback_macros_version()` holds
    the hash of their texts. Created at every connection, as temporary macros, they took ~30
    ms of each of a monthly run's ~50 connections (a third of a small step). A read-only
    database without the current ones gets them as the connection's own, temporary."""
    con.execute("set TimeZone = 'UTC'")
    # a table missing from the warehouse is an error naming it, not a Python variable of the
    # calling module that happens to have its name (DuckDB's replacement scans)
    con.execute("set python_enable_replacements = false")
    version, texts = _macros()
    try:
        [(found,)] = con.execute(f"select {VERSION_MACRO}()").fetchall()
    except duckdb.CatalogException:  # a new database, or one of a release before this
        found = None
    if found != version:
        _create_macros(con, texts, replacing=found is not None)
    return con


@cache
def _macros() -> tuple[str, tuple[str, ...]]:
    """The hash of the macros' SQL, and each macro's `create or replace macro` statement with
    the one that records the hash (`chargeback_macros_version()`) last."""
    texts = tuple(sql_text(macro) for macro in MACROS)
    version = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    return version, (*texts, f"create or replace macro {VERSION_MACRO}() as '{version}'")


def _create_macros(con: duckdb.DuckDBPyConnection, texts: tuple[str, ...], replacing: bool):
    """Create the macros in the database in one transaction; `replacing` those of another
    version, drop any macro not among them (one that version had). In a read-only database,
    create them as the connection's own temporary macros."""
    ours = {macro.rsplit("/", 1)[-1] for macro in MACROS} | {VERSION_MACRO}
    con.execute("begin transaction")
    try:
        if replacing:  # listing the database's functions takes ~20 ms: only then
            for name, kind in con.execute(
                "select distinct function_name, function_type from duckdb_functions() "
                "where database_name = current_database() and schema_name = 'main' "
                "and function_type in ('macro', 'table_macro') and not internal"
            ).fetchall():
                if name not in ours:
                    table = " table" if kind == "table_macro" else ""
                    con.execute(f'drop macro{table} "{name}"')
        for text in texts:
            con.execute(text)
        con.execute("commit")
    except duckdb.InvalidInputException as error:
        con.execute("rollback")
        if "read-only" not in str(error):
            raise
        for text in texts:
            con.execute(text.replace("create or replace macro", "create or replace temp macro", 1))
    except BaseException:
        con.execute("rollback")
        raise


@dataclass(frozen=True)
class Folders:
    """Where a run reads and writes, besides the warehouse."""

    landing: Path
    catalog: Path
    reports: Path
    telemetry: Path  # daily Parquet rollups of the telemetry


# The environment variable of each setting (DESIGN.md); unset, the field's default applies.
ENVIRONMENT = {
    "landing_dir": "CHARGEBACK_LANDING_DIR",
    "catalog_dir": "CHARGEBACK_CATALOG_DIR",
    "warehouse": "CHARGEBACK_WAREHOUSE",
    "reports_dir": "CHARGEBACK_REPORTS_DIR",
    "duckdb_memory_limit": "CHARGEBACK_DUCKDB_MEMORY_LIMIT",
    "lock_wait_s": "CHARGEBACK_LOCK_WAIT_S",
    "rollup_dir": "CHARGEBACK_ROLLUP_DIR",
    "spill_dir": "CHARGEBACK_SPILL_DIR",
}


class ChargebackResource(dg.ConfigurableResource):
    """Paths of the landing folder, catalog, warehouse and reports, and connections to the
    warehouse and to a scratch DuckDB.

    Within a run the resource holds the warehouse's run lock from its first `connect()` to the
    end of the run (pipelines/locking.py), so a second run waits for the whole first one, and
    every connection of the run opens the run's working copy of the warehouse, which the end of
    the run commits together with the month reports, or keeps aside if a step failed
    (pipelines/commit.py).
    """

    # The descriptions show in the Dagster UI beside each setting (the resource's page and the
    # launchpad's config schema); ENVIRONMENT names each one's variable.
    landing_dir: str = Field(
        "data/landing", description="The scheduler and telemetry exports, one folder per area."
    )
    catalog_dir: str = Field(
        "data/catalog", description="Tenants, rates, quotas, budgets, nodes and settings."
    )
    warehouse: str = Field("data/warehouse.duckdb", description="The DuckDB warehouse file.")
    reports_dir: str = Field("data/reports", description="Each month's published reports.")
    # Under the 2 GiB a run may use: Python, Arrow and Dagster need the rest.
    duckdb_memory_limit: str = Field(
        "1.5GB", description="DuckDB's memory limit per connection: it spills to disk past it."
    )
    # Long enough for a monthly run ahead of it to finish. Whole seconds: Dagster reads an
    # integer from an environment variable, not a float.
    lock_wait_s: int = Field(
        300,
        description="How long a run waits for another run or a writer holding the warehouse "
        "before it stops, in seconds.",
    )
    # A shared file system when days run on several machines; the default suits one machine.
    rollup_dir: str | None = Field(
        None,
        description="The telemetry's daily rollups (and the conversions and staging folders "
        "they come from): the storage every rollup worker writes and the monthly run reads. "
        "Unset: `<warehouse stem>_telemetry` beside the warehouse.",
    )
    # Never the shared rollup folder: a day's sorts may spill gigabytes.
    spill_dir: str | None = Field(
        None,
        description="DuckDB's spill folder of the daily rollups, on the local disk of the "
        "process's own machine. Unset: `<warehouse stem>_spill` beside the warehouse.",
    )

    _run_id: str | None = PrivateAttr(default=None)
    _working_copy: Path | None = PrivateAttr(default=None)
    # the run's own connection to its working copy, open from its first step to its end:
    # each step's connection then shares its database (DuckDB keeps one per file and
    # process) instead of opening the file and checkpointing it again, ~65 ms a step
    _run_connection: duckdb.DuckDBPyConnection | None = PrivateAttr(default=None)

    @classmethod
    def from_env(cls) -> ChargebackResource:
        """The resource of the code location: each setting whose variable is set is a
        `dg.EnvVar`, which Dagster reads when a run starts, in the process that runs it (a
        remote worker reads its own environment, and the UI shows the variable, not its
        value); a setting whose variable is unset keeps its default (Dagster's EnvVar has
        none: an unset one would fail the run)."""
        return cls(**{
            field: dg.EnvVar.int(variable) if field == "lock_wait_s" else dg.EnvVar(variable)
            for field, variable in ENVIRONMENT.items()
            if variable in os.environ
        })  # fmt: skip

    @classmethod
    def from_env_now(cls) -> ChargebackResource:
        """The settings of this process's environment as values, read now: for the
        `chargeback` command, which uses the paths itself before and after its runs."""
        return cls(**{
            field: os.environ[variable]
            for field, variable in ENVIRONMENT.items()
            if variable in os.environ
        })  # fmt: skip

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._run_id = context.run.run_id if context.run else None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """The end of a run. If it worked on the warehouse: commit its working copy and its
        complete month reports when every step succeeded, else keep the copy aside
        (pipelines/commit.py). Then release the run lock and remove the run's unpublished
        staging folders (a killed run leaves its leftovers to `remove_dead_leftovers`)."""
        warehouse, work, run_id = Path(self.warehouse), self._working_copy, self._run_id
        self._run_id, self._working_copy = None, None
        staging = Path(self.reports_dir) / STAGING
        try:
            succeeded = work is not None and _run_succeeded(context.instance, run_id)
            try:
                self._close_run_connection()  # its last checkpoint: the copy whole on disk
            except duckdb.Error:
                if succeeded:
                    raise  # not committed: the next run removes the copy
                # a failed run's copy is kept aside as the failure left it
            if work is not None:
                if succeeded:
                    months = [
                        (folder, Path(self.reports_dir) / owned_stem(folder).partition(".")[0])
                        for folder in sorted(staging.glob(f"*.{run_id}@*"))
                        if (folder / MANIFEST).exists()
                    ]
                    commit(warehouse, work, months, run_id)
                else:
                    keep_failed(warehouse, work)
        finally:
            if work is not None:
                release_run_lock(warehouse)
            for folder in staging.glob(f"*.{run_id}@*"):
                remove(folder)
            remove_if_empty(staging)

    @property
    def telemetry_dir(self) -> Path:
        """The rollup folder: daily Parquet rollups of the telemetry (`rollup_dir`, else beside
        the warehouse file)."""
        if self.rollup_dir:
            return Path(self.rollup_dir)
        warehouse = Path(self.warehouse)
        return warehouse.parent / f"{warehouse.stem}_telemetry"

    @property
    def spill_root(self) -> Path:
        """Where the scratch DuckDBs spill (`spill_dir`, else beside the warehouse file)."""
        if self.spill_dir:
            return Path(self.spill_dir)
        warehouse = Path(self.warehouse)
        return warehouse.parent / f"{warehouse.stem}_spill"

    def catalog(self) -> Catalog:
        return load_catalog(Path(self.catalog_dir))

    @property
    def folders(self) -> Folders:
        return Folders(
            landing=Path(self.landing_dir),
            catalog=Path(self.catalog_dir),
            reports=Path(self.reports_dir),
            telemetry=self.telemetry_dir,
        )

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection with UTC session time and the project's macros: in a run, to the run's
        working copy of the warehouse; outside one (the tests, a look between runs), to the
        live warehouse.

        The first connection of a run (each connection outside one) takes the run lock,
        waiting up to `lock_wait_s` for another run, completes a commit a killed run left
        half done and removes what dead runs left behind.
        """
        warehouse = Path(self.warehouse)
        in_run = self._run_id is not None
        if not in_run:
            self._take_run_lock()
            database = warehouse
        elif self._working_copy is None:
            self._take_run_lock()  # released at the end of the run
            try:
                self._working_copy = start_working_copy(warehouse, self._run_id, self.lock_wait_s)
                self._run_connection = connect_waiting(self._working_copy, self.lock_wait_s)
            except BaseException:
                release_run_lock(warehouse)
                raise
            database = self._working_copy
        else:
            database = self._working_copy
        try:
            con = connect_waiting(database, self.lock_wait_s)
            try:
                con.execute("set memory_limit = $limit", {"limit": self.duckdb_memory_limit})
                prepare_connection(con)
                yield con
            finally:
                con.close()
            if in_run:  # not after a failure: its error is the step's, whatever state it left
                self._end_step()
        finally:
            if not in_run:
                release_run_lock(warehouse)

    def _end_step(self) -> None:
        """At the end of a step: write what it changed into the database file (as closing
        the last connection would), then give back the memory its statements left with the
        database, which the run's connection would hold until the run ends (1,000 GPUs: the
        month's peak RSS 990 MiB instead of 940): the blocks read, and what DuckDB's
        allocator keeps for reuse. A memory limit too small for any of them makes DuckDB
        evict and flush them all. No statement runs between steps, so nothing is pinned;
        were something, the limit stays as it was."""
        self._run_connection.execute("checkpoint")
        try:
            self._run_connection.execute("set memory_limit = '1MB'")
        except duckdb.OutOfMemoryException:
            pass
        finally:
            self._run_connection.execute(
                "set memory_limit = $limit", {"limit": self.duckdb_memory_limit}
            )

    def _close_run_connection(self) -> None:
        connection, self._run_connection = self._run_connection, None
        if connection is not None:
            connection.close()

    def _take_run_lock(self) -> None:
        warehouse = Path(self.warehouse)
        warehouse.parent.mkdir(parents=True, exist_ok=True)
        acquire_run_lock(warehouse, self.lock_wait_s)
        try:
            finish_commit(warehouse)
            self.remove_dead_leftovers()
        except BaseException:
            release_run_lock(warehouse)
            raise

    def remove_dead_leftovers(self) -> list[Path]:
        """Remove the staging folders and temporary files of dead runs (pipelines/leftovers.py):
        the reports' staging folders, the warehouse's working copies, the telemetry's day
        staging and DuckDB spill folders, the partial conversions and the partial entries of
        the conversions seen and spans found (telemetry.py). Returns what was removed."""
        telemetry = self.telemetry_dir
        warehouse = Path(self.warehouse)
        candidates = [
            *telemetry.glob(".staging/*"),
            *self.spill_root.glob("*"),
            *telemetry.glob("converted/*/*.partial"),
            *telemetry.glob("converted/*/seen/*.partial"),
            *telemetry.glob("*/*.partial"),
            *working_copies(warehouse),
            *warehouse.parent.glob(f"{record_path(warehouse).name}@*.partial"),
        ]
        # the telemetry's staging roots stay: a rollup of another process may be about to
        # create its folder in them
        return remove_dead(candidates) + clean_staging(Path(self.reports_dir))

    @contextmanager
    def scratch(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB (not the warehouse: several processes may run at once) that
        spills to its own folder under `spill_root`; row order is not kept unless a statement
        orders, which lets large copies stream."""
        spill = self.spill_root / owned_name(uuid.uuid4().hex[:8])
        # DuckDB creates its temp directory when it first spills, but not the parents
        spill.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect()
        try:
            con.execute("set memory_limit = $limit", {"limit": self.duckdb_memory_limit})
            con.execute("set temp_directory = $dir", {"dir": str(spill)})
            con.execute("set preserve_insertion_order = false")
            prepare_connection(con)
            yield con
        finally:
            con.close()
            shutil.rmtree(spill, ignore_errors=True)


def _run_succeeded(instance: dg.DagsterInstance | None, run_id: str | None) -> bool:
    """Whether every step the run started succeeded and the run is not being cancelled: the
    condition for committing it."""
    if instance is None or run_id is None:
        return False
    run = instance.get_run_by_id(run_id)
    if run is None or run.status in (dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.CANCELED):
        return False
    step = dg.DagsterEventType
    events = instance.all_logs(
        run_id, of_type={step.STEP_START, step.STEP_SUCCESS, step.STEP_FAILURE}
    )
    steps_with = {
        kind: {e.step_key for e in events if e.dagster_event_type == kind}
        for kind in (step.STEP_START, step.STEP_SUCCESS, step.STEP_FAILURE)
    }
    return (
        not steps_with[step.STEP_FAILURE]
        and steps_with[step.STEP_START] == steps_with[step.STEP_SUCCESS]
    )
