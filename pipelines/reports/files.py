"""Report files are replaced atomically: a failure leaves the earlier report."""

from __future__ import annotations

import os
import pathlib

from pipelines.checkpoints import checkpoint


def write_atomically(data: bytes, out_path: pathlib.Path) -> None:
    """Temporary file in the same folder, then rename: a failure leaves the old report."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            half = memoryview(data)[: len(data) // 2]
            fh.write(half)
            fh.flush()
            checkpoint("workbook_half_written")  # the kill tests stop here
            fh.write(memoryview(data)[len(half) :])
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
