"""Readers of the export formats, one module each, recognised by content.

Every module exposes `FORMAT`, an `ExportFormat`. Scheduler formats yield one dict per input
line (`read_rows`): the canonical job or allocation columns as text, plus `line`, `raw`,
`parse_error` and, for jobs, `record_type` ('job', or 'step' for a Slurm job step, which is
loaded but never counted as a job). Telemetry formats that DuckDB cannot read in place are
converted once to canonical Parquet (`to_parquet`), with a `line` column pointing back into
the source file. Typing, validation and rejects happen in SQL, for every format alike.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.catalog import ClusterSettings

if TYPE_CHECKING:
    import pyarrow as pa

RowReader = Callable[[Path, ClusterSettings], Iterator[dict]]
# the rows of `read_rows` as one Arrow table of text columns, or None when the file needs the
# row reader (a fast path: building a dict per row is most of a large export's load time)
TableReader = Callable[[Path, ClusterSettings], "pa.Table | None"]
SampleConverter = Callable[[Path, Path, ClusterSettings], int]


@dataclass(frozen=True)
class ExportFormat:
    name: str
    area: str  # scheduler | telemetry
    kind: str  # jobs | allocations | samples
    expected: str  # what a file of this format looks like, for the error message
    sniff: Callable[[Path, str], bool]  # (path, first 64 KiB as text, '' if binary) -> is it?
    read_rows: RowReader | None = None
    read_table: TableReader | None = None
    to_parquet: SampleConverter | None = None  # None: DuckDB reads the file in place


# Order matters: the first format whose sniff accepts a file reads it.
_MODULES = (
    "pipelines.formats.canonical",
    "pipelines.formats.slurm",
    "pipelines.formats.kubernetes",
    "pipelines.formats.dcgm",
    "pipelines.formats.nvidia_smi",
)


def registered_formats() -> list[ExportFormat]:
    """Every format module's FORMAT(S), in recognition order."""
    formats: list[ExportFormat] = []
    for name in _MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name == name:  # a format not written yet
                continue
            raise
        formats += list(getattr(module, "FORMATS", [getattr(module, "FORMAT", None)]))
    return [f for f in formats if f is not None]
