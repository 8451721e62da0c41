"""Property tests of the cost rules over random months: money is conserved to the cent."""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal

import duckdb
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipelines.defs.ingest.loading import gpu_shares
from pipelines.defs.resources import prepare_connection
from pipelines.sql import create_table, run

NOV = {"billing_month": dt.date(2026, 11, 1), "currency": "USD"}
UNITS_PER_CENT = 15_120_000_000_000  # 1,512,000,000 GPU units per GPU-hour x 10^4 / 10^2

COST_POOLS_DDL = (
    "create table cost_pools (billing_month date, cluster varchar, gpu_model varchar, "
    "capacity_units bigint, cost_cents bigint, amount decimal(18, 2), price_micro bigint, "
    "unit_price decimal(18, 6), idle_sharing varchar)"
)
RESERVED_DDL = (
    "create table reserved_quota_unused (billing_month date, tenant_id varchar, "
    "capacity_reservation_id varchar, cluster varchar, gpu_model varchar, "
    "unit_price decimal(18, 6), gpu_units bigint, guaranteed_units bigint, "
    "charge_numerator hugeint)"
)
CHARGES_DDL = (
    "create table job_gpu_charges (billing_month date, cluster varchar, job_id varchar, "
    "tenant_id varchar, "
    "gpu_model varchar, unit_price decimal(18, 6), gpu_units bigint, "
    "charge_numerator hugeint, credit_gpu_units bigint, credit_numerator hugeint, "
    "price_tier varchar)"
)
TENANTS_DDL = (
    "create table catalog_tenants (tenant_id varchar, name varchar, department varchar, "
    "cost_center varchar)"
)
POLICIES = ["weighted", "even", "reserved_quota_first", "platform"]

line = st.tuples(
    st.sampled_from(["a", "b", "c", "d"]),  # tenant
    st.sampled_from(["A100", "H100", "L4"]),  # model
    st.integers(min_value=0, max_value=10**9),  # GPU units / 1000
    st.integers(min_value=1, max_value=9_999_999),  # price in millionths
    st.integers(min_value=0, max_value=100),  # credited percent
)


def exact_cents(numerator: int) -> Decimal:
    return (Decimal(numerator) / UNITS_PER_CENT).quantize(Decimal(1), rounding=ROUND_HALF_UP)


reserved_line = st.tuples(
    st.sampled_from(["a", "b", "e"]),  # tenant
    st.sampled_from(["A100", "H100"]),  # model
    st.integers(min_value=0, max_value=10**9),  # unused GPU units / 1000
    st.integers(min_value=1, max_value=9_999_999),  # price in millionths
)


def computed_lines(con) -> list[dict]:
    run(con, "marts/issued_charge_lines")
    create_table(con, "job_line_cents", "facts/job_line_cents", NOV)
    cursor = run(con, "marts/computed_charge_lines", NOV)
    columns = [c[0] for c in cursor.description]
    return [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]


def assert_jobs_add_up_to_their_lines(con, result: list[dict]) -> None:
    """Each tenant's jobs (their usage less credit cents, job_line_cents) add up to its usage
    and credit lines to the cent."""
    jobs = dict(con.execute(
        "select tenant_id, sum(case when charge_type = 'credit' then -cents else cents end) "
        "from job_line_cents group by all"
    ).fetchall())  # fmt: skip
    lines: dict[str, Decimal] = {}
    for r in result:
        if r["charge_type"] in ("usage", "credit"):
            lines[r["tenant_id"]] = lines.get(r["tenant_id"], Decimal(0)) + r["amount"] * 100
    assert jobs == lines


def rate_card_month(con, lines: list[tuple], reserved: list[tuple]) -> tuple[list, list]:
    """job_gpu_charges and reserved_quota_unused of `lines` and `reserved` (rate_card: no
    cost pools); returns the charge rows and the reservations' exact numerators."""
    rows = []
    for tenant, model, scaled_units, price_micro, credited_pct in lines:
        units = scaled_units * 1000
        credit = units * credited_pct // 100
        rows.append((tenant, model, Decimal(price_micro) / 10**6, units, units * price_micro,
                     credit, credit * price_micro))  # fmt: skip
    for ddl in (CHARGES_DDL, TENANTS_DDL, COST_POOLS_DDL, RESERVED_DDL):
        con.execute(ddl)
    # jobs of one line: a tenant and model priced alike more than once
    for number, row in enumerate(rows):
        con.execute(
            "insert into job_gpu_charges values ('2026-11-01', 'c', ?, ?, ?, ?, ?, ?, ?, ?, null)",
            [f"j{number}", *row],
        )
    reserved_numerators = []
    for tenant, model, scaled_units, price_micro in reserved:
        units = scaled_units * 1000
        reserved_numerators.append(units * price_micro)
        con.execute(
            "insert into reserved_quota_unused values ('2026-11-01', ?, ?, 'c', ?, ?, ?, ?, ?)",
            [tenant, f"{tenant}/{model}", model, Decimal(price_micro) / 10**6, units, units,
             units * price_micro],
        )  # fmt: skip
    return rows, reserved_numerators


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(line, min_size=1, max_size=25), st.lists(reserved_line, max_size=6))
def test_lines_sum_to_tenants_and_the_total_to_the_cent(lines, reserved):
    """rate_card: usage, credits and unused reservations, each rounded once in total."""
    con = prepare_connection(duckdb.connect())
    rows, reserved_numerators = rate_card_month(con, lines, reserved)
    result = computed_lines(con)

    usage = sum(r[4] for r in rows)
    credits = sum(r[6] for r in rows)
    unused = sum(reserved_numerators)
    total = sum(r["amount"] for r in result)
    # the total is the exact usage, credits and unused reservations, each rounded once
    assert total * 100 == exact_cents(usage) - exact_cents(credits) + exact_cents(unused)
    for charge_type, numerator in (("usage", usage), ("credit", credits),
                                   ("reserved_unused", unused)):  # fmt: skip
        amounts = [abs(r["amount"]) for r in result if r["charge_type"] == charge_type]
        assert sum(amounts, Decimal(0)) * 100 == (exact_cents(numerator) if amounts else 0)
    # every line is within one cent of its own exact amount
    for r in result:
        exact = Decimal(r["charge_numerator"]) / UNITS_PER_CENT / 100
        assert abs(abs(r["amount"]) - exact) < Decimal("0.01")
    # one line per tenant x model x price x type x reservation: nothing lost or counted twice
    keys = {
        (r["tenant_id"], r["gpu_model"], r["unit_price"], r["charge_type"],
         r["capacity_reservation_id"])
        for r in result
    }  # fmt: skip
    assert len(keys) == len(result)
    assert not {r["charge_type"] for r in result} & {"idle_share", "platform"}
    assert_jobs_add_up_to_their_lines(con, result)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(line, min_size=1, max_size=25),
    st.lists(reserved_line, max_size=6),
    st.sets(st.integers(min_value=0, max_value=30)),
    st.sets(st.integers(min_value=0, max_value=6)),
)
# three lines of a half cent each, issued 0.01, 0.01, 0.00 (ties by tenant); the third grows
# by 0.004 cents and now has the largest remainder: rounded afresh, the second would lose its
# cent. The same for three unused reservations.
@example(
    lines=[("a", "L4", 151_200, 50_000, 0), ("b", "L4", 151_200, 50_000, 0),
           ("c", "L4", 151_200, 50_000, 0)],
    reserved=[("a", "A100", 151_200, 50_000), ("b", "A100", 151_200, 50_000),
              ("e", "A100", 151_200, 50_000)],
    late_jobs={2},
    restated_reservations={2},
)  # fmt: skip
def test_a_restatement_keeps_the_cents_of_every_line_priced_as_issued(
    lines, reserved, late_jobs, restated_reservations
):
    """A closed month re-run after some jobs' and reservations' GPU time changed: each line
    priced exactly as issued keeps its issued amount; the changed lines of each charge type add
    up to their own exact total rounded half up, each within a cent of its exact amount; the
    jobs still add up to their lines."""
    con = prepare_connection(duckdb.connect())
    rate_card_month(con, lines, reserved)
    computed_lines(con)
    # `chargeback close`: the lines as computed, issued
    create_table(con, "computed_charge_lines", "marts/computed_charge_lines", NOV)
    con.execute(
        "insert into issued_charge_lines by name select *, current_timestamp::timestamp "
        "as issued_at from computed_charge_lines"
    )
    issued = {
        tuple(key): (numerator, units, amount)
        for *key, numerator, units, amount in con.execute(
            "select tenant_id, gpu_model, unit_price, charge_type, capacity_reservation_id, "
            "charge_numerator, gpu_units, amount from issued_charge_lines"
        ).fetchall()
    }
    # the late jobs' time grows by a GPU-second per job number (their credits stay)
    for number in late_jobs:
        con.execute(
            "update job_gpu_charges set gpu_units = gpu_units + $more, "
            "charge_numerator = charge_numerator + $more * (unit_price * 1000000)::hugeint "
            "where job_id = $job",
            {"more": 420_000 * (number + 1), "job": f"j{number}"},
        )
    for number in restated_reservations:
        con.execute(
            "update reserved_quota_unused set gpu_units = gpu_units + 420000, "
            "charge_numerator = charge_numerator + 420000 * (unit_price * 1000000)::hugeint "
            "where rowid = $row",
            {"row": number},
        )
    result = computed_lines(con)

    changed: dict[str, list[dict]] = {}
    for r in result:
        key = (r["tenant_id"], r["gpu_model"], r["unit_price"], r["charge_type"],
               r["capacity_reservation_id"])  # fmt: skip
        if issued.get(key, (None, None))[:2] == (r["charge_numerator"], r["gpu_units"]):
            assert r["amount"] == issued[key][2]
        else:
            changed.setdefault(r["charge_type"], []).append(r)
        exact = Decimal(r["charge_numerator"]) / UNITS_PER_CENT / 100
        assert abs(abs(r["amount"]) - exact) < Decimal("0.01")
    for charge_type, restated in changed.items():
        cents = sum(abs(r["amount"]) for r in restated) * 100
        assert cents == exact_cents(sum(r["charge_numerator"] for r in restated)), charge_type
    assert_jobs_add_up_to_their_lines(con, result)


pool = st.tuples(
    st.sampled_from(["c1", "c2"]),  # cluster
    st.sampled_from(["A100", "H100", "L4"]),  # model
    st.integers(min_value=0, max_value=5_000_000),  # cost in cents
    # capacity GPU units / 10^6, at least 0.66 GPU-hours: a pool of 50,000.00 on less priced
    # a GPU-hour at tens of millions, and a line at hundreds of billions, past what
    # job_line_cents' split of a line's cents over its jobs multiplies in 128 bits
    st.integers(min_value=1000, max_value=10**7),
)
usage_line = st.tuples(
    st.sampled_from(["a", "b", "c", "unmapped"]),  # tenant
    st.integers(min_value=0, max_value=5),  # which pool (modulo the pools drawn)
    st.integers(min_value=0, max_value=10**7),  # GPU units / 10^6 (may exceed capacity)
    st.integers(min_value=0, max_value=100),  # credited percent
)
reserved_share = st.tuples(
    st.sampled_from(["a", "b", "e"]),  # tenant
    st.integers(min_value=0, max_value=5),  # which pool
    st.integers(min_value=0, max_value=10**6),  # unused GPU units / 10^6
    st.integers(min_value=0, max_value=10**6),  # guaranteed GPU units / 10^6
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(pool, min_size=1, max_size=5, unique_by=lambda p: p[:2]),
    st.lists(usage_line, max_size=20),
    st.lists(reserved_share, max_size=6),
    st.sampled_from(POLICIES),
)
def test_full_recovery_lines_add_up_to_each_cluster_cost(pools, usage, reserved, policy):
    """full_recovery: whatever the usage, credits, reservations and policy, the tenant lines
    plus the platform lines of each cluster add up to its cost exactly; shares are never
    negative and only the platform line gives money back."""
    con = prepare_connection(duckdb.connect())
    for ddl in (CHARGES_DDL, TENANTS_DDL, COST_POOLS_DDL, RESERVED_DDL):
        con.execute(ddl)
    priced = []
    for cluster, model, cents, scaled_capacity in pools:
        capacity = scaled_capacity * 10**6
        price_micro = (cents * UNITS_PER_CENT + capacity // 2) // capacity
        priced.append((cluster, model, price_micro))
        con.execute(
            "insert into cost_pools values ('2026-11-01', ?, ?, ?, ?, ?, ?, ?, ?)",
            [cluster, model, capacity, cents, Decimal(cents) / 100, price_micro,
             Decimal(price_micro) / 10**6, policy],
        )  # fmt: skip
    for number, (tenant, which, scaled_units, credited_pct) in enumerate(usage):
        cluster, model, price_micro = priced[which % len(priced)]
        units = scaled_units * 10**6
        credit = units * credited_pct // 100
        con.execute(
            "insert into job_gpu_charges values ('2026-11-01', ?, ?, ?, ?, ?, ?, ?, ?, ?, null)",
            [cluster, f"j{number}", tenant, model,
             Decimal(price_micro) / 10**6, units, units * price_micro, credit,
             credit * price_micro],
        )  # fmt: skip
    for tenant, which, scaled_unused, scaled_guaranteed in reserved:
        cluster, model, price_micro = priced[which % len(priced)]
        unused = scaled_unused * 10**6
        con.execute(
            "insert into reserved_quota_unused values ('2026-11-01', ?, ?, ?, ?, ?, ?, ?, ?)",
            [tenant, f"{tenant}/{model}", cluster, model, Decimal(price_micro) / 10**6,
             unused, unused + scaled_guaranteed * 10**6, unused * price_micro],
        )  # fmt: skip
    result = computed_lines(con)

    costs: dict[str, int] = {}
    for cluster, _, cents, _ in pools:
        costs[cluster] = costs.get(cluster, 0) + cents
    charged: dict[str, Decimal] = {}
    for r in result:
        charged[r["cluster"]] = charged.get(r["cluster"], Decimal(0)) + r["amount"]
    assert {c: a * 100 for c, a in charged.items()} == {
        c: cents for c, cents in costs.items() if c in charged or cents
    }
    assert all(r["amount"] >= 0 for r in result if r["charge_type"] == "idle_share")
    if policy == "platform":
        assert not [r for r in result if r["charge_type"] == "idle_share"]
    assert {r["tenant_id"] for r in result if r["charge_type"] == "platform"} <= {"platform"}
    # one platform line per pool at most; where tenants share a pool's rest, they share all
    # of it (largest remainder leaves no cent to the platform)
    platform = [(r["cluster"], r["gpu_model"]) for r in result if r["charge_type"] == "platform"]
    assert len(platform) == len(set(platform))
    # at the derived rates too
    assert_jobs_add_up_to_their_lines(con, result)
    shared = {(r["cluster"], r["gpu_model"]) for r in result if r["charge_type"] == "idle_share"}
    assert not [
        r for r in result
        if r["charge_type"] == "platform" and (r["cluster"], r["gpu_model"]) in shared
        and r["amount"] != 0
    ]  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["c1", "c2"]),  # cluster
            st.sampled_from(["A100", "H100"]),  # model
            st.integers(min_value=1, max_value=8),  # GPUs
            st.integers(min_value=0, max_value=10_000_000),  # monthly cost in cents
            st.integers(min_value=-5, max_value=29),  # in service from day (< 0: all month)
            st.integers(min_value=1, max_value=40),  # in service for days
        ),
        min_size=1,
        max_size=8,
    ),
    st.integers(min_value=0, max_value=1_000_000),  # c1's overhead in cents
)
def test_cost_pools_sum_exactly_to_the_cluster_cost(nodes, overhead_cents):
    """Prorated node costs plus the overhead, spread by capacity: each pool within a cent of
    its exact cost, and the pools of a cluster sum to its exact cost rounded half up."""
    from fractions import Fraction

    con = prepare_connection(duckdb.connect())
    con.execute("create table catalog_nodes (cluster varchar, node varchar, gpu_model varchar, "
                "gpus integer, in_service_from timestamp, in_service_to timestamp, "
                "monthly_cost decimal(18, 2))")  # fmt: skip
    con.execute("create table gpu_capacity (billing_month date, cluster varchar, "
                "gpu_model varchar, capacity_units bigint)")  # fmt: skip
    con.execute(
        "create table catalog_clusters as select 'c1' as cluster, "
        "?::decimal(18, 2) as monthly_overhead",
        [Decimal(overhead_cents) / 100],
    )
    start, end = dt.datetime(2026, 11, 1), dt.datetime(2026, 12, 1)
    month_ms = int((end - start).total_seconds() * 1000)
    exact: dict[tuple[str, str], Fraction] = {}
    capacity: dict[tuple[str, str], int] = {}
    for i, (cluster, model, gpus, cents, first_day, days) in enumerate(nodes):
        since = start + dt.timedelta(days=first_day)
        until = since + dt.timedelta(days=days)
        con.execute(
            "insert into catalog_nodes values (?, ?, ?, ?, ?, ?, ?)",
            [cluster, f"n{i}", model, gpus, since, until, Decimal(cents) / 100],
        )
        service_ms = int((min(until, end) - max(since, start)).total_seconds() * 1000)
        if service_ms <= 0:
            continue
        units = gpus * service_ms * 420
        con.execute(
            "insert into gpu_capacity values ('2026-11-01', ?, ?, ?)", [cluster, model, units]
        )
        key = (cluster, model)
        exact[key] = exact.get(key, Fraction(0)) + Fraction(cents * service_ms, month_ms)
        capacity[key] = capacity.get(key, 0) + units
    c1_units = sum(u for (c, _), u in capacity.items() if c == "c1")
    for key in exact:
        if key[0] == "c1":
            exact[key] += Fraction(overhead_cents * capacity[key], c1_units)
    params = {**NOV, "month_start": start, "month_end": end, "cost_mode": "full_recovery",
              "idle_sharing": "weighted"}  # fmt: skip
    cursor = run(con, "facts/cost_pools", params)
    columns = [c[0] for c in cursor.description]
    result = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]

    if c1_units == 0 and overhead_cents:  # no capacity: the overhead alone, unshared
        exact[("c1", "*")] = Fraction(overhead_cents)
        capacity[("c1", "*")] = 0
    got = {(r["cluster"], r["gpu_model"]): r for r in result}
    assert set(got) == set(exact)
    for cluster in {c for c, _ in exact}:
        total = sum(v for (c, _), v in exact.items() if c == cluster)
        cents = sum(r["cost_cents"] for (c, _), r in got.items() if c == cluster)
        assert cents == int(total + Fraction(1, 2))  # half up, once per cluster
    for key, r in got.items():
        assert abs(r["cost_cents"] - exact[key]) < 1
        assert r["amount"] * 100 == r["cost_cents"]
        if capacity[key]:
            rate = Fraction(r["cost_cents"] * UNITS_PER_CENT, capacity[key])
            assert r["price_micro"] == int(rate + Fraction(1, 2))
            assert r["unit_price"] * 10**6 == r["price_micro"]
        else:
            assert r["price_micro"] is None


@given(
    st.integers(min_value=1, max_value=4),  # nodes
    st.sampled_from([1 / 7, 2 / 7, 3 / 7, 0.5, 1, 2, 4, 8, 1.5, 16]),  # GPU-eq per node
)
def test_gpu_shares_never_exceed_a_gpu_and_add_up_to_the_request(nodes, per_node):
    shares = gpu_shares(per_node * nodes, nodes)
    assert all(0 < share <= 420 for share in shares)
    assert sum(shares) == round(per_node * 420)
