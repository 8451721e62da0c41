"""Department pages and workbooks: exact figures, escaping, only the department's tenants,
self-contained and reproducible output, and a real headless-browser render."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import struct
import subprocess
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import openpyxl
import pytest
from openpyxl.utils.cell import range_boundaries

from pipelines.defs.resources import prepare_connection
from pipelines.months import BillingMonth
from pipelines.reports.department_page import DAILY_FALLBACK, render_department_page
from pipelines.reports.department_reports import (
    MonthPages,
    write_department_reports,
    write_organisation_page,
)
from pipelines.reports.department_workbook import write_department_workbook
from pipelines.reports.departments import Department, department_slugs, departments, slugify
from tests.conftest import require_tool

NOV = dt.date(2026, 11, 1)
OCT = dt.date(2026, 10, 1)
MONTH = BillingMonth.of(NOV, "UTC")
PARAMETERS = {
    "billing_month": "2026-11",
    "billing_timezone": "UTC",
    "currency": "USD",
    "cost_mode": "rate_card",
    "idle_threshold_pct": "5",
    "zombie_min_hours": "2",
    "code_version": "0.1.0+gtest",
}

EVIL = "<script>alert(1)</script> & Co"
BIO = "Bio & <Chem>"
PHYSICS = Department("Physics", "physics")
BIOLOGY = Department(BIO, "bio-chem")

DDL = [
    """create table charge_lines (billing_month date, tenant_id varchar, tenant_name varchar,
    department varchar, cost_center varchar, cluster varchar, gpu_model varchar,
    charge_category varchar, charge_class varchar, charge_description varchar,
    gpu_hours double, unit_price decimal(18,6), amount decimal(18,2), currency varchar)""",
    """create table charge_line_coverage (billing_month date, tenant_id varchar,
    cluster varchar, gpu_model varchar, unit_price decimal(18,6), charge_type varchar,
    gpu_hours double, measured_gpu_hours double, measured_share_pct double)""",
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
    """create table utilization_daily (billing_month date, day date, cluster varchar,
    gpu_model varchar, level varchar, tenant_id varchar, jobs bigint,
    allocated_gpu_hours double, productive_gpu_hours double, measured_gpu_hours double,
    mean_util_pct double, capacity_gpu_hours double, allocation_rate_pct double)""",
    """create table quota_compliance (billing_month date, tenant_id varchar, pool varchar,
    has_quota boolean, guaranteed_gpus double, limit_gpus double, reserved boolean,
    hours double, used_gpu_hours double, mean_gpus double, peak_gpus double,
    peak_at timestamp, guaranteed_gpu_hours double, borrowed_gpu_hours double,
    unused_guaranteed_gpu_hours double, minutes_above_limit double, quota_use_pct double,
    borrowing_days bigint, days bigint, breach boolean, idle_quota boolean,
    chronic_borrowing boolean)""",
]

# (tenant_id, name, department, cost_center, cluster, model, category, class, description,
#  gpu_hours, unit_price, amount)
CHARGE_LINES = [
    ("quark", EVIL, "Physics", "CC-7", "c1", "A100", "Usage", None, "A100 GPU-hours",
     65.0, "2.000000", "130.00"),
    ("quark", EVIL, "Physics", "CC-7", "c1", "A100", "Credit", None, "failed_infra credit",
     -3.275, "2.000000", "-6.55"),
    ("lepton", "Lepton Group", "Physics", "CC-8", "c1", "A100", "Usage", None,
     "A100 GPU-hours", 80.0, "2.000000", "160.00"),
    ("lepton", "Lepton Group", "Physics", "CC-8", "c1", "A100", "Usage", "Correction",
     "restated", 5.0, "2.000000", "10.00"),
    ("finch", "Finch Lab", BIO, "CC-9", "c2", "H100", "Usage", None, "H100 GPU-hours",
     333.33, "3.000000", "999.99"),
]  # fmt: skip
PHYSICS_TOTAL = Decimal("293.45")

# (tenant_id, name, department, cost_center, owner, jobs, allocated, productive, idle, zombie,
#  failed_job, failed_infra, unmeasured, mean_util, amount, budget, status, quota_flags)
TENANTS = [
    ("quark", EVIL, "Physics", "CC-7", "q@example.org", 3, 50.0, 30.0, 5.0, 10.0, 2.0, 1.0,
     2.0, 41.5, "123.45", "100.00", "over", "breach"),
    ("lepton", "Lepton Group", "Physics", "CC-8", None, 1, 80.0, 72.0, 8.0, 0.0, 0.0, 0.0,
     0.0, 63.0, "170.00", "200.00", "warn", ""),
    ("finch", "Finch Lab", BIO, "CC-9", None, 2, 14.0, 10.0, 4.0, 0.0, 0.0, 0.0, 0.0, 50.0,
     "999.99", None, "no budget", ""),
]  # fmt: skip

# (cluster, job_id, tenant, model, state, gpus, start, allocated, util, productive, idle,
#  zombie, failed_job, failed_infra, unmeasured)
JOBS = [
    ("c1", "phys-101", "quark", "A100", "COMPLETED", 1.0, "2026-11-03 10:00", 25.0, 30.0, 10.0,
     3.0, 10.0, 0.0, 1.0, 1.0),
    ("c1", "phys-102", "quark", "A100", "COMPLETED", 2.0, "2026-11-04 00:00", 23.0, 70.0, 20.0,
     2.0, 0.0, 0.0, 0.0, 1.0),
    ("c1", "phys-103", "quark", "A100", "FAILED", 1.0, "2026-11-04 12:00", 2.0, None, 0.0,
     0.0, 0.0, 2.0, 0.0, 0.0),
    ("c1", "phys-201", "lepton", "A100", "COMPLETED", 4.0, "2026-10-30 00:00", 80.0, 63.0,
     72.0, 8.0, 0.0, 0.0, 0.0, 0.0),
    ("c2", "bio-301", "finch", "H100", "COMPLETED", 1.0, "2026-11-05 00:00", 10.0, 60.0, 10.0,
     0.0, 0.0, 0.0, 0.0, 0.0),
    ("c2", "bio-302", "finch", "H100", "COMPLETED", 1.0, "2026-11-06 00:00", 4.0, 1.0, 0.0,
     4.0, 0.0, 0.0, 0.0, 0.0),
]  # fmt: skip

# (day, tenant_id, allocated); level 'tenant' unless the tenant is 'all'
DAILY = [
    ("2026-11-03", "quark", 30.0),
    ("2026-11-04", "quark", 20.0),
    ("2026-11-03", "lepton", 80.0),
    ("2026-11-05", "finch", 14.0),
    ("2026-11-03", "all", 500.0),  # a gpu_model row: never a tenant's hours
]

# (tenant_id, pool, has_quota, breach, idle_quota, chronic_borrowing)
QUOTAS = [
    ("quark", "A100", True, True, False, False),
    ("lepton", "gpu", True, False, True, False),
    ("lepton", "A100", False, False, False, False),
    ("finch", "H100", True, False, False, True),
]


@pytest.fixture
def con(tmp_path):
    # the report queries use the project's macros, as the report assets' connection has them
    con = prepare_connection(duckdb.connect(str(tmp_path / "warehouse.duckdb")))
    for statement in DDL:
        con.execute(statement)
    for line in CHARGE_LINES:
        con.execute(
            "insert into charge_lines values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'USD')",
            [NOV, *line],
        )
    # Another month must never leak into this month's reports.
    con.execute(
        "insert into charge_lines values (?, 'quark', 'x', 'Physics', 'CC-7', 'c1', 'A100', "
        "'Usage', null, 'x', 1.0, 2.0, 5000.00, 'USD')",
        [OCT],
    )
    # the charge type of each line, as computed_charge_lines sets it
    con.execute("alter table charge_lines add column charge_type varchar")
    con.execute(
        "update charge_lines set charge_type = "
        "case when charge_category = 'Credit' then 'credit' else 'usage' end"
    )
    for t in TENANTS:
        con.execute(
            "insert into tenant_month values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
            " 'USD', ?, null, ?, ?)",
            [NOV, *t[:7], t[6] - t[12], *t[7:]],
        )
    for j in JOBS:
        start = dt.datetime.fromisoformat(j[6])
        con.execute(
            "insert into job_usage values (?, ?, ?, ?, ?, 'u1', 'gpu', ?, ?, ?, ?, ?, ?, ?, ?,"
            " ?, ?, ?, ?, ?, ?, ?, 0, 'USD')",
            [NOV, j[0], j[1], j[2], j[2], j[3], j[4], j[5], start - dt.timedelta(hours=1),
             start, start + dt.timedelta(hours=j[7] / j[5]), j[7], j[7] - j[14], *j[8:]],
        )  # fmt: skip
    for day, tenant, hours in DAILY:
        level = "gpu_model" if tenant == "all" else "tenant"
        con.execute(
            "insert into utilization_daily values (?, ?, 'c1', 'A100', ?, ?, 1, ?, 0, 0, null,"
            " null, null)",
            [NOV, dt.date.fromisoformat(day), level, tenant, hours],
        )
    for tenant, pool, has_quota, breach, idle_quota, chronic in QUOTAS:
        con.execute(
            "insert into quota_compliance values (?, ?, ?, ?, 2, 3, false, 720, 100, 0.5, 4,"
            " null, 1440, 10, 1350, ?, ?, 5, 30, ?, ?, ?)",
            [NOV, tenant, pool, has_quota, 90.0 if breach else 0.0,
             10.0 if idle_quota else 50.0, breach, idle_quota, chronic],
        )  # fmt: skip
    yield con
    con.close()


# --------------------------------------------------------------------------------------------
# A small DOM from the stdlib parser: enough to read tables, attributes and text.


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def iter(self):
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def find_all(self, tag: str) -> list[Node]:
        return [n for n in self.iter() if n.tag == tag]

    def by_id(self, id_: str) -> Node:
        [node] = [n for n in self.iter() if n.attrs.get("id") == id_]
        return node

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)


_VOID = {"meta", "link", "br", "hr", "img", "input", "source", "col", "base", "wbr"}


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        if tag not in _VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, dict(attrs), self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"stray </{tag}>"
        self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse(html: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    assert builder.current is builder.root, f"unclosed <{builder.current.tag}>"
    return builder.root


def rows(table: Node, section: str = "tbody") -> list[list[str]]:
    [body] = table.find_all(section)
    return [[cell.text.strip() for cell in tr.find_all("td")] for tr in body.find_all("tr")]


def table_in(doc: Node, section_id: str) -> Node:
    [table] = doc.by_id(section_id).find_all("table")
    return table


def kpis(doc: Node) -> dict[str, str]:
    [box] = [n for n in doc.iter() if n.attrs.get("class") == "kpis"]
    return {div.find_all("dt")[0].text: div.find_all("dd")[0].text for div in box.find_all("div")}


@pytest.fixture
def pages(con) -> MonthPages:
    """The month's pages of `con` on A4, without PDFs."""
    return MonthPages(con, MONTH, PARAMETERS)


@pytest.fixture
def physics(con) -> Node:
    return parse(render_department_page(con, MONTH, PHYSICS, PARAMETERS))


# --------------------------------------------------------------------------------------------
# The page


def test_departments_of_the_month_have_unique_readable_slugs(con):
    assert departments(con, NOV) == [BIOLOGY, PHYSICS]
    assert slugify("Forschung & Entwicklung — Ångström") == "forschung-entwicklung-angstrom"
    assert slugify("../../etc") == "etc"
    slugs = department_slugs(["R&D", "R D", "", "Ops"])
    assert slugs["Ops"] == "ops"
    assert slugs[""] == "no-department"
    assert slugs["R&D"] != slugs["R D"]
    assert slugs["R&D"].startswith("r-d-") and slugs["R D"].startswith("r-d-")


def test_headline_figures_are_the_departments(physics):
    assert kpis(physics) == {
        "Total charge (USD)": "293.45",
        "Budget (USD)": "300.00",
        "Allocated GPU-hours": "130.00",
        "Productive share": "78.5 %",
        "Idle + zombie GPU-hours": "23.00",
        "Tenants": "2",
    }


def test_tenant_table_has_exact_figures_in_amount_order(physics):
    table = table_in(physics, "tenants")
    assert rows(table) == [
        ["Lepton Group", "170.00", "200.00", "85.0 %", "warn", "90.0 %", "0.00",
         "idle_quota (gpu)", "80.00", "CC-8", ""],
        [EVIL, "123.45", "100.00", "123.5 %", "over", "60.0 %", "10.00", "breach (A100)",
         "50.00", "CC-7", "q@example.org"],
    ]  # fmt: skip
    assert rows(table, "tfoot") == [
        ["Total", "293.45", "300.00", "", "", "78.5 %", "10.00", "", "130.00", "", ""]
    ]
    classes = [tr.attrs["class"] for tr in table.find_all("tbody")[0].find_all("tr")]
    assert classes == ["status-warn", "status-over"]


def test_names_are_escaped_text_never_markup(con, physics):
    html = render_department_page(con, MONTH, PHYSICS, PARAMETERS)
    assert not physics.find_all("script")
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; Co" in html
    assert EVIL in [r[0] for r in rows(table_in(physics, "tenants"))]
    spend_labels = [t.text for t in physics.by_id("spend").find_all("text")]
    assert f"{EVIL} — 123.45 of 100.00" in spend_labels

    bio = parse(render_department_page(con, MONTH, BIOLOGY, PARAMETERS))
    assert bio.find_all("h1")[0].text == BIO
    assert bio.find_all("title")[0].text == f"GPU chargeback 2026-11 — {BIO}"
    assert not bio.find_all("chem")


def test_page_is_self_contained(con):
    for department in (PHYSICS, BIOLOGY):
        html = render_department_page(con, MONTH, department, PARAMETERS)
        assert "http://" not in html and "https://" not in html
        assert "url(" not in html and "@import" not in html
        doc = parse(html)
        for tag in ("script", "link", "img", "iframe", "object", "embed", "a"):
            assert not doc.find_all(tag), tag
        for node in doc.iter():
            assert not {"src", "href", "xlink:href", "srcset"} & node.attrs.keys(), node.tag
        assert len(doc.find_all("svg")) == 3


def test_only_the_departments_tenants_and_jobs(con, physics):
    ids = {n.attrs["data-tenant-id"] for n in physics.iter() if "data-tenant-id" in n.attrs}
    assert ids == {"quark", "lepton"}
    text = physics.text
    for other in ("Finch Lab", "finch", "bio-30", "999.99", "5,000.00", "5000.00"):
        assert other not in text

    bio = parse(render_department_page(con, MONTH, BIOLOGY, PARAMETERS))
    assert [r[0] for r in rows(table_in(bio, "tenants"))] == ["Finch Lab"]
    assert kpis(bio)["Total charge (USD)"] == "999.99"
    assert kpis(bio)["Budget (USD)"] == "no budget"
    assert EVIL not in bio.text and "phys-" not in bio.text


def test_spend_and_waste_charts_scale_exactly(physics):
    # spend: scale = the largest spend or budget (200.00) over 400 units; budgets are outlines
    # inset by their 1.5-unit stroke
    bars = [(r.attrs["width"], r.attrs["fill"]) for r in physics.by_id("spend").find_all("rect")]
    assert bars == [
        ("340.00", "#f9a825"), ("398.50", "#fff"), ("246.90", "#c62828"), ("198.50", "#fff"),
    ]  # fmt: skip
    # waste: one stacked bar per tenant after the department total, scaled to 130 GPU-hours
    groups = physics.by_id("waste").find_all("svg")[0].find_all("g")
    assert [g.find_all("text")[0].text for g in groups] == [
        "Department total — 130.00 GPU-hours",
        "Lepton Group — 80.00 GPU-hours",
        f"{EVIL} — 50.00 GPU-hours",
    ]
    lepton = [
        (r.find_all("title")[0].text, r.attrs["x"], r.attrs["width"])
        for r in groups[1].find_all("rect")[1:]
    ]
    assert lepton == [
        ("productive: 72.00 GPU-hours", "0.00", "221.54"),
        ("idle: 8.00 GPU-hours", "221.54", "24.62"),
    ]
    total_widths = [float(r.attrs["width"]) for r in groups[0].find_all("rect")[1:]]
    assert sum(total_widths) == pytest.approx(400.0, abs=0.03)


def test_waste_table_by_bucket(physics):
    table = physics.by_id("waste-table")
    assert [th.text for th in table.find_all("th")] == [
        "Tenant", "productive", "idle", "zombie", "failed_job", "failed_infra", "unmeasured",
        "Allocated",
    ]  # fmt: skip
    assert rows(table) == [
        ["Lepton Group", "72.00", "8.00", "0.00", "0.00", "0.00", "0.00", "80.00"],
        [EVIL, "30.00", "5.00", "10.00", "2.00", "1.00", "2.00", "50.00"],
    ]
    assert rows(table, "tfoot") == [
        ["Total", "102.00", "13.00", "10.00", "2.00", "1.00", "2.00", "130.00"]
    ]


def test_top_idle_and_zombie_jobs(physics):
    assert rows(table_in(physics, "top-jobs")) == [
        [EVIL, "c1", "phys-101", "u1", "A100", "COMPLETED", "1.00", "2026-11-03 10:00",
         "2026-11-04 11:00", "25.00", "30.0", "3.00", "10.00", "13.00"],
        ["Lepton Group", "c1", "phys-201", "u1", "A100", "COMPLETED", "4.00",
         "2026-10-30 00:00", "2026-10-30 20:00", "80.00", "63.0", "8.00", "0.00", "8.00"],
        [EVIL, "c1", "phys-102", "u1", "A100", "COMPLETED", "2.00", "2026-11-04 00:00",
         "2026-11-04 11:30", "23.00", "70.0", "2.00", "0.00", "2.00"],
    ]  # fmt: skip


def daily_of(doc: Node) -> dict[str, str]:
    return {day: hours for day, hours in rows(doc.by_id("daily-table"))}


def test_daily_allocated_hours_from_utilization_daily(physics):
    daily = daily_of(physics)
    assert list(daily) == [f"2026-11-{d:02d}" for d in range(1, 31)]
    assert {d: h for d, h in daily.items() if h != "0.00"} == {
        "2026-11-03": "110.00",
        "2026-11-04": "20.00",
    }
    bars = physics.by_id("daily").find_all("rect")
    assert len(bars) == 30
    # ceiling of the axis: 200 (the next 1-2-2.5-5 step above 110) over 150 units of height
    assert (bars[2].attrs["height"], bars[3].attrs["height"]) == ("82.50", "15.00")
    ticks = [t.text for t in physics.by_id("daily").find_all("text")][:3]
    assert ticks == ["0", "100", "200"]
    assert "from utilization_daily" in physics.by_id("daily").text


def test_daily_counts_tenant_rows_only_even_for_a_tenant_called_all(con):
    con.execute(
        "insert into tenant_month (billing_month, tenant_id, tenant_name, department, amount,"
        " currency, budget_status, quota_flags) values (?, 'all', 'All Hands', 'Physics', 0,"
        " 'USD', 'no budget', '')",
        [NOV],
    )
    doc = parse(render_department_page(con, MONTH, PHYSICS, PARAMETERS))
    assert "All Hands" in [r[0] for r in rows(table_in(doc, "tenants"))]
    assert daily_of(doc)["2026-11-03"] == "110.00"


def test_daily_falls_back_to_job_start_days_without_the_mart(con):
    con.execute("drop table utilization_daily")
    doc = parse(render_department_page(con, MONTH, PHYSICS, PARAMETERS))
    daily = daily_of(doc)
    assert len(daily) == 30
    # phys-201 started in October: its November hours count on the first day
    assert {d: h for d, h in daily.items() if h != "0.00"} == {
        "2026-11-01": "80.00",
        "2026-11-03": "25.00",
        "2026-11-04": "25.00",
    }
    assert DAILY_FALLBACK in doc.by_id("daily").text


def test_quota_section_and_flags_degrade_without_quota_compliance(con, physics):
    quota = rows(table_in(physics, "quota"))
    assert [(r[0], r[1], r[-1]) for r in quota] == [
        ("Lepton Group", "A100", "—"),
        ("Lepton Group", "gpu", "idle_quota"),
        (EVIL, "A100", "breach"),
    ]
    con.execute("drop table quota_compliance")
    doc = parse(render_department_page(con, MONTH, PHYSICS, PARAMETERS))
    assert not [n for n in doc.iter() if n.attrs.get("id") == "quota"]
    assert [r[7] for r in rows(table_in(doc, "tenants"))] == ["—", "breach"]


def test_page_is_readable_on_a_phone_and_printable(physics, con):
    [viewport] = [m for m in physics.find_all("meta") if m.attrs.get("name") == "viewport"]
    assert "width=device-width" in viewport.attrs["content"]
    css = physics.find_all("style")[0].text
    assert "@media print" in css and "max-width" in css and "overflow-x: auto" in css
    for table in physics.find_all("table"):
        assert table.parent.attrs.get("class") == "scroll"
    for svg in physics.find_all("svg"):
        assert svg.attrs["viewbox"].startswith("0 0 400 ")
    terms = [dt_.text for dt_ in physics.by_id("definitions").find_all("dt")]
    expected = ("Amount", "Budget status", "Productive share", "zombie", "idle",
                "Daily allocated GPU-hours", "Top idle and zombie jobs", "Quota flags")  # fmt: skip
    assert set(expected) <= set(terms)


def test_same_tables_give_the_same_bytes(pages, tmp_path):
    first = write_department_reports(pages, tmp_path / "a")
    second = write_department_reports(pages, tmp_path / "b")
    assert first == second == {"departments": 2, "tenants": 3, "charge_lines": 5,
                               "job_lines": 6, "pdfs": 0}  # fmt: skip
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == ["bio-chem.html", "bio-chem.xlsx", "physics.html", "physics.xlsx"]
    for name in names:
        a, b = (tmp_path / d / name for d in ("a", "b"))
        assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()


def test_stale_department_files_are_removed_and_others_kept(pages, tmp_path):
    folder = tmp_path / "departments"
    folder.mkdir()
    (folder / "gone.html").write_text("old")
    (folder / "gone.xlsx").write_text("old")
    (folder / "README.txt").write_text("keep")
    write_department_reports(pages, folder)
    assert sorted(p.name for p in folder.iterdir()) == [
        "README.txt", "bio-chem.html", "bio-chem.xlsx", "physics.html", "physics.xlsx",
    ]  # fmt: skip


def test_a_failed_write_leaves_the_earlier_files(con, pages, tmp_path, monkeypatch):
    folder = tmp_path / "departments"
    write_department_reports(pages, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    con.execute("update charge_lines set amount = amount + 1")

    def broken(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        write_department_reports(pages, folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


# --------------------------------------------------------------------------------------------
# The workbook


def _evaluate(wb, sheet: str, value) -> Decimal:
    """=SUM(range), =ref, =ref-ref and 'Sheet'!$X$n: the formulas the workbook writes."""
    if not (isinstance(value, str) and value.startswith("=")):
        return Decimal(str(value))
    body = value[1:]
    if body.startswith("SUM("):
        min_col, min_row, max_col, max_row = range_boundaries(body[4:-1])
        cells = wb[sheet].iter_rows(min_row, max_row, min_col, max_col, values_only=True)
        return sum((_evaluate(wb, sheet, v) for row in cells for v in row if v is not None),
                   Decimal(0))  # fmt: skip
    if "!" in body:
        other, ref = body.split("!")
        other = other.strip("'")
        return _evaluate(wb, other, wb[other][ref.replace("$", "")].value)
    if "-" in body:
        left, right = body.split("-")
        return _evaluate(wb, sheet, wb[sheet][left].value) - _evaluate(
            wb, sheet, wb[sheet][right].value
        )
    return _evaluate(wb, sheet, wb[sheet][body].value)


def _total_row(ws) -> int:
    [row] = [c.row for c in ws["A"] if c.value == "TOTAL"]
    return row


def test_workbook_holds_only_the_department_and_ties_out(con, tmp_path):
    out = tmp_path / "physics.xlsx"
    result = write_department_workbook(con, MONTH, PHYSICS, PARAMETERS, out)
    [(expected,)] = con.execute(
        "select sum(amount) from charge_lines where billing_month = ? and department = ?",
        [NOV, "Physics"],
    ).fetchall()
    assert expected == PHYSICS_TOTAL == result["total_amount"]

    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames == ["Summary", "Charges", "Job lines", "Definitions"]

    charges = wb["Charges"]
    total = _total_row(charges)
    lines = list(charges.iter_rows(min_row=2, max_row=total - 1, values_only=True))
    assert {line[0] for line in lines} == {"quark", "lepton"}
    assert {line[2] for line in lines} == {"Physics"}
    assert EVIL in {line[1] for line in lines}
    assert len(lines) == 4
    assert _evaluate(wb, "Charges", charges[f"L{total}"].value) == PHYSICS_TOTAL

    jobs = wb["Job lines"]
    assert sorted(r[2] for r in jobs.iter_rows(min_row=2, values_only=True)) == [
        "phys-101", "phys-102", "phys-103", "phys-201",
    ]  # fmt: skip

    summary = wb["Summary"]
    assert summary["A1"].value == (
        "GPU chargeback — Physics — November 2026 (2026-11), amounts in USD"
    )
    assert summary["B6"].value == pytest.approx(float(PHYSICS_TOTAL))
    total = _total_row(summary)
    header = total - 3
    assert [c.value for c in summary[header]][:2] == ["Tenant", "Tenant ID"]
    tenants = [
        (r[0], r[1], r[5], r[8], r[11])
        for r in summary.iter_rows(min_row=header + 1, max_row=total - 1, values_only=True)
    ]
    assert tenants == [
        ("Lepton Group", "lepton", 170, "warn", "idle_quota (gpu)"),
        (EVIL, "quark", 123.45, "over", "breach (A100)"),
    ]
    assert _evaluate(wb, "Summary", summary[f"F{total}"].value) == PHYSICS_TOTAL
    assert _evaluate(wb, "Summary", summary[f"E{total}"].value) == Decimal("130")
    [diff_row] = [c.row for c in summary["A"] if str(c.value).startswith("Difference")]
    assert _evaluate(wb, "Summary", summary[f"F{diff_row}"].value) == 0

    for ws in wb.worksheets:
        for row in ws.iter_rows(values_only=True):
            for value in row:
                assert value not in ("finch", "Finch Lab", BIO, "bio-301", "bio-302")


def test_workbook_bytes_are_reproducible(con, tmp_path):
    a = write_department_workbook(con, MONTH, BIOLOGY, PARAMETERS, tmp_path / "a.xlsx")
    b = write_department_workbook(con, MONTH, BIOLOGY, PARAMETERS, tmp_path / "b.xlsx")
    assert a["sha256"] == b["sha256"]
    assert a["total_amount"] == Decimal("999.99")
    wb = openpyxl.load_workbook(tmp_path / "a.xlsx")
    assert wb.properties.created == dt.datetime(2026, 12, 1)


# --------------------------------------------------------------------------------------------
# End to end: the asset on the tiny month


@pytest.mark.slow
def test_department_reports_asset_on_a_real_month(tmp_path):
    from tests.conftest import materialize_month, query
    from tests.e2e.test_tiny_month import build_tiny_month

    build_tiny_month(tmp_path, pdfs=True)
    # the telemetry days, then the month's assets (a run holds one partitioning)
    require_tool("chromium", "chromium")  # the asset prints the pages' PDFs with it
    result = materialize_month(tmp_path, "2026-11-01")
    assert result.success
    folder = tmp_path / "reports/2026-11/departments"
    assert sorted(p.name for p in folder.iterdir()) == [
        "science.html", "science.pdf", "science.xlsx", "unmapped.html", "unmapped.pdf",
        "unmapped.xlsx",
    ]  # fmt: skip
    organisation = tmp_path / "reports/2026-11/chargeback-2026-11.html"
    assert organisation.with_suffix(".pdf").exists()
    org = parse(organisation.read_text(encoding="utf-8"))
    [(total,)] = query(
        tmp_path, "select sum(amount) from charge_lines where billing_month = ?", [NOV]
    )
    assert kpis(org)["Total charge (EUR)"] == f"{total:,.2f}"
    [(science,)] = query(
        tmp_path,
        "select sum(amount) from charge_lines where billing_month = ? and department = ?",
        [NOV, "Science"],
    )
    doc = parse((folder / "science.html").read_text(encoding="utf-8"))
    assert kpis(doc)["Total charge (EUR)"] == f"{science:,.2f}"
    assert sorted(r[0] for r in rows(table_in(doc, "tenants"))) == ["Alpha Lab", "Beta & Co"]
    assert "from utilization_daily" in doc.by_id("daily").text
    [materialization] = result.asset_materializations_for_node("department_reports")
    assert materialization.metadata["rows_departments"].value == 2


# --------------------------------------------------------------------------------------------
# A real browser: the page renders at phone width and prints to PDF


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_cost_views_section_lists_the_departments_tenants_two_views(con):
    assert "cost-views" not in render_department_page(con, MONTH, PHYSICS, PARAMETERS)
    con.execute(
        "create table cost_views as select * from (values "
        "('c1', 'q1', 'quark', 50.0, 15.0, 0::hugeint, 0::hugeint, 100.00, 30.00, 70.00, "
        "0.0, 0::hugeint, 0.00), "
        "('c1', 'q2', 'quark', 10.0, 0.0, 0, 0, 20.00, 0.00, 20.00, 2.5, 0, 5.00), "
        "('c2', 'f1', 'finch', 5.0, 5.0, 0, 0, 9.99, 9.99, 0.00, 1.0, 0, 2.00)) "
        "as v(cluster, job_id, tenant_id, allocated_gpu_hours, idle_zombie_gpu_hours, "
        "allocated_units, idle_zombie_units, allocation_amount, idle_zombie_amount, "
        "utilisation_amount, failed_job_gpu_hours, failed_job_units, failed_job_amount), "
        "(select date '2026-11-01' as billing_month)"
    )
    con.execute(
        "update cost_views set allocated_units = allocated_gpu_hours * 1512000000, "
        "idle_zombie_units = idle_zombie_gpu_hours * 1512000000, "
        "failed_job_units = failed_job_gpu_hours * 1512000000"
    )
    doc = parse(render_department_page(con, MONTH, PHYSICS, PARAMETERS))
    # Physics: quark's two jobs summed (q2's 2.5 failed GPU-hours cost 5.00); finch is Biology's
    assert rows(table_in(doc, "cost-views")) == [
        [EVIL, "120.00", "15.00", "30.00", "90.00", "2.50", "5.00"]
    ]


# (cluster, metric, series, samples, sampled_h, sampled_pct, median_s, min_s, max_s,
#  allocated_h, measured_h, measured_pct): c1 is Physics', c2 Biology's, c3 nobody's
TELEMETRY = [
    ("c1", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 8, 1000, 10.0, 62.5, 15.0, 15.0, 15.0,
     155.0, 150.0, 100 * 150 / 155),
    ("c1", "DCGM_FI_DEV_GPU_UTIL", 2, 6000, 6.0, 37.5, 60.0, 10.0, 60.0,
     155.0, 150.0, 100 * 150 / 155),
    ("c2", "nvidia-smi utilization.gpu", 1, 600, 10.0, 100.0, 60.0, 60.0, 60.0,
     14.0, 10.0, 100 * 10 / 14),
    ("c3", None, 0, 0, 0.0, None, None, None, None, 2.0, 0.0, 0.0),
]  # fmt: skip
TELEMETRY_TERMS = (
    "Utilisation metric",
    "Observed sampling interval",
    "Measured share of a cluster",
)


def test_telemetry_section_shows_the_clusters_of_the_departments_jobs(con, pages, tmp_path):
    # a warehouse built before telemetry_coverage: no section, no source named
    before = parse(render_department_page(con, MONTH, PHYSICS, PARAMETERS))
    assert [n for n in before.iter() if n.attrs.get("id") == "telemetry"] == []
    assert "telemetry_coverage" not in before.find_all("footer")[0].text
    con.execute(
        "create table telemetry_coverage (billing_month date, cluster varchar, "
        "util_metric varchar, series bigint, samples bigint, sampled_gpu_hours double, "
        "sampled_share_pct double, median_step_s double, min_step_s double, max_step_s double, "
        "allocated_gpu_hours double, measured_gpu_hours double, measured_share_pct double)"
    )
    for t in TELEMETRY:
        con.execute(f"insert into telemetry_coverage values ({', '.join('?' * 13)})", [NOV, *t])
    con.execute("insert into telemetry_coverage (billing_month, cluster) values (?, 'c1')", [OCT])
    c1 = ["c1", "DCGM_FI_PROF_GR_ENGINE_ACTIVE 62.5 %, DCGM_FI_DEV_GPU_UTIL 37.5 %",
          "15 s, 60 s (10–60 s)", "155.00", "150.00", "96.8 %"]  # fmt: skip
    c2 = ["c2", "nvidia-smi utilization.gpu", "60 s", "14.00", "10.00", "71.4 %"]
    physics = parse(render_department_page(con, MONTH, PHYSICS, PARAMETERS))
    # Physics' jobs ran on c1 only; the cluster's figures are all of its jobs'
    assert rows(table_in(physics, "telemetry")) == [c1]
    assert "telemetry_coverage" in physics.find_all("footer")[0].text
    terms = [term.text for term in physics.by_id("definitions").find_all("dt")]
    assert [term for term in terms if term in TELEMETRY_TERMS] == list(TELEMETRY_TERMS)
    biology = parse(render_department_page(con, MONTH, BIOLOGY, PARAMETERS))
    assert rows(table_in(biology, "telemetry")) == [c2]
    write_organisation_page(pages, tmp_path / "chargeback-2026-11.html")
    organisation = parse((tmp_path / "chargeback-2026-11.html").read_text(encoding="utf-8"))
    # every cluster, c3 without telemetry among them
    assert rows(table_in(organisation, "telemetry")) == [
        c1, c2, ["c3", "no telemetry", "—", "2.00", "0.00", "0.0 %"],
    ]  # fmt: skip


def test_users_section_lists_the_departments_users(con):
    assert 'id="users"' not in render_department_page(con, MONTH, PHYSICS, PARAMETERS)
    con.execute(
        "create table user_efficiency as select date '2026-11-01' as billing_month, * from "
        "(values ('quark', 'ann', 2, 60.0, 25.0, 30.0, 45.0, 32.421875, 75.0, 0.88, "
        "'c1/q1 (20.00); c1/q2 (10.00)', true), "
        "('quark', null, 1, 4.0, 100.0, 0.0, 90.0, null, null, null, null, false), "
        "('finch', 'bob', 1, 5.0, 0.0, 5.0, 1.0, 10.0, 10.0, 0.5, 'c2/f1 (5.00)', false)) "
        'as u(tenant_id, "user", jobs, allocated_gpu_hours, productive_share_pct, '
        "idle_zombie_gpu_hours, mean_util_pct, mean_memory_pct, peak_memory_pct, energy_kwh, "
        "idlest_jobs, is_notified)"
    )
    con.execute(
        "alter table user_efficiency add column idle_gpu_hours double default 0; "
        "alter table user_efficiency add column zombie_gpu_hours double default 0; "
        "alter table user_efficiency add column power_measured_gpu_hours double default 0"
    )
    doc = parse(
        render_department_page(con, MONTH, PHYSICS, {**PARAMETERS, "notice_idle_gpu_hours": "24"})
    )
    # Physics: quark's users, most idle + zombie first; finch's bob is Biology's; memory of
    # unknown size shows a dash, and so does the energy of a user whose GPUs read no power
    assert rows(table_in(doc, "users")) == [
        ["ann", EVIL, "2", "60.00", "25.0 %", "30.00", "45.0", "32.4 %", "75.0 %", "0.9",
         "yes", "c1/q1 (20.00); c1/q2 (10.00)"],
        ["—", EVIL, "1", "4.00", "100.0 %", "0.00", "90.0", "—", "—", "—", "", ""],
    ]  # fmt: skip
    assert "idle + zombie above 24 GPU-hours" in doc.by_id("users").text


def test_the_organisation_page_is_every_department_with_links_to_theirs(con, pages, tmp_path):
    written = write_organisation_page(pages, tmp_path / "chargeback-2026-11.html")
    assert written == ["chargeback-2026-11.html"]  # no Chromium given: no PDF
    doc = parse((tmp_path / "chargeback-2026-11.html").read_text(encoding="utf-8"))
    assert doc.find_all("h1")[0].text == "All departments"
    assert kpis(doc)["Total charge (USD)"] == "1,293.44"  # 293.45 + 999.99: every line
    departments_table = table_in(doc, "departments")
    assert [row[:3] for row in rows(departments_table)] == [
        [BIO, "1", "999.99"],
        ["Physics", "2", "293.45"],
    ]
    links = [a.attrs["href"] for a in departments_table.find_all("a")]
    assert links == ["departments/bio-chem.html", "departments/physics.html"]
    assert sorted(r[0] for r in rows(table_in(doc, "tenants"))) == sorted(
        [EVIL, "Lepton Group", "Finch Lab"]
    )
    # the department pages have no such table
    physics_page = parse(render_department_page(con, MONTH, PHYSICS, PARAMETERS))
    assert [n for n in physics_page.iter() if n.attrs.get("id") == "departments"] == []


def _media_box(pdf: bytes) -> tuple[float, float]:
    [box] = set(re.findall(rb"/MediaBox \[0 0 ([\d.]+) ([\d.]+)\]", pdf))
    return float(box[0]), float(box[1])


@pytest.mark.browser
@pytest.mark.parametrize(("page_size", "points"), [("A4", (595, 842)), ("Letter", (612, 792))])
@pytest.mark.slow
def test_pages_print_to_reproducible_pdfs_on_the_settings_paper(con, tmp_path, page_size, points):
    chromium = require_tool("chromium", "chromium")
    printed = MonthPages(con, MONTH, PARAMETERS, page_size, chromium)
    counts = [write_department_reports(printed, tmp_path / run) for run in ("a", "b")]
    assert counts[0]["pdfs"] == 2
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == [
        "bio-chem.html", "bio-chem.pdf", "bio-chem.xlsx", "physics.html", "physics.pdf",
        "physics.xlsx",
    ]  # fmt: skip
    for name in ("bio-chem.pdf", "physics.pdf"):
        pdf = (tmp_path / "a" / name).read_bytes()
        assert pdf == (tmp_path / "b" / name).read_bytes()  # the same page, the same bytes
        # stamped with the period's end, not the time Chromium printed it
        assert re.findall(rb"/CreationDate \((D:[^)]*)\)", pdf) == [b"D:20261201000000+00'00'"]
        width, height = _media_box(pdf)
        assert (round(width), round(height)) in {points, (points[0] - 1, points[1] - 1)}
    # the organisation page's links to the department pages print as text: an absolute
    # file:// address of the folder it was printed in would differ from run to run
    org = [write_organisation_page(printed, tmp_path / run / "org.html") for run in ("a", "b")]
    assert org[0] == ["org.html", "org.pdf"]
    pdf = (tmp_path / "a" / "org.pdf").read_bytes()
    assert pdf == (tmp_path / "b" / "org.pdf").read_bytes() and b"file:" not in pdf
    (tmp_path / "a" / "org.html").unlink()
    (tmp_path / "a" / "org.pdf").unlink()
    # a run without Chromium removes the PDFs of an earlier one: they would not match the pages
    write_department_reports(MonthPages(con, MONTH, PARAMETERS, page_size), tmp_path / "a")
    assert not list((tmp_path / "a").glob("*.pdf"))


@pytest.mark.browser
@pytest.mark.slow
def test_page_renders_in_headless_chromium(pages, tmp_path):
    chromium = require_tool("chromium", "chromium")
    write_department_reports(pages, tmp_path / "departments")
    page = (tmp_path / "departments" / "physics.html").resolve()
    common = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
    ]  # fmt: skip
    png, pdf = tmp_path / "phone.png", tmp_path / "page.pdf"
    for extra in (
        [f"--screenshot={png}", "--window-size=390,2000"],
        [f"--print-to-pdf={pdf}", "--no-pdf-header-footer"],
    ):
        done = subprocess.run(
            [*common, *extra, page.as_uri()], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]

    assert _png_size(png) == (390, 2000)
    assert png.stat().st_size > 20_000  # a blank 390 x 2000 PNG is a few kB
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-")
    pages = re.search(rb"/Count (\d+)", data)
    assert pages and int(pages.group(1)) >= 1
    assert len(data) > 10_000 and b"/Type /Page" in data.replace(b"/Type/Page", b"/Type /Page")


def test_workbook_prints_like_the_finance_workbook(con, tmp_path):
    out = tmp_path / "physics.xlsx"
    write_department_workbook(con, MONTH, PHYSICS, PARAMETERS, out)
    wb = openpyxl.load_workbook(out)
    heading = f"GPU chargeback — {PHYSICS.label} — November 2026 (2026-11)".replace("&", "&&")
    for ws in wb.worksheets:
        assert (ws.page_setup.orientation, ws.oddHeader.left.text) == ("landscape", heading)
        assert (ws.oddHeader.right.text, ws.oddFooter.center.text) == ("&A", "Page &P of &N")
    # one table each: the header repeats on every page (the job lines' identity columns too);
    # the Summary's tenants under their title, from where they begin below the headline
    summary = wb["Summary"]
    header = _total_row(summary) - 3  # two tenants above the TOTAL in this month
    assert (summary[f"A{header - 1}"].value, summary[f"A{header}"].value) == ("Tenants", "Tenant")
    assert [(ws.print_title_rows, ws.print_title_cols) for ws in wb.worksheets[:3]] == [
        (f"${header - 1}:${header}", None),
        ("$1:$1", None),
        ("$1:$1", "$A:$C"),
    ]
    # the parameters, then the figures' definitions on a new page, under their title and
    # header on each page (they run over several)
    definitions = wb["Definitions"]
    assert definitions["A1"].value == "Parameters of this run"
    figures = next(
        r for r in range(1, definitions.max_row + 1)
        if definitions.cell(row=r, column=1).value == "Definitions of the figures"
    )  # fmt: skip
    assert [b.id for b in definitions.row_breaks.brk] == [figures - 1]
    assert definitions.print_title_rows == f"${figures}:${figures + 1}"
