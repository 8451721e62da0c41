"""A month folder through re-runs of some of its report steps: its manifest lists every file
beside it, a report step of the run publishes only what it wrote (no PDF of an earlier run when
this one prints none), the other steps' files are kept, unless the run rebuilt a table they are
made from (pipelines/defs/reports/assets.py month_manifest, publish.py carry_over)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import pytest

from pipelines.definitions import all_assets
from tests.conftest import materialize_month, require_tool, resource_for, write
from tests.e2e.test_tiny_month import build_tiny_month

LABEL = "2026-11"
PAGES = [
    "chargeback-2026-11.html",
    "chargeback-2026-11.pdf",
    "chargeback-2026-11.xlsx",
    "departments/science.html",
    "departments/science.pdf",
    "departments/science.xlsx",
    "departments/unmapped.html",
    "departments/unmapped.pdf",
    "departments/unmapped.xlsx",
    "focus-2026-11.csv",
    "notices-2026-11.csv",
]
STEPS = {
    "chargeback-2026-11.html": "organisation_page",
    "chargeback-2026-11.pdf": "organisation_page",
    "chargeback-2026-11.xlsx": "chargeback_workbook",
    "focus-2026-11.csv": "focus_export",
    "notices-2026-11.csv": "notices_export",
}


def contents(folder: Path) -> dict[str, bytes]:
    """Every file of the month folder but its manifest, by path."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != "manifest.json"
    }


def manifest_outputs(folder: Path) -> list[dict]:
    return json.loads((folder / "manifest.json").read_text())["outputs"]


def run_steps(root: Path, *names: str) -> None:
    """Materialise the assets `names` of November, and nothing else, in one run."""
    result = dg.materialize(
        all_assets,
        selection=dg.AssetSelection.assets(*names),
        partition_key="2026-11-01",
        resources={"chargeback": resource_for(root)},
    )
    assert result.success


@pytest.mark.slow  # materialises the month, prints its pages, then runs some steps twice
def test_reruns_of_some_report_steps_publish_a_folder_that_agrees_with_its_manifest(tmp_path):
    require_tool("chromium", "chromium")
    build_tiny_month(tmp_path, pdfs=True)
    assert materialize_month(tmp_path, "2026-11-01").success
    folder = tmp_path / "reports" / LABEL
    first = contents(folder)

    # the manifest lists every file beside it, in path order, with its sha256
    assert list(first) == PAGES
    outputs = manifest_outputs(folder)
    assert [output["file"] for output in outputs] == PAGES
    for output in outputs:
        data = (folder / output["file"]).read_bytes()
        assert output["sha256"] == hashlib.sha256(data).hexdigest(), output["file"]
        assert output["bytes"] == len(data)
        assert output["report"] == STEPS.get(output["file"], "department_reports")
        assert output["carried_over"] is False

    # the pages again, with settings.yaml page_pdfs false (at the same figures): the run's page
    # steps publish their pages alone, not beside the PDFs of the run before; the workbook and
    # the CSVs, of steps not in the run, are kept as they were
    write(tmp_path / "catalog/settings.yaml", "currency: EUR\ntelemetry: {step_s: 600}\n"
          "page_pdfs: false\n")  # fmt: skip
    run_steps(tmp_path, "organisation_page", "department_reports", "month_manifest")
    second = contents(folder)
    without_pdfs = [name for name in PAGES if not name.endswith(".pdf")]
    assert list(second) == without_pdfs
    kept = ["chargeback-2026-11.xlsx", "focus-2026-11.csv", "notices-2026-11.csv"]
    assert {name: second[name] for name in kept} == {name: first[name] for name in kept}
    outputs = manifest_outputs(folder)
    assert [output["file"] for output in outputs] == without_pdfs
    assert [output["file"] for output in outputs if output["carried_over"]] == kept
    assert all(
        output["sha256"] == hashlib.sha256(second[output["file"]]).hexdigest() for output in outputs
    )

    # charge_lines rebuilt, with the workbook only: the steps made from charge_lines that are
    # not in the run lose their files (they would describe the table before the run)
    run_steps(tmp_path, "charge_lines", "chargeback_workbook", "month_manifest")
    third = contents(folder)
    assert list(third) == ["chargeback-2026-11.xlsx", "notices-2026-11.csv"]
    assert third["notices-2026-11.csv"] == first["notices-2026-11.csv"]
    assert [(o["file"], o["carried_over"]) for o in manifest_outputs(folder)] == [
        ("chargeback-2026-11.xlsx", False),
        ("notices-2026-11.csv", True),
    ]
