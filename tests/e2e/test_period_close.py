"""Closing a month: issued lines never change; re-runs add corrections; open months replace."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from pipelines.close import CloseError, close_month, main
from tests.conftest import materialize_month, query, resource_for, write
from tests.e2e.test_tiny_month import build_tiny_month

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
