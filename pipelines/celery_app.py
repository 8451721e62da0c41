"""The Celery app of the rollup workers: `celery -A pipelines.celery_app -b <broker> worker`.

dagster-celery's own app (`dagster_celery.app`) with one change: a worker acknowledges a day
when it has finished it, not when it starts it, so it holds one day at a time and the others
stay in the queue for the idle workers (by default a worker takes the next day as soon as it
starts one). And a day whose worker dies is not acknowledged: Celery puts it back in the queue
for another worker (a killed pool process at once, a killed worker after Redis's visibility
timeout, an hour) instead of losing it while its run waits; re-running a day replaces it
whole. That recovery is Celery's documented behaviour, not tested here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
from dagster_celery.app import app

app.conf.update(task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1)


@contextlib.contextmanager
def started(args: list[str], log: Path, **popen) -> Iterator[subprocess.Popen]:
    """A process (broker, worker, daemon) in a session of its own, its output to `log`, stopped
    with all its children on the way out (a worker's pool process, the daemon's code server
    and runs), whatever happened: TERM, then KILL after 20 s, then KILL for whatever of the
    session outlived its leader."""
    with log.open("w") as out:
        process = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **popen
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):  # then killed below
                process.wait(timeout=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now, for a server of its own (a broker,
    the UI of a test)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def broker_command(redis_server: str, port: int, folder: Path) -> tuple[list[str], str]:
    """The command line of a Redis broker in the foreground on 127.0.0.1:`port` that keeps
    nothing on disk (its working folder `folder`), and the broker URL the workers and the
    executor take."""
    command = [redis_server, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
               "--appendonly", "no", "--dir", str(folder)]  # fmt: skip
    return command, f"redis://127.0.0.1:{port}/0"


def worker_command(celery: str, broker: str, name: str) -> list[str]:
    """The command line of a worker `name@<host>` in the foreground: one day at a time from
    `broker` (also its result backend), on the queue the Dagster Celery executor sends to."""
    return [celery, "-A", "pipelines.celery_app", "-b", broker, "--result-backend", broker,
            "worker", "-n", f"{name}@%h", "--concurrency", "1", "-Q", "dagster",
            "--without-mingle", "--without-gossip", "--loglevel", "INFO"]  # fmt: skip


def worker_of_run(instance: dg.DagsterInstance, run_id: str) -> str:
    """The name (without its host) of the Celery worker that ran the run's step, from the
    engine event the executor logs when a worker takes it."""
    [worker] = [
        record.dagster_event.engine_event_data.metadata["Celery worker"].value
        for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
        if "Celery worker" in record.dagster_event.engine_event_data.metadata
    ]
    return worker.partition("@")[0]
