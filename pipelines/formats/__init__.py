"""Readers of the export formats, one module each, recognised by content.

Every module exposes `FORMAT`, an `ExportFormat`. Scheduler formats yield one dict per input
line (`read_rows`): the canonical job or allocation columns as text, plus `line`, `raw`,
`parse_error` and, for jobs, `record_type` ('job', or 'step' for a Slurm job step, which is
loaded but never counted as a job). Telemetry formats that DuckDB cannot read in place are
converted once to canonical Parquet (`to_parquet`), with a `line` column pointing back into
the source file. Typing, validation and rejects happen in SQL, for every format alike.

Every text format may also come gzip-compressed: readers open files with `open_binary` /
`open_text`, which recognise gzip by its magic bytes (not the name) and decompress as they
read, and apply their name rules (node, snapshot time, extension) to `without_gz(path)`.
`open_text` also drops a UTF-8 byte order mark, so a header's first name reads as itself.
"""

from __future__ import annotations

import gzip
import importlib
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from pipelines.catalog import ClusterSettings

if TYPE_CHECKING:
    import pyarrow as pa

# (path, first 64 KiB as text: decompressed when gzip, byte order mark dropped) -> is it?
Sniffer = Callable[[Path, str], bool]
RowReader = Callable[[Path, ClusterSettings], Iterator[dict]]
# the rows of `read_rows` as one Arrow table of text columns, or None when the file needs the
# row reader (a fast path: building a dict per row is most of a large export's load time)
TableReader = Callable[[Path, ClusterSettings], "pa.Table | None"]
SampleConverter = Callable[[Path, Path, ClusterSettings], int]
# (path, its cluster's settings) -> whether DuckDB reads the file in place, unconverted
InPlace = Callable[[Path, ClusterSettings], bool]


@dataclass(frozen=True)
class ExportFormat:
    name: str
    kind: str  # jobs | allocations | quotas (scheduler exports) | samples (telemetry)
    expected: str  # what a file of this format looks like, for the error message
    sniff: Sniffer
    read_rows: RowReader | None = None
    read_table: TableReader | None = None
    to_parquet: SampleConverter | None = None  # None: DuckDB reads the file in place
    # with to_parquet: whether a file needs no conversion after all (None: every file does)
    read_in_place: InPlace | None = None
    # samples: the utilisation metric util_pct comes from, unless a row names DCGM's
    # GR_ENGINE_ACTIVE (the reports name each cluster's metrics by it)
    util_metric: str | None = None

    @classmethod
    def of_samples(
        cls,
        name: str,
        expected: str,
        sniff: Sniffer,
        to_parquet: SampleConverter | None = None,
        util_metric: str | None = None,
        read_in_place: InPlace | None = None,
    ) -> ExportFormat:
        """A telemetry format: its files are converted to canonical samples Parquet
        (`to_parquet`) or read in place (no `to_parquet`, or `read_in_place` says so for the
        file); it has no row readers."""
        return cls(
            name, "samples", expected, sniff, to_parquet=to_parquet, util_metric=util_metric,
            read_in_place=read_in_place,
        )  # fmt: skip

    @property
    def area(self) -> str:
        """The landing folder its files come in: telemetry for samples, else scheduler."""
        return "telemetry" if self.kind == "samples" else "scheduler"


def json_object_sniffer(matches: Callable[[str], bool]) -> Sniffer:
    """The sniffer of a JSON format: the head opens an object (after a byte order mark and
    white space) and `matches` its text. The extension does not matter."""

    def sniff(path: Path, head: str) -> bool:
        text = head.lstrip("\ufeff \t\r\n")
        return text.startswith("{") and matches(text)

    return sniff


GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    """Whether the file is gzip-compressed, by its first two bytes (whatever its name)."""
    with path.open("rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def open_binary(path: Path) -> BinaryIO:
    """The file's bytes, decompressed while read when it is gzip (never all in memory)."""
    return gzip.open(path, "rb") if is_gzip(path) else path.open("rb")


def open_text(path: Path, newline: str | None = None) -> TextIO:
    """The file as UTF-8 text (gzip decompressed while read), without a leading byte order
    mark; bytes that are not UTF-8 are replaced. `newline` as for `open`."""
    return io.TextIOWrapper(
        open_binary(path), encoding="utf-8-sig", errors="replace", newline=newline
    )


def without_gz(path: Path) -> Path:
    """`path` without a `.gz` extension: what the name rules of a format read
    (`gpu-a01_2026-11.csv.gz` -> `gpu-a01_2026-11.csv`)."""
    return path.with_suffix("") if path.suffix.lower() == ".gz" else path


def is_utc(zone: str) -> bool:
    """Whether a cluster's scheduler_timezone is UTC, so that its local times need no
    conversion (the converters of local times take a faster path)."""
    return zone.upper() in ("UTC", "ETC/UTC", "GMT", "ETC/GMT")


# A CTE of the converters of local times (nvidia_smi.py, canonical.py): the instants of each
# local minute of the CTE `minutes` (its column `minute`, naive local time in $zone, and `guess`,
# its instant as DuckDB's timezone() reads it): where the minute lies in the hour repeated when
# clocks go back, `earlier` and `later` are its two instants an hour apart (NULL otherwise).
LOCAL_MINUTE_INSTANTS = """instants as (
    select
        minute,
        guess,
        case when timezone($zone, timezone('UTC', guess - interval 1 hour)) = minute
            then guess - interval 1 hour end as earlier,
        case when timezone($zone, timezone('UTC', guess + interval 1 hour)) = minute
            then guess + interval 1 hour end as later
    from minutes
)"""


# Order matters: the first format whose sniff accepts a file reads it.
_MODULES = (
    "pipelines.formats.canonical",
    "pipelines.formats.sacctmgr",  # before sacct: a sacctmgr dump is '|'-separated too
    "pipelines.formats.slurm",
    "pipelines.formats.kueue",  # before pod lists: a Kueue List's Workloads may name pods
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
