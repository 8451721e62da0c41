"""The code location loads with the expected assets, checks, job and schedule."""

import datetime as dt

import dagster as dg

from pipelines.definitions import defs

EXPECTED_ASSETS = {
    "catalog", "stg_jobs", "gpu_samples", "job_gpu_hours", "job_time_buckets", "gpu_capacity",
    "capacity_buckets", "job_gpu_charges", "charge_lines", "job_usage", "tenant_month",
    "rejects", "data_quality", "chargeback_workbook", "focus_export", "month_manifest",
    "department_reports", "quota_compliance", "queue_stats", "failure_stats",
    "capacity_evidence", "utilization_daily",
}  # fmt: skip


def test_assets_and_checks():
    graph = defs.resolve_asset_graph()
    assert {key.to_user_string() for key in graph.get_all_asset_keys()} == EXPECTED_ASSETS
    checks = {(key.asset_key.to_user_string(), key.name) for key in graph.asset_check_keys}
    assert checks == {
        ("capacity_buckets", "capacity_buckets_sum_to_capacity"),
        ("tenant_month", "charges_tie_out"),
        ("job_usage", "every_account_mapped"),
        ("data_quality", "rows_reconcile"),
        ("gpu_capacity", "gpus_never_oversubscribed"),
        ("quota_compliance", "quota_compliance_ties_out"),
        ("utilization_daily", "utilization_daily_ties_out"),
    }
    blocking = {
        spec.name
        for assets_def in defs.asset_checks
        for spec in assets_def.check_specs
        if spec.blocking
    }
    assert blocking >= {"capacity_buckets_sum_to_capacity", "charges_tie_out", "rows_reconcile"}
    assert "every_account_mapped" not in blocking


def test_every_asset_is_monthly_and_backfills_in_one_run():
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert isinstance(node.partitions_def, dg.MonthlyPartitionsDefinition), key
        assert node.backfill_policy == dg.BackfillPolicy.single_run(), key


def test_job_and_schedule():
    job = defs.resolve_job_def("chargeback_job")
    assert job.name == "chargeback_job"
    assert defs.resolve_job_def("close_month_job").name == "close_month_job"
    schedule = defs.resolve_schedule_def("chargeback_monthly_schedule")
    assert schedule.cron_schedule == "0 3 1 * *"
    assert schedule.job_name == "chargeback_job"


def test_schedule_requests_the_month_just_ended():
    schedule = defs.resolve_schedule_def("chargeback_monthly_schedule")
    context = dg.build_schedule_context(
        scheduled_execution_time=dt.datetime(2026, 12, 1, 3, 0, tzinfo=dt.UTC)
    )
    requests = list(schedule.evaluate_tick(context).run_requests or [])
    assert [request.partition_key for request in requests] == ["2026-11-01"]
