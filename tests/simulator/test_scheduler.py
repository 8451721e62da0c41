"""The demo scheduler's shortcut: the earliest start of a waiting job found from each node's
free gaps (`_first_fit`) is the one trying every candidate instant in turn would find."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.scheduler import _first_fit, _fits_at, _Gpu
from simulator.site import GPUS_PER_NODE
from simulator.workload import Job


def busy_gpu(cuts: list[int]) -> _Gpu:
    """A GPU busy over consecutive pairs of the sorted `cuts` (zero-length intervals too)."""
    gpu = _Gpu()
    points = sorted(cuts)
    for start, end in zip(points[::2], points[1::2], strict=False):
        gpu.hold(start, end, None)
    return gpu


def one_by_one(job: Job, node_gpus: list[_Gpu], starts: list[int]) -> int | None:
    return next((k for k, s in enumerate(starts) if _fits_at(job, [("n", node_gpus)], s)), None)


@settings(max_examples=400, deadline=None)
@given(
    cuts=st.lists(
        st.lists(st.integers(0, 200), max_size=8), min_size=GPUS_PER_NODE, max_size=GPUS_PER_NODE
    ),
    starts=st.lists(st.integers(0, 220), min_size=1, max_size=12, unique=True).map(sorted),
    gpus=st.integers(1, GPUS_PER_NODE),
    runtime=st.integers(0, 80),
)
def test_the_first_fit_from_the_gaps_is_the_first_instant_that_fits(cuts, starts, gpus, runtime):
    job = Job(submit=0, account="a", user="u", queue="q", qos="normal", gpu_model="A100",
              gpus=gpus, runtime=runtime, state="COMPLETED", exit_code=0, profile=0)  # fmt: skip
    node_gpus = [busy_gpu(gpu_cuts) for gpu_cuts in cuts]
    assert _first_fit(job, node_gpus, starts) == one_by_one(job, node_gpus, starts)


def test_a_gap_shorter_than_the_run_does_not_fit():
    # GPU 0 busy 10-20 and 30-40: free 20-30, too short for 15 s; free again from 40
    job = Job(submit=0, account="a", user="u", queue="q", qos="normal", gpu_model="A100",
              gpus=1, runtime=15, state="COMPLETED", exit_code=0, profile=0)  # fmt: skip
    gpu = busy_gpu([10, 20, 30, 40])
    assert _first_fit(job, [gpu], [20, 25, 40]) == 2
    assert _first_fit(job, [gpu], [12, 22]) is None
