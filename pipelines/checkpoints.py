"""Named points where the kill tests stop a real run (tests/e2e/test_kill_safety.py).

`CHARGEBACK_TEST_KILL_AT=<name>` makes the process SIGKILL itself when it reaches the
checkpoint `<name>`; `<name>:SIGSTOP` (any signal name) sends that signal instead, so a test
can pause a run that holds the warehouse and resume it with SIGCONT. Without the variable a
checkpoint does nothing.

The checkpoints: `after_<asset>` after each monthly asset, between two steps of the run
(e.g. `after_stg_jobs`, `after_charge_lines`: pipelines/defs/monthly.py); `rollup_day_written`
(a telemetry day complete in its staging folder, not yet moved into place);
`workbook_half_written` (half of a workbook's or page's bytes in its temporary file);
`before_commit` (the month's reports complete in staging, the commit record written aside but
not yet in place: pipelines/commit.py), `before_publish` and `during_publish` (the record in
place; a month folder about to switch, and switched with the previous generation not yet
removed: pipelines/defs/reports/publish.py), `during_commit` (the reports switched, the
warehouse not yet).
"""

import os
import signal


def checkpoint(name: str) -> None:
    """Signal this process when CHARGEBACK_TEST_KILL_AT names `name` (see the module doc)."""
    point, _, signal_name = os.environ.get("CHARGEBACK_TEST_KILL_AT", "").partition(":")
    if point == name:
        os.kill(os.getpid(), signal.Signals[signal_name or "SIGKILL"])
