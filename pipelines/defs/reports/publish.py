"""A month's reports switch as a whole: built in a staging folder of the run, then swapped in.

    <reports>/.staging/<YYYY-MM>.<run id>@<host>@<pid>/   this run's reports of the month
    <reports>/YYYY-MM/                                    the published generation

The report assets write their files into the run's staging folder of the month
(`month_staging`); each report step owns the names listed in `REPORT_FILES`. `month_manifest`
runs last: it carries over from the published folder the files of the report steps this run
left alone (`carry_over`) and checksums every file into manifest.json beside them.
The run's commit (pipelines/commit.py) then calls `publish_month`, which exchanges the staging
folder with `<reports>/YYYY-MM/` in one renameat2(RENAME_EXCHANGE) where the OS has it (Linux
3.15+ on ext4, xfs, btrfs, tmpfs): a reader of the month folder, and a kill at any instant,
find the whole previous set or the whole new one, never a mix. Elsewhere the month folder is
renamed aside, then the staging folder into place: a kill between those two renames leaves the
month folder missing (still never mixed), and the next run finishes the commit.

A failed run, or one killed before its commit, publishes nothing; its staging folder is
removed at the end of the run (`ChargebackResource.teardown_after_execution`) or, after a
kill, by the next run.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from pipelines.checkpoints import checkpoint
from pipelines.leftovers import is_dead, owned_name, owned_stem, remove, remove_if_empty

STAGING = ".staging"


def month_staging(reports_dir: Path, label: str, run_id: str) -> Path:
    """This run's staging folder of month `label`, created by the first report asset."""
    root = Path(reports_dir) / STAGING
    stem = f"{label}.{run_id}"
    for folder in root.glob(f"{stem}@*"):
        if owned_stem(folder) == stem:
            return folder
    folder = root / owned_name(stem)
    folder.mkdir(parents=True)
    return folder


# The names each report step writes in a month folder (`{month}`: YYYY-MM), and owns: a run
# of the step publishes exactly what it wrote there, and drops what the step wrote before and
# did not write again (the PDFs of a run with settings.yaml page_pdfs false, a department gone).
REPORT_FILES: dict[str, tuple[str, ...]] = {
    "chargeback_workbook": ("chargeback-{month}.xlsx",),
    "organisation_page": ("chargeback-{month}.html", "chargeback-{month}.pdf"),
    "department_reports": ("departments",),  # the folder as a whole
    "focus_export": ("focus-{month}.csv",),
    "notices_export": ("notices-{month}.csv",),
}
MANIFEST = "manifest.json"


def report_files(step: str, label: str) -> list[str]:
    """The names report step `step` owns in the folder of month `label`."""
    return [name.format(month=label) for name in REPORT_FILES[step]]


def report_of(name: str, label: str) -> str | None:
    """The report step owning `name` (a path relative to the folder of month `label`: the
    first part decides), None for a name no step writes."""
    first = name.split("/", 1)[0]
    return next((step for step in REPORT_FILES if first in report_files(step, label)), None)


def carry_over(published: Path, staging: Path, label: str, kept: Iterable[str]) -> list[str]:
    """Hard-link into `staging` the published files and folders of month `label` that report
    steps `kept` own (steps this run did not run, whose reports still describe the tables: a
    run that rebuilds some reports publishes the others unchanged); returns their names.

    Nothing else goes over: a report step of this run publishes only what it wrote, and a name
    no step owns (an earlier release's) is dropped. Links are safe because every report is
    written to a temporary name and renamed, never rewritten in place."""
    if not published.is_dir():
        return []
    names = {name for step in kept for name in report_files(step, label)}
    carried = []
    for entry in sorted(published.iterdir()):
        target = staging / entry.name
        if entry.name not in names or target.exists():
            continue
        if entry.is_dir():
            shutil.copytree(entry, target, copy_function=_link)
        else:
            _link(entry, target)
        carried.append(entry.name)
    return carried


def month_files(folder: Path) -> list[str]:
    """Every file of a month folder but its manifest, as paths relative to it, in order."""
    files = (path.relative_to(folder) for path in folder.rglob("*") if path.is_file())
    return sorted(
        file.as_posix()
        for file in files
        if file.as_posix() != MANIFEST and not any(part.startswith(".") for part in file.parts)
    )  # (a dot name is a temporary file, never a report)


def _link(source: str | Path, target: str | Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copy2(source, target)


def publish_month(staging: Path, month_folder: Path) -> None:
    """Make the complete `staging` folder the published `month_folder`, as one switch."""
    checkpoint("before_publish")
    if not month_folder.exists():
        staging.rename(month_folder)
        remove_if_empty(staging.parent)
        return
    if _exchange(staging, month_folder):
        old = staging  # now holds the previous generation, under a dead run's name if killed
        checkpoint("during_publish")
    else:
        old = staging.with_name(owned_name(f"{owned_stem(staging)}.old"))
        month_folder.rename(old)
        checkpoint("during_publish")
        staging.rename(month_folder)
    remove(old)
    remove_if_empty(staging.parent)


def clean_staging(reports_dir: Path) -> list[Path]:
    """Remove the staging folders of dead runs; returns them. A previous generation that a dead
    run had renamed aside while its month folder is missing goes back into place instead."""
    root = Path(reports_dir) / STAGING
    if not root.is_dir():
        return []
    dead = [folder for folder in sorted(root.iterdir()) if is_dead(folder)]
    for folder in dead:
        label, _, rest = owned_stem(folder).partition(".")
        month_folder = Path(reports_dir) / label
        if rest.endswith(".old") and not month_folder.exists():
            folder.rename(month_folder)
        else:
            remove(folder)
    remove_if_empty(root)
    return dead


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@cache
def _renameat2():
    """libc's renameat2, or None (not Linux, or a C library without it)."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    return function


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one atomic rename; False where the OS or file system cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    paths = os.fsencode(first), os.fsencode(second)
    if renameat2(_AT_FDCWD, paths[0], _AT_FDCWD, paths[1], _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(error, os.strerror(error), str(first), None, str(second))
