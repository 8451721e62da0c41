"""`chargeback run` / `chargeback close` as a person at a terminal runs them: the installed
console script in a subprocess, its own folders and DAGSTER_HOME under tmp_path."""

from __future__ import annotations

import os
import subprocess
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pytest

from tests.conftest import query, write
from tests.e2e.test_tiny_month import build_tiny_month

REPO = Path(__file__).resolve().parents[2]
CHARGEBACK = REPO / ".venv" / "bin" / "chargeback"


def env_for(data: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARGEBACK_", "DAGSTER_"))}
    env.update(
        CHARGEBACK_FIRST_MONTH="2026-09",
        CHARGEBACK_LANDING_DIR=str(data / "landing"),
        CHARGEBACK_CATALOG_DIR=str(data / "catalog"),
        CHARGEBACK_WAREHOUSE=str(data / "warehouse.duckdb"),
        CHARGEBACK_REPORTS_DIR=str(data / "reports"),
        CHARGEBACK_DUCKDB_MEMORY_LIMIT="1GB",
    )
    env.update(overrides)
    return env


def chargeback(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CHARGEBACK), *args], env=env, cwd=REPO, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The hand-computed tiny month run by `chargeback run --month 2026-11`."""
    data = tmp_path_factory.mktemp("command")
    build_tiny_month(data)
    return data, chargeback(["run", "--month", "2026-11"], env_for(data))


@pytest.mark.slow
def test_run_prints_progress_and_one_summary_line(ran):
    data, result = ran
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == "chargeback run 2026-11: 4 export files; telemetry of 30 days"
    days = [line for line in lines if line.startswith("  telemetry day ")]
    assert len(days) == 30
    assert days[0].startswith("  telemetry day 1 of 30 (2026-11-01): 24 samples, 0 rejected, ")
    assert days[4].startswith("  telemetry day 5 of 30 (2026-11-05): 0 samples, 1 rejected, ")
    assert "monthly run 2026-11" in lines
    steps = [line.split(":")[0].strip() for line in lines if line.startswith("  2026-11 ")]
    # the catalog first, then the steps that read only the catalog, in name order; the
    # telemetry's quality after the landing's telemetry files, which it checks the days against
    assert steps[:4] == [
        "2026-11 catalog", "2026-11 node_service", "2026-11 scheduler_exports",
        "2026-11 telemetry_files",
    ]  # fmt: skip
    assert steps.index("2026-11 sample_quality") > steps.index("2026-11 telemetry_files")
    assert steps[-1] == "2026-11 month_manifest"
    assert (
        "  2026-11 scheduler_exports: stg_scheduler_files 2, stg_job_records 8, "
        "stg_allocation_records 6, stg_quota_configs 0 ("
    ) in result.stdout
    assert "  2026-11 stg_jobs: 6 rows (" in result.stdout
    # usage 23.14 less 3.51 of failed_infra credits (tests/e2e/test_tiny_month.py)
    assert lines[-1] == (
        "2026-11: charged EUR 19.63 to 3 tenants; 9 of 10 checks passed (warnings: "
        f"every_account_mapped); reports in {data / 'reports' / '2026-11'}/"
    )
    assert (data / "reports/2026-11/chargeback-2026-11.xlsx").is_file()


@pytest.mark.slow
def test_run_records_both_runs_in_dagster_home(ran, monkeypatch):
    data, _ = ran
    home = data / "dagster_home"  # unset DAGSTER_HOME: beside the warehouse
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = [record.dagster_run for record in instance.get_run_records()]
    assert [
        (r.status, r.tags["dagster/asset_partition_range_start"],
         r.tags["dagster/asset_partition_range_end"]) for r in runs
    ] == [
        (dg.DagsterRunStatus.SUCCESS, "2026-11-01", "2026-11-01"),  # the month, newest first
        (dg.DagsterRunStatus.SUCCESS, "2026-11-01", "2026-11-30"),  # its telemetry days
    ]  # fmt: skip


@pytest.mark.slow
def test_close_issues_the_month_once(ran):
    data, _ = ran
    closed = chargeback(["close", "--month", "2026-11", "--by", "finance"], env_for(data))
    assert (closed.returncode, closed.stderr) == (0, "")
    assert closed.stdout == "closed 2026-11 by finance: 6 charge lines issued, total 19.63\n"
    again = chargeback(["close", "--month", "2026-11", "--by", "finance"], env_for(data))
    assert again.returncode == 1
    assert again.stderr.startswith(
        "chargeback: close_billing_month: 2026-11 is already closed (at "
    )
    assert again.stderr.endswith(" by finance)\n")
    assert query(data, "select closed_by, issued_lines, issued_amount from closed_months") == [
        ("finance", 6, Decimal("19.63"))
    ]


@pytest.mark.slow
def test_a_range_of_months_in_two_runs(tmp_path):
    build_tiny_month(tmp_path)
    result = chargeback(["run", "--from", "2026-10", "--to", "2026-11"], env_for(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "telemetry day 61 of 61 (2026-11-30)" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "2026-10..2026-11: charged EUR 23.66 to 3 tenants; 9 of 10 checks passed (warnings: "
        f"every_account_mapped); reports in {tmp_path / 'reports' / '2026-10'}/ .. "
        f"{tmp_path / 'reports' / '2026-11'}/"
    )  # October: J2's two hours at 2.0133 = 4.03; each check looks at both months


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--month", "2016-13"], "--month 2016-13: not a month (YYYY-MM, e.g. 2026-11)"),
        (["run", "--month", "december"], "--month december: not a month (YYYY-MM, e.g. 2026-11)"),
        (["run", "--month", "2026-08"], "2026-08 is before the first month 2026-09 "
         "(CHARGEBACK_FIRST_MONTH)"),
        (["run", "--month", "2999-01"], "2999-01 has not ended yet (the latest month that can "
         "run is "),
        (["run", "--from", "2026-11", "--to", "2026-10"], "--to 2026-10 is before --from 2026-11"),
        (["run", "--from", "2026-11"], "give --month YYYY-MM, or --from YYYY-MM and --to YYYY-MM"),
        (["run", "--month", "2026-11", "--to", "2026-12"], "give --month, or --from and --to, "
         "not both"),
        (["close", "--month", "2026-11", "--by", "me"], "warehouse {root}/warehouse.duckdb does "
         "not exist (CHARGEBACK_WAREHOUSE)"),
    ],
)  # fmt: skip
def test_a_wrong_argument_is_one_line_and_touches_nothing(tmp_path, args, message):
    build_tiny_month(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    result = chargeback(args, env_for(tmp_path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("chargeback: error: " + message.format(root=tmp_path))
    assert len(result.stderr.splitlines()) == 1
    assert sorted(tmp_path.rglob("*")) == before


def test_a_mistyped_warehouse_folder_creates_nothing(tmp_path):
    build_tiny_month(tmp_path)
    typo = tmp_path / "wherehouse" / "warehouse.duckdb"
    result = chargeback(
        ["run", "--month", "2026-11"], env_for(tmp_path, CHARGEBACK_WAREHOUSE=str(typo))
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"chargeback: error: the warehouse's folder {typo.parent} does not exist "
        "(CHARGEBACK_WAREHOUSE)\n"
    )
    assert not typo.parent.exists()


def test_a_lock_wait_that_is_not_whole_seconds_is_one_line(tmp_path):
    build_tiny_month(tmp_path)
    result = chargeback(
        ["run", "--month", "2026-11"], env_for(tmp_path, CHARGEBACK_LOCK_WAIT_S="0.5")
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "chargeback: error: CHARGEBACK_LOCK_WAIT_S 0.5: input should be a valid integer, "
        "unable to parse string as an integer\n"
    )


@pytest.mark.slow
def test_a_refused_input_is_one_line_a_blocked_month_one_line_per_failed_check(tmp_path):
    build_tiny_month(tmp_path)
    write(tmp_path / "landing/scheduler/tiny/notes.dat", "nothing a scheduler wrote\n")
    refused = chargeback(["run", "--month", "2026-11"], env_for(tmp_path))
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.startswith(
        f"chargeback: {tmp_path}/landing/scheduler/tiny/notes.dat: line 1: unrecognised export, "
        "expected "
    )
    assert len(refused.stderr.splitlines()) == 1
    (tmp_path / "landing/scheduler/tiny/notes.dat").unlink()

    # two jobs on one GPU at once (tests/e2e/test_oversubscription.py): J9 holds GPU 0 of n1
    # 10:15-10:30 while J7 does (10:00-10:45). The cause, gpus_never_oversubscribed (which does
    # not block), comes first; then the check it broke, which blocks the reports: the buckets
    # hold those 900 s twice (1/420 GPU-ms units: 900 x 420,000 = 378,000,000 too many); the
    # warning every_account_mapped (ghost) is for the summary of a run that completes
    jobs = tmp_path / "landing/scheduler/tiny/jobs.csv"
    jobs.write_text(
        jobs.read_text()
        + "J9,tiny,alpha,ann,batch,normal,A100,1,n1,2026-11-15T09:00:00,2026-11-15T10:15:00,"
        "2026-11-15T10:30:00,COMPLETED,0\n"
    )
    allocations = tmp_path / "landing/scheduler/tiny/allocations.csv"
    allocations.write_text(allocations.read_text() + "J9,n1,0\n")
    blocked = chargeback(["run", "--month", "2026-11"], env_for(tmp_path))
    assert blocked.returncode == 1
    lines = blocked.stderr.splitlines()
    run_id = lines[-1].rpartition(" (Dagster run ")[2].removesuffix(")")
    assert len(run_id) == 36  # a Dagster run id, a UUID
    assert lines == [
        "chargeback: 2026-11: check gpus_never_oversubscribed failed: 1 violation(s); first: "
        "cluster=tiny, node=n1, gpu_index=0, excess_gpu_hours=0.25, "
        "first_overlap_at=2026-11-15 10:15:00, jobs=J7, J9",
        "chargeback: 2026-11: check capacity_buckets_sum_to_capacity failed: 1 violation(s); "
        "first: cluster=tiny, gpu_model=A100, bucket_units=2177658000000, "
        "capacity_units=2177280000000, difference_units=378000000; the month's reports were "
        f"not written; the run's tables are in {tmp_path}/warehouse_failed.duckdb "
        f"(Dagster run {run_id})",
    ]
    assert not (tmp_path / "reports/2026-11/chargeback-2026-11.xlsx").exists()


def evaluation(table: str, check: str, first: dict[str, str], warn: bool = False):
    """A failed check's evaluation as the run reports it: one violation, shown first."""
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(table),
        check_name=check,
        passed=False,
        metadata={"violations": 1, "first_violations": dg.MetadataValue.json([first])},
        severity=dg.AssetCheckSeverity.WARN if warn else dg.AssetCheckSeverity.ERROR,
    )


OVERSUBSCRIBED = evaluation("gpu_capacity", "gpus_never_oversubscribed", {"node": "n1"})
BUCKETS = evaluation("capacity_buckets", "capacity_buckets_sum_to_capacity", {"cluster": "c"})
TIES_OUT = evaluation("tenant_month", "charges_tie_out", {"tenant_id": "t"})
UNMAPPED = evaluation("job_usage", "every_account_mapped", {"account": "ghost"}, warn=True)
# a check that does not block, of a table beside capacity_buckets (data_quality is not made
# from it) with more tables above it: made up, today's only such check is upstream
BESIDE = evaluation("data_quality", "quality_note", {"file": "f"})
BLOCKING = {"capacity_buckets_sum_to_capacity", "charges_tie_out"}


@pytest.mark.parametrize(
    ("failed", "failure", "kept", "expected"),
    [
        # one blocking check: the one line it always was (a warning is not listed)
        ([UNMAPPED, BUCKETS], None, "/w/failed.duckdb", [
            "check capacity_buckets_sum_to_capacity failed: 1 violation(s); first: cluster=c; "
            "the month's reports were not written; the run's tables are in /w/failed.duckdb "
            "(Dagster run r1)",
        ]),
        # in whatever order Dagster reports them: upstream first, the blocking checks last
        ([TIES_OUT, BUCKETS, UNMAPPED, OVERSUBSCRIBED], None, None, [
            "check gpus_never_oversubscribed failed: 1 violation(s); first: node=n1",
            "check capacity_buckets_sum_to_capacity failed: 1 violation(s); first: cluster=c",
            "check charges_tie_out failed: 1 violation(s); first: tenant_id=t; the month's "
            "reports were not written (Dagster run r1)",
        ]),
        # the line saying the reports were not written is a blocking check's, the last
        ([BUCKETS, BESIDE], None, None, [
            "check quality_note failed: 1 violation(s); first: file=f",
            "check capacity_buckets_sum_to_capacity failed: 1 violation(s); first: cluster=c; "
            "the month's reports were not written (Dagster run r1)",
        ]),
        # a failed step after a check that does not block: both, the step last
        ([OVERSUBSCRIBED], "costing: a rate error", None, [
            "check gpus_never_oversubscribed failed: 1 violation(s); first: node=n1",
            "costing: a rate error (Dagster run r1)",
        ]),
        ([UNMAPPED], "costing: a rate error", None, ["costing: a rate error (Dagster run r1)"]),
    ],
)  # fmt: skip
def test_a_run_that_did_not_complete_names_every_failed_check(failed, failure, kept, expected):
    from pipelines.cli import _failed_run_lines

    kept_path = Path(kept) if kept else None
    assert _failed_run_lines(failed, BLOCKING, failure, kept_path, "r1") == expected


@pytest.mark.parametrize(
    ("failed", "lines", "checks"),
    [
        ([], [], "10 checks passed"),
        ([UNMAPPED], [], "9 of 10 checks passed (warnings: every_account_mapped)"),
        # a failed check that does not block is not a warning: it has a line of its own
        ([UNMAPPED, OVERSUBSCRIBED], [
            "check gpus_never_oversubscribed failed: 1 violation(s); first: node=n1; the "
            "reports were written",
        ], "8 of 10 checks passed (failed: gpus_never_oversubscribed; warnings: "
           "every_account_mapped)"),
        ([BESIDE, OVERSUBSCRIBED], [
            "check gpus_never_oversubscribed failed: 1 violation(s); first: node=n1; the "
            "reports were written",
            "check quality_note failed: 1 violation(s); first: file=f; the reports were written",
        ], "8 of 10 checks passed (failed: gpus_never_oversubscribed, quality_note)"),
    ],
)  # fmt: skip
def test_a_completed_run_names_its_failed_checks_apart_from_warnings(failed, lines, checks):
    from pipelines.cli import _checks_text, _completed_run_lines

    assert _completed_run_lines(failed) == lines
    assert _checks_text([None] * 10, failed) == checks


def test_a_run_whose_commit_failed_is_found_unpublished(tmp_path):
    """The run commits at its very end, where Dagster only logs a failure: `chargeback run`
    checks that the month's manifest is the run's and no commit is left half done."""
    from pipelines.cli import _unpublished
    from pipelines.defs.resources import ChargebackResource
    from pipelines.months import BillingMonth

    chargeback = ChargebackResource(
        landing_dir="l", catalog_dir="c", warehouse=str(tmp_path / "warehouse.duckdb"),
        reports_dir=str(tmp_path / "reports"),
    )  # fmt: skip
    november = [BillingMonth.parse("2026-11", "UTC")]
    manifest = tmp_path / "reports/2026-11/manifest.json"
    assert _unpublished(chargeback, november, "run-b") == f"{manifest.parent}/"
    write(manifest, '{"dagster_run_id": "run-a"}\n')  # the previous run's reports
    assert _unpublished(chargeback, november, "run-b") == f"{manifest.parent}/"
    assert _unpublished(chargeback, november, "run-a") is None
    write(tmp_path / "warehouse.duckdb.commit.json", "{}\n")
    assert _unpublished(chargeback, november, "run-a") == "its warehouse and reports"
