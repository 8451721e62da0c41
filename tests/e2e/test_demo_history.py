"""The demo with its two history months (`python -m simulator --history-months 2`, what `make
demo` runs), small: September to November 2026 simulated in one run, loaded and built by one
`chargeback run --from 2026-09 --to 2026-11`. Jobs run across the month boundaries, so each
month's view of such a job must give it the same GPUs (the placement is replayed over every
month's exports: loading.py::assign_gpu_indices), and the trend and forecast rest on three
months of growing demand."""

from __future__ import annotations

import subprocess
from pathlib import Path

import openpyxl
import pytest

from simulator.demo import generate_demo
from tests.conftest import query
from tests.e2e.test_chargeback_command import chargeback, env_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quarter(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    data = tmp_path_factory.mktemp("history")
    generate_demo(data, month="2026-11", seed=7, small=True, history_months=2)
    with (data / "catalog" / "settings.yaml").open("a", encoding="utf-8") as settings:
        settings.write("page_pdfs: false\n")  # a second a page, and not what is tested here
    return data, chargeback(["run", "--from", "2026-09", "--to", "2026-11"], env_for(data))


def test_one_command_builds_the_three_months(quarter):
    data, result = quarter
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "2026-09..2026-11: charged USD 184,169.01 to 16 tenants; 9 of 10 checks passed "
        f"(warnings: every_account_mapped); reports in {data / 'reports' / '2026-09'}/ .. "
        f"{data / 'reports' / '2026-11'}/"
    )
    jobs = "select billing_month::varchar, count(*) from stg_jobs group by 1 order by 1"
    assert query(data, jobs) == [("2026-09-01", 707), ("2026-10-01", 790), ("2026-11-01", 889)]


def test_a_job_across_a_month_boundary_holds_the_same_gpus_in_both_months(quarter):
    data, _ = quarter
    # every job in two months' job_gpus, and whether its GPUs there are the same
    rows = query(data, """
        with gpus as (
            select billing_month, cluster, job_id,
                list(node || ':' || gpu_index || ':' || gpu_share order by node, gpu_index) as held
            from job_gpus group by all
        )
        select a.billing_month::varchar, a.cluster, count(*), count(*) filter (a.held = b.held)
        from gpus as a join gpus as b
            on b.cluster = a.cluster and b.job_id = a.job_id
            and b.billing_month = a.billing_month + interval 1 month
        group by all order by all
    """)  # fmt: skip
    assert rows == [
        ("2026-09-01", "atlas", 39, 39),
        ("2026-09-01", "kube", 16, 16),
        ("2026-10-01", "atlas", 37, 37),
        ("2026-10-01", "kube", 13, 13),
    ]


def test_a_job_across_a_month_boundary_is_measured_in_both_months(quarter):
    # its samples land on it in each month: measured as good as all of its GPU-hours
    data, _ = quarter
    rows = query(data, """
        select billing_month::varchar, count(*), round(sum(allocated_gpu_hours), 2),
            round(sum(measured_gpu_hours), 2)
        from job_usage
        semi join (
            select cluster, job_id from job_gpus group by all
            having count(distinct billing_month) > 1
        ) using (cluster, job_id)
        group by all order by all
    """)  # fmt: skip
    assert rows == [
        ("2026-09-01", 61, 2740.65, 2740.15),
        ("2026-10-01", 93, 5037.45, 5025.15),
        ("2026-11-01", 56, 9144.5, 9029.76),
    ]


def test_the_trend_has_three_months_and_the_forecast_a_date(quarter):
    data, _ = quarter
    trend = query(data, """
        select billing_month::varchar, round(allocated_gpu_hours, 1),
            round(allocation_rate_pct, 1), incidents
        from month_trends
        where level = 'cluster_gpu_model' and cluster = 'atlas' and gpu_model = 'A100-80GB'
        order by all
    """)  # fmt: skip
    assert trend == [
        ("2026-09-01", 7889.3, 34.2, 0),
        ("2026-10-01", 6944.7, 29.2, 0),
        ("2026-11-01", 10296.2, 44.7, 1),  # the outage of the 17th
    ]
    # the budgets are the quarter's, the same each month; spend grows towards them
    spend = "select billing_month::varchar, sum(amount), sum(budget) from month_trends "
    spend += "where level = 'tenant' group by all order by all"
    assert [(m, str(a), str(b)) for m, a, b in query(data, spend)] == [
        ("2026-09-01", "55251.58", "119320.00"),
        ("2026-10-01", "51473.65", "119320.00"),
        ("2026-11-01", "77443.78", "119320.00"),
    ]
    forecast = query(data, """
        select horizon_months, history_months, method, round(forecast_gpu_hours),
            threshold_month::varchar, trend_verdict
        from demand_forecast
        where billing_month = '2026-11-01' and cluster = 'atlas' and gpu_model = 'A100-80GB'
        order by all
    """)  # fmt: skip
    verdict = (
        "allocation 44.7%, rising 1203 GPU-hours a month: 80% reached in 2027-07 at this trend"
    )
    method = "least-squares line through 3 months of allocated GPU-hours"
    assert forecast == [
        (1, 3, method, 10784.0, "2027-07-01", verdict),
        (2, 3, method, 11987.0, "2027-07-01", verdict),
        (3, 3, method, 13191.0, "2027-07-01", verdict),
    ]


def test_the_workbook_charts_the_three_months(quarter):
    data, _ = quarter
    book = openpyxl.load_workbook(data / "reports" / "2026-11" / "chargeback-2026-11.xlsx")
    sheet = book["Trends"]
    months = sheet[sheet.tables["TrendsAllocation"].ref][1:]  # under its header
    assert [(row[0].value.date().isoformat(), round(row[1].value, 4)) for row in months] == [
        ("2026-09-01", 0.3424),
        ("2026-10-01", 0.2917),
        ("2026-11-01", 0.4469),
    ]
