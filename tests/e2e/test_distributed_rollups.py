"""The daily rollup fanned out to Celery workers gives the Parquet and the month of an
in-process run.

On this machine, as the README's scale-out section runs it: Redis (Debian's redis-server, on
127.0.0.1), two Celery workers, the Dagster daemon, and a backfill of
`telemetry_rollup_fanout_job` for the tiny month's three days with samples (one run per day,
each run's step on a worker). Each worker has its own settings (CHARGEBACK_* of its process):
the shared rollup folder and a spill folder of its own. The month's other days and the monthly
assets then run in process, as on the machine that holds the warehouse, and everything equals
a run of the whole month in process.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pytest
import redis

from pipelines.celery_app import (
    broker_command,
    free_port,
    started,
    worker_command,
    worker_of_run,
)
from tests.conftest import (
    materialize_days,
    materialize_month,
    materialize_monthly,
    query,
    require_tool,
    resource_for,
)
from tests.e2e.test_daily_increments import assert_same_tables, monthly_tables, rollup_rows
from tests.e2e.test_tiny_month import build_tiny_month

# slow (quick tier: make test-quick): Redis, two workers, the daemon and three runs
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
MONTH = "2026-11-01"
# the tiny month's days with samples (J1 and J2, J7, J4): the others roll up in process
FANOUT_DAYS = ["2026-11-01", "2026-11-15", "2026-11-30"]
WORKERS = ("w1", "w2")
WAIT_S = 180


def wait_for(condition: Callable[[], bool], what: str, logs: list[Path]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not after {WAIT_S} s\n{tails(logs)}")
        time.sleep(0.5)


def tails(logs: list[Path]) -> str:
    return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in logs if log.exists())


@pytest.fixture
def broker(tmp_path) -> Iterator[str]:
    """A Redis of its own on a free port of 127.0.0.1, no persistence; stopped after the test."""
    server = require_tool("redis-server", "redis-server")
    port = free_port()
    args, url = broker_command(server, port, tmp_path)
    with started(args, tmp_path / "redis.log"):
        client = redis.Redis(host="127.0.0.1", port=port)

        def answers() -> bool:
            try:
                return client.ping()
            except redis.ConnectionError:
                return False

        wait_for(answers, "redis-server answering", [tmp_path / "redis.log"])
        yield url


def environment(**settings: str) -> dict[str, str]:
    """This process's environment without its CHARGEBACK_* settings (the partitions' first
    month aside: every process of a deployment loads the same partitions), plus `settings`."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("CHARGEBACK_") or name == "CHARGEBACK_FIRST_MONTH"
    }
    return {**env, **settings}


def submitted(instance: dg.DagsterInstance) -> int:
    """How many runs have handed their step to Celery."""
    return sum(
        any(
            "Submitting celery task" in (record.message or "")
            for record in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
        )
        for run in instance.get_runs()
    )


def test_days_fanned_out_to_celery_workers_match_an_in_process_run(broker, tmp_path):
    # the reference: every day and the month in process (one writer, no workers)
    reference = tmp_path / "in_process"
    build_tiny_month(reference)
    assert materialize_month(reference, MONTH).success

    root = tmp_path / "distributed"
    build_tiny_month(root)
    # the storage every worker writes and the monthly run reads; the workers know it from
    # CHARGEBACK_ROLLUP_DIR only (they have no warehouse setting)
    shared = resource_for(root).telemetry_dir
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\n"
        "run_coordinator:\n  module: dagster.core.run_coordinator\n"
        "  class: QueuedRunCoordinator\n  config:\n    dequeue_interval_seconds: 1\n",
        encoding="utf-8",
    )
    # made here, before the subprocesses: two processes creating the SQLite storage of an
    # empty DAGSTER_HOME at once stamp its schema version twice
    instance = dg.DagsterInstance.from_config(str(home))
    # the daemon and the runs it launches hand each step to a worker and run none: a rollup
    # folder of theirs would show if a step read its settings from them
    decoy = tmp_path / "not_the_workers_folder"
    orchestration = environment(
        DAGSTER_HOME=str(home), CHARGEBACK_CELERY_BROKER=broker, CHARGEBACK_ROLLUP_DIR=str(decoy)
    )
    workspace = ["-w", str(REPO / "workspace.yaml")]
    logs = [tmp_path / f"{name}.log" for name in ("backfill", "daemon", *WORKERS)]
    with instance, ExitStack() as stack:
        backfill = subprocess.run(
            [str(BIN / "dagster"), "job", "backfill", *workspace,
             "-j", "telemetry_rollup_fanout_job", "--partitions", ",".join(FANOUT_DAYS),
             "--noprompt"],
            cwd=REPO, env=orchestration, capture_output=True, text=True, timeout=WAIT_S,
        )  # fmt: skip
        assert backfill.returncode == 0, backfill.stdout[-3000:] + backfill.stderr[-3000:]
        daemon = [str(BIN / "dagster-daemon"), "run", *workspace]
        stack.enter_context(started(daemon, logs[1], cwd=REPO, env=orchestration))
        # the workers start once the three steps wait in the queue, and each holds one day
        # until it has finished it (pipelines/celery_app.py): the first worker up cannot take
        # every day before the other is up, so both must take days
        wait_for(lambda: submitted(instance) == 3, "three steps handed to Celery", logs[1:2])
        for number, name in enumerate(WORKERS, start=1):
            folder = tmp_path / f"worker_{number}"
            folder.mkdir()
            # its own settings: the shared landing, catalog and rollup folders, its own spill
            # folder; no warehouse (a worker never opens it)
            env = environment(
                CHARGEBACK_LANDING_DIR=str(root / "landing"),
                CHARGEBACK_CATALOG_DIR=str(root / "catalog"),
                CHARGEBACK_ROLLUP_DIR=str(shared),
                CHARGEBACK_SPILL_DIR=str(folder / "spill"),
                CHARGEBACK_DUCKDB_MEMORY_LIMIT="1GB",
            )
            worker = worker_command(str(BIN / "celery"), broker, name)
            stack.enter_context(started(worker, logs[1 + number], cwd=folder, env=env))

        def finished() -> bool:
            runs = instance.get_runs()
            return len(runs) == 3 and all(run.is_finished for run in runs)

        wait_for(finished, "the three runs finished", logs)
        runs = instance.get_runs()
        if any(run.status != dg.DagsterRunStatus.SUCCESS for run in runs):
            pytest.fail(f"a run failed\n{tails(logs)}")
        took = {run.tags["dagster/partition"]: worker_of_run(instance, run.run_id) for run in runs}

    # one run per day, each on a worker; both workers took days
    assert sorted(took) == FANOUT_DAYS
    assert set(took.values()) == set(WORKERS), took
    # each worker's scratch DuckDB spilled (had it needed to) where its own setting says
    assert (tmp_path / "worker_1/spill").is_dir() and (tmp_path / "worker_2/spill").is_dir()
    assert not decoy.exists()
    # the workers published the three days to the shared folder, whole: no staging is left
    assert sorted(path.name for path in (shared / "quality").iterdir()) == [
        f"day={day}" for day in FANOUT_DAYS
    ]
    assert list(shared.glob(".staging/*")) == []

    # the month's other days and the month itself in process, on the machine of the warehouse
    for first, last in [(dt.date(2026, 11, 2), dt.date(2026, 11, 14)),
                        (dt.date(2026, 11, 16), dt.date(2026, 11, 29))]:  # fmt: skip
        assert materialize_days(root, [first, last]).success
    assert materialize_monthly(root, MONTH).success

    assert_same_tables(rollup_rows(root), rollup_rows(reference))
    charge_lines = "select * from charge_lines order by all"
    assert query(root, charge_lines) == query(reference, charge_lines)
    # the tiny month's hand-computed total (test_tiny_month)
    assert query(root, "select sum(amount) from charge_lines") == [(Decimal("19.63"),)]
    assert_same_tables(monthly_tables(root), monthly_tables(reference))
