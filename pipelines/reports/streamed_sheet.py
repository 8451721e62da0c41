"""The streamed XLSX sheet: a worksheet that is one table whose rows come from a DuckDB query,
its XML part written whole by this module.

openpyxl builds an object per cell and serialises it on its own (~13 µs a cell): the 200k job
lines of a 1,000-GPU month took over two minutes a workbook, and formatting them cell by cell
in Python still took most of the workbook's time (XlsxWriter, measured, is ~13x slower than
this on the job lines). DuckDB writes each row's XML instead (`_row_xml_sql`), as openpyxl
writes cells: inline strings, numbers as "%.16g", dates as Excel serial numbers, each column
with its table style. tests/reports/test_streamed_rows.py pins the part to the one openpyxl
writes for the same sheet: the same cells read back, and the same bytes but for two spellings
of the same XML (text in UTF-8 where openpyxl writes character references, an empty text as
`<c .../>` where it writes `<c ...></c>`).

The worksheet stays in the openpyxl workbook with the table's header row and the sheet's
settings (column widths, frozen header, filter, print setup with its header and footer): the
workbook's own parts (sheet list, defined names such as the print titles, styles) come from
it. `sheet_xml` writes the sheet's part from those settings, the header row and the query's
rows; `pipelines.reports.package` stores it in the package in place of the part openpyxl
writes for the worksheet.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

import duckdb
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet
from openpyxl.xml.functions import tostring

from pipelines.reports.sheets import (
    MAX_CELL_CHARS,
    STYLE_OF_KIND,
    TEXT_KINDS,
    Column,
    named_style_id,
    ref,
)

_SHEET_NAMESPACE = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"


@dataclass(frozen=True)
class RowsQuery:
    """A select whose rows a sheet's table streams (`sql` without ORDER BY; `order_by` orders
    them, and must order them completely: the workbook's bytes follow it)."""

    con: duckdb.DuckDBPyConnection
    sql: str
    params: Mapping[str, Any]  # bound by name, as pipelines.sql.bind gives them
    order_by: str


@dataclass(frozen=True)
class StreamedRows:
    """The rows of a worksheet's table, below the header row the worksheet holds."""

    sheet: str  # its title
    first_row: int
    count: int
    width_values: list[list[Any]]  # per column, the values that decide its width
    query: RowsQuery
    row_xml_sql: str  # one <row> element per row, in order

    @classmethod
    def below_header(cls, ws: Worksheet, cols: Sequence[Column], query: RowsQuery) -> StreamedRows:
        relation = query.con.sql(query.sql, params=query.params)
        types = [str(t) for t in relation.types]
        if len(types) != len(cols):
            raise ValueError(f"{ws.title}: {len(cols)} columns, the query has {len(types)}")
        columns = []
        for column, (col, name, sql_type) in enumerate(
            zip(cols, relation.columns, types, strict=True), start=1
        ):
            if col.kind == "wrap":
                # its rows are written without heights: wrapped text would be cut (Excel)
                raise TypeError(f"{ws.title}: a streamed table cannot wrap text ({col.header})")
            style = STYLE_OF_KIND.get(col.kind)
            style_id = named_style_id(ws, style) if style is not None else None
            columns.append((name, sql_type, get_column_letter(column), col.kind, style_id))
        first_row = ws.max_row + 1
        row_xml = _row_xml_sql(query, columns, first_row)  # checks the columns' types
        count, width_values = _count_and_width_values(query, columns)
        return cls(ws.title, first_row, count, width_values, query, row_xml)

    @property
    def last_row(self) -> int:
        return self.first_row + self.count - 1

    def xml_chunks(self, rows_per_chunk: int = 2000) -> Iterator[str]:
        rows = self.query.con.sql(self.row_xml_sql, params=self.query.params)
        for batch in rows.to_arrow_reader(rows_per_chunk):
            yield "".join(batch.column(0).to_pylist())


def sheet_xml(ws: Worksheet, rows: StreamedRows) -> Iterator[str]:
    """The whole XML part of worksheet `ws`: its settings, its header row and `rows`.

    Written in the order of the sheet schema, as openpyxl writes a worksheet: each setting is
    the serialisation of the worksheet's own settings object (what openpyxl would write for
    it); the header row and the rows are written here. A worksheet holding anything else
    (cells below the header, merged cells, tables, ...) is refused: its part would lose it.
    """
    _check_only_a_table(ws, rows)
    last_row = max(rows.last_row, ws.max_row)
    dimension = ref(ws.min_row, ws.min_column, last_row, ws.max_column)
    yield f'<worksheet xmlns="{_SHEET_NAMESPACE}">'
    yield _setting(ws.sheet_properties)
    yield f'<dimension ref="{dimension}"/>'
    yield _setting(ws.views)
    yield _setting(ws.sheet_format)
    cols = ws.column_dimensions.to_tree()
    if cols is not None:
        yield tostring(cols).decode()
    yield "<sheetData>"
    for row in ws.iter_rows(max_row=rows.first_row - 1):
        yield _text_row_xml(row)
    yield from rows.xml_chunks()
    yield "</sheetData>"
    # in the schema's order, as openpyxl's writer: filter, margins, page setup, header/footer
    # (the print titles are defined names of the workbook part, written by openpyxl)
    for setting in (ws.auto_filter, ws.page_margins, ws.page_setup, ws.HeaderFooter):
        if setting:
            yield _setting(setting)
    yield "</worksheet>"


def _setting(obj: Any) -> str:
    # in ASCII with character references, as openpyxl (through lxml) writes a part: a header
    # or footer text may hold any character
    return tostring(obj.to_tree()).decode().encode("ascii", "xmlcharrefreplace").decode()


def _check_only_a_table(ws: Worksheet, rows: StreamedRows) -> None:
    if ws.max_row >= rows.first_row:
        raise ValueError(f"{rows.sheet}: streamed rows overlap row {ws.max_row}")
    others = {
        "merged cells": ws.merged_cells.ranges,
        "tables": ws.tables,
        "conditional formatting": list(ws.conditional_formatting),
        "data validations": ws.data_validations.dataValidation,
        "print options": ws.print_options,
        "page breaks": ws.row_breaks or ws.col_breaks,
        "protection": ws.protection,
    }
    found = [name for name, value in others.items() if value]
    if found:
        raise ValueError(f"{rows.sheet}: a streamed sheet holds one table, not {found}")


def _text_row_xml(cells: Sequence[Any]) -> str:
    """A row of text cells as openpyxl (through lxml) writes them: inline strings, the text
    in ASCII with character references, outer whitespace marked to be kept."""
    written = []
    for cell in cells:
        if cell.value is None and not cell.has_style:
            continue
        if cell.data_type != "s":
            raise TypeError(f"{cell.coordinate}: a streamed sheet's header holds text only")
        style = f' s="{cell.style_id}"' if cell.has_style else ""
        head = f'<c r="{cell.coordinate}"{style} t="inlineStr"'
        text = cell.value
        if text is None or text == "":
            written.append(f"{head}></c>")
            continue
        space = ' xml:space="preserve"' if text != text.strip() else ""
        body = escape(text, {"\r": "&#13;"}).encode("ascii", "xmlcharrefreplace").decode()
        written.append(f"{head}><is><t{space}>{body}</t></is></c>")
    return f'<row r="{cells[0].row}">{"".join(written)}</row>' if written else ""


# The characters str.strip() removes that cell_text leaves in a text: a text that starts or
# ends with one is marked xml:space="preserve" (Excel drops outer whitespace otherwise)
_STRIPPED = "".join(
    c for c in map(chr, range(0x3001)) if c.isspace() and not ILLEGAL_CHARACTERS_RE.match(c)
)
# openpyxl's ILLEGAL_CHARACTERS_RE: its characters, and as an RE2 class for DuckDB
_ILLEGAL_CODES = [code for code in range(0x20) if ILLEGAL_CHARACTERS_RE.match(chr(code))]
_ILLEGAL_RE2 = "[" + "".join(f"\\x{code:02x}" for code in _ILLEGAL_CODES) + "]"
_NUMBER_TYPES = re.compile(
    r"(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT"
    r"|FLOAT|DOUBLE|DECIMAL\(\d+,\d+\))"
)


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _sql_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _row_xml_sql(
    query: RowsQuery, columns: Sequence[tuple[str, str, str, str, int | None]], first_row: int
) -> str:
    """The select of each row's XML, in order: each cell as cell_text, xml_escape and
    openpyxl's writer make it (tests/reports/test_streamed_rows.py compares the two). Each
    value is made ready once (its cell text, or its number as a double), then written."""
    ready, cells, texts = [], [], []
    for index, (name, sql_type, letter, kind, style_id) in enumerate(columns):
        value, ready_value = _sql_name(name), f"v{index}"
        style = "" if style_id is None else f' s="{style_id}"'
        cell = functools.partial(_cell_sql, letter, style)
        if kind in TEXT_KINDS:
            if sql_type != "VARCHAR":
                raise TypeError(f"column {letter} ({kind}): {sql_type} is not text")
            texts.append(value)
            ready.append(f"{_cell_text_sql(value)} as {ready_value}")
            cells.append(_text_cell_sql(ready_value, cell))
        else:
            ready.append(f"{_number_sql(value, sql_type, letter, kind)} as {ready_value}")
            # not-finite numbers: openpyxl writes an empty value
            number = f"case when isfinite({ready_value}) then printf('%.16g', {ready_value}) end"
            written = cell(' t="n"><v>', number, _sql_text("</v></c>"))
            cells.append(f"case when {ready_value} is null then '' else {written} end")
    # one pattern match per row tells the (rare) rows with characters to spell out
    has_control = (
        f"regexp_matches(concat({', '.join(texts)}), '{_ILLEGAL_RE2}')" if texts else "false"
    )
    return (
        f"select concat('<row r=\"', _r, '\">', {', '.join(cells)}, '</row>') as xml "
        f"from (select _r, {', '.join(ready)} from ("
        f"select *, {first_row - 1} + row_number() over (order by {query.order_by}) as _r, "
        f"{has_control} as _has_control from ({query.sql}))) order by _r"
    )


def _cell_sql(letter: str, style: str, type_and_value: str, *pieces: str) -> str:
    """A cell of column `letter` in row _r: its head, `type_and_value` (XML text), then
    `pieces` (SQL), in one concat(): a chain of || copies the text so far at every step,
    and the rows' XML took twice as long."""
    head = [_sql_text(f'<c r="{letter}'), "_r", _sql_text(f'"{style}{type_and_value}')]
    return f"concat({', '.join(head + list(pieces))})"


def _cell_text_sql(value: str) -> str:
    """cell_text of a VARCHAR `value`: the characters XML cannot hold spelled out (\\x01),
    then cut at Excel's limit. `_has_control`: the row has such characters somewhere."""
    spelled = value
    for code in _ILLEGAL_CODES:
        spelled = f"replace({spelled}, chr({code}), '\\x{code:02x}')"
    cleaned = (
        f"(case when _has_control and regexp_matches({value}, '{_ILLEGAL_RE2}') "
        f"then {spelled} else {value} end)"
    )
    return (
        f"case when length({cleaned}) > {MAX_CELL_CHARS} "
        f"then left({cleaned}, {MAX_CELL_CHARS - 14}) || ' [truncated]' else {cleaned} end"
    )


def _text_cell_sql(text: str, cell: Callable[..., str]) -> str:
    """An inline-string cell of `text` (a cell_text), as openpyxl writes it."""
    escaped = f"replace(replace(replace({text}, '&', '&amp;'), '<', '&lt;'), '>', '&gt;')"
    # a text that str.strip() would change (it is not empty here): its first or last character
    stripped = _sql_text(_STRIPPED)
    space = (
        f"case when contains({stripped}, left({text}, 1)) "
        f"or contains({stripped}, right({text}, 1)) then ' xml:space=\"preserve\"' else '' end"
    )
    empty = cell(' t="inlineStr"/>')
    written = cell(' t="inlineStr"><is><t', space, "'>'", escaped, "'</t></is></c>'")
    return f"case when {text} is null then '' when {text} = '' then {empty} else {written} end"


def _number_sql(value: str, sql_type: str, letter: str, kind: str) -> str:
    """The double a number or date column's cell holds, as openpyxl computes it."""
    if sql_type in ("DATE", "TIMESTAMP"):
        # openpyxl's to_excel: days since 1899-12-30 (one less up to 1900-02-28, Excel's 1900
        # leap day) + the time of day as (seconds + µs / 10^6) / 86400, in that order
        days = f"date_diff('day', DATE '1899-12-30', {value}::date)"
        seconds = (
            f"(hour({value}) * 3600 + minute({value}) * 60 + second({value}))::double"
            f" + (microsecond({value}) % 1000000)::double / 1000000.0"
        )
        return (
            f"({days} - case when {days} > 0 and {days} <= 60 then 1 else 0 end)::double"
            f" + ({seconds}) / 86400.0"
        )
    if _NUMBER_TYPES.fullmatch(sql_type):
        # "%.16g" of the double: openpyxl formats a Decimal as the float it converts to
        return f"{value}::double"
    raise TypeError(f"column {letter} ({kind}): {sql_type} is not a number or date")


# The characters str.splitlines() breaks lines at, as an RE2 class
_LINE_BREAKS_RE2 = r"[\n\r\x0b\x0c\x1c\x1d\x1e\x{85}\x{2028}\x{2029}]"


def _count_and_width_values(
    query: RowsQuery, columns: Sequence[tuple[str, str, str, str, int | None]]
) -> tuple[int, list[list[Any]]]:
    """The query's row count and, per column, the values that decide its width (see
    sheets.fit_widths_to): of the texts, the longest one-line text (its display length is its
    length: DuckDB's length() counts code points, as len() does) and every text with a line
    break or a leading '=' (displayed otherwise); the smallest and largest finite number; any
    one date. One pass over the rows, and no 200k job ids sent to Python."""
    picks = ["count(*)"]
    for name, sql_type, _, kind, _ in columns:
        value = _sql_name(name)
        if kind in TEXT_KINDS:
            special = (
                f"(regexp_matches({value}, '{_LINE_BREAKS_RE2}') or starts_with({value}, '='))"
            )
            picks.append(
                f"list_prepend(arg_max({value}, length({value})) filter (not {special}), "
                f"coalesce(list(distinct {value}) filter ({special}), []))"
            )
        else:
            finite = f"isfinite({value})" if sql_type in ("FLOAT", "DOUBLE") else "true"
            picks.append(f"[min({value}) filter ({finite}), max({value}) filter ({finite})]")
    [(count, *per_column)] = query.con.execute(
        f"select {', '.join(picks)} from ({query.sql})", query.params
    ).fetchall()
    return count, [[v for v in values if v is not None] if values else [] for values in per_column]
