"""over_allocation: jobs holding GPUs they never used while their others worked (DESIGN: a
diagnostic view, not a bucket). Given: GivenMonth (canonical jobs and samples CSV, the real
steps: busy and measured GPUs come from the rollup's sums per series-hour).

Catalog: n1 holds 4 A100; idle threshold 5 %, samples 10 minutes apart."""

from __future__ import annotations

import pytest

from tests.marts.conftest import (
    CHAFF_TENANT,
    IDLE_RULES,
    JOBS_HEADER,
    ONE_RATE,
    pick,
    samples,
    samples_csv,
)

NODES = """
    node,cluster,gpu_model,gpus
    n1,c1,A100,4
"""
# GPUs are assigned lowest free first (no allocations export): j1 n1/0-2, j2 n1/0-1 ...
JOBS = f"""
    {JOBS_HEADER}
    j1,chaff,ann,batch,normal,A100,3,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,2026-11-02T02:00:00,COMPLETED,0
    j2,chaff,bob,batch,normal,A100,2,n1,2026-11-03T00:00:00,2026-11-03T00:00:00,2026-11-03T01:00:00,COMPLETED,0
    j3,chaff,cy,batch,normal,A100,2,n1,2026-11-04T00:00:00,2026-11-04T00:00:00,2026-11-04T01:00:00,COMPLETED,0
    j4,chaff,dee,batch,normal,A100,1,n1,2026-11-05T00:00:00,2026-11-05T00:00:00,2026-11-05T01:00:00,COMPLETED,0
"""
SAMPLES = samples_csv(
    # j1: n1/0 busy, n1/1 idle for its whole run, n1/2 busy for one sample only
    samples("n1", 0, "2026-11-02 00:00", 12, 80.0),
    samples("n1", 1, "2026-11-02 00:00", 12, 1.0),
    samples("n1", 2, "2026-11-02 00:00", 11, 2.0),
    samples("n1", 2, "2026-11-02 01:50", 1, 50.0),
    # j2: n1/0 busy; n1/1 without samples: unmeasured, not idle
    samples("n1", 0, "2026-11-03 00:00", 6, 80.0),
    # j3: both GPUs idle: an idle job, not an over-allocated one
    samples("n1", 0, "2026-11-04 00:00", 6, 1.0),
    samples("n1", 1, "2026-11-04 00:00", 6, 1.0),
    # j4: one GPU, idle: nothing to over-allocate
    samples("n1", 0, "2026-11-05 00:00", 6, 1.0),
)


@pytest.fixture(scope="module")
def rows(module_month) -> list[dict]:
    module_month.catalog(settings=IDLE_RULES, tenants=CHAFF_TENANT, rates=ONE_RATE, nodes=NODES)
    module_month.file("landing/scheduler/c1/jobs.csv", JOBS)
    module_month.file("landing/telemetry/c1/samples.csv", SAMPLES)
    return module_month.build("over_allocation")


def test_a_gpu_measured_and_never_busy_beside_busy_ones_is_over_allocated(rows):
    assert pick(rows, "job_id", "tenant_id", "user", "gpu_model", "gpus", "busy_gpus",
                "idle_gpus", "idle_gpu_hours") == [
        ("j1", "chaff", "ann", "A100", 3, 2, ["n1/1"], 2.0),
    ]  # fmt: skip
