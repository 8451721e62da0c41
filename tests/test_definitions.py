"""The code location loads with the expected assets, checks, job and schedule."""

import datetime as dt

import dagster as dg

from pipelines.definitions import defs
from pipelines.defs.partitions import window_months
from pipelines.defs.resources import ENVIRONMENT, ChargebackResource

EXPECTED_ASSETS = {
    "catalog", "stg_jobs", "gpu_samples", "job_gpu_hours", "job_time_buckets", "gpu_capacity",
    "capacity_buckets", "job_gpu_charges", "charge_lines", "job_usage", "quota_steps",
    "tenant_month", "rejects", "data_quality", "chargeback_workbook", "focus_export",
    "month_manifest", "department_reports", "quota_compliance", "queue_stats", "failure_stats",
    "capacity_evidence", "utilization_daily", "telemetry_label_checks", "gpu_sample_rollup",
}  # fmt: skip
DAILY_ASSETS = {"gpu_sample_rollup"}


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
    blocking = {
        spec.name
        for assets_def in defs.asset_checks
        for spec in assets_def.check_specs
        if spec.blocking
    }
    assert blocking >= {
        "capacity_buckets_sum_to_capacity", "charges_tie_out", "cluster_cost_recovered",
        "rows_reconcile", "no_file_mostly_rejected",
    }  # fmt: skip
    assert "every_account_mapped" not in blocking
    assert "telemetry_labels_agree_with_scheduler" not in blocking


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
        assert node.backfill_policy == dg.BackfillPolicy.single_run(), key
    # the month's telemetry is the rollup of its days: a backfill of months from the UI
    # (rooted at the monthly catalog) rolls up their days before the monthly assets
    assert graph.get(dg.AssetKey("gpu_samples")).parent_keys >= {dg.AssetKey("gpu_sample_rollup")}
    assert graph.get(dg.AssetKey("gpu_sample_rollup")).parent_keys == {dg.AssetKey("catalog")}
    # month_manifest describes the month's reports as a whole: after every report is written
    reports = {"chargeback_workbook", "focus_export", "department_reports"}
    assert graph.get(dg.AssetKey("month_manifest")).parent_keys >= {
        dg.AssetKey(name) for name in reports
    }


def test_job_and_schedule():
    job = defs.resolve_job_def("chargeback_job")
    assert job.name == "chargeback_job"
    assert defs.resolve_job_def("close_month_job").name == "close_month_job"
    schedule = defs.resolve_schedule_def("chargeback_monthly_schedule")
    assert schedule.cron_schedule == "0 3 1 * *"
    assert schedule.job_name == "chargeback_job"
    # a run holds one partitioning: the monthly job is every asset but the daily rollup
    monthly = {key.to_user_string() for key in job.asset_layer.selected_asset_keys}
    assert monthly == EXPECTED_ASSETS - DAILY_ASSETS
    daily = defs.resolve_schedule_def("telemetry_daily_schedule")
    assert daily.cron_schedule == "0 1 * * *"
    assert daily.job_name == "telemetry_rollup_job"
    rollup = defs.resolve_job_def("telemetry_rollup_job")
    assert {key.to_user_string() for key in rollup.asset_layer.selected_asset_keys} == DAILY_ASSETS


def test_schedule_requests_the_month_just_ended():
    schedule = defs.resolve_schedule_def("chargeback_monthly_schedule")
    context = dg.build_schedule_context(
        scheduled_execution_time=dt.datetime(2026, 12, 1, 3, 0, tzinfo=dt.UTC)
    )
    requests = list(schedule.evaluate_tick(context).run_requests or [])
    assert [request.partition_key for request in requests] == ["2026-11-01"]


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
    resource = ChargebackResource.from_env()
    monkeypatch.setenv("CHARGEBACK_WAREHOUSE", str(tmp_path / "run.duckdb"))
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
    }


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
