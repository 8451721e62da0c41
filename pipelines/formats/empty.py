"""Empty exports: a file of no bytes, or of nothing but blank lines (gzipped or not, with or
without a byte order mark), in either area of the landing folder.

An exporter with nothing to export writes exactly that (`sacct` for a quiet day, a collector
whose query matched nothing), so such a file is no error that stops the run: it is an input
without rows, listed in the month's data quality with 0 rows read like an export that has a
header alone. `pipelines.landing` takes a file for this format when no other format does.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

from pipelines.catalog import ClusterSettings
from pipelines.formats import ExportFormat, open_binary
from pipelines.formats.canonical import SAMPLE_PARQUET_SCHEMA

_WHITESPACE = b" \t\r\n\x0b\x0c"


def is_blank(path: Path) -> bool:
    """Whether the (decompressed) file holds nothing but whitespace, read in chunks."""
    with open_binary(path) as handle:
        first = True
        while chunk := handle.read(2**20):
            if first:
                chunk, first = chunk.removeprefix(codecs.BOM_UTF8), False
            if chunk.strip(_WHITESPACE):
                return False
    return True


def _read_rows(path: Path, settings: ClusterSettings) -> Iterator[dict]:
    return iter(())


def _to_parquet(path: Path, out: Path, settings: ClusterSettings) -> int:
    """An empty canonical samples file: the file is listed, and no day has rows of it."""
    pq.write_table(SAMPLE_PARQUET_SCHEMA.empty_table(), out)
    return 0


def _sniff(path: Path, head: str) -> bool:
    return not head.strip() and is_blank(path)


_EXPECTED = "an empty file (no bytes, or blank lines only)"

# per area of the landing folder
FORMATS = {
    "scheduler": ExportFormat(
        name="empty",
        kind="jobs",  # of no rows: no job comes from it
        expected=_EXPECTED,
        sniff=_sniff,
        read_rows=_read_rows,
    ),
    "telemetry": ExportFormat.of_samples(
        name="empty",
        expected=_EXPECTED,
        sniff=_sniff,
        to_parquet=_to_parquet,
    ),
}
