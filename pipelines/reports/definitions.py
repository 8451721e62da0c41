"""The figure definitions of the reports, worded once in `reports/definitions.yaml`: the
workbooks' Definitions sheets, the department page's Definitions and the "Figure definitions"
section of README.md, which `python -m pipelines.reports.definitions` rewrites from the file
(tests/reports/test_figure_definitions.py checks that it is in sync).
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS_FILE = ROOT / "reports" / "definitions.yaml"
README = ROOT / "README.md"
README_START = (
    "<!-- generated from reports/definitions.yaml by `python -m pipelines.reports.definitions`:"
    " edit that file, then run it -->"
)
README_END = "<!-- end of the generated definitions -->"

Definitions = tuple[tuple[str, str], ...]


@cache
def _wording() -> dict[str, Any]:
    return yaml.safe_load(DEFINITIONS_FILE.read_text(encoding="utf-8"))


def workbook_definitions(report: str = "workbook") -> Definitions:
    """The figures of both workbooks' Definitions sheets: (term, meaning), in order."""
    return tuple(
        (item["term"], item["meaning"].format(report=report)) for item in _wording()["workbook"]
    )


def governance_definitions() -> Definitions:
    """The governance figures, after the others on the finance workbook's sheet only."""
    return tuple((item["term"], item["meaning"]) for item in _wording()["governance"])


def note(name: str) -> str:
    """One of the page's notes on its sources (`notes` in the file)."""
    return _wording()["notes"][name]


def page_definitions(values: Mapping[str, str]) -> Definitions:
    """The department page's Definitions, every {name} filled from `values` (and {report})."""
    values = {"report": "page", **values}
    figures = {
        item["term"]: item["meaning"]
        for item in [*_wording()["workbook"], *_wording()["governance"]]
    }
    items = []
    for item in _wording()["page"]:
        meaning = figures[item["figure"]] if "figure" in item else item["meaning"]
        then = item.get("then", "").format_map(values)
        meaning = meaning.format_map(values) + (f" {then}" if then else "")
        items.append((item.get("term", item.get("figure")), meaning))
    return tuple(items)


def readme_section() -> str:
    """README.md's "Figure definitions" section, between its markers."""
    lines = [
        README_START,
        "",
        "As the workbooks' Definitions sheets word them; the department pages show a selection,",
        "and the finance workbook adds the governance figures below them.",
        "",
    ]
    lines += _markdown_list(workbook_definitions())
    lines += ["", "Governance figures (finance workbook only):", ""]
    lines += _markdown_list(governance_definitions())
    return "\n".join([*lines, "", README_END])


def _markdown_list(definitions: Definitions) -> list[str]:
    return [
        textwrap.fill(
            f"- **{term}**: {meaning}",
            width=100,
            subsequent_indent="  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        for term, meaning in definitions
    ]


def readme_with_section(readme: str) -> str:
    """`readme` with the text between the markers replaced by `readme_section()`."""
    start, end = readme.index(README_START), readme.index(README_END) + len(README_END)
    return readme[:start] + readme_section() + readme[end:]


def main() -> None:
    """Rewrite README.md's generated definitions; exit 1 if it was out of date."""
    readme = README.read_text(encoding="utf-8")
    updated = readme_with_section(readme)
    if updated != readme:
        README.write_text(updated, encoding="utf-8")
        print(f"{README.name}: definitions rewritten from {DEFINITIONS_FILE.name}")
        sys.exit(1)


if __name__ == "__main__":
    main()
