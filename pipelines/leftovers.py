"""Staging folders and temporary files that name their owner, and the removal of dead ones.

Everything a run writes before moving it into place (a telemetry day, a month's reports, a
converted export, the published warehouse copy, DuckDB's spill folder) is named
`<stem>@<host>@<pid>[<suffix>]`. A killed run leaves such entries behind; the next run removes
those whose owner is dead: a process of this host that no longer runs, or, for an entry of
another host (a shared telemetry folder) or a pid reused since, an entry untouched for a day.
Entries without an owner in their name are never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import time
from collections.abc import Iterable
from pathlib import Path

HOST = socket.gethostname()
# No run of this pipeline lasts a day (a 10,000-GPU day rolls up in under two minutes), so an
# entry untouched that long is dead even when its pid is alive again or on another host.
MAX_AGE_S = 24 * 3600
_OWNED = re.compile(r"(?P<stem>.+)@(?P<host>[^@]+)@(?P<pid>\d+)(?P<suffix>\.[^@]*)?")


def owned_name(stem: str, suffix: str = "") -> str:
    """`<stem>@<host>@<pid><suffix>`: a name that says which process may still be writing it."""
    return f"{stem}@{HOST}@{os.getpid()}{suffix}"


def replace_text(path: Path, text: str) -> None:
    """Write `text` to `path` through an owned partial file renamed into place: a reader sees
    the old file or the new one, and a killed writer's partial is a dead leftover."""
    partial = path.with_name(owned_name(path.name, ".partial"))
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def owned_stem(path: Path) -> str | None:
    """The stem of an owned name (None: not an owned name)."""
    owned = _OWNED.fullmatch(path.name)
    return owned["stem"] if owned else None


def is_dead(path: Path) -> bool:
    """Whether `path` is an owned entry whose process is gone (see the module doc)."""
    owned = _OWNED.fullmatch(path.name)
    if owned is None:
        return False
    if owned["host"] == HOST and not _running(int(owned["pid"])):
        return True
    try:
        return time.time() - path.lstat().st_mtime > MAX_AGE_S
    except FileNotFoundError:
        return False


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove(path: Path) -> None:
    """Remove a file or a folder tree; one that is already gone is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_dead(paths: Iterable[Path]) -> list[Path]:
    """Remove the dead owned entries among `paths`; returns them."""
    dead = [path for path in paths if is_dead(path)]
    for path in dead:
        remove(path)
    return dead


def remove_if_empty(folder: Path) -> None:
    """Remove `folder` when nothing is left in it (a staging root between runs)."""
    with contextlib.suppress(OSError):  # missing, or in use
        folder.rmdir()
