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
