"""Job lines are streamed into the sheet's XML, each row's XML written by DuckDB (openpyxl is
too slow for 200k rows): what a reader sees must be what openpyxl itself would have written
for the same rows."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from decimal import Decimal
from xml.etree import ElementTree

import duckdb
import openpyxl
import pytest
from openpyxl import Workbook

from pipelines.reports import package, sheets, streamed_sheet
from pipelines.reports.sheets import Column

COLS = [
    Column("N", "count"),  # the rows' order
    Column("Text"),
    Column("Hours", "hours"),
    Column("Money", "money"),
    Column("When", "timestamp"),
    Column("Day", "date"),
    Column("Util", "util"),
    # plain text: a streamed table cannot wrap (its rows have no heights to fit the lines)
    Column("Note"),
]
AWKWARD_ROWS = [
    (1, "plain", 1.5, Decimal("1234.56"), dt.datetime(2026, 11, 1, 13, 45, 30),
     dt.date(2026, 11, 30), 45.3, "two\nlines"),
    (2, "  padded  ", 1 / 3, Decimal("-0.01"), dt.datetime(1999, 12, 31, 23, 59, 59, 999000),
     dt.date(2026, 1, 1), 0, "<b>&amp; \"quoted\"</b>"),
    (3, "=SUM(A1:A2)", 0.1 + 0.2, Decimal("0"), None, None, 100, None),
    (4, "ctl\x00\x01\x1f char", 12345678901234.5, Decimal("99999999999.99"), None, None, None,
     "x" * 40_000),
    (5, None, None, None, None, None, None, None),
    (6, "ünïcødé ✓", 2, 7, dt.datetime(2026, 11, 1), dt.date(2026, 11, 1), 12.25, "tab\tand end "),
    (7, "not finite", float("nan"), Decimal("0.1000000000000000055"), None, None, float("-inf"),
     None),
    (8, "big", 12345678901234567, Decimal("-1E+3"), None, None, float("inf"), ""),
]  # fmt: skip


# the table's SQL types: the streamed rows take theirs from the query
TYPES = (
    "n integer, text varchar, hours double, money decimal(38, 19), seen timestamp, day date, "
    "util double, note varchar"
)


def _package(streamed: bool, rows: list[tuple], types: str = TYPES) -> bytes:
    con = duckdb.connect()
    con.execute(f"create table awkward ({types})")
    con.executemany(f"insert into awkward values ({', '.join('?' * len(COLS))})", rows)
    wb = Workbook()
    sheets.add_named_styles(wb)
    ws = wb.active
    ws.title = "Rows"
    if streamed:
        sheets.write_table(ws, 1, COLS, [])
        query = streamed_sheet.RowsQuery(con, "select * from awkward", {}, "n")
        rows = streamed_sheet.StreamedRows.below_header(ws, COLS, query)
        return package.workbook_bytes(wb, dt.datetime(2026, 12, 1), [rows])
    # openpyxl writes the same values, as DuckDB returns them
    sheets.write_table(ws, 1, COLS, con.execute("select * from awkward order by n").fetchall())
    return package.workbook_bytes(wb, dt.datetime(2026, 12, 1))


def _cells(data: bytes) -> list[list[tuple]]:
    ws = openpyxl.load_workbook(io.BytesIO(data))["Rows"]
    return [
        [(c.value, c.data_type, c.number_format, c.style, c.alignment.wrap_text) for c in row]
        for row in ws.iter_rows()
    ]


def test_streamed_rows_read_back_as_the_rows_openpyxl_writes():
    by_openpyxl = _cells(_package(False, AWKWARD_ROWS))
    streamed = _cells(_package(True, AWKWARD_ROWS))
    assert streamed == by_openpyxl
    # and the awkward values survived: text stays text, control characters are spelled out,
    # over-long text is cut at Excel's limit
    assert [row[1][0] for row in streamed[1:]] == [
        "plain", "  padded  ", "=SUM(A1:A2)", "ctl\\x00\\x01\\x1f char", None, "ünïcødé ✓",
        "not finite", "big",
    ]  # fmt: skip
    assert streamed[3][1][1] == "s"
    assert streamed[2][7][0] == '<b>&amp; "quoted"</b>'
    assert streamed[4][7][0] == "x" * 32_753 + " [truncated]"  # within Excel's 32,767
    assert streamed[1][4][0] == dt.datetime(2026, 11, 1, 13, 45, 30)
    assert streamed[2][4][0] == dt.datetime(1999, 12, 31, 23, 59, 59, 999000)
    assert streamed[1][3][0] == 1234.56
    # numbers as openpyxl formats them: not-finite floats have no value, a Decimal is the float
    # it converts to
    assert (streamed[7][2][0], streamed[7][6][0], streamed[7][3][0]) == (None, None, 0.1)
    assert streamed[8][2][0] == 1.234567890123457e16


def test_the_sheet_dimension_covers_the_streamed_rows():
    # the <dimension> element itself: openpyxl's loaded sheet computes its size from the cells,
    # but readers that trust the element (read-only mode, some viewers) would cut the sheet short
    with zipfile.ZipFile(io.BytesIO(_package(True, AWKWARD_ROWS))) as package:
        sheet = ElementTree.fromstring(package.read("xl/worksheets/sheet1.xml"))
    main = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
    assert sheet.find(f"{main}dimension").get("ref") == "A1:H9"
    read_only = openpyxl.load_workbook(io.BytesIO(_package(True, AWKWARD_ROWS)), read_only=True)
    assert read_only["Rows"].max_row == 9


def test_a_column_that_is_not_a_number_in_a_number_column_stops_the_workbook():
    rows = [(1, "ok", "1.5", Decimal("1"), None, None, None, None)]
    with pytest.raises(TypeError, match=r"column C \(hours\): VARCHAR is not a number or date"):
        _package(True, rows, TYPES.replace("hours double", "hours varchar"))


def test_a_column_that_is_not_text_in_a_text_column_stops_the_workbook():
    rows = [(1, 2.5, 1.5, Decimal("1"), None, None, None, None)]
    with pytest.raises(TypeError, match=r"column B \(text\): DOUBLE is not text"):
        _package(True, rows, TYPES.replace("text varchar", "text double"))


def test_text_with_outer_spaces_is_marked_to_keep_them():
    # openpyxl's reader keeps the spaces either way; Excel drops them without xml:space
    with zipfile.ZipFile(io.BytesIO(_package(True, AWKWARD_ROWS))) as package:
        sheet = ElementTree.fromstring(package.read("xl/worksheets/sheet1.xml"))
    main = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
    space = "{http://www.w3.org/XML/1998/namespace}space"
    marks = {
        cell.get("r"): cell.find(f"{main}is/{main}t").get(space)
        for cell in sheet.iter(f"{main}c")
        if cell.get("t") == "inlineStr"
        and cell.get("r")[0] in "BH"
        and cell.get("r")[1:] != "1"
        and cell.find(f"{main}is") is not None
    }
    # "  padded  " (B3) and "tab\tand end " (H7, a trailing space only)
    assert marks == {f"B{r}": None for r in (2, 4, 5, 7, 8, 9)} | {"B3": "preserve"} | {
        "H2": None,
        "H3": None,
        "H5": None,
        "H7": "preserve",
    }


def test_streamed_columns_are_as_wide_as_their_widest_value():
    # DuckDB picks the few values that can be the widest: the longest one-line text, and the
    # texts with line breaks (the widest line counts) or a leading '=' (text all the same: a
    # streamed table's text is never a formula). The widths are those of every value.
    text = [
        "short",
        "=a text that looks like a formula",
        "a line of 20 chars..\nanother of 20 chars.",
        "x\n" + "y" * 38,
    ]
    note = ["plain note, nineteen", "=" + "z" * 40, "line one\u2028line two is here", None]
    rows = [(n, text[n], None, None, None, None, None, note[n]) for n in range(4)]
    con = duckdb.connect()
    con.execute(f"create table awkward ({TYPES})")
    con.executemany(f"insert into awkward values ({', '.join('?' * len(COLS))})", rows)
    wb = Workbook()
    sheets.add_named_styles(wb)
    query = streamed_sheet.RowsQuery(con, "select * from awkward", {}, "n")
    streamed = streamed_sheet.StreamedRows.below_header(wb.active, COLS, query)
    widths = sheets.fit_widths_to(COLS, streamed.width_values)
    assert widths == sheets.fit_widths({}, COLS, rows)
    assert (widths[2], widths[8]) == (38 + 2, 41 + 2)


def _sheet_part(streamed: bool, rows: list[tuple], print_setup: bool) -> bytes:
    """The XML part of a one-table sheet (header, widths, frozen header, filter and, with
    `print_setup`, the workbooks' print setup) written by openpyxl or streamed."""
    con = duckdb.connect()
    con.execute(f"create table awkward ({TYPES})")
    if rows:
        con.executemany(f"insert into awkward values ({', '.join('?' * len(COLS))})", rows)
    wb = Workbook()
    sheets.add_named_styles(wb)
    ws = wb.active
    ws.title = "Rows"
    # headers hold data too (the job lines' currency): escaped and spaced like any text
    cols = [Column("N & <n> €", "count"), Column(" text\r"), *COLS[2:]]
    streamed_rows = []
    if streamed:
        sheets.write_table(ws, 1, cols, [])
        query = streamed_sheet.RowsQuery(con, "select * from awkward", {}, "n")
        streamed_rows.append(streamed_sheet.StreamedRows.below_header(ws, cols, query))
        last = streamed_rows[0].last_row
    else:
        # the streamed rows number their columns' styles first (style ids are the workbook's)
        for col in cols:
            if col.kind in sheets.STYLE_OF_KIND:
                sheets.named_style_id(ws, sheets.STYLE_OF_KIND[col.kind])
        last = sheets.write_table(
            ws, 1, cols, con.execute("select * from awkward order by n").fetchall()
        )
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = sheets.ref(1, 1, last, len(cols))
    sheets.apply_widths(ws, {1: 12, 2: 30, 8: 100})
    if print_setup:
        # a heading with an & (escaped as &&) beside the codes &A, &P and &N
        sheets.set_print_setup(wb, "R&D — 2026-11")
    data = package.workbook_bytes(wb, dt.datetime(2026, 12, 1), streamed_rows)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.read("xl/worksheets/sheet1.xml")


# Two spellings differ where the XML does not: openpyxl (through lxml) writes text in ASCII with
# character references and an empty text as <c ...></c>; the streamed rows write UTF-8 and
# <c .../> (the test above reads both back alike). The other awkward rows, byte for byte:
BYTE_ROWS = [
    row for row in AWKWARD_ROWS if all(not isinstance(v, str) or (v.isascii() and v) for v in row)
]


@pytest.mark.parametrize("print_setup", [False, True], ids=["plain", "print setup"])
def test_the_streamed_sheet_part_is_the_part_openpyxl_writes(print_setup):
    # the whole part, byte for byte: settings, header row, rows, filter, margins, print setup
    assert len(BYTE_ROWS) == len(AWKWARD_ROWS) - 2
    streamed = _sheet_part(True, BYTE_ROWS, print_setup)
    assert streamed == _sheet_part(False, BYTE_ROWS, print_setup)
    assert (b"<pageSetup " in streamed) == print_setup
    assert (b"<oddHeader>&amp;LR&amp;&amp;D" in streamed) == print_setup
    assert b"N &amp; &lt;n&gt; &#8364;" in streamed
    assert _sheet_part(True, [], print_setup) == _sheet_part(False, [], print_setup)


def test_a_streamed_table_with_wrapped_text_is_refused():
    con = duckdb.connect()
    con.execute(f"create table awkward ({TYPES})")
    wb = Workbook()
    sheets.add_named_styles(wb)
    cols = [*COLS[:-1], Column("Note", "wrap")]
    sheets.write_table(wb.active, 1, cols, [])
    query = streamed_sheet.RowsQuery(con, "select * from awkward", {}, "n")
    with pytest.raises(TypeError, match="a streamed table cannot wrap text \\(Note\\)"):
        streamed_sheet.StreamedRows.below_header(wb.active, cols, query)


def test_a_streamed_sheet_holding_more_than_its_table_is_refused():
    con = duckdb.connect()
    con.execute(f"create table awkward ({TYPES})")
    wb = Workbook()
    sheets.add_named_styles(wb)
    ws = wb.active
    sheets.write_table(ws, 1, COLS, [])
    query = streamed_sheet.RowsQuery(con, "select * from awkward", {}, "n")
    rows = streamed_sheet.StreamedRows.below_header(ws, COLS, query)
    ws.merge_cells("A1:B1")
    with pytest.raises(ValueError, match="holds one table, not \\['merged cells'\\]"):
        package.workbook_bytes(wb, dt.datetime(2026, 12, 1), [rows])
