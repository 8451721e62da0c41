"""Find the export files in the landing folder and recognise each by its content.

`landing/scheduler/<cluster>/...` and `landing/telemetry/<cluster>/...`: the folder names the
cluster. A file that is not recognised stops the run with one line naming it, unless it matches
an ignore pattern (`.ignore` or hidden files, README*, *.md, *.txt).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from pipelines.formats import canonical

IGNORED = ("README*", "*.md", "*.txt", ".*", "*.ignore")


class LandingError(ValueError):
    """An export file could not be recognised or read."""


@dataclass(frozen=True)
class ExportFile:
    path: Path
    cluster: str
    kind: str  # jobs | allocations | samples
    name: str  # the path relative to the landing folder, as reports and rejects show it


def discover(landing_dir: Path, area: str) -> list[ExportFile]:
    """Every export file under `landing_dir/<area>/<cluster>/`, sorted by path."""
    landing_dir = Path(landing_dir)
    root = landing_dir / area
    found: list[ExportFile] = []
    if not root.exists():
        return found
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if any(fnmatch.fnmatch(path.name, pattern) for pattern in IGNORED):
            continue
        cluster = path.relative_to(root).parts[0]
        if path.parent == root:
            raise LandingError(f"{path}: export files belong in a cluster folder {root}/<cluster>/")
        name = path.relative_to(landing_dir).as_posix()
        found.append(ExportFile(path, cluster, _recognise(path, area), name))
    return found


def _recognise(path: Path, area: str) -> str:
    try:
        columns = canonical.header_of(path)
    except Exception as error:  # noqa: BLE001 - any unreadable file is reported the same way
        raise LandingError(f"{path}: cannot be read as CSV or Parquet ({error})") from None
    if area == "scheduler":
        if canonical.is_jobs(columns):
            return "jobs"
        if canonical.is_allocations(columns):
            return "allocations"
        expected = "a canonical jobs file (job_id, account, gpus, start_time, end_time, state, ...)"
    else:
        if canonical.is_samples(columns):
            return "samples"
        expected = "canonical GPU samples (ts, node, gpu_index, util_pct, ...)"
    raise LandingError(f"{path}: line 1: unrecognised export, expected {expected}")
