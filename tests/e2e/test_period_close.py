"""Closing a month: issued lines never change; re-runs add corrections; open months replace."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from pipelines.close import CloseError, close_month, main
from tests.conftest import materialize_month, query, resource_for, write
from tests.e2e.test_tiny_month import build_tiny_month

# slow (quick tier: make test-quick): materialises the tiny month several times per test;
# closed-month corrections are also given/expect-tested in tests/marts/test_charge_lines.py
pytestmark = pytest.mark.slow

CHEAPER_A100 = """
rates:
  - {gpu_model: A100, price_per_gpu_hour: 1.50}
  - {gpu_model: "*", price_per_gpu_hour: 1.00}
"""


def lines(root):
    return query(
        root,
        "select tenant_id, gpu_model, charge_category, charge_class, unit_price, amount "
        "from charge_lines "
        "where billing_month = '2026-11-01'",
    )


def test_closed_month_keeps_issued_lines_and_adds_corrections(tmp_path, monkeypatch):
    build_tiny_month(tmp_path)
    assert materialize_month(tmp_path, "2026-11-01").success
    issued = lines(tmp_path)
    monkeypatch.setenv("CHARGEBACK_WAREHOUSE", str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("CHARGEBACK_CATALOG_DIR", str(tmp_path / "catalog"))
    assert main(["--month", "2026-11", "--by", "finance"]) == 0
    # the catalog changes after the close: A100 gets cheaper
    write(tmp_path / "catalog/rates.yaml", CHEAPER_A100)
    assert materialize_month(tmp_path, "2026-11-01").success
    after = lines(tmp_path)
    assert [row for row in after if row[3] is None] == issued  # issued lines untouched
    # A100 now at 1.50/h: each A100 line at the old price is reversed and the new-price line
    # added (the unit price is part of a line's key): alpha 6.75 h -> 10.13 (was 13.59),
    # its credit of 1 h -> -1.50 (was -2.01); beta 2 h -> 3.00 (4.03); unmapped 3.00 (4.02)
    old, new = Decimal("2.013300"), Decimal("1.500000")
    assert [row for row in after if row[3] == "Correction"] == [
        ("alpha", "A100", "Usage", "Correction", new, Decimal("10.13")),
        ("alpha", "A100", "Usage", "Correction", old, Decimal("-13.59")),
        ("alpha", "A100", "Credit", "Correction", new, Decimal("-1.50")),
        ("alpha", "A100", "Credit", "Correction", old, Decimal("2.01")),
        ("beta", "A100", "Usage", "Correction", new, Decimal("3.00")),
        ("beta", "A100", "Usage", "Correction", old, Decimal("-4.03")),
        ("unmapped", "A100", "Usage", "Correction", new, Decimal("3.00")),
        ("unmapped", "A100", "Usage", "Correction", old, Decimal("-4.02")),
    ]
    net = query(tmp_path, "select sum(amount) from charge_lines")[0][0]
    computed = query(tmp_path, "select sum(amount) from computed_charge_lines")[0][0]
    assert net == computed == Decimal("19.63") - Decimal("5.00")
    assert query(tmp_path, "select sum(amount) from tenant_month")[0][0] == net


def test_an_open_month_is_replaced_and_a_month_closes_once(tmp_path):
    build_tiny_month(tmp_path)
    assert materialize_month(tmp_path, "2026-11-01").success
    write(tmp_path / "catalog/rates.yaml", CHEAPER_A100)
    assert materialize_month(tmp_path, "2026-11-01").success
    assert all(row[3] is None for row in lines(tmp_path))
    assert query(tmp_path, "select sum(amount) from charge_lines")[0][0] == Decimal("14.63")
    with resource_for(tmp_path).connect() as con:
        assert close_month(con, dt.date(2026, 11, 1), "finance") == (6, "14.63")
        with pytest.raises(CloseError, match="2026-11 is already closed"):
            close_month(con, dt.date(2026, 11, 1), "finance")
        with pytest.raises(CloseError, match="2026-10 has no charge lines"):
            close_month(con, dt.date(2026, 10, 1), "finance")


def test_the_workbook_shows_issued_corrections_and_net(tmp_path):
    import openpyxl

    build_tiny_month(tmp_path)
    assert materialize_month(tmp_path, "2026-11-01").success
    with resource_for(tmp_path).connect() as con:
        close_month(con, dt.date(2026, 11, 1), "finance")
    write(tmp_path / "catalog/rates.yaml", CHEAPER_A100)
    assert materialize_month(tmp_path, "2026-11-01").success
    summary = openpyxl.load_workbook(tmp_path / "reports/2026-11/chargeback-2026-11.xlsx")[
        "Summary"
    ]
    values = {row[0].value: row[4].value for row in summary.iter_rows() if row[0].value}
    assert Decimal(str(values["Issued lines (charge class empty)"])) == Decimal("19.63")
    assert Decimal(str(values["Corrections (charge class Correction)"])) == Decimal("-5.00")
    assert values["Net (issued + corrections)"].startswith("=E")


def test_a_closed_month_rerun_in_full_recovery_is_corrected_line_by_line(tmp_path):
    from tests.e2e.test_full_recovery import build_recovery_month, settings_yaml

    key_sql = (
        "select tenant_id, cluster, gpu_model, charge_type, unit_price, "
        "capacity_reservation_id, amount from {table} where billing_month = '2026-11-01' "
        "{where} order by all"
    )
    build_recovery_month(tmp_path, "rate_card")
    assert materialize_month(tmp_path, "2026-11-01").success
    issued = query(tmp_path, key_sql.format(table="charge_lines", where=""))
    with resource_for(tmp_path).connect() as con:
        assert close_month(con, dt.date(2026, 11, 1), "finance") == (13, "8490.00")
    # after the close the platform team moves to full cost recovery
    write(tmp_path / "catalog/settings.yaml", settings_yaml("full_recovery", "weighted"))
    result = materialize_month(tmp_path, "2026-11-01")
    assert result.success
    outcomes = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert outcomes["cluster_cost_recovered"] and outcomes["charges_tie_out"]

    kept = query(tmp_path, key_sql.format(table="charge_lines", where="and charge_class is null"))
    assert kept == issued
    computed = query(tmp_path, key_sql.format(table="computed_charge_lines", where=""))
    corrections = query(
        tmp_path, key_sql.format(table="charge_lines", where="and charge_class = 'Correction'")
    )
    # every issued line is reversed (no key is the same: the derived rates differ from the
    # rate card's) and every full_recovery line is added, idle shares and platform included
    reversals = sorted((*row[:-1], -row[-1]) for row in issued)
    assert corrections == sorted(reversals + computed)
    assert ("platform", "edge", "H100", "platform", Decimal("0.250000"), None,
            Decimal("480.00")) in corrections  # fmt: skip
    assert ("alpha", "lab", "H100", "idle_share", Decimal("1.000000"), None,
            Decimal("712.58")) in corrections  # fmt: skip
    assert sum(row[-1] for row in corrections) == Decimal("6840.00") - Decimal("8490.00")
    # net per cluster is the cluster's cost, and the tenants' totals carry it
    net = dict(query(tmp_path, "select cluster, sum(amount) from charge_lines group by 1"))
    assert net == {"lab": Decimal("6120.00"), "edge": Decimal("720.00")}
    assert query(tmp_path, "select sum(amount) from tenant_month")[0][0] == Decimal("6840.00")


def test_a_closed_full_recovery_month_rerun_with_another_policy_corrects_only_the_shares(
    tmp_path,
):
    from tests.e2e.test_full_recovery import build_recovery_month, settings_yaml

    build_recovery_month(tmp_path, "full_recovery", "weighted")
    assert materialize_month(tmp_path, "2026-11-01").success
    with resource_for(tmp_path).connect() as con:
        assert close_month(con, dt.date(2026, 11, 1), "finance") == (14, "6840.00")
    write(tmp_path / "catalog/settings.yaml", settings_yaml("full_recovery", "even"))
    assert materialize_month(tmp_path, "2026-11-01").success
    # usage, credit and reserved lines carry the same price as the idle shares of their pool:
    # only the charge type tells them apart, so only the shares are corrected
    corrections = query(
        tmp_path,
        "select tenant_id, cluster, gpu_model, charge_type, amount from charge_lines "
        "where charge_class = 'Correction' order by all",
    )
    assert corrections == [
        ("alpha", "lab", "H100", "idle_share", Decimal("727.42")),  # 712.58 -> 1,440.00
        ("beta", "lab", "A100", "idle_share", Decimal("52.50")),  # 105.00 -> 157.50
        ("beta", "lab", "H100", "idle_share", Decimal("-727.42")),  # 2,167.42 -> 1,440.00
        ("gamma", "lab", "A100", "idle_share", Decimal("-52.50")),  # 210.00 -> 157.50
    ]
    net = dict(query(tmp_path, "select cluster, sum(amount) from charge_lines group by 1"))
    assert net == {"lab": Decimal("6120.00"), "edge": Decimal("720.00")}


def test_the_pages_show_the_close_issued_corrections_and_net(tmp_path):
    import html
    import re

    build_tiny_month(tmp_path)
    assert materialize_month(tmp_path, "2026-11-01").success
    page = tmp_path / "reports/2026-11/chargeback-2026-11.html"
    assert 'id="close"' not in page.read_text()  # open: nothing issued
    with resource_for(tmp_path).connect() as con:
        close_month(con, dt.date(2026, 11, 1), "finance")
        [(closed_at,)] = con.execute("select closed_at from closed_months").fetchall()
    assert materialize_month(tmp_path, "2026-11-01").success
    closed = page.read_text()
    assert f"Closed on {closed_at:%Y-%m-%d %H:%M} UTC by finance" in closed
    assert "nothing has been corrected since" in closed
    # the catalog changes after the close: A100 gets cheaper (the corrections of
    # test_closed_month_keeps_issued_lines_and_adds_corrections)
    write(tmp_path / "catalog/rates.yaml", CHEAPER_A100)
    assert materialize_month(tmp_path, "2026-11-01").success
    section = page.read_text().split('<section id="close">')[1].split("</section>")[0]
    cells = [
        [html.unescape(cell) for cell in re.findall(r"<td[^>]*>([^<]*)</td>", row)]
        for row in section.split("<tr>")[2:]
    ]
    assert [(name, corrections) for name, _, corrections, _ in cells[:-1]] == [
        ("Alpha Lab", "-2.95"), ("Beta & Co", "-1.03"), ("Unmapped accounts", "-1.02"),
    ]  # fmt: skip
    for _, issued, corrections, net in cells:
        assert Decimal(issued) + Decimal(corrections) == Decimal(net)
    assert cells[-1] == ["Every tenant of the page", "19.63", "-5.00", "14.63"]
