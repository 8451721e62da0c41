"""The FOCUS export passes the FinOps Foundation's validator (focus-validator 2.2.1, FOCUS 1.2
rules, recommended rules included): the small demo month as the pipeline writes it, and the
FOCUS view over corrections of a closed month.

The validator runs in its own virtual environment (it needs Python 3.12+, the project 3.11),
which `.ci/focus-validator.sh` prepares (`.ci/run` calls it) at FOCUS_VALIDATOR_VENV, by default
~/.cache/gpu-chargeback/focus-validator-2.2.1. Missing, the tests fail under CI and are skipped
elsewhere.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import subprocess
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from pipelines.catalog import Settings
from pipelines.defs.resources import prepare_connection
from pipelines.reports.exports import write_focus_csv
from tests.conftest import tool_missing
from tests.marts.conftest import given, month_params
from tests.marts.test_focus_charges import CHARGE_LINES, COVERAGE, line

pytestmark = pytest.mark.slow

D = Decimal
NOV = dt.date(2026, 11, 1)

# What the provider of the export supports (the validator's --show-applicability-criteria):
# the rules that depend on them run, ConsumedQuantity's and ConsumedUnit's for Credit and
# Correction lines among them. Left out, besides what the platform does not have (availability
# zones, regions, commitment discounts, several currencies or account types):
# CAPACITY_RESERVATION_SUPPORTED, whose CapacityReservationStatus-C-003-C and -C-004-C the
# validator checks without their conditions (every row null, and every row not null), and
# PUBLIC_PRICE_LIST_SUPPORTED, which the validator takes as enough for the rules of providers
# with virtual currencies or prices in another currency (it ORs a rule's criteria).
APPLICABILITY = (
    "ACCOUNT_NAMING_SUPPORTED", "SUB_ACCOUNT_SUPPORTED", "TAGGING_SUPPORTED",
    "UNIT_PRICING_SUPPORTED", "USAGE_MEASUREMENT_SUPPORTED", "RESOURCE_TYPE_ASSIGNMENT_SUPPORTED",
    "BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED",
)  # fmt: skip

# The one failure no data set with an InvoiceId column avoids in focus-validator 2.2.1: its rules
# model has InvoiceId-C-004-C (MUST be null) and -C-005-C (MUST NOT be null) without the spec's
# condition (whether the charge is on an invoice), so one of them fails on every row; the rule
# they define together, InvoiceId-C-003-C (either), passes and is asserted below.
VALIDATOR_DEFECTS = {"InvoiceId-C-004-C"}


@pytest.fixture(scope="module")
def validator() -> Path:
    """The focus-validator program of the validator's own virtual environment."""
    tools = Path(os.environ.get("CHARGEBACK_TOOLS_DIR", Path.home() / ".cache/gpu-chargeback"))
    venv = Path(os.environ.get("FOCUS_VALIDATOR_VENV", tools / "focus-validator-2.2.1"))
    program = venv / "bin" / "focus-validator"
    if not program.exists():
        tool_missing(f"the FOCUS validator is not installed at {venv} (.ci/focus-validator.sh)")
    return program


def validate(validator: Path, csv_path: Path, tmp_path: Path) -> dict[str, str]:
    """Every rule the validator ran on `csv_path` (FOCUS 1.2, recommended rules included) and
    its outcome: 'pass', 'fail' or 'skipped'."""
    report = tmp_path / f"{csv_path.stem}-validation.xml"
    python = validator.parent / "python"
    packages = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    done = subprocess.run(
        [validator, "--validate-version", "1.2", "--block-download",
         "--applicability-criteria", ",".join(APPLICABILITY), "--data-file", csv_path.resolve(),
         "--output-type", "unittest", "--output-destination", report],
        # it reads its currency list at focus_validator/rules/ from the working directory
        cwd=packages, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        rule = case.get("name").split(" :: ")[0]
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[rule] = "fail"
        elif case.find("skipped") is not None:
            outcomes[rule] = "skipped"
        else:
            outcomes[rule] = "pass"
    return outcomes


def failures(outcomes: dict[str, str]) -> set[str]:
    return {rule for rule, outcome in outcomes.items() if outcome == "fail"}


def rewrite(source: Path, out: Path, change) -> Path:
    """`source` with `change(row)` applied to every row, as `out`."""
    with source.open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows = [change(dict(row)) for row in reader]
        fields = reader.fieldnames
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fields)
        writer.writeheader()
        writer.writerows(rows)
    return out


@pytest.fixture(scope="module")
def demo_export(demo_month) -> Path:
    root, _ = demo_month
    return root / "reports/2026-11/focus-2026-11.csv"


def test_the_demo_months_export_passes_the_focus_validator(validator, demo_export, tmp_path):
    outcomes = validate(validator, demo_export, tmp_path)
    assert failures(outcomes) == VALIDATOR_DEFECTS
    # the recommended columns and the rules on them ran, and the usage columns' rules
    for rule in ("CostAndUsage-D-033-O", "CostAndUsage-D-042-O", "InvoiceId-C-000-O",
                 "InvoiceId-C-003-C", "ServiceSubcategory-C-000-O", "ServiceName-C-008-C",
                 "ConsumedQuantity-C-000-C", "ConsumedUnit-C-000-C", "PricingQuantity-C-000-M",
                 "SkuMeter-C-000-C", "SkuPriceDetails-C-000-C"):  # fmt: skip
        assert outcomes[rule] == "pass", rule
    with demo_export.open(newline="") as handle:
        categories = {row["ChargeCategory"] for row in csv.DictReader(handle)}
    assert categories == {"Usage", "Credit"}


def test_the_validator_fails_a_credit_line_with_a_consumed_quantity(
    validator, demo_export, tmp_path
):
    # the checker can fail: a consumed quantity on Credit lines, as the export had before
    def consumed(row):
        if row["ChargeCategory"] == "Credit":
            row["ConsumedQuantity"], row["ConsumedUnit"] = "1.5", "GPU-Hours"
        return row

    broken = rewrite(demo_export, tmp_path / "credit-consumed.csv", consumed)
    assert failures(validate(validator, broken, tmp_path)) == VALIDATOR_DEFECTS | {
        "ConsumedQuantity-C-000-C", "ConsumedQuantity-C-003-C", "ConsumedQuantity-C-004-C",
    }  # fmt: skip


def test_corrections_of_a_closed_month_pass_the_focus_validator(validator, tmp_path):
    # A closed month restated: corrections of a usage line (up and down), of a credit and of
    # an unused reservation, beside the lines issued when it was closed.
    con = prepare_connection(duckdb.connect())
    given(con, "charge_lines", CHARGE_LINES, [
        line(NOV, "alpha", "A100", "Usage", None, "usage", None, 10.0, "2.10", "21.00"),
        line(NOV, "alpha", "A100", "Usage", "Correction", "usage", None, 0.5, "2.10", "1.05"),
        line(NOV, "alpha", "A100", "Credit", None, "credit", None, 2.0, "2.10", "-4.20"),
        line(NOV, "alpha", "A100", "Credit", "Correction", "credit", None, 1.0, "2.10", "-2.10"),
        line(NOV, "beta", "H100", "Usage", None, "usage", None, 4.0, "3.00", "12.00"),
        line(NOV, "beta", "H100", "Usage", "Correction", "usage", None, -1.0, "3.00", "-3.00"),
        line(NOV, "beta", "H100", "Usage", None, "reserved_unused", "beta/H100", 100.0, "3.00",
             "300.00"),
        line(NOV, "beta", "H100", "Usage", "Correction", "reserved_unused", "beta/H100", -4.0,
             "3.00", "-12.00"),
    ])  # fmt: skip
    given(con, "charge_line_coverage", COVERAGE, [])
    export = tmp_path / "focus-2026-11.csv"
    assert write_focus_csv(con, month_params(Settings()), export) == 8
    con.close()
    outcomes = validate(validator, export, tmp_path)
    assert failures(outcomes) == VALIDATOR_DEFECTS
    assert outcomes["ConsumedQuantity-C-000-C"] == outcomes["PricingQuantity-C-000-M"] == "pass"
