"""A repeated allocation record (canonical `allocations.csv`: job_id, node, gpu_index), in one
file or in two overlapping exports, names one GPU once: it is loaded and counted as a duplicate
folded (data_quality), like a job record another record of its job supersedes.

Given: canonical jobs and allocations CSV and a catalog with an inventory, built through the
real readers and every step up to data_quality (tests/marts/conftest.py, GivenMonth).
Catalog: node n1 holds 2 A100 at 2.00 USD/GPU-hour.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from pipelines.catalog import load_catalog
from pipelines.sql import run
from tests.marts.conftest import ALPHA_TENANT, JOBS_HEADER, month_params, pick

RATES = """
    rates:
      - {gpu_model: A100, price_per_gpu_hour: 2.00}
"""
NODES = """
    node,cluster,gpu_model,gpus
    n1,c1,A100,2
"""
JOBS = f"""
    {JOBS_HEADER}
    j1,alpha,ann,batch,normal,A100,2,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T03:00:00,COMPLETED,0
    j2,alpha,ann,batch,normal,A100,1,n1,2026-11-03T00:00:00,2026-11-03T00:00:00,2026-11-03T01:00:00,COMPLETED,0
"""
# j1's GPU 0 twice in one file, j2's GPU 1 again in a second export; line 1 is the header
ALLOCATIONS = """
    job_id,node,gpu_index
    j1,n1,0
    j1,n1,1
    j1,n1,0
    j2,n1,1
"""
OVERLAPPING = """
    job_id,node,gpu_index
    j2,n1,1
"""


@pytest.fixture(scope="module")
def quality(module_month) -> list[dict]:
    module_month.catalog(tenants=ALPHA_TENANT, rates=RATES, nodes=NODES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/scheduler/c1/allocations-a.csv", ALLOCATIONS)
    module_month.file("landing/scheduler/c1/allocations-b.csv", OVERLAPPING)
    return module_month.build("data_quality")


def query(month, sql: str) -> list[tuple]:
    return month.con.execute(sql, {"month": dt.date(2026, 11, 1)}).fetchall()


def test_each_repeated_allocation_record_is_counted_as_a_duplicate_folded(quality, module_month):
    files = [row for row in quality if row["category"] == "file"]
    assert pick(
        files, "subject", "rows_read", "rows_loaded", "rows_rejected", "duplicates_folded"
    ) == [
        # of two equal records the later (file, then line) is kept, as for job records: line
        # 2 (j1's GPU 0, again on line 4) and allocations-a.csv's j2 (again in allocations-b)
        ("scheduler/c1/allocations-a.csv", 4, 4, 0, 2),
        ("scheduler/c1/allocations-b.csv", 1, 1, 0, 0),
        ("scheduler/c1/jobs.csv", 2, 2, 0, 0),
    ]
    assert module_month.con.execute(
        "select file, line, record_rank from stg_allocation_records order by file, line"
    ).fetchall() == [
        ("scheduler/c1/allocations-a.csv", 2, 2),
        ("scheduler/c1/allocations-a.csv", 3, 1),
        ("scheduler/c1/allocations-a.csv", 4, 1),
        ("scheduler/c1/allocations-a.csv", 5, 2),
        ("scheduler/c1/allocations-b.csv", 2, 1),
    ]
    params = month_params(load_catalog(module_month.root / "catalog").settings)
    assert run(module_month.con, "checks/rows_reconcile", params).fetchall() == []


def test_a_repeated_record_holds_its_gpu_once(quality, module_month):
    assert query(
        module_month,
        "select job_id, node, gpu_index, gpu_share, index_source from job_gpus "
        "where billing_month = $month order by job_id, node, gpu_index",
    ) == [
        ("j1", "n1", 0, 420, "export"),
        ("j1", "n1", 1, 420, "export"),
        ("j2", "n1", 1, 420, "export"),
    ]
    assert query(
        module_month,
        "select job_id, allocated_gpu_hours, amount from job_usage "
        "where billing_month = $month order by job_id",
    ) == [
        ("j1", 6.0, Decimal("12.00")),  # 2 GPUs × 3 h
        ("j2", 1.0, Decimal("2.00")),
    ]
