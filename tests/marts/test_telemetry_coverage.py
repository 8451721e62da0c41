"""telemetry_coverage: per cluster, the utilisation metric(s) of its telemetry, the sampling
interval observed and the measured share of its allocated GPU time.

Given (real export formats through the real rollup, ingest and SQL steps, GivenMonth):
- cluster dc, node d1, one DCGM query_range export: GPU 0 has DCGM_FI_PROF_GR_ENGINE_ACTIVE
  every 15 s from 2026-11-10 10:00 (240 points, to 10:59:45: 1 h), GPU 1 DCGM_FI_DEV_GPU_UTIL
  only, every 15 s from 10:00 (80 points: 20 minutes). Job j1 holds GPU 0 10:00-12:00, j2
  GPU 1 10:00-11:00: 3 GPU-hours allocated, 1 h + 20 min measured.
- cluster smi, node s1, one nvidia-smi log: GPU 0 every 60 s from 2026-11-10 10:00 (180
  samples: 3 h), GPU 1, which no job holds, 11 samples 30 s apart on Nov 11 and 11 samples
  120 s apart on Nov 12. Job j3 holds GPU 0 10:00-14:00: 4 GPU-hours, the last hour without a
  sample.
- cluster dark: job j4, 1 GPU-hour, no telemetry at all.
No step is declared: each series-day's step is its own spacing (10 spacings or more).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.marts.conftest import CHAFF_TENANT, JOBS_HEADER, ONE_RATE, UNITS_PER_GPU_HOUR, pick

TEN = dt.datetime(2026, 11, 10, 10, tzinfo=dt.UTC)


def dcgm_series(metric: str, gpu: str, value: str, count: int) -> dict:
    """A query_range series of node d1's GPU `gpu`: `count` points 15 s apart from 10:00."""
    first = int(TEN.timestamp())
    return {
        "metric": {"__name__": metric, "Hostname": "d1", "gpu": gpu, "modelName": "A100"},
        "values": [[first + 15 * i, value] for i in range(count)],
    }


DCGM = json.dumps({
    "status": "success",
    "data": {"resultType": "matrix", "result": [
        dcgm_series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0", "0.5", 240),
        dcgm_series("DCGM_FI_DEV_GPU_UTIL", "1", "50", 80),
    ]},
})  # fmt: skip


def smi_lines(gpu: int, first: dt.datetime, seconds: int, count: int) -> list[str]:
    return [
        f"{first + dt.timedelta(seconds=seconds * i):%Y/%m/%d %H:%M:%S}.000, {gpu}, 40 %"
        for i in range(count)
    ]


NVIDIA_SMI = "\n".join([
    "timestamp, index, utilization.gpu [%]",
    *smi_lines(0, dt.datetime(2026, 11, 10, 10), 60, 180),
    *smi_lines(1, dt.datetime(2026, 11, 11, 6), 30, 11),
    *smi_lines(1, dt.datetime(2026, 11, 12, 6), 120, 11),
    "",  # the last line ends: a log cut off mid-line loses it
])  # fmt: skip

DC_JOBS = f"""
    {JOBS_HEADER}
    j1,chaff,ann,batch,normal,A100,1,d1,2026-11-10T09:00:00,2026-11-10T10:00:00,2026-11-10T12:00:00,COMPLETED,0
    j2,chaff,ann,batch,normal,A100,1,d1,2026-11-10T09:00:00,2026-11-10T10:00:00,2026-11-10T11:00:00,COMPLETED,0
"""
DC_ALLOCATIONS = """
    job_id,node,gpu_index
    j1,d1,0
    j2,d1,1
"""
SMI_JOBS = f"""
    {JOBS_HEADER}
    j3,chaff,ann,batch,normal,A100,1,s1,2026-11-10T09:00:00,2026-11-10T10:00:00,2026-11-10T14:00:00,COMPLETED,0
"""
DARK_JOBS = f"""
    {JOBS_HEADER}
    j4,chaff,ann,batch,normal,A100,1,k1,2026-11-10T09:00:00,2026-11-10T10:00:00,2026-11-10T11:00:00,COMPLETED,0
"""
COLUMNS = (
    "cluster", "util_metric", "series", "samples", "sampled_gpu_hours", "sampled_share_pct",
    "median_step_s", "min_step_s", "max_step_s", "allocated_gpu_hours", "measured_gpu_hours",
    "measured_share_pct",
)  # fmt: skip


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    module_month.catalog(tenants=CHAFF_TENANT, rates=ONE_RATE)
    module_month.file("landing/scheduler/dc/jobs.csv", DC_JOBS)
    module_month.file("landing/scheduler/dc/allocations.csv", DC_ALLOCATIONS)
    module_month.file("landing/telemetry/dc/d1_2026-11-10.json", DCGM)
    module_month.file("landing/scheduler/smi/jobs.csv", SMI_JOBS)
    module_month.file("landing/telemetry/smi/s1_2026-11.csv", NVIDIA_SMI)
    module_month.file("landing/scheduler/dark/jobs.csv", DARK_JOBS)
    return module_month.build("telemetry_coverage")


def test_each_clusters_metrics_interval_and_measured_share(rows):
    unit = UNITS_PER_GPU_HOUR
    # dc: 1 h + 20 min of its 3 allocated GPU-hours measured (the same on both of its rows)
    dc_share = 100.0 * (unit + unit // 3) / (3 * unit)
    assert pick(rows, *COLUMNS) == [
        # no sample at all: one row without a metric, nothing measured
        ("dark", None, 0, 0, 0.0, None, None, None, None, 1.0, 0.0, 0.0),
        # two metrics, the larger share of sampled time first: GR_ENGINE_ACTIVE's 1 h is 75 %
        # of dc's 1 h 20 min of telemetry, GPU_UTIL's 20 minutes 25 %; both every 15 s
        ("dc", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1, 240, 1.0, 75.0, 15.0, 15.0, 15.0,
         3.0, 4 / 3, dc_share),
        ("dc", "DCGM_FI_DEV_GPU_UTIL", 1, 80, 1 / 3, 25.0, 15.0, 15.0, 15.0,
         3.0, 4 / 3, dc_share),
        # steps of the series-days: GPU 0 60 s on Nov 10, GPU 1 30 s on Nov 11 and 120 s on
        # Nov 12 (lower median 60 s); sampled 3 h + 11 × 30 s + 11 × 120 s = 12,450 s, of
        # which only GPU 0's is allocated: 3 of j3's 4 hours measured
        ("smi", "nvidia-smi utilization.gpu", 2, 202, 12_450 / 3600, 100.0, 60.0, 30.0, 120.0,
         4.0, 3.0, 75.0),
    ]  # fmt: skip


def test_the_measured_share_is_data_qualitys_telemetry_coverage(module_month, rows):
    coverage = module_month.con.execute(
        "select cluster, value from data_quality where category = 'telemetry_coverage' "
        "order by cluster"
    ).fetchall()
    shares = dict(sorted({(r["cluster"], r["measured_share_pct"]) for r in rows}))
    assert [cluster for cluster, _ in coverage] == list(shares) == ["dark", "dc", "smi"]
    for cluster, value in coverage:
        assert 100 * value == pytest.approx(shares[cluster], rel=1e-12)
