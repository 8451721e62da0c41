"""A telemetry sample of a GPU index its node does not have (not below the node's GPU count in
nodes.csv) is a reject naming the field, the value and the inventory, as an allocation row is
(sql/rollup/day_samples.sql judges each series of a day; stg_allocation_records.sql the rows):
it is in no series, no hour and no figure. A node of no inventory takes any index; a MIG
instance is judged by its GPU's index, never by its instance id.

Given: canonical samples CSV, an nvidia-smi log of n1 and a DCGM query_range body of a MIG
GPU, and a catalog with an inventory, built through the real readers, the daily telemetry
rollup and every step up to data_quality (tests/marts/conftest.py, GivenMonth). Samples
declared 10 minutes apart. Catalog: node n1 holds 2 A100 (GPUs 0 and 1), m1 one H100 (GPU 0,
MIG-partitioned); n9 is in no inventory.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from pipelines.catalog import load_catalog
from pipelines.defs.ingest.telemetry import month_hour_files
from pipelines.formats import dcgm
from pipelines.months import BillingMonth
from pipelines.sql import run
from tests.marts.conftest import ALPHA_TENANT, JOBS_HEADER, ONE_RATE, month_params, pick

SETTINGS = "telemetry: {step_s: 600}\n"
TENANTS, RATES = ALPHA_TENANT, ONE_RATE
NODES = """
    node,cluster,gpu_model,gpus
    n1,c1,A100,2
    m1,c1,H100,1
"""
JOBS = f"""
    {JOBS_HEADER}
    j1,alpha,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T01:00:00,COMPLETED,0
"""
# line 1 is the header
SAMPLES = """
    ts,node,gpu_index,util_pct
    2026-11-02 00:00:00,n1,0,50
    2026-11-02 00:10:00,n1,0,50
    2026-11-02 00:00:00,n1,99,90
    2026-11-02 00:10:00,n1,99,150
    2026-11-02 00:20:00,n1,2,90
    2026-11-02 00:00:00,n1,-1,90
    2026-11-02 00:00:00,n9,5,40
    2026-11-02 00:10:00,n9,5,40
    2026-11-02 00:00:00,n1,1,20
    2026-11-03 00:00:00,n1,99,90
"""
# n1's GPU 1, and its GPU 99 again (the probe that found the rows loaded: a GPU 99 in every
# report and figure of n1)
SMI = """
    timestamp, index, uuid, name, utilization.gpu [%], memory.used [MiB], power.draw [W]
    2026/11/02 00:10:00.000, 1, GPU-b, NVIDIA A100-SXM4-80GB, 30 %, 1024 MiB, 100 W
    2026/11/02 00:10:00.000, 99, GPU-z, NVIDIA A100-SXM4-80GB, 90 %, 1024 MiB, 100 W
"""
NOV_2 = 1793577600  # 2026-11-02 00:00 UTC, in Unix seconds


def _series(gpu: str, values: list[tuple[int, str]], instance: str | None = None) -> dict:
    labels = {"__name__": dcgm.GR_ENGINE_ACTIVE, "Hostname": "m1", "gpu": gpu}
    if instance is not None:
        labels |= {"GPU_I_ID": instance, "GPU_I_PROFILE": "1g.10gb"}
    return {"metric": labels, "values": [[NOV_2 + s, value] for s, value in values]}


# m1's GPU 0 as MIG instances 7 and 13 (an instance id above the node's GPU count is no GPU
# index) at 00:00 and 00:10, and a GPU 1 that m1 does not have (line 3000001: the 3rd series'
# 1st point)
MIG = json.dumps({
    "status": "success",
    "data": {"resultType": "matrix", "result": [
        _series("0", [(0, "0.5"), (600, "0.5")], "7"),
        _series("0", [(0, "0"), (600, "0")], "13"),
        _series("1", [(0, "0.9")]),
    ]},
})  # fmt: skip


@pytest.fixture(scope="module")
def quality(module_month) -> list[dict]:
    module_month.catalog(settings=SETTINGS, tenants=TENANTS, rates=RATES, nodes=NODES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    module_month.file("landing/telemetry/c1/m1.json", MIG)
    module_month.file("landing/telemetry/c1/n1_2026-11.csv", SMI)
    return module_month.build("data_quality")


def query(month, sql: str) -> list[tuple]:
    return month.con.execute(sql, {"month": dt.date(2026, 11, 1)}).fetchall()


def test_a_gpu_index_its_node_lacks_is_a_reject_naming_the_inventory(quality, module_month):
    assert query(
        module_month,
        "select file, line, reason from rejects where billing_month = $month "
        "and file like 'telemetry/%' order by file, line",
    ) == [
        ("telemetry/c1/m1.json", 3000001,
         "field gpu_index: 1 is not a GPU of node m1, which holds 1 GPUs (nodes.csv)"),
        ("telemetry/c1/n1_2026-11.csv", 3,
         "field gpu_index: 99 is not a GPU of node n1, which holds 2 GPUs (nodes.csv)"),
        ("telemetry/c1/samples.csv", 4,
         "field gpu_index: 99 is not a GPU of node n1, which holds 2 GPUs (nodes.csv)"),
        # a row another check rejects keeps that reason
        ("telemetry/c1/samples.csv", 5, "field util_pct: 150.0 is outside 0-100"),
        # n1's GPUs are 0 and 1
        ("telemetry/c1/samples.csv", 6,
         "field gpu_index: 2 is not a GPU of node n1, which holds 2 GPUs (nodes.csv)"),
        ("telemetry/c1/samples.csv", 7, "field gpu_index: not a GPU index"),
        # judged by every day: the 3rd of November as the 2nd
        ("telemetry/c1/samples.csv", 11,
         "field gpu_index: 99 is not a GPU of node n1, which holds 2 GPUs (nodes.csv)"),
    ]  # fmt: skip


def test_rows_read_loaded_and_rejected_reconcile(quality, module_month):
    files = [row for row in quality if row["category"] == "file"]
    assert pick(files, "subject", "rows_read", "rows_loaded", "rows_rejected",
                "duplicates_folded") == [
        ("scheduler/c1/jobs.csv", 1, 1, 0, 0),
        # the MIG GPU's instance rows of a timestamp are one sample: the other row is folded
        ("telemetry/c1/m1.json", 5, 4, 1, 2),
        ("telemetry/c1/n1_2026-11.csv", 2, 1, 1, 0),
        ("telemetry/c1/samples.csv", 10, 5, 5, 0),
    ]  # fmt: skip
    params = month_params(load_catalog(module_month.root / "catalog").settings)
    assert run(module_month.con, "checks/rows_reconcile", params).fetchall() == []


def test_a_rejected_gpu_has_no_series_nor_hours(quality, module_month):
    # n9, of no inventory, keeps its GPU 5; the MIG GPU is m1's GPU 0
    assert query(
        module_month,
        "select day, node, gpu_index, util_metric, samples, cover_ms from sample_series "
        "where billing_month = $month order by all",
    ) == [
        (dt.date(2026, 11, 2), "m1", 0, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2, 1_200_000),
        (dt.date(2026, 11, 2), "n1", 0, "canonical util_pct", 2, 1_200_000),
        # 00:00 from the canonical file, 00:10 from the nvidia-smi log
        (dt.date(2026, 11, 2), "n1", 1, "canonical util_pct", 1, 600_000),
        (dt.date(2026, 11, 2), "n1", 1, "nvidia-smi utilization.gpu", 1, 600_000),
        (dt.date(2026, 11, 2), "n9", 5, "canonical util_pct", 2, 1_200_000),
    ]
    month = BillingMonth.parse("2026-11", "UTC")
    # each series' key, the rejected GPUs' too: a key of none of them would show as itself
    keys = dict(module_month.con.execute(
        "select series_key('c1', node, gpu_index), node || '/' || gpu_index "
        "from (values ('m1', 0), ('n1', 0), ('n1', 1), ('n9', 5), ('m1', 1), ('n1', 2), "
        "('n1', 99)) as v(node, gpu_index)"
    ).fetchall())  # fmt: skip
    hours = module_month.con.execute(
        "select series_key, hour, samples, cover_ms from read_parquet($files) order by all",
        {"files": month_hour_files(module_month.resource.telemetry_dir, month)},
    ).fetchall()
    assert sorted((keys.get(key, key), hour, n, cover) for key, hour, n, cover in hours) == [
        ("m1/0", dt.datetime(2026, 11, 2), 2, 1_200_000),
        ("n1/0", dt.datetime(2026, 11, 2), 2, 1_200_000),
        ("n1/1", dt.datetime(2026, 11, 2), 2, 1_200_000),
        ("n9/5", dt.datetime(2026, 11, 2), 2, 1_200_000),
    ]


def test_a_month_on_days_judged_by_another_inventory_stops_until_they_are_rolled_up_again(
    given_month,
):
    # nodes.csv corrected after reading the month's rejects: n1 holds 3 GPUs, so GPU 2 is one;
    # the month on the days rolled up before would keep its samples set aside, silently
    given_month.catalog(settings=SETTINGS, tenants=TENANTS, rates=RATES, nodes=NODES)
    given_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    given_month.build("sample_rejects")
    given_month.catalog(nodes=NODES.replace("n1,c1,A100,2", "n1,c1,A100,3"))
    with pytest.raises(ValueError) as stop:
        given_month.build("sample_rejects", roll_up=False)
    assert str(stop.value) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-02, 2026-11-03 rolled up by another catalog "
        "(node n1 of c1: 2 GPUs in nodes.csv when rolled up, 3 GPUs now): materialise "
        "gpu_sample_rollup for these days again"
    )
    # rolled up again, n1's GPU 2 is kept; its GPU 99 is not
    rejects = given_month.build("sample_rejects")
    assert [(row["line"], row["reason"]) for row in rejects] == [
        (4, "field gpu_index: 99 is not a GPU of node n1, which holds 3 GPUs (nodes.csv)"),
        (5, "field util_pct: 150.0 is outside 0-100"),
        (7, "field gpu_index: not a GPU index"),
        (11, "field gpu_index: 99 is not a GPU of node n1, which holds 3 GPUs (nodes.csv)"),
    ]
    # n9, of no inventory when rolled up, listed now with more GPUs than the index its samples
    # have (5): no sample is judged otherwise, and the month goes on
    fixed = NODES.replace("n1,c1,A100,2", "n1,c1,A100,3")
    given_month.catalog(nodes=f"{fixed}    n9,c1,A100,6\n")
    assert given_month.build("sample_rejects", roll_up=False) == rejects
    # n1 with 100 GPUs would take its GPU 99
    given_month.catalog(nodes=NODES.replace("n1,c1,A100,2", "n1,c1,A100,100"))
    with pytest.raises(
        ValueError, match=r"\(node n1 of c1: 3 GPUs in nodes.csv when rolled up, 100 GPUs now\)"
    ):
        given_month.build("sample_rejects", roll_up=False)
