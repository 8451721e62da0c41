"""End to end on a small demo month: every invariant of DESIGN.md holds on realistic data."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import openpyxl
import pytest

from pipelines.demo import generate_demo
from tests.conftest import materialize_month, query

MONTH = "2026-11-01"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("demo")
    generate_demo(root, month="2026-11", seed=7, small=True)
    result = materialize_month(root, MONTH)
    assert result.success
    return root, result


def test_checks_pass_and_the_unmapped_account_is_listed(demo):
    _, result = demo
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert {name: e.passed for name, e in evaluations.items()} == {
        "capacity_buckets_sum_to_capacity": True,
        "charges_tie_out": True,
        "every_account_mapped": False,
        "rows_reconcile": True,
    }
    unmapped = evaluations["every_account_mapped"].metadata["unmapped_accounts"].value
    assert unmapped == "contractor-x"


def test_buckets_sum_exactly_to_capacity(demo):
    root, _ = demo
    rows = query(
        root,
        """
        select gpu_model,
               sum(gpu_units) filter (bucket <> 'capacity'),
               sum(gpu_units) filter (bucket = 'capacity')
        from capacity_buckets group by 1 order by 1
        """,
    )
    assert [model for model, _, _ in rows] == ["A100-80GB", "H100-80GB"]
    for _, buckets, capacity in rows:
        assert buckets == capacity
    # capacity from the inventory: 2 A100 nodes all month, 1 H100 node all month and one
    # from day 10 (21 days), 8 GPUs each; 420 units per GPU-millisecond
    assert [capacity for _, _, capacity in rows] == [
        2 * 8 * 720 * 3_600_000 * 420,
        (8 * 720 + 8 * 21 * 24) * 3_600_000 * 420,
    ]


def test_money_ties_from_lines_to_tenants_to_workbook(demo):
    root, _ = demo
    [(lines_total,)] = query(root, "select sum(amount) from charge_lines")
    [(tenants_total,)] = query(root, "select sum(amount) from tenant_month")
    assert lines_total == tenants_total > 0
    workbook = openpyxl.load_workbook(root / "reports/2026-11/chargeback-2026-11.xlsx")
    summary, charges = workbook["Summary"], workbook["Charges"]
    total_row = next(r for r in summary.iter_rows() if r[0].value == "TOTAL")
    formula = total_row[4].value
    first, last = re.fullmatch(r"=SUM\(E(\d+):E(\d+)\)", formula).groups()
    summary_total = sum(
        Decimal(str(summary.cell(row=r, column=5).value)) for r in range(int(first), int(last) + 1)
    )
    charge_amounts = [
        Decimal(str(row[11].value))
        for row in charges.iter_rows(min_row=2)
        if row[0].value not in (None, "TOTAL")
    ]
    assert summary_total == sum(charge_amounts) == lines_total
    [(line_count,)] = query(root, "select count(*) from charge_lines")
    assert len(charge_amounts) == line_count


def test_every_export_row_is_loaded_or_rejected(demo):
    root, _ = demo
    files = query(
        root,
        "select subject, rows_read, rows_loaded, rows_rejected from data_quality "
        "where category = 'file' and subject like 'scheduler/%jobs%' order by subject",
    )
    assert all(read == loaded + rejected for _, read, loaded, rejected in files)
    assert sum(rejected for *_, rejected in files) == 3
    reasons = {reason.split(":")[0] for (reason,) in query(root, "select reason from rejects")}
    assert reasons == {"field gpus", "field end_time", "field start_time"}


def test_failures_land_in_their_buckets(demo):
    root, _ = demo
    rows = query(
        root,
        """
        select state, sum(allocated_gpu_hours), sum(failed_infra_gpu_hours),
               sum(failed_job_gpu_hours)
        from job_usage where state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') group by 1
        """,
    )
    assert {state for state, *_ in rows} == {"NODE_FAIL", "FAILED", "OUT_OF_MEMORY"}
    for state, allocated, failed_infra, failed_job in rows:
        if state == "NODE_FAIL":
            assert failed_infra == pytest.approx(allocated) and failed_job == 0
        else:
            assert failed_job + failed_infra == pytest.approx(allocated)
    [(down,)] = query(root, "select sum(gpu_hours) from capacity_buckets where bucket = 'down'")
    assert down > 0  # the outage on gpu-a02
    [(zombie,)] = query(
        root, "select sum(zombie_gpu_hours) from job_usage where queue = 'interactive'"
    )
    assert zombie > 0
