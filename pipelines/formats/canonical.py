"""The canonical export format (DESIGN.md "Inputs" 3): jobs, allocations and GPU samples.

Jobs and allocations are CSV (or Parquet) with fixed column names; every row comes out as text
with its file and line so that typing, and rejecting, happens in SQL (`sql/staging/`).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

JOB_COLUMNS = (
    "job_id", "cluster", "account", "user", "queue", "qos", "gpu_model", "gpus", "nodes",
    "submit_time", "start_time", "end_time", "state", "exit_code",
)  # fmt: skip
ALLOCATION_COLUMNS = ("job_id", "node", "gpu_index")
SAMPLE_COLUMNS = ("ts", "node", "gpu_index", "util_pct", "mem_used_mib", "power_w")
_REQUIRED_JOB_COLUMNS = {"job_id", "account", "gpus", "start_time", "end_time", "state"}


def header_of(path: Path) -> list[str]:
    """Column names of a CSV or Parquet file (lower-cased), or [] when it has none."""
    if path.suffix == ".parquet":
        return [name.lower() for name in pq.read_schema(path).names]
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        first = handle.readline()
    return [name.strip().lower() for name in next(csv.reader([first]), [])]


def is_jobs(columns: list[str]) -> bool:
    return set(columns) >= _REQUIRED_JOB_COLUMNS


def is_allocations(columns: list[str]) -> bool:
    return set(ALLOCATION_COLUMNS) <= set(columns) and "state" not in columns


def is_samples(columns: list[str]) -> bool:
    return {"ts", "node", "gpu_index", "util_pct"} <= set(columns)


def read_rows(path: Path, columns: tuple[str, ...]) -> Iterator[dict[str, str | None]]:
    """Yield each data row as text: the wanted columns plus `line`, `raw` and `parse_error`.

    A row with a wrong field count is still yielded (with `parse_error`) so it reaches the
    rejects table instead of disappearing.
    """
    if path.suffix == ".parquet":
        yield from _read_parquet_rows(path, columns)
        return
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.reader(handle)
        header = [name.strip().lower() for name in next(reader, [])]
        position = {name: header.index(name) for name in columns if name in header}
        line = reader.line_num
        for fields in reader:
            first_line, line = line + 1, reader.line_num
            if not fields:
                continue
            row: dict[str, str | None] = {
                name: _blank_to_none(fields[i]) if i < len(fields) else None
                for name, i in position.items()
            }
            row["line"] = first_line
            row["raw"] = ",".join(fields)
            row["parse_error"] = (
                f"expected {len(header)} fields, found {len(fields)}"
                if len(fields) != len(header)
                else None
            )
            yield row


def _read_parquet_rows(path: Path, columns: tuple[str, ...]) -> Iterator[dict[str, str | None]]:
    table = pq.read_table(path)
    names = {name.lower(): name for name in table.column_names}
    data = {name: table.column(names[name]).to_pylist() for name in columns if name in names}
    for index in range(table.num_rows):
        row = {name: _text(values[index]) for name, values in data.items()}
        row["line"] = index + 1
        row["raw"] = repr({name: values[index] for name, values in data.items()})
        row["parse_error"] = None
        yield row


def _blank_to_none(value: str) -> str | None:
    value = value.strip()
    return value or None


def _text(value: object) -> str | None:
    if value is None:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)
