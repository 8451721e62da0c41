"""charge_line_coverage: the measured share of each usage and credit line's GPU time.

Given: the jobs, samples and catalog of test_job_usage.py (built through the real ingest and
SQL steps), whose measured hours that file computes by hand: j1 4 of 4.5 h measured, j2 3 of
6, j3 1 of 1, j4 (NODE_FAIL, credited) 0 of 1.5, j5 and j7 (T4) none.
"""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from tests.marts.conftest import pick
from tests.marts.test_job_usage import JOBS, NODES, RATES, SAMPLES, SETTINGS, TENANTS


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    module_month.catalog(settings=SETTINGS, tenants=TENANTS, rates=RATES, nodes=NODES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    return module_month.build("charge_line_coverage")


def test_each_line_is_measured_in_the_share_its_jobs_were(rows):
    columns = (
        "tenant_id", "gpu_model", "unit_price", "charge_type", "gpu_hours", "measured_gpu_hours",
        "measured_share_pct",
    )  # fmt: skip
    unit = 1_512_000_000  # GPU units per GPU-hour: the share is a ratio of unit sums
    assert pick(rows, *columns) == [
        # j4's credit: all of its 1.5 h, none of it measured
        ("chaff", "A100", D("2.5"), "credit", 1.5, 0.0, 0.0),
        # chaff's A100 usage: 4.5 + 6 + 1 + 1.5 = 13 GPU-hours, of which 4 + 3 + 1 + 0 measured
        ("chaff", "A100", D("2.5"), "usage", 13.0, 8.0, 100.0 * (8 * unit) / (13 * unit)),
        ("chaff", "T4", D("0.05"), "usage", 1.0, 0.0, 0.0),  # j7's November hour
        ("unmapped", "T4", D("0.05"), "usage", 0.1, 0.0, 0.0),  # j5 (account ghost)
    ]
