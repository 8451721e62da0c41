"""A two-month backfill launched the way the UI's "Materialize all" button does it.

`dagster dev` (webserver + daemon) runs on a tiny dataset under tmp_path; the test finds every
asset through GraphQL, launches one `launchPartitionBackfill` for October and November 2026,
waits for the backfill daemon to finish it, stops the server and checks both months' marts.
The assets have `BackfillPolicy.single_run()`; a run holds one partitioning, so the backfill
(rooted at the monthly `catalog`, whose days the daily `gpu_sample_rollup` reads) runs the
monthly assets upstream of the telemetry, then the 61 days in one run, then the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from pipelines.celery_app import free_port
from tests.conftest import query
from tests.e2e.test_tiny_month import build_tiny_month

REPO = Path(__file__).resolve().parents[2]
DAGSTER = REPO / ".venv" / "bin" / "dagster"
MONTHS = ["2026-10-01", "2026-11-01"]

STARTUP_TIMEOUT_S = 90
BACKFILL_TIMEOUT_S = 240
# SIGTERM, then SIGKILL after this long. dagster dev usually stops at once, but not always: in a
# fresh clone on 2026-12-04 its daemon shut down at once while the dev process itself logged
# nothing and was still there 90 s later. How Dagster stops is not what this test checks (the
# backfill is), so it kills what is left and checks that nothing outlives the group.
STOP_TIMEOUT_S = 30

# The backfill daemon ticks every 30 s; the run queue is polled every second so the run starts
# as soon as the daemon submits it. One run at a time: DuckDB allows one writer per file.
DAGSTER_YAML = """\
telemetry:
  enabled: false
run_queue:
  max_concurrent_runs: 1
  dequeue_interval_seconds: 1
"""

LAUNCH_BACKFILL = """
mutation LaunchPartitionBackfill($backfillParams: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $backfillParams) {
    __typename
    ... on LaunchBackfillSuccess { backfillId launchedRunIds }
    ... on PythonError { message stack }
    ... on UnauthorizedError { message }
    ... on PartitionSetNotFoundError { message }
    ... on InvalidSubsetError { message }
  }
}
"""

BACKFILL = """
query Backfill($backfillId: String!) {
  partitionBackfillOrError(backfillId: $backfillId) {
    __typename
    ... on PartitionBackfill {
      id
      status
      partitionNames
      error { message stack }
      runs { runId status tags { key value } }
    }
    ... on PythonError { message stack }
  }
}
"""

RUN_LOGS = """
query RunLogs($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message level stepKey }
        ... on ErrorEvent { error { message causes { message } } }
      }
    }
  }
}
"""

CHARGES_BY_MONTH = """
select billing_month::varchar, charge_category, sum(amount), count(*)
from charge_lines group by all order by 1, 2
"""
TOTAL_BY_MONTH = (
    "select billing_month::varchar, sum(amount) from charge_lines group by 1 order by 1"
)

TERMINAL_FAILURES = {"FAILED", "FAILING", "CANCELED", "CANCELING", "COMPLETED_FAILED"}
SUCCESS = {"COMPLETED_SUCCESS", "COMPLETED"}  # COMPLETED is the deprecated spelling


def tail(path: Path, lines: int = 40, skip_debug: bool = False) -> str:
    """The last lines of a log file without colour codes (optionally without DEBUG and frames)."""
    if not path.exists():
        return f"({path.name} missing)"
    text = re.sub(r"\x1b\[[0-9;]*m", "", path.read_text(encoding="utf-8", errors="replace"))
    kept = [
        line
        for line in text.splitlines()
        if not (skip_debug and (" - DEBUG - " in line or line.startswith(("  File ", "    "))))
    ]
    return "\n".join(kept[-lines:])


def project_frames(stack: list[str]) -> list[str]:
    """The frames of a Python stack that are in the project's code (else the last four)."""
    ours = [f for f in stack if str(REPO) in f and "/.venv/" not in f]
    return ours or stack[-4:]


def processes_in_group(pgid: int) -> list[str]:
    """Live (non-zombie) processes of a process group: "pid state cmdline" from /proc."""
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: only whether the group still exists at all
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        return [f"process group {pgid}"]
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        # the fields after the parenthesised command name: state ppid pgrp ...
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            found.append(f"{entry.name} {state} {cmdline}")
    return found


@dataclass
class DagsterDev:
    """`dagster dev -w workspace.yaml` in its own process group, stopped on exit."""

    root: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    killed: bool = False
    left_behind: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def stdout_path(self) -> Path:
        return self.root / "dagster_dev.stdout"

    @property
    def stderr_path(self) -> Path:
        return self.root / "dagster_dev.stderr"

    def __enter__(self) -> DagsterDev:
        cmd = [str(DAGSTER), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(self.port)]
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                cmd,
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # a new process group: one signal reaches every child
            )
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM to the group (dagster dev maps it to its clean shutdown), then SIGKILL."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # start_new_session: the leader's pid is the group id
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            self.proc.poll()
            if self.proc.returncode is not None and not processes_in_group(pgid):
                break
            time.sleep(0.2)
        else:
            self.killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            time.sleep(0.5)
        self.left_behind = processes_in_group(pgid)

    def diagnostics(self) -> str:
        return (
            f"--- dagster dev stdout: services and daemon (tail) ---\n{tail(self.stdout_path)}\n"
            f"--- dagster dev stderr: run logs without DEBUG or stack frames (tail) ---\n"
            f"{tail(self.stderr_path, 60, skip_debug=True)}"
        )

    def graphql(self, gql: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": gql, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                payload = json.load(response)
        except urllib.error.HTTPError as error:  # the server's message, not just its status
            pytest.fail(f"GraphQL HTTP {error.code}: {error.read().decode()[:2000]}")
        assert not payload.get("errors"), f"GraphQL errors: {payload['errors']}"
        return payload["data"]

    def assert_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(
                f"dagster dev exited with code {self.proc.returncode}\n{self.diagnostics()}"
            )

    def wait_until_ready(self, location: str) -> None:
        """`GET /server_info` answers, then the code location is LOADED (or fail on its error)."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            self.assert_alive()
            try:
                with urllib.request.urlopen(f"{self.url}/server_info", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"webserver not up after {STARTUP_TIMEOUT_S} s\n{self.diagnostics()}")
            time.sleep(0.5)
        while True:
            self.assert_alive()
            data = self.graphql(
                """
                { workspaceOrError { __typename
                    ... on Workspace { locationEntries { name loadStatus
                        locationOrLoadError { __typename
                            ... on PythonError { message causes { message stack } } }
                    } }
                    ... on PythonError { message }
                } }
                """
            )["workspaceOrError"]
            entries = {e["name"]: e for e in data.get("locationEntries", [])}
            entry = entries.get(location)
            if entry and entry["loadStatus"] == "LOADED":
                loaded = entry["locationOrLoadError"] or {}
                if loaded.get("__typename") == "PythonError":
                    causes = "\n".join(
                        c["message"].strip() + "\n" + "".join(project_frames(c["stack"]))
                        for c in loaded["causes"]
                    )
                    pytest.fail(
                        f"code location {location} failed to load:\n{loaded['message']}\n"
                        f"caused by:\n{causes}\n{self.diagnostics()}"
                    )
                return
            if time.monotonic() > deadline:
                pytest.fail(
                    f"code location {location} not loaded after {STARTUP_TIMEOUT_S} s: {data}\n"
                    f"{self.diagnostics()}"
                )
            time.sleep(0.5)

    def run_logs(self, run_id: str, limit: int = 30) -> str:
        """The run's events above DEBUG, with the causes of any error (the user code's own)."""
        data = self.graphql(RUN_LOGS, {"runId": run_id})["logsForRun"]
        lines = []
        for event in data.get("events", []):
            if event.get("level") == "DEBUG" and not event.get("error"):
                continue
            lines.append(f"{event.get('level')} {event.get('stepKey') or '-'}: {event['message']}")
            if event.get("error"):
                error = event["error"]
                lines += [f"    {e['message'].strip()}" for e in [error, *error["causes"]]]
        return f"--- run {run_id}: events above DEBUG (last {limit}) ---\n" + "\n".join(
            lines[-limit:]
        )


def dev_env(root: Path, dagster_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARGEBACK_", "DAGSTER_"))}
    env.update(
        DAGSTER_HOME=str(dagster_home),
        CHARGEBACK_FIRST_MONTH="2026-09",
        CHARGEBACK_LANDING_DIR=str(root / "landing"),
        CHARGEBACK_CATALOG_DIR=str(root / "catalog"),
        CHARGEBACK_WAREHOUSE=str(root / "warehouse.duckdb"),
        CHARGEBACK_REPORTS_DIR=str(root / "reports"),
        CHARGEBACK_DUCKDB_MEMORY_LIMIT="1GB",
        PYTHONUNBUFFERED="1",
    )
    return env


def launch_and_wait(server: DagsterDev) -> dict[str, Any]:
    """Every asset key, one backfill over MONTHS as the UI sends it, polled to the end."""
    nodes = server.graphql(
        "{ assetNodes { assetKey { path } isPartitioned partitionKeys isMaterializable } }"
    )["assetNodes"]
    assert nodes, "no assets in the code location"
    # the tables of issued charges are shown, but only `chargeback close` writes them: the
    # UI's "Materialize all" leaves them out
    closing = [n["assetKey"]["path"] for n in nodes if not n["isMaterializable"]]
    assert sorted(closing) == [["closed_months"], ["issued_charge_lines"]]
    # the location's partitions start at CHARGEBACK_FIRST_MONTH=2026-09: months, and UTC days
    # for the telemetry rollup
    assert all(n["isPartitioned"] for n in nodes), [n["assetKey"] for n in nodes]
    assert all(n["partitionKeys"][0] == "2026-09-01" for n in nodes)
    daily = [n for n in nodes if n["assetKey"]["path"] == ["gpu_sample_rollup"]]
    assert len(daily) == 1 and "2026-11-30" in daily[0]["partitionKeys"]
    assert all(set(MONTHS) <= set(n["partitionKeys"]) for n in nodes if n not in daily)

    # the UI's LaunchAssetChoosePartitionsDialog for assets outside a user job
    params = {
        "tags": [],
        "assetSelection": [
            {"path": n["assetKey"]["path"]} for n in nodes if n["isMaterializable"]
        ],  # fmt: skip
        "partitionNames": MONTHS,
        "fromFailure": False,
    }
    launched = server.graphql(LAUNCH_BACKFILL, {"backfillParams": params})
    launched = launched["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched

    started = time.monotonic()
    while True:
        server.assert_alive()
        backfill = server.graphql(BACKFILL, {"backfillId": launched["backfillId"]})
        backfill = backfill["partitionBackfillOrError"]
        assert backfill["__typename"] == "PartitionBackfill", backfill
        status = backfill["status"]
        if status in SUCCESS:
            return backfill
        waited = time.monotonic() - started
        if status in TERMINAL_FAILURES or waited > BACKFILL_TIMEOUT_S:
            logs = "\n".join(server.run_logs(r["runId"]) for r in backfill["runs"])
            pytest.fail(
                f"backfill {backfill['id']} is {status} after {waited:.0f} s; "
                f"error: {backfill['error']}\nruns: {backfill['runs']}\n{logs}\n"
                f"{server.diagnostics()}"
            )
        time.sleep(2)


@pytest.mark.slow
def test_ui_backfill_of_two_months_builds_both_marts(tmp_path):
    data = tmp_path / "data"
    build_tiny_month(data)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML, encoding="utf-8")

    t0 = time.monotonic()
    with DagsterDev(tmp_path, dev_env(data, home)) as server:
        server.wait_until_ready("gpu_chargeback")
        t1 = time.monotonic()
        backfill = launch_and_wait(server)
        t2 = time.monotonic()
    print(
        f"dagster dev ready in {t1 - t0:.0f} s, backfill done in {t2 - t1:.0f} s, stopped in "
        f"{time.monotonic() - t2:.0f} s (exit {server.proc.returncode}, SIGKILL: {server.killed})"
    )
    assert server.left_behind == [], f"processes left behind: {server.left_behind}"

    # (partitionNames is null: the backfill's assets have different partitionings)
    # single_run backfill policy: each run covers the whole range, of months or of their days
    ranges = sorted(
        (tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"])
        for tags in ({t["key"]: t["value"] for t in run["tags"]} for run in backfill["runs"])
    )
    assert all(run["status"] == "SUCCESS" for run in backfill["runs"]), backfill["runs"]
    # the monthly assets upstream of the telemetry (catalog, jobs...), the 61 days, the rest
    assert ranges == [
        ("2026-10-01", "2026-11-01"),
        ("2026-10-01", "2026-11-01"),
        ("2026-10-01", "2026-11-30"),
    ]

    assert query(data, CHARGES_BY_MONTH) == [
        # October: J2's 2 h before midnight, A100 at 2.0133 -> 4.0266 -> 4.03
        ("2026-10-01", "Usage", Decimal("4.03"), 1),
        # November: usage 23.14, less the failed_infra credits (J3's outage hour, J6)
        ("2026-11-01", "Credit", Decimal("-3.51"), 2),
        ("2026-11-01", "Usage", Decimal("23.14"), 4),
    ]
    assert query(data, TOTAL_BY_MONTH) == [
        ("2026-10-01", Decimal("4.03")),
        ("2026-11-01", Decimal("19.63")),
    ]
    assert query(
        data,
        "select billing_month::varchar, job_id, tenant_id, allocated_gpu_hours, "
        "productive_gpu_hours, unmeasured_gpu_hours from job_usage "
        "where billing_month = '2026-10-01'",
    ) == [("2026-10-01", "J2", "beta", 2.0, 1.0, 1.0)]
    assert query(
        data,
        "select billing_month::varchar, tenant_id, amount from tenant_month order by 1, 2",
    ) == [
        ("2026-10-01", "alpha", Decimal("0.00")),
        ("2026-10-01", "beta", Decimal("4.03")),
        ("2026-11-01", "alpha", Decimal("11.58")),
        ("2026-11-01", "beta", Decimal("4.03")),
        ("2026-11-01", "unmapped", Decimal("4.02")),
    ]
    # capacity: October 2 A100 x 744 h; November 2 x 720 h plus the H100 from Nov 16 (360 h);
    # the other buckets sum to it exactly
    assert query(
        data,
        """
        select billing_month::varchar, gpu_model,
               sum(gpu_hours) filter (where bucket = 'capacity'),
               sum(gpu_hours) filter (where bucket <> 'capacity')
        from capacity_buckets group by all order by 1, 2
        """,
    ) == [
        ("2026-10-01", "A100", 1488.0, 1488.0),
        ("2026-11-01", "A100", 1440.0, 1440.0),
        ("2026-11-01", "H100", 360.0, 360.0),
    ]
    assert sorted(p.name for p in (data / "reports").iterdir()) == ["2026-10", "2026-11"]
