"""Progress lines of long steps: in the Dagster UI's run log, and on the terminal of the
`chargeback` command (which attaches a handler to `PROGRESS`; elsewhere it prints nothing)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command imports this before it needs Dagster
    import dagster as dg

PROGRESS = logging.getLogger("chargeback.progress")


def progress(context: dg.AssetExecutionContext | dg.OpExecutionContext, message: str) -> None:
    context.log.info(message)
    PROGRESS.info(message)
