"""PagePrinter: one headless Chromium prints the pages over its DevTools pipe, as
`chromium --print-to-pdf` would print them one by one, and a browser that fails says so."""

from __future__ import annotations

import datetime as dt
import re
import subprocess

import pytest

from pipelines.reports import pdf
from pipelines.reports.pdf import CHROMIUM_FLAGS, PagePrinter, PdfError
from tests.conftest import require_tool

STAMP = dt.datetime(2026, 12, 1)
PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>@page {{ size: {size}; margin: 12mm }} body {{ font-family: sans-serif }}</style></head>
<body><h1>{title}</h1><p>See <a href="other.html">the other page</a>.</p>
<table>{rows}</table></body></html>"""


def _page(title: str, size: str = "A4", rows: int = 80) -> str:
    cells = "".join(f"<tr><td>{i}</td><td>{i * i}</td></tr>" for i in range(rows))
    return PAGE.format(title=title, size=size, rows=cells)


def _without_stamps(data: bytes) -> bytes:
    return re.sub(rb"/(CreationDate|ModDate) \(D:[^)]*\)", b"", data)


@pytest.mark.browser
@pytest.mark.slow
def test_pages_print_as_chromium_prints_them_one_by_one(tmp_path):
    chromium = require_tool("chromium", "chromium")
    pages = {"a": _page("First"), "b": _page("Second", "Letter", rows=300)}
    with PagePrinter(chromium) as printer:
        printed = {name: printer.print_pdf(page, tmp_path / f"{name}.pdf", STAMP)
                   for name, page in pages.items()}  # fmt: skip
    for name, page in pages.items():
        # the reference: the command line's own print of the same page (links as text)
        html = tmp_path / f"{name}.html"
        html.write_text(page.replace('<a href="other.html">', "").replace("</a>", ""))
        reference = tmp_path / f"{name}-cli.pdf"
        subprocess.run(
            [chromium, *CHROMIUM_FLAGS, "--no-pdf-header-footer", f"--print-to-pdf={reference}",
             f"--user-data-dir={tmp_path / 'profile'}", html.as_uri()],
            capture_output=True, timeout=120, check=True,
        )  # fmt: skip
        data = printed[name].read_bytes()
        # the reference's tags numbered as the printer numbers them (below)
        expected = pdf._numbered_in_order(reference.read_bytes())
        assert _without_stamps(data) == _without_stamps(expected)
        assert re.findall(rb"/CreationDate \((D:[^)]*)\)", data) == [b"D:20261201000000+00'00'"]
        assert b"other.html" not in data
    assert b"/MediaBox [0 0 612 792]" in printed["b"].read_bytes()  # Letter, from the CSS


def test_a_program_that_is_not_there_cannot_start(tmp_path):
    missing = tmp_path / "no-chromium"
    with pytest.raises(PdfError, match=rf"^{re.escape(str(missing))}: cannot start it \("):
        PagePrinter(str(missing)).__enter__()


def test_a_browser_that_stops_names_the_page_and_its_last_words(tmp_path):
    stops = tmp_path / "stops"
    stops.write_text("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n")
    stops.chmod(0o755)
    out = tmp_path / "page.pdf"
    with PagePrinter(str(stops)) as printer, pytest.raises(PdfError) as raised:
        printer.print_pdf(_page("Lost"), out, STAMP)
    assert str(raised.value) in {
        # the pipe closed before the command was written, or while it waited for the reply
        f"{out}: Chromium has stopped: cannot open display",
        f"{out}: Chromium could not print it: it stopped: cannot open display",
    }
    assert not out.exists()


def test_a_browser_that_never_answers_is_stopped_in_time(tmp_path, monkeypatch):
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexec sleep 60\n")  # reads nothing, answers nothing
    silent.chmod(0o755)
    monkeypatch.setattr(pdf, "PRINT_TIMEOUT_S", 0.5)
    out = tmp_path / "page.pdf"
    with PagePrinter(str(silent)) as printer:
        with pytest.raises(PdfError) as raised:
            printer.print_pdf(_page("Late"), out, STAMP)
        assert not printer._running()  # killed, not left behind
    assert str(raised.value) == (
        f"{out}: Chromium did not answer in time (Target.createTarget, 0.5 s)"
    )
    assert not out.exists()


def test_tag_node_ids_are_numbered_in_order_at_the_same_width():
    # the renderer numbered one node more before this print: every id one higher
    printed = (
        b"<</S /TH /ID (node00000040)>> <</S /TH /ID (node00000043)>> "
        b"<</S /TD /A [<</Headers [(node00000040)]>>]>> <</S /TH /ID (node00000041)>> "
        b"/Names [(node00000040) 57 0 R (node00000041) 59 0 R (node00000043) 63 0 R] (node 12)"
    )
    assert pdf._numbered_in_order(printed) == (
        b"<</S /TH /ID (node00000001)>> <</S /TH /ID (node00000003)>> "
        b"<</S /TD /A [<</Headers [(node00000001)]>>]>> <</S /TH /ID (node00000002)>> "
        b"/Names [(node00000001) 57 0 R (node00000002) 59 0 R (node00000003) 63 0 R] (node 12)"
    )
    assert pdf._numbered_in_order(printed.replace(b"0000004", b"0000003")) == (
        pdf._numbered_in_order(printed)
    )
