"""PDFs of the report pages, printed by headless Chromium with the pages' own print CSS (page
size from settings.yaml `page_size`, A4 or Letter; margins, no browser header or footer).

Chromium is a program of the machine, not a Python package: `CHARGEBACK_CHROMIUM` names it,
else the first of `chromium`, `chromium-browser`, `google-chrome` on the PATH. Without one the
pages are still written and their PDFs are not (the run says so). Chromium stamps each PDF with
the time it printed it: the stamps become the billing period's end, so the same page gives the
same bytes.

One Chromium prints all the pages of a report step (`PagePrinter`), driven over its DevTools
pipe (`--remote-debugging-pipe`: JSON messages, each ended by a NUL byte, written to its file
descriptor 3 and read from its 4). Measured on the demo's November, two paired runs: its five
pages took 6.4 and 6.0 s as one `chromium --print-to-pdf` each, 3.7 and 3.4 s through one
browser, with the same bytes but the stamps (the parameters below are those of
`--print-to-pdf --no-pdf-header-footer`).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import os
import pathlib
import re
import select
import shutil
import signal
import tempfile
import threading
import time
from typing import Any

from pipelines.reports.files import write_atomically

CHROMIUM_ENV = "CHARGEBACK_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# headless, and nothing that reaches for the network or a profile: a report machine may have
# neither (without these, Chromium retries blocked connections at every start)
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)  # fmt: skip
PRINT_TIMEOUT_S = 120
# Page.printToPDF as `--print-to-pdf --no-pdf-header-footer` prints: the paper of the page's
# @page rule, backgrounds printed
PRINT_PARAMETERS = {
    "preferCSSPageSize": True,
    "printBackground": True,
    "displayHeaderFooter": False,
}
_STAMP = re.compile(rb"/(CreationDate|ModDate) \((D:\d{14}[^)]*)\)")
# a node id of a tagged PDF's structure (`/ID (node00000039)`, `/Headers [(node00000039)]`)
_NODE_ID = re.compile(rb"\(node(\d{8})\)")
# a link of the pages' templates (`<a href="...">text</a>`, no nested markup)
_LINK = re.compile(r'<a href="[^"]*">(.*?)</a>', re.S)


class PdfError(RuntimeError):
    """Chromium could not print a page."""


def find_chromium() -> str | None:
    """The Chromium to print with, or None when the machine has none."""
    named = os.environ.get(CHROMIUM_ENV)
    if named:
        return named
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


class PagePrinter:
    """One headless Chromium printing HTML pages to PDF, a page at a time (`print_pdf` may be
    called from several threads). A context manager: the browser starts on entry and is closed
    (killed if it does not close) on exit."""

    def __init__(self, chromium: str) -> None:
        self._chromium = chromium
        self._lock = threading.Lock()
        self._pages = 0

    def __enter__(self) -> PagePrinter:
        self._scratch = tempfile.TemporaryDirectory(prefix="chargeback-pdf-")
        self._folder = pathlib.Path(self._scratch.name)
        self._log = self._folder / "chromium.log"
        commands, self._to_browser = os.pipe()
        self._from_browser, replies = os.pipe()
        log = os.open(self._log, os.O_WRONLY | os.O_CREAT, 0o600)
        argv = [self._chromium, *CHROMIUM_FLAGS, f"--user-data-dir={self._folder / 'profile'}",
                "--remote-debugging-pipe", "about:blank"]  # fmt: skip
        try:
            # posix_spawn puts the pipe's ends at 3 and 4 without running Python in the child
            # (a preexec_fn may deadlock in a process with threads); the other descriptors of
            # this process are close-on-exec
            self._pid = os.posix_spawnp(
                self._chromium,
                argv,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, log, 1),
                    (os.POSIX_SPAWN_DUP2, log, 2),
                    (os.POSIX_SPAWN_DUP2, commands, 3),
                    (os.POSIX_SPAWN_DUP2, replies, 4),
                ],
            )
        except OSError as error:
            self._close_files()
            raise PdfError(f"{self._chromium}: cannot start it ({error.strerror})") from None
        finally:
            for fd in (commands, replies, log):
                os.close(fd)
        self._exit_status: int | None = None
        self._received = b""
        self._message_id = 0
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._running():
                with contextlib.suppress(PdfError):
                    self._send("Browser.close", timeout_s=10)
                self._stop(grace_s=10)
        finally:
            self._close_files()

    def _running(self) -> bool:
        if self._exit_status is None:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
            if pid:
                self._exit_status = status
        return self._exit_status is None

    def _stop(self, grace_s: float = 0) -> None:
        """Wait up to `grace_s` for Chromium to end, then kill it."""
        deadline = time.monotonic() + grace_s
        while self._running() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._running():
            os.kill(self._pid, signal.SIGKILL)
            _, self._exit_status = os.waitpid(self._pid, 0)

    def _close_files(self) -> None:
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._scratch.cleanup()

    def print_pdf(self, page: str, out: pathlib.Path, stamp: dt.datetime) -> pathlib.Path:
        """The HTML `page` printed to the PDF `out`, written atomically, its time stamps
        `stamp`; returns `out`. Links print as their text: Chromium would write a relative link
        as the absolute file:// address of wherever the page was printed (a scratch folder),
        which differs from run to run and leads nowhere once the reports are published."""
        with self._lock:
            self._pages += 1
            html = self._folder / f"page-{self._pages}.html"
            html.write_text(_LINK.sub(r"\1", page), encoding="utf-8")
            try:
                pdf = self._print(html.as_uri())
            except PdfError as error:
                raise PdfError(f"{out}: {error}") from None
            finally:
                html.unlink()
        write_atomically(_stamped(_numbered_in_order(pdf), stamp), out)
        return out

    def _print(self, url: str) -> bytes:
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        try:
            session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})[
                "sessionId"
            ]
            self._send("Page.enable", session=session)
            self._send("Page.navigate", {"url": url}, session, until="Page.loadEventFired")
            printed = self._send("Page.printToPDF", PRINT_PARAMETERS, session)
        finally:
            # the tab goes, whether the page printed or not; a browser that stopped (or was
            # stopped for not answering) has none left to close
            if self._running():
                self._send("Target.closeTarget", {"targetId": target})
        return base64.b64decode(printed["data"])

    def _send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        until: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Send one DevTools command and return its result; with `until`, also wait for that
        event of the session (the reply and the event may come in either order)."""
        self._message_id += 1
        message: dict[str, Any] = {"id": self._message_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        except OSError:
            raise PdfError(f"Chromium has stopped{self._log_tail()}") from None
        timeout_s = PRINT_TIMEOUT_S if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        result: dict[str, Any] | None = None
        waiting = until is not None
        while result is None or waiting:
            reply = self._receive(deadline, f"{method}, {timeout_s:g} s")
            if reply.get("id") == self._message_id:
                if "error" in reply:
                    raise PdfError(f"Chromium could not print it: {method}: {reply['error']}")
                result = reply["result"]
            elif reply.get("method") == until and reply.get("sessionId") == session:
                waiting = False
        return result

    def _receive(self, deadline: float, waiting_for: str) -> dict[str, Any]:
        """The next message from Chromium, by `deadline` (`waiting_for`: what for, to say)."""
        while b"\0" not in self._received:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(remaining, 0))
            if not ready:
                self._stop()
                raise PdfError(f"Chromium did not answer in time ({waiting_for})")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                self._stop(grace_s=10)
                raise PdfError(f"Chromium could not print it: it stopped{self._log_tail()}")
            self._received += chunk
        message, self._received = self._received.split(b"\0", 1)
        return json.loads(message)

    def _log_tail(self) -> str:
        lines = self._log.read_text(errors="replace").strip().splitlines()
        return f": {' / '.join(lines[-3:])}" if lines else ""


def _numbered_in_order(pdf: bytes) -> bytes:
    """`pdf` with the node ids of its tags (`(node00000039)`: the tagged PDF's table headers,
    by the renderer's count of the DOM nodes it has numbered) renumbered 1, 2, ... in their
    order. The renderer sometimes numbers one more node first, and the same page then prints
    with every id one higher: one fresh-clone run of the suite saw it twice, and one of four
    runs of the PDF test once. Same width, same order: the file's offsets and its sorted tree
    of ids stay right."""
    ids = sorted({int(number) for number in _NODE_ID.findall(pdf)})
    rank = {number: f"{k:08d}".encode() for k, number in enumerate(ids, start=1)}
    return _NODE_ID.sub(lambda match: b"(node" + rank[int(match.group(1))] + b")", pdf)


def _stamped(pdf: bytes, stamp: dt.datetime) -> bytes:
    """`pdf` with its creation and modification dates `stamp`, written at the same length so
    the file's cross-reference offsets stay right."""

    def replace(match: re.Match[bytes]) -> bytes:
        date = f"D:{stamp:%Y%m%d%H%M%S}+00'00'".encode()
        if len(date) != len(match.group(2)):
            raise PdfError(f"unexpected PDF date {match.group(2)!r}")
        return b"/" + match.group(1) + b" (" + date + b")"

    return _STAMP.sub(replace, pdf)
