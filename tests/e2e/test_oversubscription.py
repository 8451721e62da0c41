"""Two jobs on one GPU at once: reported by name, never silently summed into capacity."""

import datetime as dt

import duckdb
import pytest

from pipelines.defs.resources import prepare_connection
from pipelines.sql import run
from tests.conftest import materialize_month, write
from tests.e2e.test_tiny_month import ALLOCATIONS, build_tiny_month

# slow (quick tier: make test-quick): materialises the tiny month per case
pytestmark = pytest.mark.slow

FAILED = "warehouse_failed.duckdb"  # where a failed run's tables are kept (pipelines/commit.py)


def test_two_jobs_on_one_gpu_fail_the_checks_and_name_the_gpu(tmp_path):
    build_tiny_month(tmp_path)
    # J7 (Nov 15 10:00-10:45) moves onto GPU 1 of n1, and a new job J9 holds it whole as well
    write(
        tmp_path / "landing/scheduler/tiny/allocations.csv",
        ALLOCATIONS.replace("J7,n1,0", "J7,n1,1") + "J9,n1,1\n",
    )
    jobs = tmp_path / "landing/scheduler/tiny/jobs.csv"
    jobs.write_text(
        jobs.read_text()
        + "J9,tiny,alpha,ann,batch,normal,A100,1,n1,2026-11-15T09:00:00,2026-11-15T10:15:00,"
        "2026-11-15T10:30:00,COMPLETED,0\n"
    )
    result = materialize_month(tmp_path, "2026-11-01", raise_on_error=False)
    outcomes = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert outcomes["gpus_never_oversubscribed"].passed is False
    assert outcomes["capacity_buckets_sum_to_capacity"].passed is False
    # blocking: the workbook of a month whose buckets do not add up is not written
    assert not (tmp_path / "reports/2026-11/chargeback-2026-11.xlsx").exists()
    # nor the warehouse committed: the failed run's tables are kept aside to look into
    assert not (tmp_path / "warehouse.duckdb").exists()
    # the checks use the project's macros: the failed run's copy has them (prepare_connection)
    con = prepare_connection(duckdb.connect(str(tmp_path / FAILED), read_only=True))
    try:
        assert con.execute(
            "select subject, value from data_quality where category = 'overlapping_allocations'"
        ).fetchall() == [("n1/gpu1", 0.25)]  # J7 and J9 both held it 10:15-10:30
    finally:
        con.close()


def test_a_table_rebuilt_on_its_own_checks_its_months(tmp_path):
    import dagster as dg

    from pipelines.definitions import all_assets
    from pipelines.defs.resources import ChargebackResource
    from tests.conftest import resource_for

    test_two_jobs_on_one_gpu_fail_the_checks_and_name_the_gpu(tmp_path)
    # the failed run's copy, checked as a warehouse of its own
    failed = ChargebackResource(**{
        **resource_for(tmp_path).model_dump(), "warehouse": str(tmp_path / FAILED)
    })  # fmt: skip
    for month, passed in (("2026-11-01", False), ("2026-10-01", True)):
        # the table's checks run in its step, on the months of its partition window
        result = dg.materialize(
            all_assets,
            selection=dg.AssetSelection.assets("gpu_capacity"),
            resources={"chargeback": failed},
            partition_key=month,
            raise_on_error=False,
        )
        [evaluation] = result.get_asset_check_evaluations()
        assert evaluation.passed is passed
        assert evaluation.metadata["months"].value == month[:7]


def test_the_check_names_the_gpu_and_the_jobs_that_overlapped(tmp_path):
    test_two_jobs_on_one_gpu_fail_the_checks_and_name_the_gpu(tmp_path)
    # the checks use the project's macros: the failed run's copy has them (prepare_connection)
    con = prepare_connection(duckdb.connect(str(tmp_path / FAILED), read_only=True))
    try:
        rows = run(con, "checks/gpus_never_oversubscribed", {"billing_month": "2026-11-01"})
        assert rows.fetchall() == [
            ("tiny", "n1", 1, 0.25, dt.datetime(2026, 11, 15, 10, 15), "J7, J9")
        ]
    finally:
        con.close()
