"""Allocation records (canonical `allocations.csv`: job_id, node, gpu_index) that cannot be
true are rejects (sql/staging/stg_allocation_records.sql), and the job they name is then
placed as a job without them: lowest free GPU first (index_source 'assigned').

Given: canonical jobs and allocations CSV and a catalog with an inventory, built through the
real readers and every step up to data_quality (tests/marts/conftest.py, GivenMonth).
Catalog: node n1 holds 2 A100 (2.00 USD/GPU-hour), n2 one H100 (4.00).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from pipelines.catalog import load_catalog
from pipelines.sql import run
from tests.marts.conftest import ALPHA_TENANT, JOBS_HEADER, month_params, pick, text

TENANTS = ALPHA_TENANT
RATES = """
    rates:
      - {gpu_model: A100, price_per_gpu_hour: 2.00}
      - {gpu_model: H100, price_per_gpu_hour: 4.00}
      - {gpu_model: "*", price_per_gpu_hour: 1.00}
"""
NODES = """
    node,cluster,gpu_model,gpus
    n1,c1,A100,2
    n2,c1,H100,1
"""
JOBS = f"""
    {JOBS_HEADER}
    j1,alpha,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T01:00:00,COMPLETED,0
    k1,alpha,ann,batch,normal,A100,1,n1,2026-11-03T00:00:00,2026-11-03T00:00:00,2026-11-03T02:00:00,COMPLETED,0
    k2,alpha,ann,batch,normal,A100,1,n1,2026-11-04T00:00:00,2026-11-04T00:00:00,2026-11-04T03:00:00,COMPLETED,0
    m1,alpha,ann,batch,normal,A100,2,n[1-2],2026-11-05T00:00:00,2026-11-05T00:00:00,2026-11-05T01:00:00,COMPLETED,0
    j2,alpha,ann,batch,normal,A100,two,n1,2026-11-06T00:00:00,2026-11-06T00:00:00,2026-11-06T01:00:00,COMPLETED,0
    p1,alpha,ann,batch,normal,A100,1,,2026-11-07T00:00:00,,,PENDING,
    o1,alpha,ann,batch,normal,A100,1,n1,2026-10-05T00:00:00,2026-10-05T00:00:00,2026-10-05T01:00:00,COMPLETED,0
"""
# line 1 is the header
ALLOCATIONS = """
    job_id,node,gpu_index
    j1,n1,1
    k1,n1,7
    k2,n2,0
    zz,n1,0
    j2,n1,0
    m1,n1,0
    m1,n2,0
    p1,n1,0
    o1,n1,1
"""
# the lines of ALLOCATIONS that are rejected
REJECTED = (3, 4, 5, 6, 9)


def build(month, allocations: str) -> list[dict]:
    month.catalog(tenants=TENANTS, rates=RATES, nodes=NODES)
    month.file("landing/scheduler/c1/jobs.csv", JOBS)
    month.file("landing/scheduler/c1/allocations.csv", allocations)
    return month.build("data_quality")


@pytest.fixture(scope="module")
def quality(module_month) -> list[dict]:
    return build(module_month, ALLOCATIONS)


def query(month, sql: str) -> list[tuple]:
    return month.con.execute(sql, {"month": dt.date(2026, 11, 1)}).fetchall()


def check(month, name: str) -> list[tuple]:
    """The violations of `sql/checks/<name>.sql` in the month."""
    params = month_params(load_catalog(month.root / "catalog").settings)
    return run(month.con, f"checks/{name}", params).fetchall()


def test_each_impossible_allocation_is_a_reject_naming_file_line_and_field(quality, module_month):
    assert query(
        module_month,
        "select file, line, reason, raw from rejects where billing_month = $month "
        "and file like '%allocations.csv' order by line",
    ) == [
        # n1 holds GPUs 0 and 1 (nodes.csv)
        ("scheduler/c1/allocations.csv", 3,
         "field gpu_index: 7 is not a GPU of node n1, which holds 2 GPUs (nodes.csv)", "k1,n1,7"),
        # k2 ran on n1 only: its time on n2 would be priced at the H100's rate
        ("scheduler/c1/allocations.csv", 4,
         "field node: n2 is not one of the nodes of job k2 (n1)", "k2,n2,0"),
        ("scheduler/c1/allocations.csv", 5,
         "field job_id: no job zz of cluster c1 in the exports", "zz,n1,0"),
        # j2's only record is a reject of jobs.csv ('two' GPUs)
        ("scheduler/c1/allocations.csv", 6,
         "field job_id: every record of job j2 in the exports is rejected", "j2,n1,0"),
        # a job that never started holds no node
        ("scheduler/c1/allocations.csv", 9,
         "field node: n1 is not one of the nodes of job p1 (none)", "p1,n1,0"),
    ]  # fmt: skip


def test_rows_read_loaded_and_rejected_reconcile(quality, module_month):
    files = [row for row in quality if row["category"] == "file"]
    assert pick(files, "subject", "rows_read", "rows_loaded", "rows_rejected") == [
        # loaded: j1; m1 on each node of its hostlist n[1-2]; o1, a job of October (an
        # allocations file may cover several months): no orphan
        ("scheduler/c1/allocations.csv", 9, 4, 5),
        ("scheduler/c1/jobs.csv", 7, 6, 1),
    ]
    assert check(module_month, "rows_reconcile") == []


def test_a_rejected_allocation_leaves_its_job_placed_lowest_free_first(quality, module_month):
    assert query(
        module_month,
        "select job_id, node, gpu_index, gpu_share, index_source from job_gpus "
        "where billing_month = $month order by job_id, node",
    ) == [
        ("j1", "n1", 1, 420, "export"),
        # k1's and k2's only allocation rows were rejected: GPU 0 of n1, the lowest free
        ("k1", "n1", 0, 420, "assigned"),
        ("k2", "n1", 0, 420, "assigned"),
        ("m1", "n1", 0, 420, "export"),
        ("m1", "n2", 0, 420, "export"),
    ]
    assert query(
        module_month,
        "select job_id, gpu_model, allocated_gpu_hours, amount from job_usage "
        "where billing_month = $month order by job_id",
    ) == [
        ("j1", "A100", 1.0, Decimal("2.00")),
        # 2 h and 3 h on n1's A100s, not 2 h on a GPU n1 lacks and 3 h of n2's H100
        ("k1", "A100", 2.0, Decimal("4.00")),
        ("k2", "A100", 3.0, Decimal("6.00")),
        ("m1", "A100", 2.0, Decimal("6.00")),  # 1 h of an A100 and 1 h of the H100
        ("p1", "A100", 0.0, Decimal("0.00")),
    ]
    assert check(module_month, "capacity_buckets_sum_to_capacity") == []


def test_the_month_is_the_month_without_the_rejected_rows(quality, module_month, given_month):
    kept = [line for n, line in enumerate(text(ALLOCATIONS).splitlines(), 1) if n not in REJECTED]
    build(given_month, "\n".join(kept) + "\n")
    for sql in (
        "select * from job_gpus where billing_month = $month order by all",
        "select * from job_usage where billing_month = $month order by all",
        "select * from capacity_buckets where billing_month = $month order by all",
    ):
        assert query(module_month, sql) == query(given_month, sql), sql
    charges = (
        "select tenant_id, gpu_model, charge_category, gpu_hours, amount from charge_lines "
        "where billing_month = $month order by all"
    )
    assert query(module_month, charges) == query(given_month, charges)
    assert query(module_month, charges) == [
        # j1 1 h, k1 2 h, k2 3 h, m1 1 h: 7 h at 2.00; m1's hour on n2
        ("alpha", "A100", "Usage", 7.0, Decimal("14.00")),
        ("alpha", "H100", "Usage", 1.0, Decimal("4.00")),
    ]
