"""The canonical jobs/allocations CSV: the table fast path (Arrow's CSV reader) gives exactly
the rows of the row reader, and leaves to it the files whose rows and lines do not pair up."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipelines.formats import canonical

COLUMNS = ("job_id", "node", "gpu_index")

# quoted fields (a comma and a doubled quote inside), padding, a blank field, blank lines,
# a column nobody reads, CRLF line endings
AWKWARD = (
    '"job_id", Node ,gpu_index,extra\r\n"1","n1",0,"x, ""y"""\r\n\r\n2, n2 ,,y\r\n   ,n3,1,\r\n\r\n'
)


def rows_of_reader(path) -> list[dict]:
    return [
        {name: row.get(name) for name in (*COLUMNS, "line", "raw", "parse_error")}
        for row in canonical.read_rows(path, COLUMNS)
    ]


def test_the_table_fast_path_gives_the_rows_of_the_row_reader(tmp_path):
    path = tmp_path / "allocations.csv"
    path.write_bytes(AWKWARD.encode())
    table = canonical.read_table(path, COLUMNS)
    assert table.column_names == [*COLUMNS, "line", "raw", "parse_error"]
    assert table.schema.field("line").type == pa.int64()
    assert table.to_pylist() == rows_of_reader(path)
    assert table.to_pylist() == [
        {"job_id": "1", "node": "n1", "gpu_index": "0", "line": 2, "raw": '1,n1,0,x, "y"',
         "parse_error": None},
        {"job_id": "2", "node": "n2", "gpu_index": None, "line": 4, "raw": "2, n2 ,,y",
         "parse_error": None},
        {"job_id": None, "node": "n3", "gpu_index": "1", "line": 5, "raw": "   ,n3,1,",
         "parse_error": None},
    ]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "job_id,node,gpu_index\n1,n1,0\n2,n2\n",
        "job_id,node,gpu_index\n1,n1,0,9\n",
        'job_id,node,gpu_index\n1,"n\n1",0\n',
        "job_id,node,gpu_index\r1,n1,0\r",
    ],
    ids=["short row", "long row", "line break in quotes", "carriage returns only"],
)
def test_files_whose_rows_and_lines_do_not_pair_up_go_to_the_row_reader(tmp_path, text):
    path = tmp_path / "allocations.csv"
    path.write_bytes(text.encode())
    assert canonical.read_table(path, COLUMNS) is None
    assert rows_of_reader(path)[0]["job_id"] == "1"


# Found by tests/formats/test_reader_properties.py: each once lost or crashed on rows.


def test_a_1_mb_field_is_a_field_not_a_crash(tmp_path):
    # csv's default limit (128 KiB) raised `field larger than field limit` mid-file
    path = tmp_path / "allocations.csv"
    path.write_text(f"job_id,node,gpu_index\n1,n1,0\n2,{'x' * 2**20},1\n3,n3,2\n")
    rows = rows_of_reader(path)
    assert [(row["line"], row["node"], row["parse_error"]) for row in rows] == [
        (2, "n1", None),
        (3, "x" * 2**20, None),
        (4, "n3", None),
    ]
    table = canonical.read_table(path, COLUMNS)
    assert table is None or table.to_pylist() == rows


def test_a_line_of_spaces_is_blank_not_a_rejected_row(tmp_path):
    # it was a row of one field ("expected 3 fields, found 1"), unlike a blank line
    path = tmp_path / "allocations.csv"
    path.write_text("job_id,node,gpu_index\n1,n1,0\n   \n\t\n2,n2,1\n")
    assert [(row["line"], row["job_id"]) for row in rows_of_reader(path)] == [(2, "1"), (5, "2")]
    assert canonical.read_table(path, COLUMNS) is None  # Arrow would see a row there


NEVER_CLOSES = "its opening quote never closes (a stray '\"'?)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the quote took every later line into one field of one rejected row
        ("job_id,node,gpu_index\n1,n1,0\n2,\"n2,1\n3,n3,2\n4,n4,3\n",
         [(2, None), (3, f"field node: {NEVER_CLOSES}"), (4, None), (5, None)]),
        # in the last column the swallowing row had the header's field count
        ("job_id,node,gpu_index\n1,n1,\"0\n2,n2,1\n",
         [(2, f"field gpu_index: {NEVER_CLOSES}"), (3, None)]),
        # on the last line, with or without its line end
        ("job_id,node,gpu_index\n1,n1,0\n2,n2,\"1\n",
         [(2, None), (3, f"field gpu_index: {NEVER_CLOSES}")]),
        ("job_id,node,gpu_index\n1,n1,0\n2,n2,\"1",
         [(2, None), (3, f"field gpu_index: {NEVER_CLOSES}")]),
        ("job_id,node,gpu_index\n1,n1,0\n\"", [(2, None), (3, f"field job_id: {NEVER_CLOSES}")]),
        # in the header: the header is its first line, the rows still come line by line
        ("job_id,\"node,gpu_index\n1,n1,0\n2,n2,1\n",
         [(2, "expected 2 fields, found 3"), (3, "expected 2 fields, found 3")]),
        # a line break inside a closed quoted field stays one row
        ("job_id,node,gpu_index\n1,\"n\n1\",0\n2,n2,1\n", [(2, None), (4, None)]),
    ],
    ids=["a middle field", "the last field", "the last line", "the last line without its end",
         "a quote alone", "the header", "a closed quote"],
)  # fmt: skip
def test_a_stray_quote_rejects_its_line_not_the_rest_of_the_file(tmp_path, text, expected):
    path = tmp_path / "allocations.csv"
    path.write_text(text)
    rows = rows_of_reader(path)
    assert [(row["line"], row["parse_error"]) for row in rows] == expected
    table = canonical.read_table(path, COLUMNS)  # Arrow closed a quote left open at the end
    assert table is None or table.to_pylist() == rows


# The fast path checks the file's bytes and finds its blank lines without decoding it (a 336 MB
# export peaked at 2.5 GB RSS as Python strings): the same rows and line numbers as the row
# reader, or none.


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        # empty lines (CRLF too) inside the file and after its last row
        ("job_id,node,gpu_index\r\n1,n1,0\r\n\r\n\r\n2,n2,1\r\n\r\n\r\n", [2, 5]),
        # no line end after the last row; U+FFFD written in the file is text like any other
        ("job_id,node,gpu_index\n1,n\ufffd1,0\n\n2,n2,1", [2, 4]),
    ],
    ids=["empty lines", "no last line end"],
)  # fmt: skip
def test_the_fast_path_numbers_lines_as_the_row_reader(tmp_path, text, lines):
    path = tmp_path / "allocations.csv"
    path.write_bytes(text.encode())
    rows = rows_of_reader(path)
    assert [row["line"] for row in rows] == lines
    assert canonical.read_table(path, COLUMNS).to_pylist() == rows


@pytest.mark.parametrize("space", ["\u00a0", "\u3000", "\u2028", " \t\x1f"])
def test_a_line_of_unicode_white_space_is_blank_on_both_paths(tmp_path, space):
    # one column: Arrow reads the line as a row of one field, the row reader skips it as blank;
    # so the fast path must count it blank too and give the file to the row reader
    path = tmp_path / "allocations.csv"
    path.write_bytes(f"job_id\n1\n{space}\n2\n".encode())
    rows = rows_of_reader(path)
    assert [(row["line"], row["job_id"]) for row in rows] == [(2, "1"), (4, "2")]
    assert canonical.read_table(path, COLUMNS) is None


@pytest.mark.parametrize(
    "data",
    [
        # a stray quote on the last row, then blank lines: found from the end, past them
        b'job_id,node,gpu_index\n1,n1,0\n2,n2,"1\n\n \n',
        # bytes that are not UTF-8 (the row reader reads them as U+FFFD)
        b"job_id,node,gpu_index\n1,n\xff1,0\n",
        b"job_id,n\xffode,gpu_index\n1,n1,0\n",
        # a NUL
        b"job_id,node,gpu_index\n1,n\x001,0\n",
    ],
    ids=["stray quote before blank lines", "not UTF-8", "not UTF-8 in the header", "NUL"],
)
def test_the_fast_path_leaves_what_it_cannot_pair_up_to_the_row_reader(tmp_path, data):
    path = tmp_path / "allocations.csv"
    path.write_bytes(data)
    assert canonical.read_table(path, COLUMNS) is None
    assert [row["line"] for row in rows_of_reader(path)][:1] == [2]
