"""The finance workbook: layout, totals as formulas that tie out, reproducible bytes."""

import csv
import datetime as dt
import hashlib
import re
import shutil
import subprocess
import zipfile
from decimal import Decimal

import duckdb
import openpyxl
import pytest
from openpyxl.utils.cell import range_boundaries

from pipelines.defs.reports import workbook
from pipelines.defs.reports.workbook import write_chargeback_workbook

NOV = dt.date(2026, 11, 1)
OCT = dt.date(2026, 10, 1)

PARAMETERS = {
    "currency": "USD",
    "billing_timezone": "UTC",
    "cost_mode": "rate_card",
    "idle_threshold_pct": "5",
    "zombie_min_hours": "2",
    "month_start": "2026-11-01T00:00:00+00:00",
    "month_end": "2026-12-01T00:00:00+00:00",
    "catalog_dir": "data/catalog",
    "landing_dir": "data/landing",
    "code_version": "0.1.0+g1234abc",
}

RND_NAME = "Forschung & Entwicklung — Ångström"

DDL = [
    """create table charge_lines (billing_month date, tenant_id varchar, tenant_name varchar,
    department varchar, cost_center varchar, cluster varchar, gpu_model varchar,
    charge_category varchar, charge_class varchar, charge_description varchar,
    gpu_hours double, unit_price decimal(18,6), amount decimal(18,2), currency varchar)""",
    """create table tenant_month (billing_month date, tenant_id varchar, tenant_name varchar,
    department varchar, cost_center varchar, owner varchar, jobs bigint,
    allocated_gpu_hours double, measured_gpu_hours double, productive_gpu_hours double,
    idle_gpu_hours double, zombie_gpu_hours double, failed_job_gpu_hours double,
    failed_infra_gpu_hours double, unmeasured_gpu_hours double, mean_util_pct double,
    amount decimal(18,2), currency varchar, budget decimal(18,2), budget_used_pct double,
    budget_status varchar, quota_flags varchar)""",
    """create table job_usage (billing_month date, cluster varchar, job_id varchar,
    tenant_id varchar, account varchar, "user" varchar, queue varchar, gpu_model varchar,
    state varchar, gpus double, submit_at timestamp, start_at timestamp, end_at timestamp,
    allocated_gpu_hours double, measured_gpu_hours double, mean_util_pct double,
    productive_gpu_hours double, idle_gpu_hours double, zombie_gpu_hours double,
    failed_job_gpu_hours double, failed_infra_gpu_hours double, unmeasured_gpu_hours double,
    amount decimal(18,2), currency varchar)""",
    """create table capacity_buckets (billing_month date, cluster varchar, gpu_model varchar,
    bucket varchar, gpu_hours double, gpu_ms bigint)""",
    """create table data_quality (billing_month date, cluster varchar, category varchar,
    subject varchar, rows_read bigint, rows_loaded bigint, rows_rejected bigint,
    duplicates_folded bigint, value double, detail varchar)""",
    """create table rejects (billing_month date, file varchar, line bigint, reason varchar,
    raw varchar)""",
]

# (tenant_id, name, department, cost_center, cluster, model, category, class, description,
#  gpu_hours, unit_price, amount)
CHARGE_LINES = [
    ("chaff", "Chaffinch Lab", "Biology", "CC-1001", "phillips", "A100-80GB", "Usage", None,
     "A100 GPU-hours", 476.190476, "2.100000", "1000.00"),
    ("chaff", "Chaffinch Lab", "Biology", "CC-1001", "phillips", "A100-80GB", "Credit", None,
     "failed_infra credit", -7.352381, "2.100000", "-15.44"),
    ("chaff", "Chaffinch Lab", "Biology", "CC-1001", "kube", "H100", "Usage", None,
     "=HYPERLINK(\"http://x\")", 83.333333, "3.000000", "250.00"),
    ("r&d", RND_NAME, "Physik", "CC-2002", "phillips", "A100-80GB", "Usage", None,
     "A100 GPU-hours", 333.333333, "2.100000", "700.00"),
    ("r&d", RND_NAME, "Physik", "CC-2002", "phillips", "A100-80GB", "Usage", "Correction",
     "restated October", 42.385714, "2.100000", "89.01"),
    ("unmapped", "unmapped", "", "", "kube", "H100", "Usage", None,
     "H100 GPU-hours", 3.476667, "3.000000", "10.43"),
]  # fmt: skip
TOTAL = Decimal("2034.00")
TENANT_AMOUNTS = {
    "Chaffinch Lab": Decimal("1234.56"),
    RND_NAME: Decimal("789.01"),
    "unmapped": Decimal("10.43"),
}

# (tenant_id, name, dept, cc, allocated, productive, idle, zombie, failed_job, failed_infra,
#  unmeasured, amount, budget, status)
TENANTS = [
    ("chaff", "Chaffinch Lab", "Biology", "CC-1001", 552.0, 400.0, 80.0, 30.0, 20.0, 7.0,
     15.0, "1234.56", "1000.00", "over"),
    ("r&d", RND_NAME, "Physik", "CC-2002", 375.0, 300.0, 20.0, 20.0, 0.0, 3.0, 32.0,
     "789.01", "900.00", "warn"),
    ("unmapped", "unmapped", "", "", 3.5, 0.0, 0.0, 0.0, 0.0, 0.0, 3.5, "10.43", None,
     "no budget"),
]  # fmt: skip

BUCKETS = {
    "capacity": 1000.0,
    "productive": 400.0,
    "idle": 100.0,
    "zombie": 50.0,
    "failed_job": 20.0,
    "failed_infra": 10.0,
    "unmeasured": 20.0,
    "down": 100.0,
    "unallocated": 300.0,
}


def _ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@pytest.fixture
def con(tmp_path):
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    for statement in DDL:
        con.execute(statement)
    for line in CHARGE_LINES:
        con.execute(
            "insert into charge_lines values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'USD')",
            [NOV, *line],
        )
    # Another month must never leak into this month's workbook.
    con.execute(
        "insert into charge_lines values (?, 'chaff', 'Chaffinch Lab', 'Biology', 'CC-1001', "
        "'phillips', 'A100-80GB', 'Usage', null, 'x', 1.0, 2.1, 999.99, 'USD')",
        [OCT],
    )
    for t in TENANTS:
        con.execute(
            "insert into tenant_month values (?, ?, ?, ?, ?, 'lead@example.com', 1, ?, ?, ?, ?,"
            " ?, ?, ?, ?, 50.0, ?, 'USD', ?, null, ?, null)",
            [NOV, *t[:5], t[4] - t[10], *t[5:]],
        )
    jobs = [
        ("phillips", "10", "chaff", "chaff", "ann", "gpu", "A100-80GB", "COMPLETED", 4.0,
         "2026-11-02 08:00:00", "2026-11-02 09:30:00", "2026-11-03 09:30:00", 96.0, "201.60"),
        ("phillips", "9", "chaff", "chaff", "bob", "gpu", "A100-80GB", "FAILED", 1.0,
         "2026-11-05 10:00:00", "2026-11-05 10:00:00", "2026-11-05 12:00:00", 2.0, "4.20"),
        ("kube", "pod-1", "r&d", "ns-rd", "zoë", "default", "H100", "RUNNING", 0.142857,
         "2026-11-30 22:00:00", "2026-11-30 23:00:00", "2026-12-01 00:00:00", 0.142857, "0.43"),
    ]  # fmt: skip
    for j in jobs:
        con.execute(
            "insert into job_usage values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 42.5, "
            "?, 0, 0, 0, 0, 0, ?, 'USD')",
            [NOV, *j[:9], _ts(j[9]), _ts(j[10]), _ts(j[11]), j[12], j[12], j[12], j[13]],
        )
    for bucket, hours in BUCKETS.items():
        con.execute(
            "insert into capacity_buckets values (?, 'phillips', 'A100-80GB', ?, ?, ?)",
            [NOV, bucket, hours, int(hours * 3_600_000)],
        )
    con.execute(
        "insert into data_quality values "
        "(?, 'phillips', 'file', 'scheduler/phillips/sacct-1.log', 10, 8, 2, 1, null, null),"
        "(?, 'kube', 'unmapped_account', 'ns-x', null, null, null, null, 3.5, 'GPU-hours'),"
        "(?, 'phillips', 'telemetry_coverage', 'phillips', null, null, null, null, 0.93, null)",
        [NOV, NOV, NOV],
    )
    con.execute(
        "insert into rejects values "
        "(?, 'scheduler/phillips/sacct-1.log', 7, 'bad time', 'x|y|\x07bell'),"
        "(?, 'scheduler/phillips/sacct-1.log', 3, 'too few fields', '=1+1'),"
        "(?, 'scheduler/phillips/old.log', 1, 'october', 'zzz')",
        [NOV, NOV, OCT],
    )
    yield con
    con.close()


@pytest.fixture
def written(con, tmp_path):
    out = tmp_path / "reports" / "2026-11" / "chargeback-2026-11.xlsx"
    result = write_chargeback_workbook(con, NOV, PARAMETERS, out)
    return out, result, openpyxl.load_workbook(out)


# A tiny evaluator for the formulas the workbook uses: =SUM(range), =ref, =ref-ref, =ref/ref.
_REF = r"(?:('[^']+'|[A-Za-z_][\w ]*)!)?(\$?[A-Z]+\$?\d+)"


def _value(wb, sheet, coordinate):
    cell = wb[sheet][coordinate.replace("$", "")]
    if isinstance(cell.value, str) and cell.value.startswith("="):
        return _evaluate(wb, sheet, cell.value)
    return Decimal(str(cell.value))


def _evaluate(wb, sheet, formula):
    body = formula[1:]
    if m := re.fullmatch(r"SUM\(([A-Z]+\d+:[A-Z]+\d+)\)", body):
        min_col, min_row, max_col, max_row = range_boundaries(m.group(1))
        ws = wb[sheet]
        total = Decimal(0)
        for row in ws.iter_rows(min_row, max_row, min_col, max_col):
            for cell in row:
                total += _value(wb, sheet, cell.coordinate) if cell.value is not None else 0
        return total
    if m := re.fullmatch(rf"{_REF}([-/]){_REF}", body):
        left = _ref_value(wb, sheet, m.group(1), m.group(2))
        right = _ref_value(wb, sheet, m.group(4), m.group(5))
        return left - right if m.group(3) == "-" else left / right
    if m := re.fullmatch(_REF, body):
        return _ref_value(wb, sheet, m.group(1), m.group(2))
    raise AssertionError(f"unexpected formula {formula}")


def _ref_value(wb, sheet, ref_sheet, cell):
    return _value(wb, (ref_sheet or sheet).strip("'"), cell)


def _row_of(ws, text, column=1):
    rows = [c.row for c in ws[openpyxl.utils.get_column_letter(column)] if c.value == text]
    assert len(rows) == 1, (text, rows)
    return rows[0]


def test_sheet_names_in_order(written):
    _, _, wb = written
    assert wb.sheetnames == [
        "Summary",
        "Charges",
        "Job lines",
        "Waste",
        "Data quality",
        "Definitions",
    ]


def test_result_figures(written):
    out, result, _ = written
    assert result["total_amount"] == TOTAL
    assert isinstance(result["total_amount"], Decimal)
    assert result["tenant_total_amount"] == TOTAL
    assert result["charge_lines"] == 6
    assert result["job_lines"] == 3
    assert result["tenants"] == 3
    assert (result["rejects"], result["rejects_shown"]) == (2, 2)
    assert result["path"] == str(out)


def test_summary_total_is_a_sum_over_exactly_the_tenant_rows(written):
    _, _, wb = written
    ws = wb["Summary"]
    header = _row_of(ws, "Tenant")
    total = _row_of(ws, "TOTAL")
    assert ws.cell(header, 5).value == "Amount (USD)"
    assert ws[f"E{total}"].value == f"=SUM(E{header + 1}:E{total - 1})"
    tenant_rows = range(header + 1, total)
    assert [ws[f"A{r}"].value for r in tenant_rows] == [
        "Chaffinch Lab",
        RND_NAME,
        "unmapped",
    ]  # sorted by amount, descending
    assert {ws[f"A{r}"].value: Decimal(str(ws[f"E{r}"].value)) for r in tenant_rows} == (
        TENANT_AMOUNTS
    )
    assert _evaluate(wb, "Summary", ws[f"E{total}"].value) == TOTAL
    assert ws[f"D{total}"].value == f"=SUM(D{header + 1}:D{total - 1})"
    assert ws[f"E{header + 1}"].number_format == "#,##0.00"
    assert ws[f"G{header + 1}"].number_format == "0.0%"
    assert ws[f"G{header + 1}"].value == pytest.approx(1.23456)
    assert ws[f"H{header + 1}"].value == "over"


def test_summary_headline_figures(written):
    _, _, wb = written
    ws = wb["Summary"]
    assert ws["A1"].value == "GPU chargeback — November 2026 (2026-11), amounts in USD"
    assert ws["A2"].value.startswith("Billing period [2026-11-01, 2026-12-01) in UTC;")
    figures = {ws[f"A{r}"].value: ws[f"B{r}"].value for r in range(4, 9)}
    assert figures == {
        "Capacity GPU-hours": 1000.0,
        "Allocated GPU-hours": 930.5,
        "Allocated share of capacity": pytest.approx(0.9305),
        "Productive share of allocated": pytest.approx(700.0 / 930.5),
        "Total charge (USD)": pytest.approx(2034.00),
    }
    assert Decimal(str(ws["B8"].value)) == TOTAL


def test_reconciliation_formulas_tie_out_to_zero(written):
    _, _, wb = written
    ws = wb["Summary"]
    total = _row_of(ws, "TOTAL")
    charges_row = _row_of(ws, "Total of Charges sheet")
    diff_row = _row_of(ws, "Difference (TOTAL above − Charges, must be 0)")
    charges = wb["Charges"]
    charges_total = _row_of(charges, "TOTAL")
    assert ws[f"E{charges_row}"].value == f"='Charges'!$L${charges_total}"
    assert ws[f"E{diff_row}"].value == f"=E{total}-E{charges_row}"
    assert _evaluate(wb, "Summary", ws[f"E{charges_row}"].value) == TOTAL
    assert _evaluate(wb, "Summary", ws[f"E{diff_row}"].value) == Decimal("0.00")


def test_charges_one_row_per_line_with_sum_totals(written):
    _, _, wb = written
    ws = wb["Charges"]
    total = _row_of(ws, "TOTAL")
    assert total - 2 == len(CHARGE_LINES)
    assert ws["L1"].value == "Amount (USD)"
    assert ws["K1"].value == "Unit price (USD per GPU-hour)"
    assert ws[f"L{total}"].value == f"=SUM(L2:L{total - 1})"
    assert ws[f"J{total}"].value == f"=SUM(J2:J{total - 1})"
    assert _evaluate(wb, "Charges", ws[f"L{total}"].value) == TOTAL
    assert sum(Decimal(str(ws[f"L{r}"].value)) for r in range(2, total)) == TOTAL
    hours = _evaluate(wb, "Charges", ws[f"J{total}"].value)
    assert hours == pytest.approx(Decimal(str(sum(line[9] for line in CHARGE_LINES))))
    # ordered by tenant, cluster, model, category
    keys = [tuple(ws.cell(r, c).value for c in (1, 5, 6, 7)) for r in range(2, total)]
    assert keys == sorted(keys)
    assert ws["A2"].value == "chaff" and ws["E2"].value == "kube"
    assert ws["H2"].value is None  # NULL charge class stays empty
    assert "Correction" in [ws[f"H{r}"].value for r in range(2, total)]
    assert ws["L2"].number_format == "#,##0.00"
    assert ws["J2"].number_format == "#,##0.00"


def test_text_that_looks_like_a_formula_stays_text(written):
    _, _, wb = written
    ws = wb["Charges"]
    cell = ws["I2"]
    assert cell.value == '=HYPERLINK("http://x")'
    assert cell.data_type == "s"
    names = [ws[f"B{r}"].value for r in range(2, 8)]
    assert RND_NAME in names


def test_every_table_sheet_has_frozen_header_and_filter(written):
    _, _, wb = written
    header = _row_of(wb["Summary"], "Tenant")
    total = _row_of(wb["Summary"], "TOTAL")
    expected = {
        "Summary": (f"A{header + 1}", f"A{header}:H{total - 1}"),
        "Charges": ("A2", "A1:M7"),
        "Job lines": ("A2", "A1:X4"),
        "Waste": ("A2", "A1:E10"),
        "Data quality": ("A2", "A1:J4"),
        "Definitions": ("A2", f"A1:B{len(workbook.DEFINITIONS) + 1}"),
    }
    for name, (freeze, ref) in expected.items():
        ws = wb[name]
        assert (ws.freeze_panes, ws.auto_filter.ref) == (freeze, ref), name
        first = ws.auto_filter.ref.split(":")[0]
        assert ws[first].font.bold, name
        assert ws.column_dimensions["A"].width >= 8, name
    # second tables on a sheet carry their own filter as Excel tables
    assert set(wb["Waste"].tables) == {"WasteByTenant"}
    assert set(wb["Data quality"].tables) == {"Rejects"}
    assert set(wb["Definitions"].tables) == {"Parameters"}


def test_budget_status_fills(written):
    _, _, wb = written
    ws = wb["Summary"]
    rows = {ws[f"A{r}"].value: r for r in range(_row_of(ws, "Tenant") + 1, _row_of(ws, "TOTAL"))}
    for column in "ABCDEFGH":
        over = ws[f"{column}{rows['Chaffinch Lab']}"].fill
        assert (over.fill_type, over.fgColor.rgb) == ("solid", "00FFC7CE")
        warn = ws[f"{column}{rows[RND_NAME]}"].fill
        assert (warn.fill_type, warn.fgColor.rgb) == ("solid", "00FFEB9C")
        assert ws[f"{column}{rows['unmapped']}"].fill.fill_type is None


def test_job_lines(written):
    _, _, wb = written
    ws = wb["Job lines"]
    assert [c.value for c in ws[1]][:3] == ["Tenant ID", "Cluster", "Job ID"]
    assert ws["V1"].value == "Amount (USD, informational)"
    assert [(ws[f"A{r}"].value, ws[f"B{r}"].value, ws[f"C{r}"].value) for r in (2, 3, 4)] == [
        ("chaff", "phillips", "10"),
        ("chaff", "phillips", "9"),
        ("r&d", "kube", "pod-1"),
    ]
    assert ws["E4"].value == "zoë"
    assert ws["K2"].value == dt.datetime(2026, 11, 2, 9, 30)
    assert ws["K2"].number_format == "yyyy-mm-dd hh:mm"
    assert ws["M2"].number_format == "#,##0.00"
    assert ws.max_row == 4


def test_waste_shares_are_formulas_over_the_capacity_row(written):
    _, _, wb = written
    ws = wb["Waste"]
    rows = {ws[f"C{r}"].value: r for r in range(2, 11)}
    assert list(rows) == list(workbook.BUCKET_ORDER)
    for bucket, hours in BUCKETS.items():
        r = rows[bucket]
        assert ws[f"D{r}"].value == hours
        assert ws[f"E{r}"].value == f"=D{r}/D{rows['capacity']}"
        assert _evaluate(wb, "Waste", ws[f"E{r}"].value) == Decimal(str(hours)) / 1000
        assert ws[f"E{r}"].number_format == "0.0%"
    table = ws.tables["WasteByTenant"]
    min_col, min_row, max_col, max_row = range_boundaries(table.ref)
    assert (max_col, max_row - min_row) == (11, len(TENANTS))
    idle = {ws.cell(r, 1).value: ws.cell(r, 6).value for r in range(min_row + 1, max_row + 1)}
    assert idle == {"chaff": 80.0, "r&d": 20.0, "unmapped": 0.0}


def test_data_quality_and_rejects(written):
    _, _, wb = written
    ws = wb["Data quality"]
    assert [c.value for c in ws[2]] == [
        "file",
        "phillips",
        "scheduler/phillips/sacct-1.log",
        10,
        8,
        2,
        1,
        None,
        None,
        "=D2-E2-F2",
    ]
    assert {ws["A3"].value, ws["A4"].value} == {"unmapped_account", "telemetry_coverage"}
    title = _row_of(ws, "Rejected rows: 2")
    assert [c.value for c in ws[title + 1]][:4] == ["File", "Line", "Reason", "Raw"]
    assert [c.value for c in ws[title + 2]][:4] == [
        "scheduler/phillips/sacct-1.log",
        3,
        "too few fields",
        "=1+1",
    ]
    assert ws.cell(title + 2, 4).data_type == "s"
    # a control character cannot be stored in xlsx: it is shown escaped, not dropped
    assert ws.cell(title + 3, 4).value == "x|y|\\x07bell"
    assert ws.tables["Rejects"].ref == f"A{title + 1}:D{title + 3}"


def test_rejects_are_capped_and_say_so(con, tmp_path, monkeypatch):
    monkeypatch.setattr(workbook, "REJECTS_SHOWN_MAX", 1)
    out = tmp_path / "capped.xlsx"
    result = write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert (result["rejects"], result["rejects_shown"]) == (2, 1)
    ws = openpyxl.load_workbook(out)["Data quality"]
    title = _row_of(
        ws,
        "Rejected rows: showing the first 1 of 2 (capped; the full list is in the warehouse "
        "table rejects)",
    )
    assert ws.cell(title + 2, 3).value == "too few fields"
    assert ws.cell(title + 3, 1).value is None


def test_definitions_hold_the_figures_and_every_parameter(written):
    _, _, wb = written
    ws = wb["Definitions"]
    terms = [ws[f"A{r}"].value for r in range(2, len(workbook.DEFINITIONS) + 2)]
    for term in (
        "Billing period",
        "GPU-equivalents (GPU-eq)",
        "Allocated GPU-hours",
        "Capacity GPU-hours",
        "Telemetry sample attribution",
        "Utilization (mean utilization %)",
        *workbook.BUCKET_ORDER[1:],
        "Cost mode rate_card",
        "Rounding (largest remainder)",
        "Budget status",
        "Unmapped tenant",
    ):
        assert term in terms
    meaning = {ws[f"A{r}"].value: ws[f"B{r}"].value for r in range(2, len(terms) + 2)}
    assert "largest-remainder" in meaning["Rounding (largest remainder)"]
    assert "≥ 80 %" in meaning["Budget status"]
    header = _row_of(ws, "Parameter")
    shown = [
        (ws[f"A{r}"].value, ws[f"B{r}"].value)
        for r in range(header + 1, header + 1 + len(PARAMETERS))
    ]
    assert shown == list(PARAMETERS.items())
    assert ws.tables["Parameters"].ref == f"A{header}:B{header + len(PARAMETERS)}"


def test_same_tables_give_byte_identical_files(con, tmp_path):
    first = tmp_path / "a" / "chargeback-2026-11.xlsx"
    second = tmp_path / "b" / "chargeback-2026-11.xlsx"
    result = write_chargeback_workbook(con, NOV, PARAMETERS, first)
    write_chargeback_workbook(con, NOV, PARAMETERS, second)
    assert first.read_bytes() == second.read_bytes()
    # Identical bytes from two quick writes could still hide a clock: check the stamps too.
    with zipfile.ZipFile(first) as archive:
        assert {info.date_time for info in archive.infolist()} == {(2026, 12, 1, 0, 0, 0)}
    props = openpyxl.load_workbook(first).properties
    assert (props.created, props.modified) == (dt.datetime(2026, 12, 1), dt.datetime(2026, 12, 1))
    assert result["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()


def _change_the_month(con):
    con.execute(
        "insert into charge_lines values (?, 'chaff', 'Chaffinch Lab', 'Biology', 'CC-1001', "
        "'phillips', 'A100-80GB', 'Usage', null, 'late line', 1.0, 2.1, 2.10, 'USD')",
        [NOV],
    )


def test_failure_while_building_leaves_the_earlier_report(con, tmp_path, monkeypatch):
    out = tmp_path / "2026-11" / "chargeback-2026-11.xlsx"
    write_chargeback_workbook(con, NOV, PARAMETERS, out)
    before = out.read_bytes()
    _change_the_month(con)

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(workbook, "_write_job_lines", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert out.read_bytes() == before
    assert [p.name for p in out.parent.iterdir()] == [out.name]


def test_failure_while_writing_the_file_leaves_the_earlier_report(con, tmp_path, monkeypatch):
    out = tmp_path / "2026-11" / "chargeback-2026-11.xlsx"
    write_chargeback_workbook(con, NOV, PARAMETERS, out)
    before = out.read_bytes()
    _change_the_month(con)

    def broken_fsync(fd):
        raise OSError("no space left on device")

    # fsync runs after the new bytes were written: the failure is genuinely mid-write.
    monkeypatch.setattr(workbook.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="no space left"):
        write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert out.read_bytes() == before
    assert [p.name for p in out.parent.iterdir()] == [out.name]
    monkeypatch.undo()
    result = write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert result["total_amount"] == TOTAL + Decimal("2.10")
    assert out.read_bytes() != before


def test_empty_month_still_writes_a_workbook_that_ties_out(con, tmp_path):
    out = tmp_path / "chargeback-2026-09.xlsx"
    result = write_chargeback_workbook(con, dt.date(2026, 9, 1), {"currency": "USD"}, out)
    assert (result["total_amount"], result["charge_lines"], result["job_lines"]) == (
        Decimal("0.00"),
        0,
        0,
    )
    wb = openpyxl.load_workbook(out)
    ws = wb["Summary"]
    assert ws[f"E{_row_of(ws, 'TOTAL')}"].value == 0
    assert ws[f"B{_row_of(ws, 'Capacity GPU-hours')}"].value == "unknown"
    diff_row = _row_of(ws, "Difference (TOTAL above − Charges, must be 0)")
    assert _evaluate(wb, "Summary", ws[f"E{diff_row}"].value) == 0
    assert wb["Charges"].auto_filter.ref == "A1:M1"


def test_mixed_currencies_are_refused(con, tmp_path):
    con.execute("update charge_lines set currency = 'EUR' where tenant_id = 'r&d'")
    out = tmp_path / "chargeback-2026-11.xlsx"
    with pytest.raises(ValueError, match="mixed currencies"):
        write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert not out.exists()


def test_opens_in_libreoffice(written, tmp_path):
    soffice = shutil.which("libreoffice") or shutil.which("soffice")
    if soffice is None:
        pytest.skip("LibreOffice is not installed")
    out, _, _ = written
    converted = tmp_path / "converted"
    subprocess.run(
        [
            soffice,
            f"-env:UserInstallation=file://{tmp_path / 'lo-profile'}",
            "--headless",
            "--convert-to",
            # comma-separated, double quotes, UTF-8 (charset 76), first line 1
            "csv:Text - txt - csv (StarCalc):44,34,76,1",
            "--outdir",
            str(converted),
            str(out),
        ],
        check=True,
        timeout=180,
        capture_output=True,
    )
    # The CSV export holds the first sheet (Summary) with formulas evaluated by LibreOffice.
    with open(converted / "chargeback-2026-11.csv", encoding="utf-8", newline="") as fh:
        rows = {row[0]: row for row in csv.reader(fh) if row}
    assert Decimal(rows["TOTAL"][4].replace(",", "")) == TOTAL
    assert Decimal(rows["Total of Charges sheet"][4].replace(",", "")) == TOTAL
    difference = rows["Difference (TOTAL above − Charges, must be 0)"][4]
    assert Decimal(difference.replace(",", "")) == 0
    # and the whole workbook prints to PDF (what finance forwards), no repair prompt blocking
    subprocess.run(
        [soffice, f"-env:UserInstallation=file://{tmp_path / 'lo-profile'}", "--headless",
         "--convert-to", "pdf", "--outdir", str(converted), str(out)],
        check=True, timeout=180, capture_output=True,
    )  # fmt: skip
    assert (converted / "chargeback-2026-11.pdf").read_bytes().startswith(b"%PDF-")
