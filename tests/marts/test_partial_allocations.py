"""A job's record says how many GPUs it held and is billed for them; its allocation records
(canonical `allocations.csv`: job_id, node, gpu_index) say which. A job whose loaded records
name fewer GPUs than it holds (its export lists only some, or some are rejects) keeps the GPUs
they name, and the rest are placed as for a job whose export names none: lowest free first
(index_source 'assigned'). Records naming more GPUs than it holds share its GPU-equivalents
among them, exactly. Both are data quality findings.

Given: canonical jobs and allocations CSV and a catalog with an inventory, built through the
real readers and every step up to data_quality (tests/marts/conftest.py, GivenMonth).
Catalog: nodes n1 and n2 hold 4 A100 each (2.00 USD/GPU-hour), n3 8 H100 (4.00).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from pipelines.catalog import load_catalog
from pipelines.sql import run
from tests.marts.conftest import ALPHA_TENANT, JOBS_HEADER, month_params

RATES = """
    rates:
      - {gpu_model: A100, price_per_gpu_hour: 2.00}
      - {gpu_model: H100, price_per_gpu_hour: 4.00}
"""
NODES = """
    node,cluster,gpu_model,gpus
    n1,c1,A100,4
    n2,c1,A100,4
    n3,c1,H100,8
"""
JOBS = f"""
    {JOBS_HEADER}
    f1,alpha,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T03:00:00,COMPLETED,0
    a1,alpha,ann,batch,normal,A100,2,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T03:00:00,COMPLETED,0
    b1,alpha,ann,batch,normal,A100,2,n[1-2],2026-11-03T00:00:00,2026-11-03T00:00:00,2026-11-03T02:00:00,COMPLETED,0
    c2,alpha,ann,batch,normal,A100,1.5,n1,2026-11-04T00:00:00,2026-11-04T00:00:00,2026-11-04T01:00:00,COMPLETED,0
    o1,alpha,ann,batch,normal,H100,1,n3,2026-11-05T00:00:00,2026-11-05T00:00:00,2026-11-05T01:00:00,COMPLETED,0
"""
# f1 names its one GPU; a1 two, the second of which n1 lacks (a reject); b1 and c2 one GPU of
# their two; o1 eight GPUs of its one
ALLOCATIONS = """
    job_id,node,gpu_index
    f1,n1,0
    a1,n1,1
    a1,n1,9
    b1,n2,3
    c2,n1,2
""" + "".join(f"    o1,n3,{index}\n" for index in range(8))


@pytest.fixture(scope="module")
def quality(module_month) -> list[dict]:
    module_month.catalog(tenants=ALPHA_TENANT, rates=RATES, nodes=NODES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/scheduler/c1/allocations.csv", ALLOCATIONS)
    return module_month.build("data_quality")


def query(month, sql: str) -> list[tuple]:
    return month.con.execute(sql, {"month": dt.date(2026, 11, 1)}).fetchall()


def check(month, name: str) -> list[tuple]:
    """The violations of `sql/checks/<name>.sql` in the month."""
    params = month_params(load_catalog(month.root / "catalog").settings)
    return run(month.con, f"checks/{name}", params).fetchall()


def test_a_job_is_billed_for_every_gpu_it_holds_whatever_its_rows_name(quality, module_month):
    assert query(
        module_month,
        "select job_id, gpus, allocated_gpu_hours, amount from job_usage "
        "where billing_month = $month order by job_id",
    ) == [
        ("a1", 2.0, 6.0, Decimal("12.00")),  # 2 GPUs × 3 h, not the 1 its loaded row names
        ("b1", 2.0, 4.0, Decimal("8.00")),  # 2 GPUs × 2 h
        ("c2", 1.5, 1.5, Decimal("3.00")),  # 1.5 GPU-eq × 1 h
        ("f1", 1.0, 3.0, Decimal("6.00")),
        ("o1", 1.0, 1.0, Decimal("4.00")),  # 1 GPU × 1 h over 8 GPUs, not 424/420 of it
    ]
    assert check(module_month, "capacity_buckets_sum_to_capacity") == []
    assert check(module_month, "gpus_never_oversubscribed") == []


def test_the_gpus_its_rows_do_not_name_are_placed_lowest_free_first(quality, module_month):
    assert query(
        module_month,
        "select job_id, node, gpu_index, gpu_share, index_source from job_gpus "
        "where billing_month = $month and job_id <> 'o1' order by job_id, node, gpu_index",
    ) == [
        # n1's GPU 0 is f1's and GPU 1 a1's own: GPU 2 is n1's lowest free
        ("a1", "n1", 1, 420, "export"),
        ("a1", "n1", 2, 420, "assigned"),
        # the node of its hostlist its rows name the fewest GPUs of
        ("b1", "n1", 0, 420, "assigned"),
        ("b1", "n2", 3, 420, "export"),
        # the half GPU it holds beyond its row, on the lowest GPU with room
        ("c2", "n1", 0, 210, "assigned"),
        ("c2", "n1", 2, 420, "export"),
        ("f1", "n1", 0, 420, "export"),
    ]
    # 420 units (a whole GPU) over 8 GPUs: 53 on the first 4, 52 on the others
    assert query(
        module_month,
        "select gpu_index, gpu_share from job_gpus "
        "where billing_month = $month and job_id = 'o1' order by gpu_index",
    ) == [(0, 53), (1, 53), (2, 53), (3, 53), (4, 52), (5, 52), (6, 52), (7, 52)]


def test_a_job_whose_rows_do_not_name_its_gpus_is_a_data_quality_finding(quality):
    findings = [
        (row["category"], row["cluster"], row["subject"], row["value"], row["detail"])
        for row in quality
        if row["category"].startswith("allocation_rows")
    ]
    assert findings == [
        ("allocation_rows_beyond_gpus", "c1", "o1", 8.0,
         "allocation rows name 8 GPUs of a job holding 1 GPU-eq: each holds a share of it"),
        ("allocation_rows_missing_gpus", "c1", "a1", 1.0,
         "allocation rows name 1 GPU(s) of a job holding 2 GPU-eq: 1 GPU-eq placed lowest "
         "free first"),
        ("allocation_rows_missing_gpus", "c1", "b1", 1.0,
         "allocation rows name 1 GPU(s) of a job holding 2 GPU-eq: 1 GPU-eq placed lowest "
         "free first"),
        ("allocation_rows_missing_gpus", "c1", "c2", 0.5,
         "allocation rows name 1 GPU(s) of a job holding 1.5 GPU-eq: 0.5 GPU-eq placed lowest "
         "free first"),
    ]  # fmt: skip
