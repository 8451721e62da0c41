"""Writers of the export formats the simulated sites produce, one module per format:
`slurm` (sacct dumps), `kubernetes` (pod list snapshots), `dcgm` (Prometheus query_range
bodies), `nvidia_smi` (per-node logs) and `canonical` (the canonical CSV and Parquet of
DESIGN.md). Each turns what the simulation decided into files, deterministically: the same
input gives the same bytes.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """UTF-8 CSV with LF line ends, so the files are identical on every platform."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def flat(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array (compute kernels may return chunked results on large inputs)."""
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
