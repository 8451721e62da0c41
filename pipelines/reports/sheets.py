"""The sheet kit of the report workbooks: named styles, column kinds and their number formats,
tables (header, rows, filter), TOTAL rows, column widths, budget-status fills, charts and print
setup. Every workbook registers the same named styles (`add_named_styles`) and a column's kind
picks its style, so a figure has one format wherever it is shown.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE, Cell
from openpyxl.chart import BarChart, LineChart, Reference
from openpyxl.chart.text import RichText
from openpyxl.drawing.text import CharacterProperties, Paragraph, ParagraphProperties
from openpyxl.styles import Alignment, Font, NamedStyle, PatternFill
from openpyxl.utils import get_column_letter
from openpyxl.utils.cell import column_index_from_string, coordinate_from_string
from openpyxl.worksheet.page import PageMargins
from openpyxl.worksheet.pagebreak import Break
from openpyxl.worksheet.table import Table, TableStyleInfo
from openpyxl.worksheet.worksheet import Worksheet

MONEY_FORMAT = "#,##0.00"
HOURS_FORMAT = "#,##0.00"
SHARE_FORMAT = "0.0%"
TIMESTAMP_FORMAT = "yyyy-mm-dd hh:mm"
# Unit prices are DECIMAL(18,6): show cents always, and the extra digits only when present.
PRICE_FORMAT = "#,##0.00####"
COUNT_FORMAT = "#,##0"
UTIL_FORMAT = "0.0"
DATE_FORMAT = "yyyy-mm-dd"

# Excel's own "light red fill" and "yellow fill" conditional-format colours.
OVER_BUDGET_RGB = "FFC7CE"
WARN_BUDGET_RGB = "FFEB9C"
OVER_FILL = PatternFill(fill_type="solid", fgColor=OVER_BUDGET_RGB, bgColor=OVER_BUDGET_RGB)
WARN_FILL = PatternFill(fill_type="solid", fgColor=WARN_BUDGET_RGB, bgColor=WARN_BUDGET_RGB)
# budget status -> the fill of its rows
STATUS_FILLS = {"over": OVER_FILL, "warn": WARN_FILL}

# kind of a column -> named style registered in every workbook by add_named_styles
STYLE_OF_KIND = {
    "money": "cb money",
    "hours": "cb hours",
    "share": "cb share",
    "timestamp": "cb timestamp",
    "price": "cb price",
    "count": "cb count",
    "util": "cb util",
    "date": "cb date",
    "number": "cb number",
    "wrap": "cb wrap",
}
TOTAL_STYLE_OF_KIND = {"money": "cb total money", "hours": "cb total hours"}
# column kinds whose values are written as text (never as a number, date or formula)
TEXT_KINDS = ("text", "wrap")

MAX_CELL_CHARS = 32_767
_MIN_WIDTH, _MAX_WIDTH = 8, 60


@dataclass(frozen=True)
class Column:
    """A table column: its header, its kind (text, or a key of STYLE_OF_KIND) and a fixed
    width instead of one fitted to its values."""

    header: str
    kind: str = "text"
    width: int | None = None


def add_named_styles(wb: Workbook) -> None:
    """The named styles every report workbook uses, in one order (their ids follow it)."""
    bold = Font(bold=True)
    formats = {
        "money": MONEY_FORMAT,
        "hours": HOURS_FORMAT,
        "share": SHARE_FORMAT,
        "timestamp": TIMESTAMP_FORMAT,
        "price": PRICE_FORMAT,
        "count": COUNT_FORMAT,
        "util": UTIL_FORMAT,
        "date": DATE_FORMAT,
        "number": "General",
    }
    for kind, number_format in formats.items():
        wb.add_named_style(NamedStyle(name=STYLE_OF_KIND[kind], number_format=number_format))
    wb.add_named_style(
        NamedStyle(name="cb wrap", alignment=Alignment(wrap_text=True, vertical="top"))
    )
    wb.add_named_style(
        NamedStyle(
            name="cb header",
            font=bold,
            fill=PatternFill(fill_type="solid", fgColor="D9D9D9", bgColor="D9D9D9"),
        )
    )
    wb.add_named_style(NamedStyle(name="cb bold", font=bold))
    wb.add_named_style(NamedStyle(name="cb title", font=Font(bold=True, size=14)))
    wb.add_named_style(NamedStyle(name="cb total money", font=bold, number_format=MONEY_FORMAT))
    wb.add_named_style(NamedStyle(name="cb total hours", font=bold, number_format=HOURS_FORMAT))


def set_text(cell: Cell, value: Any) -> Cell:
    """Write data as text: never a formula or error code, whatever the string starts with."""
    cell.value = cell_text(value)
    cell.data_type = "s"
    return cell


def cell_text(value: Any) -> str:
    """`value` as a cell's text: characters XML cannot hold spelled out, cut at Excel's limit."""
    text = ILLEGAL_CHARACTERS_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 14] + " [truncated]"
    return text


def write_table(
    ws: Worksheet,
    header_row: int,
    cols: Sequence[Column],
    rows: Iterable[Sequence[Any]],
    table_name: str | None = None,
) -> int:
    """Header plus rows from column A; returns the last row used (the header if no rows).

    A sheet has one autofilter, which the caller puts on the sheet's first table; a second
    table on the same sheet gets its own filter as an Excel table (`table_name`). The table
    is recorded for the print setup (`set_print_setup`: a page break before each table of a
    sheet that stacks several; the height of each row with wrapped text).
    """
    register_table(ws, header_row)
    layout = _layout(ws)
    for column, col in enumerate(cols, start=1):
        set_text(ws.cell(row=header_row, column=column), col.header).style = "cb header"
    is_text = [col.kind in TEXT_KINDS for col in cols]
    styles = [STYLE_OF_KIND.get(col.kind) for col in cols]
    r = header_row
    for values in rows:
        r += 1
        for column, (text, style, value) in enumerate(
            zip(is_text, styles, values, strict=True), start=1
        ):
            if value is None:
                continue
            cell = ws.cell(row=r, column=column)
            if style == "cb wrap":
                layout.wrapped.append(cell)
            if text:
                set_text(cell, value)
            else:
                # Numbers, datetimes, and formulas built by the report (never data text).
                cell.value = value
            if style is not None:
                cell.style = style
    if table_name is not None:
        if r == header_row:
            set_text(ws.cell(row=r + 1, column=1), "(none)")
        else:
            table = Table(displayName=table_name, ref=ref(header_row, 1, r, len(cols)))
            table.tableStyleInfo = TableStyleInfo(name="TableStyleLight1", showRowStripes=False)
            ws.add_table(table)
    return r


def register_table(ws: Worksheet, header_row: int) -> None:
    """A table a writer laid out cell by cell, its header on `header_row`: printed like
    write_table's (from a new page on a sheet that stacks tables)."""
    _layout(ws).tables.append(header_row)


def write_main_table(
    ws: Worksheet, cols: Sequence[Column], rows: Sequence[Sequence[Any]], header_row: int = 1
) -> int:
    """The sheet's main table (write_table), its header row and those above frozen and its
    rows filtered by the sheet's autofilter; returns the last row used."""
    last = write_table(ws, header_row, cols, rows)
    ws.freeze_panes = f"A{header_row + 1}"
    ws.auto_filter.ref = ref(header_row, 1, last, len(cols))
    return last


def named_style_id(ws: Worksheet, name: str) -> int:
    """The workbook's cell-style id of a cell with the named style `name` (registered on first
    use: ids follow the order of use)."""
    template = Cell(ws)
    template.style = name
    return template.style_id


def write_total_row(
    ws: Worksheet,
    row: int,
    first: int,
    last: int,
    summed: Mapping[int, str],
    label: str = "TOTAL",
) -> None:
    """`label` plus `=SUM()` over rows first..last in the given columns (0 if no rows)."""
    set_text(ws.cell(row=row, column=1), label).style = "cb bold"
    for column, kind in summed.items():
        letter = get_column_letter(column)
        value: Any = f"=SUM({letter}{first}:{letter}{last})" if last >= first else 0
        ws.cell(row=row, column=column, value=value).style = TOTAL_STYLE_OF_KIND[kind]


def fill_status_rows(
    ws: Worksheet, first_row: int, statuses: Iterable[str | None], columns: int
) -> None:
    """Fill each row from `first_row` down by its budget status (over: red, warn: amber),
    columns 1..`columns`."""
    for row, status in enumerate(statuses, start=first_row):
        fill = STATUS_FILLS.get(status)
        if fill is not None:
            for column in range(1, columns + 1):
                ws.cell(row=row, column=column).fill = fill


def ref(top: int, left: int, bottom: int, right: int) -> str:
    """The range `A1:C9` of rows top..bottom and columns left..right."""
    return f"{get_column_letter(left)}{top}:{get_column_letter(right)}{bottom}"


def share_of(pct: float | None) -> float | None:
    """Marts hold percentages (0-100); the sheets show them as shares in a % format."""
    return None if pct is None else pct / 100


def section_title(ws: Worksheet, row: int, text: str) -> None:
    """A section's title in column A of `row`: a table right below it prints with it."""
    _layout(ws).titles.add(row)
    set_text(ws.cell(row=row, column=1), text).style = "cb bold"


def section_below(ws: Worksheet, last_row: int, title: str) -> int:
    """A section's title two rows below `last_row` (on the first row for TOP); returns the row
    under the title, where the section's table starts."""
    section_title(ws, last_row + 3, title)
    return last_row + 4


# section_below's `last_row` for a section at the top of its sheet
TOP = -2


def section_below_chart(ws: Worksheet, title: str, with_chart: bool = True) -> int:
    """A section's title below the chart that heads the sheet (add_chart at row 1, on a page
    of its own), or on the first row when the sheet has no chart; returns the row under the
    title. The chart can be added once the section's table is written: it plots that table."""
    return section_below(ws, CHART_ROWS if with_chart else TOP, title)


def not_available(ws: Worksheet, row: int, table: str) -> int:
    """Say in column A of `row` that the warehouse has no `table`; returns the row."""
    set_text(
        ws.cell(row=row, column=1),
        f"not available: this warehouse has no table {table} (built before it existed)",
    )
    return row


def style_chart(chart: BarChart | LineChart, title: str, y_title: str) -> None:
    chart.title = title
    chart.y_axis.title = y_title
    chart.width, chart.height = 24, 10
    # openpyxl >= 3.1 marks axes deleted unless told otherwise: the chart would have none.
    chart.x_axis.delete = False
    chart.y_axis.delete = False
    chart.legend.position = "b"
    # The renderers' default for a chart's labels is 10 pt, 7.3 pt once a wide sheet prints
    # at MIN_PRINT_SCALE: every text of the chart in the body font's size instead (its title
    # larger), so that it prints at 8 pt or more like the cells.
    for text in (chart.x_axis, chart.y_axis, chart.legend):
        text.txPr = _chart_text(BODY_FONT_PT)
    _size_title(chart.title, BODY_FONT_PT + 3)
    _size_title(chart.y_axis.title, BODY_FONT_PT)


def _chart_text(size_pt: int) -> RichText:
    """Text properties of a chart part (axis labels, legend) in `size_pt`."""
    font = CharacterProperties(sz=size_pt * 100)
    return RichText(p=[Paragraph(pPr=ParagraphProperties(defRPr=font), r=[], endParaRPr=font)])


def _size_title(title: Any, size_pt: int) -> None:
    """Set the size of a chart or axis title that openpyxl made from a string."""
    for paragraph in title.tx.rich.p:
        paragraph.pPr = ParagraphProperties(defRPr=CharacterProperties(sz=size_pt * 100, b=True))
        for run in paragraph.r or []:
            run.rPr = CharacterProperties(sz=size_pt * 100, b=True)


def add_chart(ws: Worksheet, chart: BarChart | LineChart, row: int) -> int:
    """Place `chart` (styled by style_chart) in column A from `row`, on a page of its own
    when printed (a chart is never cut by a page break); returns the last row it covers."""
    _layout(ws).charts.append(row)
    ws.add_chart(chart, f"A{row}")
    return row + CHART_ROWS - 1


def add_table_chart(
    ws: Worksheet,
    chart: BarChart | LineChart,
    row: int,
    header_row: int,
    last: int,
    series: tuple[int, int],
    categories: int = 1,
) -> int:
    """Place `chart` from `row` (add_chart) plotting the table with its header on `header_row`
    and its last row on `last`: a series per column of `series` (first, last), named by its
    header, over the values of column `categories`; returns the last row the chart covers."""
    first_col, last_col = series
    data = Reference(ws, min_col=first_col, max_col=last_col, min_row=header_row, max_row=last)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=categories, min_row=header_row + 1, max_row=last))
    return add_chart(ws, chart, row)


# --------------------------------------------------------------------------------------------
# Print setup
# --------------------------------------------------------------------------------------------

# Every sheet prints landscape on A4 with Excel's "narrow" margins (inches): the tables are
# wide, and the header and footer need only one line each.
MARGINS = {"left": 0.25, "right": 0.25, "top": 0.75, "bottom": 0.75, "header": 0.3, "footer": 0.3}
_A4_LANDSCAPE_WIDTH_PT = 297 / 25.4 * 72
PRINTABLE_WIDTH_PT = _A4_LANDSCAPE_WIDTH_PT - (MARGINS["left"] + MARGINS["right"]) * 72
# The smallest print scale that stays readable: the sheets' 11 pt body font printed at no
# less than 8 pt. Fitting a sheet to the page width below it would print unreadable pages
# (the job lines came out at 30 %): such a sheet prints at this scale over several pages.
BODY_FONT_PT = 11
MIN_PRINTED_FONT_PT = 8
MIN_PRINT_SCALE = math.ceil(100 * MIN_PRINTED_FONT_PT / BODY_FONT_PT)  # 73 %
# Printed width of a column one character wide: 5.25 pt in Calibri 11 (7 px at 96 px an inch)
# but 7.06 pt measured in LibreOffice where Calibri is missing and DejaVu Sans stands in: the
# wider one decides, so that no renderer fits a sheet below MIN_PRINT_SCALE. A column without
# a width is Excel's 8.43 characters.
_PT_PER_CHARACTER = 7.2
_DEFAULT_COLUMN_WIDTH = 8.43
# Excel's line height of the 11 pt body font, and the rows of a chart (style_chart: 10 cm)
LINE_HEIGHT_PT = 15
CHART_ROWS = 20
_CHART_WIDTH_PT = 24 / 2.54 * 72


@dataclass
class _Layout:
    """What the print setup needs to know of a sheet: the header rows of its tables, the rows
    of its section titles, the first rows of its charts and the cells of wrapped text, as the
    kit wrote them."""

    tables: list[int] = field(default_factory=list)
    wrapped: list[Cell] = field(default_factory=list)
    titles: set[int] = field(default_factory=set)
    charts: list[int] = field(default_factory=list)


# kept beside each worksheet for as long as it lives, not in the saved file
_LAYOUTS: weakref.WeakKeyDictionary[Worksheet, _Layout] = weakref.WeakKeyDictionary()


def _layout(ws: Worksheet) -> _Layout:
    return _LAYOUTS.setdefault(ws, _Layout())


def set_print_setup(wb: Workbook, heading: str) -> None:
    """Print (and PDF-export) every sheet readably, each table on pages of its own.

    Landscape A4; header `heading` (say, the month) left and the sheet's name right, footer
    "Page n of N". A sheet that holds one table repeats its frozen header rows (and frozen
    columns) on every page, or, not frozen, its title and header from where it begins. A
    sheet that stacks several tables (or a table and a chart) starts each table after the
    first, with its section title, and each chart on a new page, and repeats the title and
    header of its last table on that table's pages: print titles repeat from the page where
    they first appear (LibreOffice, measured), so the tables above keep their own header.
    Writers put a sheet's one table of unbounded length last.
    A sheet is fitted to the page width when that keeps its scale at MIN_PRINT_SCALE or
    more, otherwise it prints at MIN_PRINT_SCALE over as many pages across as it needs. A
    row with wrapped text gets the height of its lines. Call it once the sheets are written.
    """
    header = heading.replace("&", "&&")  # & starts a code (&P, &A...) in a header text
    for ws in wb.worksheets:
        layout = _layout(ws)
        ws.page_setup.orientation = "landscape"
        ws.page_setup.paperSize = ws.PAPERSIZE_A4
        ws.page_margins = PageMargins(**MARGINS)
        ws.oddHeader.left.text = header
        ws.oddHeader.right.text = "&A"
        ws.oddFooter.center.text = "Page &P of &N"
        _fit_wrapped_rows(ws)

        table_starts = {
            header_row - 1 if header_row - 1 in layout.titles else header_row: header_row
            for header_row in layout.tables
        }
        starts = sorted(set(table_starts) | set(layout.charts))
        if len(starts) <= 1 and ws.freeze_panes:
            _repeat_frozen_panes(ws)
        elif starts and starts[-1] in table_starts:
            ws.print_title_rows = f"{starts[-1]}:{table_starts[starts[-1]]}"
        for start in starts[1:]:
            # a break after row start - 1: the table (or chart) begins the next page
            ws.row_breaks.append(Break(id=start - 1))

        if print_scale(ws) >= MIN_PRINT_SCALE:
            ws.sheet_properties.pageSetUpPr.fitToPage = True
            ws.page_setup.fitToWidth = 1
            ws.page_setup.fitToHeight = 0  # as many pages down as the rows need
        else:
            ws.page_setup.scale = MIN_PRINT_SCALE


def print_scale(ws: Worksheet) -> int:
    """The scale (%) at which the sheet's columns and charts fill the printable page width,
    100 at most: an estimate from the column widths, as Excel and LibreOffice lay them out
    in the default font."""
    width = (
        sum(
            (ws.column_dimensions[get_column_letter(column)].width or _DEFAULT_COLUMN_WIDTH)
            for column in range(1, ws.max_column + 1)
        )
        * _PT_PER_CHARACTER
    )
    if _layout(ws).charts:
        width = max(width, _CHART_WIDTH_PT)  # add_chart anchors in column A
    return min(100, math.floor(100 * PRINTABLE_WIDTH_PT / width))


def _repeat_frozen_panes(ws: Worksheet) -> None:
    """The frozen rows (and columns) of the sheet repeat on every printed page."""
    if not ws.freeze_panes:
        return
    column, first_unfrozen_row = coordinate_from_string(ws.freeze_panes)
    if first_unfrozen_row > 1:
        ws.print_title_rows = f"1:{first_unfrozen_row - 1}"
    first_unfrozen_column = column_index_from_string(column)
    if first_unfrozen_column > 1:
        ws.print_title_cols = f"A:{get_column_letter(first_unfrozen_column - 1)}"


def _fit_wrapped_rows(ws: Worksheet) -> None:
    """Each row holding wrapped text as high as its lines in the column's final width: Excel
    keeps a row one line high when the file gives it no height, cutting the text. (A streamed
    table's rows are not in `ws`: StreamedRows refuses wrapped columns.)"""
    heights: dict[int, int] = {}
    for cell in _layout(ws).wrapped:
        width = ws.column_dimensions[cell.column_letter].width or _DEFAULT_COLUMN_WIDTH
        lines = _wrapped_lines(str(cell.value), width)
        heights[cell.row] = max(heights.get(cell.row, 1), lines)
    for row, lines in sorted(heights.items()):
        if lines > 1:
            ws.row_dimensions[row].height = lines * LINE_HEIGHT_PT


def _wrapped_lines(value: str, width: float) -> int:
    """Lines a text takes wrapped at word ends in a column `width` characters wide, with one
    character in ten to spare for wide letters and bold text."""
    per_line = max(1, math.floor((width - 1) * 0.9))
    lines = 0
    for paragraph in value.splitlines() or [""]:
        lines += 1
        length = 0  # of the line so far
        for word in paragraph.split(" "):
            if length and length + 1 + len(word) <= per_line:
                length += 1 + len(word)
                continue
            if length:
                lines += 1
            # a word longer than a line is broken over lines of its own
            extra = max(0, len(word) - 1) // per_line
            lines += extra
            length = len(word) - extra * per_line
    return lines


# --------------------------------------------------------------------------------------------
# Column widths
# --------------------------------------------------------------------------------------------


def fit_widths(
    widths: dict[int, int], cols: Sequence[Column], rows: Sequence[Sequence[Any]]
) -> dict[int, int]:
    """`widths` widened to fit the header and values of each column of `rows`."""
    columns = [[row[column] for row in rows] for column in range(len(cols))]
    return fit_widths_to(cols, columns, widths)


def fit_widths_to(
    cols: Sequence[Column], columns: Sequence[list[Any]], widths: dict[int, int] | None = None
) -> dict[int, int]:
    """Column widths from each column's values (or the values that decide its width)."""
    widths = {} if widths is None else widths
    for column, (col, values) in enumerate(zip(cols, columns, strict=True), start=1):
        if col.width is not None:
            width = col.width
        else:
            longest = _longest_display(values, col.kind)
            width = min(max(len(col.header), longest) + 2, _MAX_WIDTH)
        widths[column] = max(widths.get(column, _MIN_WIDTH), width)
    return widths


def current_widths(ws: Worksheet, columns: int) -> dict[int, int]:
    """The widths already set on columns 1..`columns` (0 where none), to widen further."""
    return {
        column: ws.column_dimensions[get_column_letter(column)].width or 0
        for column in range(1, columns + 1)
    }


def apply_widths(ws: Worksheet, widths: Mapping[int, int]) -> None:
    for column, width in sorted(widths.items()):
        ws.column_dimensions[get_column_letter(column)].width = width


def _display_len(value: Any, kind: str) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        if kind != "text" and value.startswith("="):
            return 10  # a formula shows its result, not its text
        return max((len(line) for line in value.splitlines()), default=0)
    fixed = {"timestamp": 16, "date": 10, "share": 7}
    if kind in fixed:
        return fixed[kind]
    if isinstance(value, int | float | Decimal):
        return len(f"{value:,.2f}")
    return len(str(value))


def _longest_display(values: list[Any], kind: str) -> int:
    """max(_display_len(v, kind) for v in values), without formatting every number: the
    width of f"{v:,.2f}" grows with |v| (and a minus sign), so the largest and the smallest
    number are the widest. A 200k-row sheet formatted 2.4 M numbers for its widths."""
    distinct = set(values)
    numbers = [v for v in distinct if isinstance(v, int | float | Decimal)]
    if numbers and kind not in ("timestamp", "date", "share"):
        distinct.difference_update(numbers)
        distinct.update((min(numbers), max(numbers)))
    return max((_display_len(value, kind) for value in distinct), default=0)
