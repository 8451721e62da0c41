"""PDFs of the report pages, printed by headless Chromium with the pages' own print CSS (page
size from settings.yaml `page_size`, A4 or Letter; margins, no browser header or footer).

Chromium is a program of the machine, not a Python package: `CHARGEBACK_CHROMIUM` names it,
else the first of `chromium`, `chromium-browser`, `google-chrome` on the PATH. Without one the
pages are still written and their PDFs are not (the run says so). Chromium stamps each PDF with
the time it printed it: the stamps become the billing period's end, so the same page gives the
same bytes.
"""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

from pipelines.reports.files import write_atomically

CHROMIUM_ENV = "CHARGEBACK_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# headless, and nothing that reaches for the network or a profile: a report machine may have
# neither (without these, Chromium retries blocked connections at every start)
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-pdf-header-footer",
)  # fmt: skip
PRINT_TIMEOUT_S = 120
_STAMP = re.compile(rb"/(CreationDate|ModDate) \((D:\d{14}[^)]*)\)")
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


def print_pdf(chromium: str, page: str, out: pathlib.Path, stamp: dt.datetime) -> pathlib.Path:
    """The HTML `page` printed to the PDF `out`, written atomically, its time stamps `stamp`;
    returns `out`. Links print as their text: Chromium would write a relative link as the
    absolute file:// address of wherever the page was printed (a run's staging folder), which
    differs from run to run and leads nowhere once the reports are published."""
    with tempfile.TemporaryDirectory(prefix="chargeback-pdf-") as scratch:
        html = pathlib.Path(scratch) / "page.html"
        html.write_text(_LINK.sub(r"\1", page), encoding="utf-8")
        printed = pathlib.Path(scratch) / "page.pdf"
        command = [
            chromium, *CHROMIUM_FLAGS, f"--user-data-dir={scratch}/profile",
            f"--print-to-pdf={printed}", html.as_uri(),
        ]  # fmt: skip
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=PRINT_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise PdfError(f"{out}: Chromium did not print it in {PRINT_TIMEOUT_S} s") from None
        if result.returncode != 0 or not printed.exists():
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise PdfError(f"{out}: Chromium could not print it: {' / '.join(tail)}")
        write_atomically(_stamped(printed.read_bytes(), stamp), out)
    return out


def _stamped(pdf: bytes, stamp: dt.datetime) -> bytes:
    """`pdf` with its creation and modification dates `stamp`, written at the same length so
    the file's cross-reference offsets stay right."""

    def replace(match: re.Match[bytes]) -> bytes:
        date = f"D:{stamp:%Y%m%d%H%M%S}+00'00'".encode()
        if len(date) != len(match.group(2)):
            raise PdfError(f"unexpected PDF date {match.group(2)!r}")
        return b"/" + match.group(1) + b" (" + date + b")"

    return _STAMP.sub(replace, pdf)
