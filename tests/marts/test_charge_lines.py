"""charge_lines: the bill, one row per billing month × tenant × cluster × GPU model × charge
category × charge type × unit price × capacity reservation (× charge class once closed).

Given: canonical jobs CSV and a catalog, built through the real ingest and SQL steps
(tests/marts/conftest.py, GivenMonth): the charge_lines asset's own three statements
(reserved_quota_unused, computed_charge_lines, charge_lines) run on job_gpu_charges, cost_pools
and quota_steps built from the jobs, so rounding, credits and reservations are tested where
they are computed. No telemetry: charges do not depend on it.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from pipelines.close import close_month
from pipelines.sql import run
from tests.marts.conftest import JOBS_HEADER, GivenMonth, pick, records

TENANTS = """
    tenants:
      - {id: alpha, name: Alpha Lab, department: Physics, cost_center: CC-1, accounts: [alpha]}
      - {id: beta, name: Beta Lab, department: Physics, cost_center: CC-2, accounts: [beta]}
      - {id: gamma, name: Gamma Lab, department: Biology, cost_center: CC-3, accounts: [gamma]}
"""
COLUMNS = (
    "tenant_id", "cluster", "gpu_model", "charge_category", "charge_class", "charge_type",
    "capacity_reservation_id", "gpu_hours", "unit_price", "amount", "currency",
)  # fmt: skip
D = Decimal


def build(month: GivenMonth, jobs: str, **catalog: str) -> list[dict]:
    month.catalog(tenants=TENANTS, **catalog)
    month.file("landing/scheduler/c1/jobs.csv", jobs)
    return month.build("charge_lines")


def closed_and_rerun(month: GivenMonth, jobs: str, late_job: str, **catalog: str) -> list[dict]:
    """Build the month of `jobs`, close it, then build it again with `late_job` (a jobs.csv
    line a late export adds); returns the re-run's charge lines."""
    build(month, jobs, **catalog)
    close_month(month.con, dt.date(2026, 11, 1), "finance@example.com")
    return build(month, jobs + late_job + "\n", **catalog)


# Rate card: n1 holds 4 A100 at 2.50 USD/GPU-hour, n2 one T4 at 0.05. Outage of n1 on Nov 10
# 00:00-02:00. gamma has a reserved guarantee of 1 A100 GPU.
RATE_CARD = {
    "rates": """
        rates:
          - {gpu_model: A100, price_per_gpu_hour: 2.50}
          - {gpu_model: T4, price_per_gpu_hour: 0.05}
    """,
    "nodes": """
        node,cluster,gpu_model,gpus
        n1,c1,A100,4
        n2,c1,T4,1
    """,
    "outages": """
        outages:
          - {nodes: n1, start: 2026-11-10T00:00:00, end: 2026-11-10T02:00:00, reason: driver}
    """,
    "quotas": """
        quotas:
          - {tenant: gamma, pool: A100, guaranteed_gpus: 1, limit_gpus: 2, reserved: true}
    """,
}
RATE_CARD_JOBS = f"""
    {JOBS_HEADER}
    a1,alpha,ann,batch,normal,A100,2,n1,2026-11-02T10:00:00,2026-11-02T10:00:00,2026-11-02T11:30:00,COMPLETED,0
    a2,alpha,ann,batch,normal,A100,1,n1,2026-11-10T01:00:00,2026-11-10T01:00:00,2026-11-10T03:00:00,COMPLETED,0
    b1,beta,bob,batch,normal,A100,1,n1,2026-11-20T00:00:00,2026-11-20T00:00:00,2026-11-20T01:30:00,NODE_FAIL,
    g1,gamma,gil,batch,normal,A100,1,n1,2026-11-05T00:00:00,2026-11-05T00:00:00,2026-11-05T10:00:00,COMPLETED,0
    ta,alpha,ann,batch,normal,T4,1,n2,2026-11-06T00:00:00,2026-11-06T00:00:00,2026-11-06T00:06:00,COMPLETED,0
    tb,beta,bob,batch,normal,T4,1,n2,2026-11-07T00:00:00,2026-11-07T00:00:00,2026-11-07T00:06:00,COMPLETED,0
    tg,gamma,gil,batch,normal,T4,1,n2,2026-11-08T00:00:00,2026-11-08T00:00:00,2026-11-08T00:06:00,COMPLETED,0
"""


@pytest.fixture(scope="module")
def rate_card(tmp_path_factory) -> list[dict]:
    month = GivenMonth(tmp_path_factory.mktemp("rate_card"))
    try:
        return build(month, RATE_CARD_JOBS, **RATE_CARD)
    finally:
        month.close()


def test_rate_card_lines(rate_card):
    assert pick(rate_card, *COLUMNS) == [
        # a1 2 GPUs x 1.5 h = 3.0 + a2 1 GPU x 2 h = 2.0: 5.0 GPU-h x 2.50 = 12.50
        ("alpha", "c1", "A100", "Usage", None, "usage", None, 5.0, D("2.500000"), D("12.50"),
         "USD"),
        # a2's hour 01:00-02:00 inside n1's outage is credited back: 1.0 x 2.50
        ("alpha", "c1", "A100", "Credit", None, "credit", None, 1.0, D("2.500000"), D("-2.50"),
         "USD"),
        # 6 minutes = 0.1 GPU-h x 0.05 = 0.005 (see the rounding test)
        ("alpha", "c1", "T4", "Usage", None, "usage", None, 0.1, D("0.050000"), D("0.01"), "USD"),
        # b1 NODE_FAIL, 1.5 h: charged 3.75 and all of it credited
        ("beta", "c1", "A100", "Usage", None, "usage", None, 1.5, D("2.500000"), D("3.75"),
         "USD"),
        ("beta", "c1", "A100", "Credit", None, "credit", None, 1.5, D("2.500000"), D("-3.75"),
         "USD"),
        ("beta", "c1", "T4", "Usage", None, "usage", None, 0.1, D("0.050000"), D("0.01"), "USD"),
        # g1: 10 h x 2.50 = 25.00
        ("gamma", "c1", "A100", "Usage", None, "usage", None, 10.0, D("2.500000"), D("25.00"),
         "USD"),
        # gamma's reserved 1 GPU x 720 h, 10 h of it used: 710 GPU-h unused x 2.50 = 1,775.00
        ("gamma", "c1", "A100", "Usage", None, "reserved_unused", "gamma/A100", 710.0,
         D("2.500000"), D("1775.00"), "USD"),
        ("gamma", "c1", "T4", "Usage", None, "usage", None, 0.1, D("0.050000"), D("0.00"), "USD"),
    ]  # fmt: skip


def test_cents_are_rounded_half_up_once_and_lines_add_up_to_the_total(rate_card):
    usage = [row["amount"] for row in rate_card if row["charge_type"] == "usage"]
    # exact usage: 12.50 + 0.005 + 3.75 + 0.005 + 25.00 + 0.005 = 41.265, half up 41.27 once.
    # Each line gets its floor (41.25), then the two cents left go to the lines with the
    # largest remainders (the three T4 lines' half cent, ties by tenant id: alpha, beta).
    # Rounding each line half up would bill 41.28.
    assert sum(usage) == D("41.27")
    assert sum(row["amount"] for row in rate_card) == D("41.27") - D("6.25") + D("1775.00")


def test_tenant_fields_and_descriptions(rate_card):
    assert pick(rate_card[:2] + rate_card[7:8], "tenant_name", "department", "cost_center",
                "charge_description") == [
        ("Alpha Lab", "Physics", "CC-1", "GPU usage, A100 at 2.5 USD/GPU-hour"),
        ("Alpha Lab", "Physics", "CC-1",
         "Credit for failed infrastructure, A100 at 2.5 USD/GPU-hour"),
        ("Gamma Lab", "Biology", "CC-3",
         "Reserved capacity unused (gamma/A100), A100 at 2.5 USD/GPU-hour"),
    ]  # fmt: skip
    assert {row["billing_month"] for row in rate_card} == {dt.date(2026, 11, 1)}


# Full recovery: n1's 2 A100 cost 1,000.00 a month, n2's T4 72.00; idle capacity shared by
# allocated GPU-hours (weighted).
FULL_RECOVERY = {
    "settings": "cost_mode: full_recovery\nidle_sharing: weighted\n",
    "rates": """
        rates:
          - {gpu_model: "*", price_per_gpu_hour: 9.99}
    """,
    "nodes": """
        node,cluster,gpu_model,gpus,monthly_cost
        n1,c1,A100,2,1000.00
        n2,c1,T4,1,72.00
    """,
}
FULL_RECOVERY_JOBS = f"""
    {JOBS_HEADER}
    a1,alpha,ann,batch,normal,A100,2,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T03:00:00,COMPLETED,0
    b1,beta,bob,batch,normal,A100,1,n1,2026-11-03T00:00:00,2026-11-03T00:00:00,2026-11-03T02:00:00,COMPLETED,0
"""


@pytest.fixture(scope="module")
def full_recovery(tmp_path_factory) -> list[dict]:
    month = GivenMonth(tmp_path_factory.mktemp("full_recovery"))
    try:
        return build(month, FULL_RECOVERY_JOBS, **FULL_RECOVERY)
    finally:
        month.close()


def test_full_recovery_lines(full_recovery):
    assert pick(full_recovery, *COLUMNS) == [
        # derived A100 rate: 1,000.00 / (2 GPUs x 720 h) = 0.694444 (half up, millionths).
        # a1 2 GPUs x 3 h = 6 GPU-h x 0.694444 = 4.166664; b1 2 GPU-h = 1.388888: exact usage
        # 5.555552, half up 5.56; floors 4.16 + 1.38, one cent more to each (largest
        # remainders): 4.17 and 1.39
        ("alpha", "c1", "A100", "Usage", None, "usage", None, 6.0, D("0.694444"), D("4.17"),
         "USD"),
        # left to recover 1,000.00 - 5.56 = 994.44, weighted 6 : 2 GPU-h = 745.83 and 248.61;
        # the idle 1,440 - 8 = 1,432 GPU-h split the same way: 1,074 and 358
        ("alpha", "c1", "A100", "Usage", None, "idle_share", None, 1074.0, D("0.694444"),
         D("745.83"), "USD"),
        ("beta", "c1", "A100", "Usage", None, "usage", None, 2.0, D("0.694444"), D("1.39"),
         "USD"),
        ("beta", "c1", "A100", "Usage", None, "idle_share", None, 358.0, D("0.694444"),
         D("248.61"), "USD"),
        # nobody used the T4 pool (72.00 / 720 h = 0.10): its whole cost on the platform line
        ("platform", "c1", "T4", "Usage", None, "platform", None, 720.0, D("0.100000"),
         D("72.00"), "USD"),
    ]  # fmt: skip


def test_full_recovery_recovers_the_cluster_cost_to_the_cent(full_recovery):
    assert sum(row["amount"] for row in full_recovery) == D("1072.00")
    platform = [row for row in full_recovery if row["tenant_id"] == "platform"]
    assert pick(platform, "tenant_name", "department") == [("Platform (unrecovered)", "Platform")]


@pytest.fixture(scope="module")
def preemptible(tmp_path_factory) -> list[dict]:
    # FULL_RECOVERY with a1 on a preemptible queue priced at half the rate
    month = GivenMonth(tmp_path_factory.mktemp("preemptible"))
    rates = """
        rates:
          - {gpu_model: "*", price_per_gpu_hour: 9.99}
        tiers:
          - {queue: preemptible, multiplier: 0.5}
    """
    jobs = FULL_RECOVERY_JOBS.replace("a1,alpha,ann,batch,", "a1,alpha,ann,preemptible,")
    try:
        return build(month, jobs, **{**FULL_RECOVERY, "rates": rates})
    finally:
        month.close()


def test_a_preemptible_queue_is_charged_at_its_tier_and_the_pool_still_recovered(preemptible):
    assert pick(preemptible, *COLUMNS, "charge_description") == [
        # a1: 6 GPU-h at 0.694444 x 0.5 = 0.347222: 2.083332; b1: 2 GPU-h x 0.694444 =
        # 1.388888; exact 3.47222, half up 3.47: floors 2.08 + 1.38, the cent to b1's larger
        # remainder
        ("alpha", "c1", "A100", "Usage", None, "usage", None, 6.0, D("0.347222"), D("2.08"),
         "USD", "GPU usage, A100 at the derived rate 0.347222 USD/GPU-hour "
         "(queue preemptible × 0.5)"),
        # the discount is not lost: left 1,000.00 - 3.47 = 996.53, weighted 6 : 2 GPU-h =
        # 747.3975 and 249.1325: floors 747.39 + 249.13, the cent to alpha's larger remainder
        ("alpha", "c1", "A100", "Usage", None, "idle_share", None, 1074.0, D("0.694444"),
         D("747.40"), "USD", "Share of unrecovered A100 capacity cost on c1 (weighted policy)"),
        ("beta", "c1", "A100", "Usage", None, "usage", None, 2.0, D("0.694444"), D("1.39"),
         "USD", "GPU usage, A100 at the derived rate 0.694444 USD/GPU-hour"),
        ("beta", "c1", "A100", "Usage", None, "idle_share", None, 358.0, D("0.694444"),
         D("249.13"), "USD", "Share of unrecovered A100 capacity cost on c1 (weighted policy)"),
        ("platform", "c1", "T4", "Usage", None, "platform", None, 720.0, D("0.100000"),
         D("72.00"), "USD", "Capacity cost of T4 on c1 not recovered from tenants"),
    ]  # fmt: skip
    assert sum(row["amount"] for row in preemptible) == D("1072.00")


def test_a_closed_month_keeps_its_issued_lines_and_adds_corrections(given_month):
    # a late export adds a3: alpha, 1 A100 GPU for 1 h (2.50)
    rerun = closed_and_rerun(
        given_month,
        RATE_CARD_JOBS,
        "a3,alpha,ann,batch,normal,A100,1,n1,2026-11-12T00:00:00,2026-11-12T00:00:00,"
        "2026-11-12T01:00:00,COMPLETED,0",
        **RATE_CARD,
    )
    issued = records(given_month.con.execute(
        "select * from issued_charge_lines order by tenant_id, cluster, gpu_model, "
        "charge_category desc, charge_type_order(charge_type)"
    ))  # fmt: skip
    assert len(issued) == 9
    alpha_a100 = [line for line in pick(rerun, *COLUMNS) if line[:3] == ("alpha", "c1", "A100")]
    assert alpha_a100 == [
        # as issued: 5.0 GPU-h, 12.50
        ("alpha", "c1", "A100", "Usage", None, "usage", None, 5.0, D("2.500000"), D("12.50"),
         "USD"),
        # computed now 6.0 GPU-h, 15.00: the difference as a Correction line
        ("alpha", "c1", "A100", "Usage", "Correction", "usage", None, 1.0, D("2.500000"),
         D("2.50"), "USD"),
        ("alpha", "c1", "A100", "Credit", None, "credit", None, 1.0, D("2.500000"), D("-2.50"),
         "USD"),
    ]  # fmt: skip
    # every other issued line is unchanged and gets no correction
    assert [line for line in pick(rerun, *COLUMNS) if line[4] is None] == pick(issued, *COLUMNS)
    assert sum(row["amount"] for row in rerun) == sum(row["amount"] for row in issued) + D("2.50")


def test_a_restatement_corrects_only_the_lines_that_changed(given_month):
    """Lines are rounded by largest remainder across a charge type, so a late job can move the
    cent of another tenant's line. A closed month's re-run keeps the issued cents of every line
    it prices exactly as issued: only the changed lines are corrected, rounded among
    themselves, and the month still ties out (checks/charges_tie_out)."""
    # a late export adds tg2: gamma, 1 T4 GPU for 9 minutes (0.15 GPU-h x 0.05 = 0.0075), so
    # gamma's T4 line is now 0.0125 exact. Rounded afresh with the others (exact usage 41.2725,
    # half up 41.27: floors 41.26, one cent to the largest remainder, alpha's half cent),
    # beta's unchanged T4 line would lose its issued cent and gamma's gain one.
    rerun = closed_and_rerun(
        given_month,
        RATE_CARD_JOBS,
        "tg2,gamma,gil,batch,normal,T4,1,n2,2026-11-09T00:00:00,2026-11-09T00:00:00,"
        "2026-11-09T00:09:00,COMPLETED,0",
        **RATE_CARD,
    )
    assert [line for line in pick(rerun, *COLUMNS) if line[4] == "Correction"] == [
        # gamma's T4 line alone changed: 0.0125 exact, half up 0.01, issued 0.00
        ("gamma", "c1", "T4", "Usage", "Correction", "usage", None, 0.15, D("0.050000"),
         D("0.01"), "USD"),
    ]  # fmt: skip
    # issued 41.27 + 1,775.00 - 6.25 and the correction; the exact usage is 41.2725
    assert sum(row["amount"] for row in rerun) == D("1810.03")
    params = {"billing_month": dt.date(2026, 11, 1)}
    for table in ("job_usage", "tenant_month"):
        given_month.build(table)
    assert run(given_month.con, "checks/charges_tie_out", params).fetchall() == []
    # the jobs' cents still add up to the (now partly issued) lines
    assert records(given_month.con.execute(
        "select tenant_id, sum(amount) as amount from job_usage where gpu_model = 'T4' "
        "group by all order by all"
    )) == [
        {"tenant_id": "alpha", "amount": D("0.01")},
        {"tenant_id": "beta", "amount": D("0.01")},
        {"tenant_id": "gamma", "amount": D("0.01")},
    ]  # fmt: skip


def test_a_restated_full_recovery_month_still_recovers_each_pool(given_month):
    # a late export adds g1: gamma, 1 A100 GPU for 1 h at the derived 0.694444
    rerun = closed_and_rerun(
        given_month,
        FULL_RECOVERY_JOBS,
        "g1,gamma,gil,batch,normal,A100,1,n1,2026-11-04T00:00:00,2026-11-04T00:00:00,"
        "2026-11-04T01:00:00,COMPLETED,0",
        **FULL_RECOVERY,
    )
    assert [line for line in pick(rerun, *COLUMNS) if line[4] == "Correction"] == [
        # alpha's and beta's usage lines are priced as issued (4.17, 1.39): no correction.
        # Left to recover 1,000.00 - 4.17 - 1.39 - 0.69 = 993.75, weighted 6 : 2 : 1 GPU-h:
        # 662.50, 220.83 and 110.42 (the cent left to gamma's largest remainder); the idle
        # 1,431 GPU-h: 954, 318 and 159
        ("alpha", "c1", "A100", "Usage", "Correction", "idle_share", None, -120.0,
         D("0.694444"), D("-83.33"), "USD"),
        ("beta", "c1", "A100", "Usage", "Correction", "idle_share", None, -40.0, D("0.694444"),
         D("-27.78"), "USD"),
        ("gamma", "c1", "A100", "Usage", "Correction", "usage", None, 1.0, D("0.694444"),
         D("0.69"), "USD"),
        ("gamma", "c1", "A100", "Usage", "Correction", "idle_share", None, 159.0,
         D("0.694444"), D("110.42"), "USD"),
    ]  # fmt: skip
    assert sum(row["amount"] for row in rerun) == D("1072.00")
    params = {"billing_month": dt.date(2026, 11, 1)}
    given_month.build("tenant_month")
    assert run(given_month.con, "checks/cluster_cost_recovered", params).fetchall() == []
    assert run(given_month.con, "checks/charges_tie_out", params).fetchall() == []
