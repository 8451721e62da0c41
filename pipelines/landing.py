"""Find the export files in the landing folder and recognise each by its content.

`landing/scheduler/<cluster>/...` and `landing/telemetry/<cluster>/...`: the folder names the
cluster. A file that is not recognised stops the run with one line naming it, unless it matches
an ignore pattern (`.ignore` or hidden files, README*, *.md; also when gzipped). A `.txt` file
is read by its content like any other: `sacct ... > jobs.txt` and `nvidia-smi ... > gpu.txt`
are how exports are often saved, and a name must not drop them unseen.
A gzip file is recognised by what it holds once decompressed. A file with no bytes, or blank
lines only, is an export without rows (`pipelines/formats/empty.py`), not an unknown file.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import gzip
import hashlib
import os
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pipelines.formats import ExportFormat, empty, open_binary, registered_formats, without_gz

# notes and files put aside on purpose, never exports
IGNORED = ("README*", "*.md", ".*", "*.ignore")


class LandingError(ValueError):
    """An export file could not be recognised or read."""


@dataclass(frozen=True)
class ExportFile:
    path: Path
    cluster: str
    format: ExportFormat
    name: str  # the path relative to the landing folder, as reports and rejects show it

    @property
    def kind(self) -> str:
        return self.format.kind

    def sha256(self) -> str:
        """The file's sha256 (hex), read once per process while the file stays as it was."""
        stat = self.path.stat()
        return _sha256(self.path, stat.st_size, stat.st_mtime_ns, stat.st_ino)


def sha256_each(exports: list[ExportFile]) -> list[str]:
    """The sha256 of each export, in order, a file per core at once: hashlib hashes outside
    the GIL. One core hashed a 285 MB landing file here in 0.47 s, ~14 s for a 10,000-GPU
    month's 8.4 GB; the finance workbook step went from 28.8-29.9 to 24.6 s at that scale."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(ExportFile.sha256, exports))


@functools.lru_cache(maxsize=1 << 16)
def _sha256(path: Path, size: int, mtime_ns: int, inode: int) -> str:
    # A run hashes each landing file up to seven times (conversion cache, each month's workbook
    # and manifest; the demo's 1 GB takes 1.3 s a pass): keyed by what changes when the file is
    # written or replaced, the work is done once.
    del size, mtime_ns, inode  # the cache key only
    with path.open("rb") as handle:  # streamed: a log may be larger than memory
        return hashlib.file_digest(handle, "sha256").hexdigest()


def discover(landing_dir: Path, area: str) -> list[ExportFile]:
    """Every export file under `landing_dir/<area>/<cluster>/`, sorted by path."""
    landing_dir = Path(landing_dir)
    root = landing_dir / area
    found: list[ExportFile] = []
    if not root.exists():
        return found
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if any(fnmatch.fnmatch(without_gz(path).name, pattern) for pattern in IGNORED):
            continue
        cluster = path.relative_to(root).parts[0]
        if path.parent == root:
            raise LandingError(f"{path}: export files belong in a cluster folder {root}/<cluster>/")
        name = path.relative_to(landing_dir).as_posix()
        found.append(ExportFile(path, cluster, _recognise(path, area), name))
    return found


@contextlib.contextmanager
def decompression_errors(path: Path) -> Iterator[None]:
    """Stop with one line naming the file when its gzip stream is damaged or cut off (found
    only while reading it: the head alone may decompress fine)."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise LandingError(f"{path}: not a complete gzip file ({error})") from None


def _recognise(path: Path, area: str) -> ExportFormat:
    stat = path.stat()
    return _recognised(path, area, stat.st_size, stat.st_mtime_ns, stat.st_ino)


@functools.lru_cache(maxsize=1 << 16)
def _recognised(path: Path, area: str, size: int, mtime_ns: int, inode: int) -> ExportFormat:
    # a run discovers the landing folder in several steps of each month: a file's format is
    # sniffed once while it stays as it was (like its sha256)
    del size, mtime_ns, inode  # the cache key only
    try:
        with decompression_errors(path), open_binary(path) as handle:
            head = handle.read(65536).decode("utf-8", errors="replace").removeprefix("\ufeff")
    except OSError as error:
        raise LandingError(f"{path}: cannot be read ({error.strerror})") from None
    candidates = [f for f in registered_formats() if f.area == area]
    for export_format in candidates:
        if export_format.sniff(path, head):
            return export_format
    if empty.FORMATS[area].sniff(path, head):
        return empty.FORMATS[area]
    expected = "; or ".join(f.expected for f in candidates)
    raise LandingError(
        f"{path}: line 1: unrecognised export, expected {expected} "
        "(a note kept here is named README*, *.md or *.ignore)"
    )
