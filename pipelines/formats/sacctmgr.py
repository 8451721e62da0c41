"""Slurm's configured GPU quotas: `sacctmgr show assoc --parsable2` and `sacctmgr show qos
--parsable2` dumps (`|`-separated, with sacctmgr's header line; `--parsable`'s trailing `|`
is accepted). Which of the two a file is, its header says: an `Account` column makes it the
associations, a `Name` column without one the QOS. As in sacct exports (slurm.py), a header line
anywhere in the file names the fields of the lines after it, and is no row: dumps concatenated
into one file (`cat assoc-a.psv assoc-b.psv`, or an association dump and a QOS one) each bring
their header, in their own column order.

One row per configured GPU limit (canonical quota columns, `canonical.QUOTA_COLUMNS`):
- the GPU entries of `GrpTRES`: each typed entry (`gres/gpu:a100=16`) is a limit on its GPU
  type (`gpu_model`, mapped to the catalog's model by the cluster's `gpu_models` setting when
  loaded); an untyped `gres/gpu=16` is a limit on every GPU of the association's partition
  (or of the cluster when it names none) and is a row of its own only when no typed entry is
  there (next to typed entries it caps their sum; the typed entries are what a pool compares
  with). Slurm has no guarantee: `guaranteed_gpus` is always empty.
- an association or QOS whose GrpTRES holds no GPU entry (empty, or CPUs and memory only) is
  one row without a limit: loaded, so that every line is counted, and an association's QOS
  list (`qos`) still says which tenants a QOS limits.
source is `slurm_assoc` or `slurm_qos`; object_name the association (`account`, plus
`/user` and `@partition` when set) or the QOS's name. A line with the wrong number of fields,
no account or QOS name, or a GPU count that is not a whole number is still a row, with
`parse_error` naming the field, so it reaches the rejects table.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pipelines.catalog import ClusterSettings
from pipelines.formats import ExportFormat
from pipelines.formats.slurm import headed_lines, mostly_fit, sniffed_lines

_COUNT = re.compile(r"[0-9]+")


def _names(text: str) -> list[str]:
    """sacctmgr's column titles, lower-cased without spaces (`Def QOS` -> `defqos`)."""
    return [name.strip().lower().replace(" ", "") for name in text.split("|")]


def _source(header: list[str]) -> str | None:
    """slurm_assoc or slurm_qos for a sacctmgr header line, None for anything else."""
    if "grptres" not in header or "jobid" in header:
        return None
    if "account" in header:
        return "slurm_assoc"
    if "name" in header:
        return "slurm_qos"
    return None


def gpu_limits(tres: str) -> list[tuple[str | None, int]]:
    """(GPU type or None, count) of the GPU entries of a GrpTRES string: the typed entries, or
    the untyped total alone when there is none. Raises ValueError naming an entry that is not
    a whole count. `cpu=64,gres/gpu:a100=16,gres/gpu=16` -> [('a100', 16)]."""
    typed: dict[str, int] = {}
    total: int | None = None
    for item in tres.split(","):
        key, _, count = item.strip().partition("=")
        kind, _, gpu_type = key.partition(":")
        if kind.strip().lower() != "gres/gpu":  # also gres/gpumem, gres/shard, cpu, mem
            continue
        if not _COUNT.fullmatch(count.strip()):
            raise ValueError(f"'{item.strip()}' is not a GPU count")
        if gpu_type.strip():
            typed[gpu_type.strip()] = typed.get(gpu_type.strip(), 0) + int(count)
        else:
            total = int(count)
    if typed:
        return sorted(typed.items())
    return [] if total is None else [(None, total)]


def read_rows(path: Path, settings: ClusterSettings) -> Iterator[dict[str, str | int | None]]:
    """Yield one row per configured GPU limit (or per line that configures none): the
    canonical quota columns as text, plus `line`, `raw` and `parse_error`."""

    def header(number: int, text: str) -> tuple[list[str], str] | None:
        names = _names(text)
        source = _source(names)
        return None if source is None else (names, source)

    for number, text, layout in headed_lines(path, header):
        if layout is None:  # the sniffer takes no file that does not start with a header
            yield _unheaded_row(number, text)
            continue
        yield from _rows(number, text, *layout)


def _unheaded_row(number: int, text: str) -> dict[str, str | int | None]:
    return {
        "source": None,
        "object_kind": None,
        "line": number,
        "raw": text,
        "parse_error": "no sacctmgr header line (naming GrpTRES and Account or Name) above it",
    }


def _rows(
    number: int, text: str, header: list[str], source: str | None
) -> Iterator[dict[str, str | int | None]]:
    row: dict[str, str | int | None] = {
        "source": source,
        "object_kind": "association" if source == "slurm_assoc" else "qos",
        "line": number,
        "raw": text,
        "parse_error": None,
    }
    fields = text.split("|")
    if len(fields) == len(header) + 1 and fields[-1] == "":
        fields = fields[:-1]  # `--parsable` (not 2) ends every line with a '|'
    if len(fields) != len(header):
        row["parse_error"] = f"expected {len(header)} fields, found {len(fields)}"
    if row["parse_error"] is not None:
        yield row
        return
    value = {name: field.strip() or None for name, field in zip(header, fields, strict=True)}
    if source == "slurm_assoc":
        row.update(account=value["account"], user=value.get("user"),
                   partition=value.get("partition"), qos=value.get("qos"))  # fmt: skip
        if row["account"] is None:
            row["parse_error"] = "field account: missing"
        else:
            row["object_name"] = (
                str(row["account"])
                + (f"/{row['user']}" if row["user"] else "")
                + (f"@{row['partition']}" if row["partition"] else "")
            )
    else:
        row["object_name"] = value["name"]
        if row["object_name"] is None:
            row["parse_error"] = "field name: missing"
    if row["parse_error"] is None:
        try:
            limits = gpu_limits(value["grptres"] or "")
        except ValueError as error:
            row["parse_error"] = f"field grptres: {error}"
    if row["parse_error"] is not None or not limits:
        yield row
        return
    for gpu_type, count in limits:
        yield {**row, "gpu_model": gpu_type, "limit_gpus": str(count)}


def sniff(path: Path, head: str) -> bool:
    """A `|`-separated file whose first line is sacctmgr's header of associations (Account,
    GrpTRES) or QOS (Name, GrpTRES), and whose other lines mostly have the width of the header
    above them (a later header, of dumps concatenated, sets the width of the lines below it)."""
    sample = sniffed_lines(head)
    if not sample or "|" not in sample[0] or _source(_names(sample[0])) is None:
        return False
    width = records = good = 0
    for line in sample:
        if _source(_names(line)) is not None:
            width = len(_names(line))
            continue
        fields = line.split("|")
        records += 1
        good += len(fields) == width or (len(fields) == width + 1 and fields[-1] == "")
    return mostly_fit(good, records)


FORMAT = ExportFormat(
    name="slurm_sacctmgr",
    kind="quotas",
    expected=(
        "Slurm `sacctmgr show assoc|qos --parsable2` ('|'-separated, a header naming GrpTRES "
        "and Account or Name)"
    ),
    sniff=sniff,
    read_rows=read_rows,
)
