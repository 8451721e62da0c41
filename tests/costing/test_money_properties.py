"""Property tests of the cost rules over random months: money is conserved to the cent."""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.defs.ingest.loading import gpu_shares
from pipelines.defs.resources import prepare_connection
from pipelines.sql import run

NOV = {"billing_month": dt.date(2026, 11, 1), "currency": "USD"}
UNITS_PER_CENT = 15_120_000_000_000  # 1,512,000,000 GPU units per GPU-hour x 10^4 / 10^2

line = st.tuples(
    st.sampled_from(["a", "b", "c", "d"]),  # tenant
    st.sampled_from(["A100", "H100", "L4"]),  # model
    st.integers(min_value=0, max_value=10**9),  # GPU units / 1000
    st.integers(min_value=1, max_value=9_999_999),  # price in millionths
    st.integers(min_value=0, max_value=100),  # credited percent
)


def exact_cents(numerator: int) -> Decimal:
    return (Decimal(numerator) / UNITS_PER_CENT).quantize(Decimal(1), rounding=ROUND_HALF_UP)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(line, min_size=1, max_size=25))
def test_lines_sum_to_tenants_and_the_total_to_the_cent(lines):
    con = prepare_connection(duckdb.connect())
    rows = []
    for tenant, model, scaled_units, price_micro, credited_pct in lines:
        units = scaled_units * 1000
        credit = units * credited_pct // 100
        rows.append((tenant, model, Decimal(price_micro) / 10**6, units, units * price_micro,
                     credit, credit * price_micro))  # fmt: skip
    con.execute(
        "create table job_gpu_charges (billing_month date, cluster varchar, tenant_id varchar, "
        "gpu_model varchar, unit_price decimal(18, 6), gpu_units bigint, "
        "charge_numerator hugeint, credit_gpu_units bigint, credit_numerator hugeint)"
    )
    for row in rows:
        con.execute(
            "insert into job_gpu_charges values ('2026-11-01', 'c', ?, ?, ?, ?, ?, ?, ?)", row
        )
    con.execute("create table catalog_tenants (tenant_id varchar, name varchar, "
                "department varchar, cost_center varchar)")  # fmt: skip
    cursor = run(con, "marts/computed_charge_lines", NOV)
    columns = [c[0] for c in cursor.description]
    result = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]

    usage = sum(r[4] for r in rows)
    credits = sum(r[6] for r in rows)
    total = sum(r["amount"] for r in result)
    # the total is the exact usage and the exact credits, each rounded once to the cent
    assert total * 100 == exact_cents(usage) - exact_cents(credits)
    for category, numerator in (("Usage", usage), ("Credit", credits)):
        amounts = [abs(r["amount"]) for r in result if r["charge_category"] == category]
        assert sum(amounts, Decimal(0)) * 100 == (exact_cents(numerator) if amounts else 0)
    # every line is within one cent of its own exact amount
    for r in result:
        exact = Decimal(r["charge_numerator"]) / UNITS_PER_CENT / 100
        assert abs(abs(r["amount"]) - exact) < Decimal("0.01")
    # one line per tenant x model x price x category: nothing lost or counted twice
    keys = {(r["tenant_id"], r["gpu_model"], r["unit_price"], r["charge_category"]) for r in result}
    assert len(keys) == len(result)


@given(
    st.integers(min_value=1, max_value=4),  # nodes
    st.sampled_from([1 / 7, 2 / 7, 3 / 7, 0.5, 1, 2, 4, 8, 1.5, 16]),  # GPU-eq per node
)
def test_gpu_shares_never_exceed_a_gpu_and_add_up_to_the_request(nodes, per_node):
    shares = gpu_shares(per_node * nodes, nodes)
    assert all(0 < share <= 420 for share in shares)
    assert sum(shares) == round(per_node * 420)
