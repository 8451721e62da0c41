"""focus_charges: one row per charge line of the billing month in FinOps FOCUS columns (the
`focus-YYYY-MM.csv` export).

Given: charge_lines rows directly, with the columns and types of the charge_lines mart: the
FOCUS view only renames and formats them (charge_lines' own rules are test_charge_lines.py's).
"""

from __future__ import annotations

import csv
import datetime as dt
from decimal import Decimal

import pytest

from pipelines.catalog import Settings
from pipelines.reports.exports import write_focus_csv
from pipelines.sql import run
from tests.marts.conftest import given, month_params, records

NOV, OCT = dt.date(2026, 11, 1), dt.date(2026, 10, 1)
D = Decimal

CHARGE_LINES = (
    "billing_month date, tenant_id varchar, tenant_name varchar, department varchar, "
    "cost_center varchar, cluster varchar, gpu_model varchar, charge_category varchar, "
    "charge_class varchar, charge_type varchar, capacity_reservation_id varchar, "
    "charge_description varchar, gpu_hours double, gpu_units bigint, unit_price decimal(18, 6), "
    "charge_numerator hugeint, amount decimal(19, 2), currency varchar"
)
COVERAGE = (
    "billing_month date, tenant_id varchar, cluster varchar, gpu_model varchar, "
    "unit_price decimal(18, 6), charge_type varchar, gpu_hours double, "
    "measured_gpu_hours double, measured_share_pct double"
)


def line(month, tenant, model, category, charge_class, charge_type, reservation, hours, price,
         amount, description="d"):  # fmt: skip
    units = round(hours * 1_512_000_000)
    return (month, tenant, f"{tenant.title()} Lab", "Physics", "CC-1", "atlas", model, category,
            charge_class, charge_type, reservation, description, hours, units, D(price),
            units * int(D(price) * 1_000_000), D(amount), "USD")  # fmt: skip


@pytest.fixture
def con_with_lines(con):
    given(con, "charge_lines", CHARGE_LINES, [
        # 20 GPU-minutes = 0.333... GPU-h at 2.10
        line(NOV, "alpha", "A100", "Usage", None, "usage", None, 1 / 3, "2.10", "0.70",
             "GPU usage, A100 at 2.1 USD/GPU-hour"),
        line(NOV, "alpha", "A100", "Credit", None, "credit", None, 0.25, "2.10", "-0.53"),
        line(NOV, "beta", "H100", "Usage", None, "reserved_unused", "beta/H100", 710.0,
             "3.000000", "2130.00"),
        line(NOV, "beta", "H100", "Usage", "Correction", "usage", None, 1.0, "3.000000", "3.00"),
        line(OCT, "alpha", "A100", "Usage", None, "usage", None, 5.0, "2.10", "10.50"),
    ])  # fmt: skip
    # alpha's A100 usage three quarters measured, its credit a quarter; beta's H100 usage a
    # third (its correction line shows it); reservations bill no job time: no row
    given(con, "charge_line_coverage", COVERAGE, [
        (NOV, "alpha", "atlas", "A100", D("2.10"), "usage", 1 / 3, 0.25, 75.0),
        (NOV, "alpha", "atlas", "A100", D("2.10"), "credit", 0.25, 0.0625, 25.0),
        (NOV, "beta", "atlas", "H100", D("3.0"), "usage", 1.0, 1 / 3, 100 / 3),
    ])  # fmt: skip
    return con


def test_focus_columns_and_values(con_with_lines):
    params = month_params(Settings())
    rows = records(run(con_with_lines, "reports/focus_charges", params))
    common = {
        "BillingCurrency": "USD",
        "BillingPeriodStart": "2026-11-01T00:00:00Z",
        "BillingPeriodEnd": "2026-12-01T00:00:00Z",
        "ChargePeriodStart": "2026-11-01T00:00:00Z",
        "ChargePeriodEnd": "2026-12-01T00:00:00Z",
        "ChargeFrequency": "Usage-Based",
        "PricingUnit": "GPU-Hours",
        "ProviderName": "Internal GPU platform",
        "PublisherName": "Internal GPU platform",
        "InvoiceIssuerName": "Internal GPU platform",
        "ServiceName": "GPU compute",
        "ServiceCategory": "AI and Machine Learning",
        "ServiceSubcategory": "AI Platforms",
        "SkuMeter": "GPU time",
        # no commitment discounts: always empty
        "CommitmentDiscountStatus": None,
        "BillingAccountId": "atlas",
        "BillingAccountName": "atlas",
        "ResourceType": "GPU pool",
    }

    def focus(amount, category, charge_class, description, quantity, price, sku_price, tenant,
              model, reservation, status, charge_type, measured):  # fmt: skip
        return {
            # no discounts: billed = effective = list = contracted = the line amount
            "BilledCost": D(amount), "EffectiveCost": D(amount), "ListCost": D(amount),
            "ContractedCost": D(amount),
            "ChargeCategory": category, "ChargeClass": charge_class,
            "ChargeDescription": description,
            # FOCUS 1.2: consumed quantity and unit on Usage lines only; the pricing quantity
            # has the sign of the charge (ListUnitPrice × PricingQuantity = ListCost)
            "ConsumedQuantity": quantity if category == "Usage" else None,
            "ConsumedUnit": "GPU-Hours" if category == "Usage" else None,
            "PricingQuantity": -quantity if category == "Credit" else quantity,
            "InvoiceId": f"GPU-2026-11-{tenant}",
            "ListUnitPrice": D(price), "ContractedUnitPrice": D(price),
            "SubAccountId": tenant, "SubAccountName": f"{tenant.title()} Lab",
            "ResourceId": f"atlas/{model}", "ResourceName": f"atlas {model} GPUs",
            "SkuId": model, "SkuPriceId": sku_price,
            "SkuPriceDetails": f'{{"x_GpuModel":"{model}"}}',
            "CapacityReservationId": reservation, "CapacityReservationStatus": status,
            "Tags": f'{{"department":"Physics","cost_center":"CC-1","gpu_model":"{model}"}}',
            "x_ChargeType": charge_type,
            "x_MeasuredShare": None if measured is None else D(measured),
            **common,
        }  # fmt: skip

    assert rows == [
        # ordered by sub-account, billing account, SKU, charge category (Credit < Usage) ...
        focus("-0.53", "Credit", None, "d", 0.25, "2.100000", "A100@2.1", "alpha", "A100", None,
              None, "credit", "0.2500"),
        # GPU-hours rounded to 6 decimals
        focus("0.70", "Usage", None, "GPU usage, A100 at 2.1 USD/GPU-hour", 0.333333,
              "2.100000", "A100@2.1", "alpha", "A100", None, None, "usage", "0.7500"),
        # the unused part of a reserved quota: its reservation, status Unused
        focus("2130.00", "Usage", None, "d", 710.0, "3.000000", "H100@3.0", "beta", "H100",
              "beta/H100", "Unused", "reserved_unused", None),
        # a correction of a closed month keeps FOCUS ChargeClass Correction
        focus("3.00", "Usage", "Correction", "d", 1.0, "3.000000", "H100@3.0", "beta", "H100",
              None, None, "usage", "0.3333"),
    ]  # fmt: skip
    assert list(rows[0]) == [
        "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "BillingCurrency",
        "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
        "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency",
        "ConsumedQuantity", "ConsumedUnit", "PricingQuantity", "PricingUnit", "ListUnitPrice",
        "ContractedUnitPrice", "ProviderName", "PublisherName", "InvoiceIssuerName", "InvoiceId",
        "ServiceName", "ServiceCategory", "ServiceSubcategory", "BillingAccountId",
        "BillingAccountName", "SubAccountId", "SubAccountName", "ResourceId", "ResourceName",
        "ResourceType", "SkuId", "SkuMeter", "SkuPriceId", "SkuPriceDetails",
        "CapacityReservationId", "CapacityReservationStatus", "CommitmentDiscountStatus", "Tags",
        "x_ChargeType", "x_MeasuredShare",
    ]  # fmt: skip


def test_periods_are_the_billing_months_utc_bounds(con_with_lines):
    # November in Europe/Berlin: 2026-11-01 00:00 +01:00 to 2026-12-01 00:00 +01:00
    params = month_params(Settings(billing_timezone="Europe/Berlin"))
    rows = records(run(con_with_lines, "reports/focus_charges", params))
    periods = {(r["BillingPeriodStart"], r["BillingPeriodEnd"], r["ChargePeriodStart"],
                r["ChargePeriodEnd"]) for r in rows}  # fmt: skip
    assert periods == {("2026-10-31T23:00:00Z", "2026-11-30T23:00:00Z",
                        "2026-10-31T23:00:00Z", "2026-11-30T23:00:00Z")}  # fmt: skip
    assert len(rows) == 4


def test_the_csv_export_has_the_focus_header_and_one_row_per_line(con_with_lines, tmp_path):
    out = tmp_path / "focus-2026-11.csv"
    assert write_focus_csv(con_with_lines, month_params(Settings()), out) == 4
    with out.open(newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [(r["SubAccountId"], r["BilledCost"], r["ChargeClass"], r["CapacityReservationStatus"])
            for r in table] == [
        ("alpha", "-0.53", "", ""),
        ("alpha", "0.70", "", ""),
        ("beta", "2130.00", "", "Unused"),
        ("beta", "3.00", "Correction", ""),
    ]  # fmt: skip


def test_corrections_are_on_the_invoice_they_restate_and_credits_consume_nothing(con):
    # a closed November restated: a credit grew by 1 GPU-hour, a usage line shrank by 2
    given(con, "charge_lines", CHARGE_LINES, [
        line(NOV, "alpha", "A100", "Credit", "Correction", "credit", None, 1.0, "2.10", "-2.10"),
        line(NOV, "alpha", "A100", "Usage", "Correction", "usage", None, -2.0, "2.10", "-4.20"),
    ])  # fmt: skip
    given(con, "charge_line_coverage", COVERAGE, [])
    rows = records(run(con, "reports/focus_charges", month_params(Settings())))
    assert [
        (r["ChargeCategory"], r["ChargeClass"], r["BilledCost"], r["ConsumedQuantity"],
         r["ConsumedUnit"], r["PricingQuantity"], r["InvoiceId"], r["BillingPeriodStart"])
        for r in rows
    ] == [
        ("Credit", "Correction", D("-2.10"), None, None, -1.0, "GPU-2026-11-alpha",
         "2026-11-01T00:00:00Z"),
        ("Usage", "Correction", D("-4.20"), -2.0, "GPU-Hours", -2.0, "GPU-2026-11-alpha",
         "2026-11-01T00:00:00Z"),
    ]  # fmt: skip
