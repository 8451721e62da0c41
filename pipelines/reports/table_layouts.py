"""The layouts of the finance workbook's tables that show a report query's rows as they come,
declared in `reports/workbook_tables.yaml`: each column's header, the query field under it,
its format and how its value is shown. The file is validated when first read (pydantic): an
unknown key, kind or `show` is an error that names it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from pipelines.reports.sheets import (
    STYLE_OF_KIND,
    TEXT_KINDS,
    TOTAL_STYLE_OF_KIND,
    Column,
    share_of,
)

LAYOUTS_FILE = Path(__file__).resolve().parents[2] / "reports" / "workbook_tables.yaml"
INCIDENT_JOBS_SHOWN = 10


def yes_no(flag: bool | None) -> str | None:
    return None if flag is None else ("yes" if flag else "no")


def hours_of_seconds(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 3600


# `show` in the file -> how a value is shown
SHOW: dict[str, Callable[[Any], Any]] = {
    "share": share_of,
    "yes_no": yes_no,
    "hours_of_seconds": hours_of_seconds,
    # an incident still open when the source was exported
    "or_not_recorded": lambda end: "not recorded" if end is None else end,
    "first_incident_jobs": lambda job_ids: " ".join(job_ids[:INCIDENT_JOBS_SHOWN]),
}

KINDS = (*TEXT_KINDS, *(kind for kind in STYLE_OF_KIND if kind not in TEXT_KINDS))


class LaidOutColumn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    header: str
    field: str
    kind: str = "text"
    show: str | None = None
    width: int | None = None
    total: bool = False

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in KINDS:
            raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
        return kind

    @field_validator("show")
    @classmethod
    def _known_show(cls, show: str | None) -> str | None:
        if show is not None and show not in SHOW:
            raise ValueError(f"show {show!r} is not one of {', '.join(SHOW)}")
        return show

    @model_validator(mode="after")
    def _summable(self) -> LaidOutColumn:
        if self.total and self.kind not in TOTAL_STYLE_OF_KIND:
            raise ValueError(
                f"{self.header!r}: a total needs kind {' or '.join(TOTAL_STYLE_OF_KIND)}"
            )
        return self


class TableLayout(BaseModel):
    """One table: the warehouse table its rows come from and its columns, in order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table: str
    columns: tuple[LaidOutColumn, ...]

    def header(self, currency: str = "", label: str = "") -> list[Column]:
        """The columns with their headers filled: {currency}, {label}, {incident_jobs_shown}."""
        values = {"currency": currency, "label": label, "incident_jobs_shown": INCIDENT_JOBS_SHOWN}
        return [Column(c.header.format(**values), c.kind, c.width) for c in self.columns]

    def rows(self, records: Iterable[Any]) -> list[tuple]:
        """A sheet row per named row: each column's field, shown as the layout says."""
        shown = [(c.field, SHOW[c.show] if c.show else None) for c in self.columns]
        return [
            tuple(
                show(getattr(record, field)) if show else getattr(record, field)
                for field, show in shown
            )
            for record in records
        ]

    def totals(self) -> dict[int, str] | None:
        """The TOTAL row's summed columns (1-based) and their kinds; None without one."""
        summed = {i: c.kind for i, c in enumerate(self.columns, start=1) if c.total}
        return summed or None

    def column_of(self, field: str) -> int:
        """The sheet column (1-based) that shows `field`."""
        return next(i for i, c in enumerate(self.columns, start=1) if c.field == field)


def table_layout(name: str) -> TableLayout:
    """The layout `name` of the file (a KeyError names a layout it does not have)."""
    return _layouts()[name]


@cache
def _layouts() -> dict[str, TableLayout]:
    declared = yaml.safe_load(LAYOUTS_FILE.read_text(encoding="utf-8"))
    layouts = {}
    for name, layout in declared.items():
        try:
            layouts[name] = TableLayout.model_validate(layout)
        except ValidationError as error:
            raise ValueError(f"{LAYOUTS_FILE.name}: table {name}: {error}") from None
    return layouts
