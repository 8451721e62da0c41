"""Both cost modes and reserved quota on a month computed by hand.

Cluster `lab`: h1 8 × H100 all November (5,760 GPU-h), a1 2 × A100 from Nov 16 (720 GPU-h);
cluster `edge`: e1 8 × H100 from Nov 16 (2,880 GPU-h), no jobs.
Costs (full_recovery): h1 4,960.00/month, a1 520.00 (half the month: 260.00), e1 1,440.00
(720.00); lab overhead 900.00, spread 5,760 : 720 over its models (800.00 H100, 100.00 A100).
So the pools are lab/H100 5,760.00 (derived rate 1.00), lab/A100 360.00 (0.50), edge/H100
720.00 (0.25); lab costs 6,120.00, edge 720.00.
Rates (rate_card): H100 2.00 until Nov 21, 2.50 from Nov 21; A100 1.00.

Job  tenant  queue  GPUs              November time                         GPU-h
A1   alpha   batch  1 H100 lab/h1     11-11 00:00 - 11-21 00:00             240
B1   beta    train  2 H100 lab/h1     11-01 00:00 - 11-16 00:00             720
B2   beta    batch  1 H100 lab/h1     11-07 00:00 - 11-07 10:00 NODE_FAIL    10 (credited)
B3   beta    batch  1 A100 lab/a1     11-25 00:00 - 11-26 06:00              30
G1   gamma   batch  1 A100 lab/a1     11-20 00:00 - 11-22 12:00              60

Quotas: alpha/H100 guaranteed 4 not reserved until Nov 11, then guaranteed 2 reserved
(effective-dated: only the second version is charged); beta/train (a queue: priced as H100,
the model its time ran on) guaranteed 4 reserved all month.
Reserved unused: alpha 1 GPU × 240 h (holds 1 of 2 until Nov 21) + 2 × 240 h = 720 GPU-h
(240 before the rate change, 480 after); beta 2 × 360 h (holds 2 of 4 for half the month) +
4 × 360 h = 2,160 GPU-h (1,200 before Nov 21, 960 after). Both split over the clusters holding
H100 pro rata to capacity, lab : edge = 5,760 : 2,880 = 2 : 1.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import materialize_month, query, write

# slow (quick tier: make test-quick): materialises a month per idle-sharing policy; full
# recovery is also given/expect-tested in tests/marts/test_charge_lines.py
pytestmark = pytest.mark.slow

MONTH = "2026-11-01"

JOBS = """
job_id,cluster,account,user,queue,qos,gpu_model,gpus,nodes,submit_time,start_time,end_time,state,exit_code
A1,lab,alpha,ann,batch,normal,H100,1,h1,2026-11-11T00:00:00,2026-11-11T00:00:00,2026-11-21T00:00:00,COMPLETED,0
B1,lab,beta,bob,train,normal,H100,2,h1,2026-11-01T00:00:00,2026-11-01T00:00:00,2026-11-16T00:00:00,COMPLETED,0
B2,lab,beta,bob,batch,normal,H100,1,h1,2026-11-07T00:00:00,2026-11-07T00:00:00,2026-11-07T10:00:00,NODE_FAIL,
B3,lab,beta,bob,batch,normal,A100,1,a1,2026-11-25T00:00:00,2026-11-25T00:00:00,2026-11-26T06:00:00,COMPLETED,0
G1,lab,gamma,gus,batch,normal,A100,1,a1,2026-11-20T00:00:00,2026-11-20T00:00:00,2026-11-22T12:00:00,COMPLETED,0
"""

NODES = """
node,cluster,gpu_model,gpus,in_service_from,monthly_cost
h1,lab,H100,8,2025-01-01,4960.00
a1,lab,A100,2,2026-11-16,520.00
e1,edge,H100,8,2026-11-16,1440.00
"""


def settings_yaml(cost_mode: str, idle_sharing: str = "weighted") -> str:
    # no PDFs of the pages (settings.yaml page_pdfs): a second a page, and not what is tested
    return (
        f"currency: USD\ncost_mode: {cost_mode}\nidle_sharing: {idle_sharing}\n"
        "page_pdfs: false\nclusters:\n  lab: {monthly_overhead: 900.00}\n"
    )


def build_recovery_month(root: Path, cost_mode: str, idle_sharing: str = "weighted") -> None:
    write(root / "landing/scheduler/lab/jobs.csv", JOBS)
    (root / "landing/telemetry").mkdir(parents=True, exist_ok=True)
    write(root / "catalog/settings.yaml", settings_yaml(cost_mode, idle_sharing))
    write(
        root / "catalog/tenants.yaml",
        """
        tenants:
          - {id: alpha, name: Alpha, department: Science, cost_center: CC-1, accounts: [alpha]}
          - {id: beta, name: Beta, department: Science, cost_center: CC-2, accounts: [beta]}
          - {id: gamma, name: Gamma, department: Arts, cost_center: CC-3, accounts: [gamma]}
        """,
    )
    write(
        root / "catalog/rates.yaml",
        """
        rates:
          - {gpu_model: H100, price_per_gpu_hour: 2.00, valid_to: 2026-11-21}
          - {gpu_model: H100, price_per_gpu_hour: 2.50, valid_from: 2026-11-21}
          - {gpu_model: A100, price_per_gpu_hour: 1.00}
          - {gpu_model: "*", price_per_gpu_hour: 1.00}
        """,
    )
    write(
        root / "catalog/quotas.yaml",
        """
        quotas:
          - {tenant: alpha, pool: H100, guaranteed_gpus: 4, reserved: false,
             valid_to: 2026-11-11}
          - {tenant: alpha, pool: H100, guaranteed_gpus: 2, reserved: true,
             valid_from: 2026-11-11}
          - {tenant: beta, pool: train, guaranteed_gpus: 4, limit_gpus: 8, reserved: true}
        """,
    )
    write(root / "catalog/nodes.csv", NODES)


def run_month(root: Path, cost_mode: str, idle_sharing: str = "weighted"):
    build_recovery_month(root, cost_mode, idle_sharing)
    result = materialize_month(root, MONTH)
    assert result.success
    return result


LINES_SQL = """
select tenant_id, cluster, gpu_model, charge_type, capacity_reservation_id, gpu_hours,
       unit_price, amount
from charge_lines
where charge_type in ({types})
order by tenant_id, cluster, gpu_model, charge_type, unit_price
"""


def lines(root: Path, *types: str) -> list[tuple]:
    placeholders = ", ".join("?" * len(types))
    return query(root, LINES_SQL.format(types=placeholders), list(types))


def tenant_totals(root: Path) -> dict[str, Decimal]:
    return dict(query(root, "select tenant_id, amount from tenant_month order by 1"))


def cluster_totals(root: Path) -> dict[str, Decimal]:
    return dict(query(root, "select cluster, sum(amount) from charge_lines group by 1"))


# --------------------------------------------------------------------------------------------
# rate_card: reserved quota


@pytest.fixture(scope="module")
def rate_card(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rate_card")
    run_month(root, "rate_card")
    return root


def d(text: str) -> Decimal:
    return Decimal(text)


R = "reserved_unused"


def test_reserved_unused_is_charged_at_the_rate_in_force_on_each_cluster(rate_card):
    # alpha: 240 h at 2.00 and 480 h at 2.50; beta/train: 1,200 h at 2.00 and 960 h at 2.50;
    # each split lab : edge = 2 : 1. The non-reserved first version of alpha's quota (4 GPUs
    # until Nov 11, all unused) is not charged.
    assert lines(rate_card, "reserved_unused") == [
        ("alpha", "edge", "H100", R, "alpha/H100", 80.0, d("2.000000"), d("160.00")),
        ("alpha", "edge", "H100", R, "alpha/H100", 160.0, d("2.500000"), d("400.00")),
        ("alpha", "lab", "H100", R, "alpha/H100", 160.0, d("2.000000"), d("320.00")),
        ("alpha", "lab", "H100", R, "alpha/H100", 320.0, d("2.500000"), d("800.00")),
        ("beta", "edge", "H100", R, "beta/train", 400.0, d("2.000000"), d("800.00")),
        ("beta", "edge", "H100", R, "beta/train", 320.0, d("2.500000"), d("800.00")),
        ("beta", "lab", "H100", R, "beta/train", 800.0, d("2.000000"), d("1600.00")),
        ("beta", "lab", "H100", R, "beta/train", 640.0, d("2.500000"), d("1600.00")),
    ]  # fmt: skip


def test_rate_card_month_totals(rate_card):
    assert lines(rate_card, "usage", "credit") == [
        ("alpha", "lab", "H100", "usage", None, 240.0, d("2.000000"), d("480.00")),
        ("beta", "lab", "A100", "usage", None, 30.0, d("1.000000"), d("30.00")),
        ("beta", "lab", "H100", "credit", None, 10.0, d("2.000000"), d("-20.00")),
        ("beta", "lab", "H100", "usage", None, 730.0, d("2.000000"), d("1460.00")),
        ("gamma", "lab", "A100", "usage", None, 60.0, d("1.000000"), d("60.00")),
    ]
    assert lines(rate_card, "idle_share", "platform") == []
    assert tenant_totals(rate_card) == {
        "alpha": d("2160.00"), "beta": d("6270.00"), "gamma": d("60.00"),
    }  # fmt: skip
    assert query(rate_card, "select count(*) from cost_pools") == [(0,)]


def test_reserved_hours_match_quota_compliance(rate_card):
    # the charged unused hours are quota_compliance's unused guarantee of the reserved quota
    [(beta_unused,)] = query(
        rate_card,
        "select unused_guaranteed_gpu_hours from quota_compliance "
        "where tenant_id = 'beta' and pool = 'train'",
    )
    [(charged,)] = query(
        rate_card,
        "select sum(gpu_hours) from charge_lines "
        "where charge_type = 'reserved_unused' and tenant_id = 'beta'",
    )
    assert beta_unused == charged == 2160.0


def test_focus_marks_unused_reservations(rate_card):
    import csv

    path = rate_card / "reports/2026-11/focus-2026-11.csv"
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    marked = {
        (r["SubAccountId"], r["BillingAccountId"], r["CapacityReservationId"],
         r["CapacityReservationStatus"], r["x_ChargeType"], r["ChargeCategory"])
        for r in rows if r["CapacityReservationStatus"]
    }  # fmt: skip
    assert marked == {
        ("alpha", "edge", "alpha/H100", "Unused", "reserved_unused", "Usage"),
        ("alpha", "lab", "alpha/H100", "Unused", "reserved_unused", "Usage"),
        ("beta", "edge", "beta/train", "Unused", "reserved_unused", "Usage"),
        ("beta", "lab", "beta/train", "Unused", "reserved_unused", "Usage"),
    }
    assert sum(1 for r in rows if r["CapacityReservationStatus"] == "Unused") == 8
    assert all(
        r["CapacityReservationId"] == "" for r in rows if r["x_ChargeType"] != "reserved_unused"
    )
    assert sum(Decimal(r["BilledCost"]) for r in rows) == d("8490.00")


def _rows_above_the_tenants(ws) -> dict:
    """The Summary's rows above its Tenants table (the charge-type reconciliation among them)
    by their label in column A: a tenant may bear a figure's name ("Platform (unrecovered)")."""
    rows = {}
    for row in ws.iter_rows():
        if row[0].value == "Tenants":
            return rows
        if row[0].value:
            rows[row[0].value] = row
    raise AssertionError("no Tenants table on the Summary")


def test_rate_card_workbook_shows_reserved_unused_as_its_own_row(rate_card):
    import openpyxl

    from tests.reports.test_workbook import _evaluate

    wb = openpyxl.load_workbook(rate_card / "reports/2026-11/chargeback-2026-11.xlsx")
    ws = wb["Summary"]
    rows = _rows_above_the_tenants(ws)
    assert [c.value for c in rows["Figure"][4:7]] == ["All clusters", "edge", "lab"]
    figures = {
        "Usage charged": ("0.00", "2030.00"),  # 480 + 1,460 + 30 + 60
        "Credited": ("0.00", "-20.00"),
        "Reserved capacity unused": ("2160.00", "4320.00"),
    }
    for label, expected in figures.items():
        assert tuple(Decimal(str(c.value)) for c in rows[label][5:7]) == tuple(map(d, expected))
    for absent in (
        "Capacity cost (full_recovery)",
        "Shared idle capacity",
        "Platform (unrecovered)",
        "Difference (total − capacity cost, must be 0)",
    ):
        assert absent not in rows  # fmt: skip
    total = rows["Total by charge type"]
    assert _evaluate(wb, "Summary", total[4].value) == d("8490.00")
    difference = rows["Difference (total − Charges TOTAL, must be 0)"][4]
    assert _evaluate(wb, "Summary", difference.value) == 0


# --------------------------------------------------------------------------------------------
# full_recovery: the four idle-sharing policies

# Left to recover after usage, credits and reservations at the derived rates:
#   lab/H100  5,760.00 − (240 + 730 − 10 + 480 + 1,440)  = 2,880.00
#   lab/A100    360.00 − (15 + 30)                        =   315.00
#   edge/H100   720.00 − (60 + 180)                       =   480.00  (nobody ran on edge)
SHARED = {
    # weighted by allocated GPU-hours: lab/H100 alpha 240 : beta 730 -> 712.577.. : 2,167.422..,
    # floors 712.57 + 2,167.42 leave a cent for the larger remainder (alpha);
    # lab/A100 beta 30 : gamma 60; edge: no usage, all to the platform line
    "weighted": [
        ("alpha", "lab", "H100", "idle_share", d("712.58")),
        ("beta", "lab", "A100", "idle_share", d("105.00")),
        ("beta", "lab", "H100", "idle_share", d("2167.42")),
        ("gamma", "lab", "A100", "idle_share", d("210.00")),
        ("platform", "edge", "H100", "platform", d("480.00")),
    ],
    # equally among the tenants that used the pool
    "even": [
        ("alpha", "lab", "H100", "idle_share", d("1440.00")),
        ("beta", "lab", "A100", "idle_share", d("157.50")),
        ("beta", "lab", "H100", "idle_share", d("1440.00")),
        ("gamma", "lab", "A100", "idle_share", d("157.50")),
        ("platform", "edge", "H100", "platform", d("480.00")),
    ],
    # by reserved guaranteed GPU-hours: alpha 2 × 480 h : beta 4 × 720 h = 1 : 3 on both H100
    # pools (edge too: its capacity is reserved though unused); A100 has no reservation: weighted
    "reserved_quota_first": [
        ("alpha", "edge", "H100", "idle_share", d("120.00")),
        ("alpha", "lab", "H100", "idle_share", d("720.00")),
        ("beta", "edge", "H100", "idle_share", d("360.00")),
        ("beta", "lab", "A100", "idle_share", d("105.00")),
        ("beta", "lab", "H100", "idle_share", d("2160.00")),
        ("gamma", "lab", "A100", "idle_share", d("210.00")),
    ],
    "platform": [
        ("platform", "edge", "H100", "platform", d("480.00")),
        ("platform", "lab", "A100", "platform", d("315.00")),
        ("platform", "lab", "H100", "platform", d("2880.00")),
    ],
}
# usage 240 + reserved 480 + 60 (alpha); usage 730 − 10 + 15, reserved 1,440 + 180 (beta);
# usage 30 (gamma); plus the shares above
TOTALS = {
    "weighted": {"alpha": "1492.58", "beta": "4627.42", "gamma": "240.00", "platform": "480.00"},
    "even": {"alpha": "2220.00", "beta": "3952.50", "gamma": "187.50", "platform": "480.00"},
    "reserved_quota_first": {"alpha": "1620.00", "beta": "4980.00", "gamma": "240.00"},
    "platform": {"alpha": "780.00", "beta": "2355.00", "gamma": "30.00", "platform": "3675.00"},
}


@pytest.fixture(scope="module", params=list(SHARED))
def full_recovery(request, tmp_path_factory) -> tuple[str, Path, object]:
    root = tmp_path_factory.mktemp(f"full_recovery_{request.param}")
    result = run_month(root, "full_recovery", request.param)
    return request.param, root, result


def test_pools_sum_to_the_cluster_cost_at_derived_rates(full_recovery):
    _, root, _ = full_recovery
    assert query(
        root,
        "select cluster, gpu_model, capacity_gpu_hours, amount, unit_price from cost_pools "
        "order by 1, 2",
    ) == [
        ("edge", "H100", 2880.0, d("720.00"), d("0.250000")),
        ("lab", "A100", 720.0, d("360.00"), d("0.500000")),
        ("lab", "H100", 5760.0, d("5760.00"), d("1.000000")),
    ]


def test_usage_credits_and_reservations_at_the_derived_rate(full_recovery):
    _, root, _ = full_recovery
    assert lines(root, "usage", "credit", "reserved_unused") == [
        ("alpha", "edge", "H100", R, "alpha/H100", 240.0, d("0.250000"), d("60.00")),
        ("alpha", "lab", "H100", R, "alpha/H100", 480.0, d("1.000000"), d("480.00")),
        ("alpha", "lab", "H100", "usage", None, 240.0, d("1.000000"), d("240.00")),
        ("beta", "edge", "H100", R, "beta/train", 720.0, d("0.250000"), d("180.00")),
        ("beta", "lab", "A100", "usage", None, 30.0, d("0.500000"), d("15.00")),
        ("beta", "lab", "H100", "credit", None, 10.0, d("1.000000"), d("-10.00")),
        ("beta", "lab", "H100", R, "beta/train", 1440.0, d("1.000000"), d("1440.00")),
        ("beta", "lab", "H100", "usage", None, 730.0, d("1.000000"), d("730.00")),
        ("gamma", "lab", "A100", "usage", None, 60.0, d("0.500000"), d("30.00")),
    ]  # fmt: skip
    # job_usage.amount is the job's usage at the derived rate, less its credit
    assert query(root, "select job_id, amount from job_usage order by 1") == [
        ("A1", d("240.00")), ("B1", d("720.00")), ("B2", d("0.00")), ("B3", d("15.00")),
        ("G1", d("30.00")),
    ]  # fmt: skip


def test_idle_capacity_is_shared_by_policy(full_recovery):
    policy, root, _ = full_recovery
    shared = [row[:4] + row[7:] for row in lines(root, "idle_share", "platform")]
    assert shared == SHARED[policy]
    expected = {tenant: d(amount) for tenant, amount in TOTALS[policy].items()}
    totals = tenant_totals(root)
    assert {t: a for t, a in totals.items() if a or t in expected} == expected


def test_each_cluster_recovers_its_cost_to_the_cent(full_recovery):
    policy, root, result = full_recovery
    assert cluster_totals(root) == {"lab": d("6120.00"), "edge": d("720.00")}
    assert sum(tenant_totals(root).values()) == d("6840.00")
    outcomes = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert outcomes["cluster_cost_recovered"] and outcomes["charges_tie_out"]


def test_the_platform_line_is_a_tenant_of_its_own(full_recovery):
    policy, root, _ = full_recovery
    platform = query(
        root,
        "select tenant_name, department, budget_status from tenant_month "
        "where tenant_id = 'platform'",
    )
    if policy == "reserved_quota_first":  # everything shared: no platform line
        assert platform == []
    else:
        assert platform == [("Platform (unrecovered)", "Platform", "no budget")]
    assert query(root, "select count(*) from job_usage where tenant_id = 'platform'") == [(0,)]


# one policy is enough for the workbook layout and for the check
@pytest.mark.parametrize("full_recovery", ["weighted"], indirect=True)
def test_workbook_summary_reconciles_the_cost(full_recovery):
    import openpyxl

    _, root, _ = full_recovery
    wb = openpyxl.load_workbook(root / "reports/2026-11/chargeback-2026-11.xlsx")
    ws = wb["Summary"]
    rows = _rows_above_the_tenants(ws)
    assert [c.value for c in rows["Figure"][4:7]] == ["All clusters", "edge", "lab"]
    figures = {
        # edge: cost 720, reserved 60 + 180, the rest unrecovered; lab: cost 6,120 = usage
        # 240 + 730 + 15 + 30, credit −10, reserved 480 + 1,440, shares 712.58 + 2,167.42 +
        # 105 + 210
        "Capacity cost (full_recovery)": ("720.00", "6120.00"),
        "Usage charged": ("0.00", "1015.00"),
        "Credited": ("0.00", "-10.00"),
        "Reserved capacity unused": ("240.00", "1920.00"),
        "Shared idle capacity": ("0.00", "3195.00"),
        "Platform (unrecovered)": ("480.00", "0.00"),
    }
    for label, expected in figures.items():
        cells = rows[label]
        assert tuple(Decimal(str(c.value)) for c in cells[5:7]) == tuple(map(d, expected))
        assert cells[4].value == f"=SUM(F{cells[4].row}:G{cells[4].row})"
    total, to_charges, to_cost = (
        rows["Total by charge type"],
        rows["Difference (total − Charges TOTAL, must be 0)"],
        rows["Difference (total − capacity cost, must be 0)"],
    )
    first, last = rows["Usage charged"][0].row, rows["Platform (unrecovered)"][0].row
    assert [c.value for c in total[4:7]] == [
        f"={col}{first}:{col}{last})".replace("=", "=SUM(") for col in "EFG"
    ]
    cost_row = rows["Capacity cost (full_recovery)"][0].row
    assert [c.value for c in to_cost[4:7]] == [
        f"={col}{total[0].row}-{col}{cost_row}" for col in "EFG"
    ]
    charges = wb["Charges"]
    charges_total = next(r[0].row for r in charges.iter_rows() if r[0].value == "TOTAL")
    assert to_charges[4].value == f"=E{total[0].row}-'Charges'!$L${charges_total}"
    # evaluated, the differences are zero and the totals are the costs
    from tests.reports.test_workbook import _evaluate

    assert [_evaluate(wb, "Summary", c.value) for c in total[4:7]] == [
        d("6840.00"), d("720.00"), d("6120.00"),
    ]  # fmt: skip
    assert [_evaluate(wb, "Summary", c.value) for c in to_cost[4:7]] == [0, 0, 0]
    assert _evaluate(wb, "Summary", to_charges[4].value) == 0


@pytest.mark.parametrize("full_recovery", ["weighted"], indirect=True)
def test_the_check_finds_a_cluster_that_does_not_recover_its_cost(full_recovery, tmp_path):
    import datetime as dt
    import shutil

    import duckdb

    from pipelines.defs.resources import prepare_connection
    from pipelines.sql import run

    _, root, _ = full_recovery
    copy = tmp_path / "warehouse.duckdb"
    shutil.copy(root / "warehouse.duckdb", copy)
    con = prepare_connection(duckdb.connect(str(copy)))
    month = {"billing_month": dt.date(2026, 11, 1)}
    assert run(con, "checks/cluster_cost_recovered", month).fetchall() == []
    # a cent lost on one line of lab/A100, and a line on a pool with no cost
    con.execute(
        "update charge_lines set amount = amount - 0.01 "
        "where tenant_id = 'gamma' and charge_type = 'idle_share'"
    )
    con.execute(
        "insert into charge_lines (billing_month, tenant_id, cluster, gpu_model, charge_type, "
        "amount) values ('2026-11-01', 'gamma', 'edge', 'L4', 'usage', 1.00)"
    )
    assert run(con, "checks/cluster_cost_recovered", month).fetchall() == [
        ("cluster", "edge", d("721.00"), d("720.00")),
        ("cluster", "lab", d("6119.99"), d("6120.00")),
        ("pool", "edge/L4", d("1.00"), d("0.00")),
        ("pool", "lab/A100", d("359.99"), d("360.00")),
    ]


@pytest.mark.parametrize("full_recovery", ["weighted"], indirect=True)
def test_the_cost_check_fails_on_a_null_amount(full_recovery, tmp_path):
    import datetime as dt
    import shutil

    import duckdb

    from pipelines.defs.resources import prepare_connection
    from pipelines.sql import run

    _, root, _ = full_recovery
    copy = tmp_path / "warehouse.duckdb"
    shutil.copy(root / "warehouse.duckdb", copy)
    con = prepare_connection(duckdb.connect(str(copy)))
    month = {"billing_month": dt.date(2026, 11, 1)}
    # a line priced NULL: the sums skip it, so the pools alone would still recover their cost
    con.execute(
        "insert into charge_lines (billing_month, tenant_id, cluster, gpu_model, charge_type, "
        "amount) values ('2026-11-01', 'gamma', 'lab', 'A100', 'usage', null)"
    )
    assert run(con, "checks/cluster_cost_recovered", month).fetchall() == [
        ("null", "gamma/lab/A100/usage", None, None),
    ]
