"""The code location loads with the expected assets, checks, job and schedule; every
warehouse table is the asset of its name, built from sql/<layer>/<table>.sql."""

import datetime as dt
import re
from graphlib import TopologicalSorter

import dagster as dg
import pytest

from pipelines.definitions import TABLE_STEPS, all_assets, defs
from pipelines.defs.partitions import window_months
from pipelines.defs.reports.publish import REPORT_FILES
from pipelines.defs.resources import ENVIRONMENT, ChargebackResource
from pipelines.defs.warehouse import in_flow_order, warehouse_tables
from pipelines.sql import SQL_DIR, sql_text, tables_read

# Every table the warehouse holds after a month's run (a test of the demo month checks the
# warehouse holds exactly these), each the asset of its name
TABLES = {
    "catalog_tenants", "catalog_rates", "catalog_price_tiers", "catalog_budgets",
    "catalog_quotas", "catalog_clusters", "catalog_gpu_models", "catalog_nodes",
    "catalog_outage_windows", "catalog_account_tenants",
    "stg_scheduler_files", "stg_job_records", "stg_allocation_records", "stg_quota_configs",
    "stg_jobs", "job_gpus",
    "sample_sources", "stg_telemetry_files", "sample_rejects", "sample_file_counts",
    "sample_series",
    "job_gpu_hours", "job_sample_time", "job_day_tenants", "job_time_buckets", "gpu_capacity",
    "capacity_buckets",
    "cost_pools", "job_gpu_charges", "job_line_cents", "job_usage", "cost_views", "quota_steps",
    "reserved_quota_unused",
    "computed_charge_lines", "charge_lines", "charge_line_coverage", "tenant_month",
    "quota_compliance", "queue_stats",
    "failure_stats", "submission_stats", "kueue_workload_waits", "quota_drift",
    "node_service", "incidents", "availability", "capacity_evidence", "job_efficiency",
    "user_efficiency", "over_allocation", "utilization_daily",
    "telemetry_label_checks", "month_trends", "demand_forecast", "rejects", "data_quality",
    "telemetry_coverage",
    # written by `chargeback close` only (the close job), created empty by charge_lines
    "issued_charge_lines", "closed_months",
}  # fmt: skip
CLOSE_TABLES = {"issued_charge_lines", "closed_months"}
FILES = {
    "chargeback_workbook", "focus_export", "notices_export", "department_reports",
    "organisation_page", "month_manifest",
}  # fmt: skip
DAILY_ASSETS = {"gpu_sample_rollup"}
EXPECTED_ASSETS = TABLES | FILES | DAILY_ASSETS


def test_assets_and_checks():
    graph = defs.resolve_asset_graph()
    assert {key.to_user_string() for key in graph.get_all_asset_keys()} == EXPECTED_ASSETS
    checks = {(key.asset_key.to_user_string(), key.name) for key in graph.asset_check_keys}
    assert checks == {
        ("capacity_buckets", "capacity_buckets_sum_to_capacity"),
        ("tenant_month", "charges_tie_out"),
        ("charge_lines", "cluster_cost_recovered"),
        ("job_usage", "every_account_mapped"),
        ("data_quality", "rows_reconcile"),
        ("data_quality", "no_file_mostly_rejected"),
        ("gpu_capacity", "gpus_never_oversubscribed"),
        ("quota_compliance", "quota_compliance_ties_out"),
        ("utilization_daily", "utilization_daily_ties_out"),
        ("telemetry_label_checks", "telemetry_labels_agree_with_scheduler"),
    }
    blocking = {spec.name for step in all_assets for spec in step.check_specs if spec.blocking}
    assert blocking == {
        "capacity_buckets_sum_to_capacity", "charges_tie_out", "cluster_cost_recovered",
        "rows_reconcile", "no_file_mostly_rejected", "quota_compliance_ties_out",
        "utilization_daily_ties_out",
    }  # fmt: skip


def test_every_table_is_built_from_the_sql_file_of_its_name():
    built = {table.name: table for step in TABLE_STEPS for table in step.tables}
    assert set(built) == TABLES - CLOSE_TABLES
    # the tables a table's upstream ones are taken from (its SQL reads temporary ones too)
    assert warehouse_tables() == TABLES
    for name in TABLES:
        # one file of that name among the table layers (rollup: the daily Parquet files;
        # checks: one row per violation; reports: the rows of a sheet or page)
        [path] = [path for path in SQL_DIR.glob(f"*/{name}.sql")
                  if path.parent.name in {"staging", "facts", "marts"}]  # fmt: skip
        if name in built:
            assert built[name].sql_name == f"{path.parent.name}/{name}"


def tables_named(sql: str) -> set[str]:
    """The warehouse tables a SQL file names after FROM or JOIN, but those it declares as CTEs:
    a plain text scan, cruder than the parser the graph's lines come from (pipelines.sql) and
    independent of it (on this repository's files, the two agree)."""
    text = re.sub(r"--[^\n]*", "", sql)
    named = set(re.findall(r"\b(?:from|join)\s+([a-z_][a-z0-9_]*)\b(?!\s*\()", text))
    ctes = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s+as\s+(?:materialized\s+)?\(", text))
    return (named - ctes) & TABLES


def test_each_table_waits_for_exactly_the_tables_it_reads():
    """The asset graph's lines are the SQL's: a table read but not a parent would be built
    after its reader in some run; a parent not read is a line to nowhere. A table's parents
    are the tables its SQL file and its checks' files name, and what its step reads besides
    (in Python, or from files an upstream asset wrote), which alone is declared by hand."""
    graph = defs.resolve_asset_graph()
    for step in TABLE_STEPS:
        for table in step.tables:
            files = [table.sql_name, *(f"checks/{check.name}" for check in table.checks)]
            named = {name for file in files for name in tables_named(sql_text(file))}
            by_hand = {dep if isinstance(dep, str) else dep.asset_key.to_user_string()
                       for dep in table.also_reads}  # fmt: skip
            parents = graph.get(dg.AssetKey(table.name)).parent_keys
            expected = (named | by_hand) - {table.name}
            assert {key.to_user_string() for key in parents} == expected, table.name
            # by hand only what the SQL does not say (an AssetDep: for its partition mapping)
            plain = {dep for dep in table.also_reads if isinstance(dep, str)}
            assert plain & named == set(), table.name


def test_the_graph_has_no_cycle_and_each_step_comes_after_what_it_reads():
    graph = defs.resolve_asset_graph()
    parents = {key: graph.get(key).parent_keys for key in graph.get_all_asset_keys()}
    assert len(list(TopologicalSorter(parents).static_order())) == len(EXPECTED_ASSETS)
    # TABLE_STEPS passed in_flow_order (the order a month is built in outside Dagster): it
    # refuses a step put before one whose table it reads
    steps = {step.name: step for step in TABLE_STEPS}
    with pytest.raises(ValueError, match="job_usage reads job_time_buckets, which is built after"):
        in_flow_order([steps["job_usage"], steps["job_time_buckets"]])
    in_flow_order([steps["job_time_buckets"], steps["job_usage"]])
    with pytest.raises(ValueError, match="built after it"):
        in_flow_order(TABLE_STEPS[::-1])


# the sql/reports files each report asset's writer reads (pipelines/reports/)
_PAGE_QUERIES = [
    "departments", "department_tenants", "department_quota", "department_daily",
    "department_daily_from_jobs", "department_top_jobs", "charge_lines", "job_lines",
    "cost_views", "users", "telemetry_coverage", "currencies", "tenants",
]  # fmt: skip
REPORT_QUERIES = {
    "chargeback_workbook": [
        "data_quality", "charge_lines", "tenants", "job_lines", "capacity_buckets", "rejects",
        "quota_compliance", "quota_drift", "queue_stats", "submission_stats", "failure_stats",
        "availability", "incidents", "capacity_evidence", "daily_capacity", "cost_views",
        "users", "month_trends", "demand_forecast", "amount_by_charge_type", "cluster_cost",
        "telemetry_coverage", "currencies",
    ],
    "department_reports": _PAGE_QUERIES,
    "organisation_page": _PAGE_QUERIES,
    "focus_export": ["focus_charges"],
    "notices_export": ["notices"],
}  # fmt: skip


def test_each_report_waits_for_every_table_its_queries_read():
    """A report built before a table it reads, in the same run, would show that table's
    previous run: every table its queries read is one of its asset's parents."""
    from pipelines.reports.finance_workbook import AUDIT_TABLES

    graph = defs.resolve_asset_graph()
    for report, files in REPORT_QUERIES.items():
        read = {name for file in files for name in tables_read(f"reports/{file}")}
        if report == "chargeback_workbook":
            read |= set(AUDIT_TABLES)  # the Audit sheet counts their rows
        parents = {key.to_user_string() for key in graph.get(dg.AssetKey(report)).parent_keys}
        assert (read & TABLES) - parents == set(), report


def test_every_asset_is_monthly_but_the_telemetry_rollup_and_backfills_in_one_run():
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        expected = (
            dg.DailyPartitionsDefinition
            if key.to_user_string() in DAILY_ASSETS
            else dg.MonthlyPartitionsDefinition
        )
        assert isinstance(node.partitions_def, expected), key
        assert node.partitions_def.start.date() == dt.date(2016, 1, 1), key
        if key.to_user_string() not in CLOSE_TABLES:  # never materialised by a run
            assert node.backfill_policy == dg.BackfillPolicy.single_run(), key
    # the month's telemetry is the rollup of its days: a backfill of months from the UI
    # (rooted at the monthly catalog) rolls up their days before the monthly assets
    assert dg.AssetKey("gpu_sample_rollup") in graph.get(dg.AssetKey("sample_rejects")).parent_keys
    assert graph.get(dg.AssetKey("gpu_sample_rollup")).parent_keys == {
        dg.AssetKey("catalog_clusters")
    }
    # month_manifest describes the month's reports as a whole: after every report is written,
    # and the files of every report step are known (they are what it carries over or not)
    reports = {
        "chargeback_workbook", "focus_export", "notices_export", "department_reports",
        "organisation_page",
    }  # fmt: skip
    assert set(REPORT_FILES) == reports == FILES - {"month_manifest"}
    assert graph.get(dg.AssetKey("month_manifest")).parent_keys >= {
        dg.AssetKey(name) for name in reports
    }


def test_job_and_schedule():
    job = defs.resolve_job_def("chargeback_job")
    assert job.name == "chargeback_job"
    assert defs.resolve_job_def("close_month_job").name == "close_month_job"
    schedule = defs.resolve_schedule_def("chargeback_monthly_schedule")
    # the 1st, or the 2nd for a billing timezone west of UTC (tests/test_schedules.py)
    assert schedule.cron_schedule == "0 3 1,2 * *"
    assert schedule.job_name == "chargeback_job"
    # a run holds one partitioning: the monthly job is every asset but the daily rollup, and
    # but the tables of issued charges (closing a month is `chargeback close`, never a run)
    monthly = {key.to_user_string() for key in job.asset_layer.selected_asset_keys}
    assert monthly == EXPECTED_ASSETS - DAILY_ASSETS - CLOSE_TABLES
    daily = defs.resolve_schedule_def("telemetry_daily_schedule")
    assert daily.cron_schedule == "0 1 * * *"
    assert daily.job_name == "telemetry_rollup_job"
    rollup = defs.resolve_job_def("telemetry_rollup_job")
    assert {key.to_user_string() for key in rollup.asset_layer.selected_asset_keys} == DAILY_ASSETS
    # the same days, each run's step on a Celery worker (tests/e2e/test_distributed_rollups.py)
    fanout = defs.resolve_job_def("telemetry_rollup_fanout_job")
    assert {key.to_user_string() for key in fanout.asset_layer.selected_asset_keys} == DAILY_ASSETS
    assert fanout.executor_def.name == "celery_redis"
    assert rollup.executor_def.name == defs.resolve_job_def("chargeback_job").executor_def.name
    assert rollup.executor_def.name == "in_process"


def test_daily_schedule_requests_the_day_just_ended():
    schedule = defs.resolve_schedule_def("telemetry_daily_schedule")
    context = dg.build_schedule_context(
        scheduled_execution_time=dt.datetime(2026, 12, 1, 1, 0, tzinfo=dt.UTC)
    )
    requests = list(schedule.evaluate_tick(context).run_requests or [])
    assert [request.partition_key for request in requests] == ["2026-11-30"]


def test_settings_are_read_by_the_process_that_runs(tmp_path, monkeypatch):
    """The code location's resource holds the variables, not their values: a run reads them
    when it starts, in its own process (a remote worker: its own environment); a setting whose
    variable is unset keeps its default."""
    for variable in ENVIRONMENT.values():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("CHARGEBACK_WAREHOUSE", str(tmp_path / "loaded.duckdb"))
    monkeypatch.setenv("CHARGEBACK_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("CHARGEBACK_LOCK_WAIT_S", "7")
    monkeypatch.setenv("CHARGEBACK_ROLLUP_DIR", str(tmp_path / "shared"))
    resource = ChargebackResource.from_env()
    monkeypatch.setenv("CHARGEBACK_WAREHOUSE", str(tmp_path / "run.duckdb"))
    monkeypatch.setenv("CHARGEBACK_ROLLUP_DIR", str(tmp_path / "nfs/rollups"))
    seen = {}

    @dg.asset
    def settings(chargeback: ChargebackResource) -> None:
        seen.update(chargeback.model_dump())

    assert dg.materialize([settings], resources={"chargeback": resource}).success
    assert seen == {
        "landing_dir": "data/landing",
        "catalog_dir": "data/catalog",
        "warehouse": str(tmp_path / "run.duckdb"),
        "reports_dir": str(tmp_path / "reports"),
        "duckdb_memory_limit": "1.5GB",
        "lock_wait_s": 7,
        "rollup_dir": str(tmp_path / "nfs/rollups"),
        "spill_dir": None,
    }


def test_every_setting_is_described_where_the_ui_shows_it():
    """The resource's config schema (its page and the launchpad in the Dagster UI) describes
    each setting, and each has its environment variable."""
    fields = ChargebackResource.to_config_schema().as_field().config_type.fields
    assert set(fields) == set(ENVIRONMENT)
    assert [name for name, field in fields.items() if not field.description] == []
    assert fields["warehouse"].description == "The DuckDB warehouse file."
    assert fields["spill_dir"].description == (
        "DuckDB's spill folder of the daily rollups, on the local disk of the process's own "
        "machine. Unset: `<warehouse stem>_spill` beside the warehouse."
    )


def test_a_partition_window_is_its_billing_months():
    window = dg.TimeWindow(
        dt.datetime(2026, 12, 1, tzinfo=dt.UTC), dt.datetime(2027, 2, 1, tzinfo=dt.UTC)
    )
    december, january = window_months(window, "America/New_York")
    assert (december.label, january.label) == ("2026-12", "2027-01")
    assert (december.start, january.end) == (
        dt.datetime(2026, 12, 1, 5),
        dt.datetime(2027, 2, 1, 5),
    )


def test_the_readme_names_every_table_and_check():
    readme = (SQL_DIR.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("**Warehouse tables**") : readme.index("## Killed, failed")]
    graph = defs.resolve_asset_graph()
    names = TABLES | {key.name for key in graph.asset_check_keys}
    assert {name for name in names if f"`{name}`" not in section} == set()
