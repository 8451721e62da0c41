"""data_quality: one row per finding of the billing month: rows read / loaded / rejected and
duplicates folded per input file (empty exports included), unmapped accounts, telemetry
coverage per cluster.

Given: canonical exports (one with a broken row and a folded duplicate, empty and header-only
files) and a catalog, built through the real readers, staging SQL, daily telemetry rollup and
every step up to the mart (tests/marts/conftest.py, GivenMonth): the counts come from where
the rows are read, folded and rejected. Samples declared 10 minutes apart.
"""

from __future__ import annotations

import pytest

from tests.marts.conftest import ALPHA_TENANT, JOBS_HEADER, ONE_RATE, pick

SETTINGS = "telemetry: {step_s: 600}\n"
TENANTS, RATES = ALPHA_TENANT, ONE_RATE
JOBS = f"""
    {JOBS_HEADER}
    j1,alpha,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T01:00:00,COMPLETED,0
    j2,alpha,ann,batch,normal,A100,two,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T01:00:00,COMPLETED,0
    j1,alpha,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,,RUNNING,
    j3,ghost,gus,batch,normal,A100,1,n1,2026-11-03T00:00:00,2026-11-03T00:00:00,2026-11-03T03:00:00,COMPLETED,0
"""
ALLOCATIONS = """
    job_id,node,gpu_index
    j1,n1,0
    j1,n1,x
"""
SAMPLES = """
    ts,node,gpu_index,util_pct
    2026-11-02 00:00:00,n1,0,50
    2026-11-02 00:10:00,n1,0,50
    2026-11-02 00:10:00,n1,0,50
    2026-11-02 00:20:00,n1,0,50
    2026-11-02 00:30:00,n1,0,150
"""


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    module_month.catalog(settings=SETTINGS, tenants=TENANTS, rates=RATES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/scheduler/c1/allocations.csv", ALLOCATIONS)
    module_month.file("landing/scheduler/c1/empty.csv", "")
    module_month.file("landing/scheduler/c1/header-only.csv", JOBS_HEADER + "\n")
    module_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    module_month.file("landing/telemetry/c1/empty.csv", "")
    return module_month.build("data_quality")


def test_rows_read_loaded_rejected_and_folded_per_file(rows):
    files = [row for row in rows if row["category"] == "file"]
    columns = ("cluster", "subject", "rows_read", "rows_loaded", "rows_rejected",
               "duplicates_folded")  # fmt: skip
    assert pick(files, *columns) == [
        # j1's GPU, and a GPU index that is not one
        ("c1", "scheduler/c1/allocations.csv", 2, 1, 1, 0),
        # an export without rows, empty or a header alone, is listed with its 0 rows
        ("c1", "scheduler/c1/empty.csv", 0, 0, 0, 0),
        ("c1", "scheduler/c1/header-only.csv", 0, 0, 0, 0),
        # 4 records: j2 ('two' GPUs) rejected; j1's running record folded into its complete one
        ("c1", "scheduler/c1/jobs.csv", 4, 3, 1, 1),
        ("c1", "telemetry/c1/empty.csv", 0, 0, 0, 0),
        # 5 rows: 150 % rejected; the second 00:10 sample of the GPU folded
        ("c1", "telemetry/c1/samples.csv", 5, 4, 1, 1),
    ]
    assert all(r["rows_read"] == r["rows_loaded"] + r["rows_rejected"] for r in files)
    assert {(r["value"], r["detail"]) for r in files} == {(None, None)}


def test_unmapped_accounts_and_telemetry_coverage(rows):
    findings = [row for row in rows if row["category"] != "file"]
    assert pick(findings, "cluster", "category", "subject", "value", "detail") == [
        # samples 00:00, 00:10, 00:20 cover 30 minutes of j1's hour; j3's 3 h has none:
        # 0.5 / (1 + 3) GPU-h measured
        ("c1", "telemetry_coverage", "c1", 0.125, "measured share of allocated GPU time"),
        # j3's account maps to no tenant: its 3 GPU-hours
        ("c1", "unmapped_account", "ghost", 3.0, "1 jobs charged to tenant unmapped"),
    ]
    assert pick(findings, "rows_read", "rows_loaded", "rows_rejected", "duplicates_folded") == [
        (None, None, None, None),
        (None, None, None, None),
    ]
