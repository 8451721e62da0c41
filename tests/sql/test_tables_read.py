"""Given/expect tests of the reader the asset graph's lines come from: a select in, exactly the
tables it reads out (pipelines.sql.select_reads)."""

import pytest

from pipelines.sql import select_reads, tables_read


@pytest.mark.parametrize(
    ("sql", "read"),
    [
        pytest.param("select * from job_usage", {"job_usage"}, id="from"),
        pytest.param(
            "select * from job_usage as u join stg_jobs as j using (job_id) "
            "left join catalog_tenants as t on t.tenant_id = u.tenant_id",
            {"job_usage", "stg_jobs", "catalog_tenants"},
            id="joins",
        ),
        pytest.param("select * from job_usage, stg_jobs", {"job_usage", "stg_jobs"}, id="comma"),
        pytest.param(
            "select * from (select * from job_usage) as u "
            "where u.job_id in (select job_id from stg_jobs) "
            "and exists (from catalog_nodes)",
            {"job_usage", "stg_jobs", "catalog_nodes"},
            id="subqueries",
        ),
        pytest.param(
            "with totals as (select job_id, sum(gpu_hours) as h from job_usage group by all), "
            "final as (select * from totals join stg_jobs using (job_id)) "
            "select * from final",
            {"job_usage", "stg_jobs"},
            id="ctes named like no table",
        ),
        pytest.param(
            # job_sample_time.sql's: its job_gpus is job_gpu_hours numbered, not the table
            "with job_gpus as (select row_number() over () as job_gpu, * from job_gpu_hours) "
            "select * from job_gpus",
            {"job_gpu_hours"},
            id="cte shadowing a table",
        ),
        pytest.param(
            "with job_usage as (select * from job_usage where gpu_hours > 0) "
            "select * from job_usage",
            {"job_usage"},
            id="cte reading the table it shadows",
        ),
        pytest.param(
            "with earlier as (select * from job_usage), job_usage as (select 1 as n) "
            "select * from earlier, job_usage",
            {"job_usage"},
            id="cte before the one shadowing",
        ),
        pytest.param(
            "select * from (with stg_jobs as (select 1 as n) select * from stg_jobs) "
            "union all select * from stg_jobs",
            {"stg_jobs"},
            id="cte of a subquery ends with it",
        ),
        pytest.param(
            "with recursive days(d) as (select 1 union all select d + 1 from days where d < 3) "
            "select * from days, catalog_nodes",
            {"catalog_nodes"},
            id="recursive cte",
        ),
        pytest.param(
            "select * from read_parquet($sample_files) as s "
            "join job_gpu_hours as h using (series_key) where h.billing_month = $billing_month",
            {"job_gpu_hours"},
            id="table function and parameters",
        ),
    ],
)
def test_select_reads(sql, read):
    assert select_reads(sql) == read


def test_a_file_that_is_no_select_is_named():
    with pytest.raises(ValueError, match=r"sql/marts/closed_months\.sql: .*SELECT"):
        tables_read("marts/closed_months")


def test_a_project_file():
    # the catalog's temporary rows table counts: the caller keeps the warehouse's tables
    assert tables_read("staging/catalog_tenants") == {"catalog_tenants_rows"}
    assert tables_read("marts/availability") == {"incidents", "node_service"}
