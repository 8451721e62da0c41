"""A month's reports switch as a whole (pipelines/defs/reports/publish.py), and what dead runs
left in the staging folder goes: on the file system, without Dagster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipelines.defs.reports import publish
from pipelines.defs.reports.publish import (
    carry_over,
    clean_staging,
    month_files,
    month_staging,
    publish_month,
    report_of,
)
from pipelines.leftovers import HOST


def files(folder: Path) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): path.read_text()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def generation(folder: Path, tag: str) -> Path:
    """A month folder as the report assets write it, every file saying which run wrote it."""
    for name in ("chargeback-2026-11.xlsx", "focus-2026-11.csv", "departments/science.html"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(tag)
    return folder


def dead_pid() -> int:
    """The pid of a process that has ended (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_publishing_swaps_the_whole_month_folder(tmp_path):
    reports = tmp_path / "reports"
    generation(reports / "2026-11", "old")
    staging = generation(month_staging(reports, "2026-11", "run-1"), "new")
    assert staging.parent == reports / ".staging"
    assert staging.name == f"2026-11.run-1@{HOST}@{os.getpid()}"
    # a later asset of the same run finds the same folder
    assert month_staging(reports, "2026-11", "run-1") == staging

    publish_month(staging, reports / "2026-11")

    assert files(reports / "2026-11") == {
        "chargeback-2026-11.xlsx": "new",
        "departments/science.html": "new",
        "focus-2026-11.csv": "new",
    }
    assert sorted(p.name for p in reports.iterdir()) == ["2026-11"]  # no staging left


def test_without_an_atomic_exchange_the_folder_is_renamed_aside_then_replaced(
    tmp_path, monkeypatch
):
    # an OS or file system without renameat2(RENAME_EXCHANGE): two renames
    monkeypatch.setattr(publish, "_renameat2", lambda: None)
    reports = tmp_path / "reports"
    generation(reports / "2026-11", "old")
    staging = generation(month_staging(reports, "2026-11", "run-1"), "new")
    publish_month(staging, reports / "2026-11")
    assert set(files(reports / "2026-11").values()) == {"new"}
    assert sorted(p.name for p in reports.iterdir()) == ["2026-11"]


# the report steps a run of chargeback_workbook and department_reports (and month_manifest)
# leaves alone
OTHER_STEPS = ["focus_export", "notices_export", "organisation_page"]


def test_reports_a_run_did_not_rebuild_are_carried_over(tmp_path):
    reports = tmp_path / "reports"
    generation(reports / "2026-11", "old")
    (reports / "2026-11" / ".focus-2026-11.csv.partial").write_text("an old version's leftover")
    staging = month_staging(reports, "2026-11", "run-1")
    (staging / "chargeback-2026-11.xlsx").write_text("new")
    (staging / "departments").mkdir()  # this run's departments: none

    assert carry_over(reports / "2026-11", staging, "2026-11", OTHER_STEPS) == ["focus-2026-11.csv"]
    publish_month(staging, reports / "2026-11")
    assert files(reports / "2026-11") == {
        "chargeback-2026-11.xlsx": "new",
        "focus-2026-11.csv": "old",
    }


def test_a_report_step_of_the_run_publishes_only_what_it_wrote(tmp_path):
    # published with PDFs, at the old rate; re-run with settings.yaml page_pdfs false
    reports = tmp_path / "reports"
    old = generation(reports / "2026-11", "old")
    for name in (
        "chargeback-2026-11.html",
        "chargeback-2026-11.pdf",
        "departments/science.pdf",
        "departments/gone.html",
        "notices-2026-11.csv",
        "readme-of-2025.txt",
    ):
        (old / name).write_text("old")
    staging = month_staging(reports, "2026-11", "run-1")
    (staging / "departments").mkdir()
    for name in ("chargeback-2026-11.html", "departments/science.html"):
        (staging / name).write_text("new")  # organisation_page and department_reports ran

    kept = ["chargeback_workbook", "focus_export", "notices_export"]
    assert carry_over(old, staging, "2026-11", kept) == [
        "chargeback-2026-11.xlsx", "focus-2026-11.csv", "notices-2026-11.csv",
    ]  # fmt: skip
    publish_month(staging, old)
    # no PDF of an earlier run beside the new pages, no department gone, no file of no step
    assert files(old) == {
        "chargeback-2026-11.html": "new",
        "chargeback-2026-11.xlsx": "old",
        "departments/science.html": "new",
        "focus-2026-11.csv": "old",
        "notices-2026-11.csv": "old",
    }


def test_only_the_files_of_the_steps_kept_go_over(tmp_path):
    # a run that rebuilt a table the pages are made from, with neither page step: the pages
    # of the previous generation describe the old table and are not kept
    reports = tmp_path / "reports"
    old = generation(reports / "2026-11", "old")
    (old / "chargeback-2026-11.html").write_text("old")
    staging = month_staging(reports, "2026-11", "run-1")
    (staging / "chargeback-2026-11.xlsx").write_text("new")

    assert carry_over(old, staging, "2026-11", ["focus_export"]) == ["focus-2026-11.csv"]
    assert carry_over(tmp_path / "never-published", staging, "2026-11", OTHER_STEPS) == []
    assert sorted(p.name for p in staging.iterdir()) == [
        "chargeback-2026-11.xlsx", "focus-2026-11.csv",
    ]  # fmt: skip


def test_a_month_folders_files_in_path_order_without_the_manifest(tmp_path):
    folder = generation(tmp_path / "2026-11", "new")
    for name in (
        "manifest.json",
        ".manifest.json.partial",
        "departments/.science.html.tmp",
        "departments/science.pdf",
        "chargeback-2026-11.html",
    ):
        (folder / name).write_text("new")
    assert month_files(folder) == [
        "chargeback-2026-11.html",
        "chargeback-2026-11.xlsx",
        "departments/science.html",
        "departments/science.pdf",
        "focus-2026-11.csv",
    ]
    assert [report_of(name, "2026-11") for name in month_files(folder)] == [
        "organisation_page", "chargeback_workbook", "department_reports", "department_reports",
        "focus_export",
    ]  # fmt: skip
    assert report_of("chargeback-2026-10.html", "2026-11") is None  # another month's name


def test_the_next_run_removes_dead_staging_and_puts_back_a_generation_left_aside(tmp_path):
    reports = tmp_path / "reports"
    pid = dead_pid()
    staging = reports / ".staging"
    # a run killed between its two renames: the month folder aside, its new one complete
    generation(staging / f"2026-11.run-1.old@{HOST}@{pid}", "old")
    generation(staging / f"2026-11.run-1@{HOST}@{pid}", "new")
    # a run killed after the switch: the previous generation under its staging name
    generation(reports / "2026-10", "new")
    generation(staging / f"2026-10.run-2@{HOST}@{pid}", "old")
    # a live run's staging folder (this process) and a dead one of another host, recent
    live = generation(month_staging(reports, "2026-09", "run-3"), "live")
    remote = generation(staging / f"2026-09.run-4@other-host@{pid}", "remote")

    removed = clean_staging(reports)

    assert sorted(p.name for p in removed) == sorted([
        f"2026-10.run-2@{HOST}@{pid}",
        f"2026-11.run-1.old@{HOST}@{pid}",
        f"2026-11.run-1@{HOST}@{pid}",
    ])  # fmt: skip
    assert set(files(reports / "2026-11").values()) == {"old"}
    assert set(files(reports / "2026-10").values()) == {"new"}
    assert sorted(p.name for p in staging.iterdir()) == sorted([live.name, remote.name])
