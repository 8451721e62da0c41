"""rejects: every input row set aside while building the billing month, with its file, line,
reason and raw text.

Given: canonical jobs, allocations and samples CSV (with broken rows) and a catalog, built
through the real readers, staging SQL and daily telemetry rollup (tests/marts/conftest.py,
GivenMonth): where a row is rejected and what it says is decided there.
"""

from __future__ import annotations

import datetime as dt

import pytest

from tests.marts.conftest import ALPHA_TENANT, JOBS_HEADER, ONE_RATE

TENANTS, RATES = ALPHA_TENANT, ONE_RATE
JOBS = f"""
    {JOBS_HEADER}
    j1,alpha,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T01:00:00,COMPLETED,0
    j2,alpha,ann,batch,normal,A100,two,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T01:00:00,COMPLETED,0
    j3,alpha,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T05:00:00,2026-11-02T04:00:00,COMPLETED,0
    j4,alpha,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00
    j5,alpha,ann,batch,normal,A100,1,n1,2026-10-02T00:00:00,2026-10-02T00:00:00,2026-10-02T01:00:00,EXPLODED,0
"""
ALLOCATIONS = """
    job_id,node,gpu_index
    j1,n1,0
    j1,n1,-1
    ,n1,1
"""
SAMPLES = """
    ts,node,gpu_index,util_pct
    2026-11-02 00:00:00,n1,0,50
    2026-11-02 00:10:00,n1,0,150
    yesterday,n1,0,50
    2026-11-02 00:20:00,n1,0,50
    2026-11-02 00:30:00,n1,0,
    2026-12-01 00:00:00,n1,0,150
"""
# memory and power of GPU 1: a negative reading is an exporter's error value, not a sample;
# a GPU index that is no number
READINGS = """
    ts,node,gpu_index,util_pct,mem_used_mib,power_w
    2026-11-02 00:00:00,n1,1,50,1024,250.5
    2026-11-02 00:10:00,n1,1,50,-40960,250.5
    2026-11-02 00:20:00,n1,1,50,1024,-301.25
    2026-11-02 00:30:00,n1,GPU-1,50,1024,250.5
"""


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    module_month.catalog(tenants=TENANTS, rates=RATES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/scheduler/c1/allocations.csv", ALLOCATIONS)
    module_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    module_month.file("landing/telemetry/c1/readings.csv", READINGS)
    return module_month.build("rejects")


def test_every_row_set_aside_with_file_line_and_reason(rows):
    assert [(r["file"], r["line"], r["reason"]) for r in rows] == [
        ("scheduler/c1/allocations.csv", 3, "field gpu_index: '-1' is not a GPU index"),
        ("scheduler/c1/allocations.csv", 4, "field job_id: missing"),
        ("scheduler/c1/jobs.csv", 3, "field gpus: 'two' is not a number"),
        ("scheduler/c1/jobs.csv", 4,
         "field end_time: 2026-11-02T04:00:00 is before start_time 2026-11-02T05:00:00"),
        ("scheduler/c1/jobs.csv", 5, "expected 13 fields, found 9"),
        # a job record of October: scheduler rejects are listed whatever their month
        ("scheduler/c1/jobs.csv", 6, "field state: 'EXPLODED' is not a known state"),
        ("telemetry/c1/readings.csv", 3, "field mem_used_mib: -40960.0 is negative"),
        ("telemetry/c1/readings.csv", 4, "field power_w: -301.25 is negative"),
        ("telemetry/c1/readings.csv", 5, "field gpu_index: 'GPU-1' is not a GPU index"),
        # telemetry rows of the month only: the 150 % of December 1 is December's
        ("telemetry/c1/samples.csv", 3, "field util_pct: 150.0 is outside 0-100"),
        # a row without a timestamp counts in the month of its file's first sample
        ("telemetry/c1/samples.csv", 4, "field ts: 'yesterday' is not a timestamp"),
        ("telemetry/c1/samples.csv", 6, "field util_pct: missing"),
    ]  # fmt: skip


def test_the_raw_text_of_each_row(rows):
    assert [(r["file"], r["line"], r["raw"]) for r in rows] == [
        ("scheduler/c1/allocations.csv", 3, "j1,n1,-1"),
        ("scheduler/c1/allocations.csv", 4, ",n1,1"),
        ("scheduler/c1/jobs.csv", 3, JOBS.splitlines()[3].strip()),
        ("scheduler/c1/jobs.csv", 4, JOBS.splitlines()[4].strip()),
        ("scheduler/c1/jobs.csv", 5, JOBS.splitlines()[5].strip()),
        ("scheduler/c1/jobs.csv", 6, JOBS.splitlines()[6].strip()),
        # telemetry rows are not kept as text: raw lists the fields as read, a field that
        # could not be read empty (never a NULL raw: the row would lose its evidence), a GPU
        # index that is no number as written
        ("telemetry/c1/readings.csv", 3,
         "ts=2026-11-02 00:10:00 node=n1 gpu_index=1 util_pct=50.0"),
        ("telemetry/c1/readings.csv", 4,
         "ts=2026-11-02 00:20:00 node=n1 gpu_index=1 util_pct=50.0"),
        ("telemetry/c1/readings.csv", 5,
         "ts=2026-11-02 00:30:00 node=n1 gpu_index=GPU-1 util_pct=50.0"),
        ("telemetry/c1/samples.csv", 3,
         "ts=2026-11-02 00:10:00 node=n1 gpu_index=0 util_pct=150.0"),
        ("telemetry/c1/samples.csv", 4, "ts= node=n1 gpu_index=0 util_pct=50.0"),
        ("telemetry/c1/samples.csv", 6, "ts=2026-11-02 00:30:00 node=n1 gpu_index=0 util_pct="),
    ]  # fmt: skip
    assert {r["billing_month"] for r in rows} == {dt.date(2026, 11, 1)}
