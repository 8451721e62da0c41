"""The workbook's table layouts (reports/workbook_tables.yaml): how a named row is shown, and
the errors a wrong declaration gives."""

import datetime as dt
from collections import namedtuple

import pytest

from pipelines.reports import table_layouts
from pipelines.reports.sheets import Column
from pipelines.reports.table_layouts import TableLayout, table_layout

Incident = namedtuple("Incident", "cluster ended_at inferred job_ids down_s")

INCIDENTS = TableLayout.model_validate({
    "table": "incidents",
    "columns": [
        {"header": "Cluster ({label})", "field": "cluster"},
        {"header": "Ended ({currency})", "field": "ended_at", "kind": "timestamp",
         "show": "or_not_recorded"},
        {"header": "Inferred", "field": "inferred", "show": "yes_no"},
        {"header": "Jobs (first {incident_jobs_shown})", "field": "job_ids",
         "show": "first_incident_jobs", "width": 40},
        {"header": "Down (h)", "field": "down_s", "kind": "hours", "show": "hours_of_seconds"},
    ],
})  # fmt: skip


def test_a_row_is_shown_field_by_field():
    ids = [f"j{n}" for n in range(12)]
    records = [
        Incident("a", dt.datetime(2026, 11, 3, 4, 5), True, ids, 5400.0),
        Incident("b", None, None, ["k"], None),
    ]
    assert INCIDENTS.rows(records) == [
        ("a", dt.datetime(2026, 11, 3, 4, 5), "yes", "j0 j1 j2 j3 j4 j5 j6 j7 j8 j9", 1.5),
        ("b", "not recorded", None, "k", None),
    ]


def test_headers_are_filled_and_keep_kind_and_width():
    assert INCIDENTS.header(currency="EUR", label="Node") == [
        Column("Cluster (Node)"),
        Column("Ended (EUR)", "timestamp"),
        Column("Inferred"),
        Column("Jobs (first 10)", "text", 40),
        Column("Down (h)", "hours"),
    ]


def test_the_file_declares_the_finance_tables():
    users = table_layout("user_efficiency")
    assert users.table == "user_efficiency"
    # the summed columns of the Users sheet, and where a flag and a percentage land
    assert users.totals() == {
        5: "hours",
        7: "hours",
        8: "hours",
        9: "hours",
        13: "hours",
        14: "hours",
    }
    assert table_layout("quota_compliance").column_of("breach") == 18
    Row = namedtuple("Row", [c.field for c in users.columns])
    row = Row("t1", "Team", "ann", 3, 10.0, 42.5, 1.0, 2.0, 3.0, 50.0, 25.0, 80.0, 4.0, 1.5,
              False, "j1 (3.00)")  # fmt: skip
    assert users.rows([row]) == [
        ("t1", "Team", "ann", 3, 10.0, 0.425, 1.0, 2.0, 3.0, 50.0, 0.25, 0.8, 4.0, 1.5, "no",
         "j1 (3.00)")
    ]  # fmt: skip
    assert table_layout("cost_views").totals() == {
        4: "hours", 5: "hours", 6: "money", 7: "money", 8: "money", 9: "hours", 10: "money"
    }  # fmt: skip
    assert table_layout("rejects").totals() is None


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ({"header": "H", "field": "f", "kind": "percent"}, "kind 'percent' is not one of text"),
        ({"header": "H", "field": "f", "show": "pct"}, "show 'pct' is not one of share, yes_no"),
        ({"header": "H", "field": "f", "format": "x"}, "format\n  Extra inputs are not permitted"),
        ({"header": "H", "field": "f", "total": True}, "'H': a total needs kind money or hours"),
        ({"header": "H"}, "columns.0.field\n  Field required"),
    ],
)  # fmt: skip
def test_a_wrong_declaration_is_named(tmp_path, monkeypatch, column, message):
    layouts = tmp_path / "workbook_tables.yaml"
    layouts.write_text(
        "fine:\n  table: t\n  columns: [{header: A, field: a}]\n"
        f"broken:\n  table: t\n  columns: [{column}]\n".replace("'", '"').replace("True", "true"),
        encoding="utf-8",
    )
    monkeypatch.setattr(table_layouts, "LAYOUTS_FILE", layouts)
    table_layouts._layouts.cache_clear()
    try:
        with pytest.raises(ValueError, match="^workbook_tables.yaml: table broken: ") as error:
            table_layout("fine")
        assert message in str(error.value)
    finally:
        table_layouts._layouts.cache_clear()
