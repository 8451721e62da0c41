"""The finance workbook: layout, totals as formulas that tie out, reproducible bytes."""

import csv
import datetime as dt
import hashlib
import math
import os
import re
import subprocess
import zipfile
from decimal import Decimal
from xml.etree import ElementTree

import duckdb
import openpyxl
import pypdf
import pytest
from openpyxl.utils.cell import range_boundaries

from pipelines.defs.resources import prepare_connection
from pipelines.reports import finance_workbook as workbook
from pipelines.reports import sheets
from pipelines.reports.finance_workbook import write_chargeback_workbook
from tests.conftest import require_tool

NOV = dt.date(2026, 11, 1)
OCT = dt.date(2026, 10, 1)

PARAMETERS = {
    "currency": "USD",
    "billing_timezone": "UTC",
    "cost_mode": "rate_card",
    "idle_threshold_pct": "5",
    "zombie_min_hours": "2",
    "month_start": "2026-11-01T00:00:00+00:00",
    "month_end": "2026-12-01T00:00:00+00:00",
    "catalog_dir": "data/catalog",
    "landing_dir": "data/landing",
    "code_version": "0.1.0+g1234abc",
}

RND_NAME = "Forschung & Entwicklung — Ångström"

DDL = [
    """create table charge_lines (billing_month date, tenant_id varchar, tenant_name varchar,
    department varchar, cost_center varchar, cluster varchar, gpu_model varchar,
    charge_category varchar, charge_class varchar, charge_description varchar,
    gpu_hours double, unit_price decimal(18,6), amount decimal(18,2), currency varchar)""",
    """create table charge_line_coverage (billing_month date, tenant_id varchar,
    cluster varchar, gpu_model varchar, unit_price decimal(18,6), charge_type varchar,
    gpu_hours double, measured_gpu_hours double, measured_share_pct double)""",
    """create table tenant_month (billing_month date, tenant_id varchar, tenant_name varchar,
    department varchar, cost_center varchar, owner varchar, jobs bigint,
    allocated_gpu_hours double, measured_gpu_hours double, productive_gpu_hours double,
    idle_gpu_hours double, zombie_gpu_hours double, failed_job_gpu_hours double,
    failed_infra_gpu_hours double, unmeasured_gpu_hours double, mean_util_pct double,
    amount decimal(18,2), currency varchar, budget decimal(18,2), budget_used_pct double,
    budget_status varchar, quota_flags varchar)""",
    """create table job_usage (billing_month date, cluster varchar, job_id varchar,
    tenant_id varchar, account varchar, "user" varchar, queue varchar, gpu_model varchar,
    state varchar, gpus double, submit_at timestamp, start_at timestamp, end_at timestamp,
    allocated_gpu_hours double, measured_gpu_hours double, mean_util_pct double,
    productive_gpu_hours double, idle_gpu_hours double, zombie_gpu_hours double,
    failed_job_gpu_hours double, failed_infra_gpu_hours double, unmeasured_gpu_hours double,
    amount decimal(18,2), currency varchar)""",
    """create table capacity_buckets (billing_month date, cluster varchar, gpu_model varchar,
    bucket varchar, gpu_hours double, gpu_units bigint, amount decimal(18,2), currency varchar)""",
    """create table data_quality (billing_month date, cluster varchar, category varchar,
    subject varchar, rows_read bigint, rows_loaded bigint, rows_rejected bigint,
    duplicates_folded bigint, value double, detail varchar)""",
    """create table rejects (billing_month date, file varchar, line bigint, reason varchar,
    raw varchar)""",
]

# The governance marts, columns as sql/marts/*.sql build them.
GOVERNANCE_DDL = [
    """create table quota_drift (billing_month date, cluster varchar, tenant_id varchar,
    pool varchar, source varchar, kind varchar, configured_guaranteed_gpus double,
    configured_limit_gpus double, catalog_guaranteed_gpus double, catalog_limit_gpus double,
    config_objects varchar, config_file varchar, detail varchar)""",
    """create table quota_compliance (billing_month date, tenant_id varchar, pool varchar,
    has_quota boolean, guaranteed_gpus double, limit_gpus double, reserved boolean,
    hours double, used_gpu_hours double, mean_gpus double, peak_gpus double,
    peak_at timestamp, guaranteed_gpu_hours double, borrowed_gpu_hours double,
    unused_guaranteed_gpu_hours double, minutes_above_limit double, quota_use_pct double,
    borrowing_days bigint, days bigint, breach boolean, idle_quota boolean,
    chronic_borrowing boolean)""",
    """create table queue_stats (billing_month date, cluster varchar, grouping_set varchar,
    tenant_id varchar, queue varchar, gpu_model varchar, jobs bigint, jobs_submitted bigint,
    jobs_started bigint, wait_p50_s double, wait_p90_s double, wait_p95_s double,
    wait_mean_s double, wait_max_s double, pending_gpu_hours double, jobs_ended bigint,
    completed_jobs bigint, failed_jobs bigint, timeout_jobs bigint,
    out_of_memory_jobs bigint, node_fail_jobs bigint, cancelled_jobs bigint,
    preempted_jobs bigint, success_rate_pct double, kueue_waits bigint)""",
    """create table cost_views (billing_month date, cluster varchar, job_id varchar,
    tenant_id varchar, allocated_gpu_hours double, idle_zombie_gpu_hours double,
    allocated_units hugeint, idle_zombie_units hugeint, allocation_amount decimal(18,2),
    idle_zombie_amount decimal(18,2), utilisation_amount decimal(18,2),
    failed_job_gpu_hours double, failed_job_units hugeint, failed_job_amount decimal(18,2),
    currency varchar)""",
    """create table user_efficiency (billing_month date, tenant_id varchar,
    department varchar, "user" varchar, jobs bigint, allocated_gpu_hours double,
    measured_gpu_hours double, productive_gpu_hours double, productive_share_pct double,
    idle_gpu_hours double, zombie_gpu_hours double, idle_zombie_gpu_hours double,
    mean_util_pct double, memory_measured_gpu_hours double, mean_memory_pct double,
    peak_memory_pct double, peak_memory_mib bigint, power_measured_gpu_hours double,
    energy_kwh decimal(18, 3),
    idlest_jobs varchar, is_notified boolean)""",
    """create table month_trends (billing_month date, level varchar, cluster varchar,
    gpu_model varchar, tenant_id varchar, allocation_rate_pct double,
    allocated_gpu_hours double, amount decimal(18, 2))""",
    """create table demand_forecast (billing_month date, cluster varchar, gpu_model varchar,
    forecast_month date, history_months bigint, forecast_gpu_hours double,
    low_gpu_hours double, high_gpu_hours double, capacity_gpu_hours double,
    forecast_allocation_rate_pct double, threshold_month date, trend_verdict varchar)""",
    """create table submission_stats (billing_month date, cluster varchar, tenant_id varchar,
    queue varchar, submitted_jobs bigint, started_jobs bigint, not_started_jobs bigint,
    cancelled_pending_jobs bigint, failed_to_start_jobs bigint, pending_jobs bigint,
    completed_jobs bigint, ended_jobs bigint, submission_success_pct double,
    job_success_pct double)""",
    """create table failure_stats (billing_month date, cluster varchar, dimension varchar,
    value varchar, jobs bigint, completed_jobs bigint, failed_jobs bigint,
    out_of_memory_jobs bigint, timeout_jobs bigint, node_fail_jobs bigint,
    cancelled_jobs bigint, preempted_jobs bigint, infra_failure_rate_pct double,
    job_failure_rate_pct double, allocated_gpu_hours double, failed_infra_gpu_hours double,
    failed_job_gpu_hours double, interrupted_gpu_hours double, failure_rank bigint)""",
    """create table capacity_evidence (billing_month date, cluster varchar, gpu_model varchar,
    capacity_gpu_hours double, allocated_gpu_hours double, productive_gpu_hours double,
    idle_gpu_hours double, zombie_gpu_hours double, failed_job_gpu_hours double,
    failed_infra_gpu_hours double, unmeasured_gpu_hours double, down_gpu_hours double,
    unallocated_gpu_hours double, allocation_rate_pct double, productive_share_pct double,
    waste_share_pct double, unmeasured_share_pct double, wait_p95_s double,
    pending_gpu_hours double, pending_share_pct double, guaranteed_gpu_hours double,
    idle_quota_gpu_hours double, idle_quota_share_pct double, availability_pct double,
    history_months bigint, trend_gpu_hours_per_month double, verdict varchar,
    verdict_rule varchar)""",
    """create table utilization_daily (billing_month date, day date, cluster varchar,
    gpu_model varchar, level varchar, tenant_id varchar, jobs hugeint,
    allocated_gpu_hours double, productive_gpu_hours double, measured_gpu_hours double,
    mean_util_pct double, capacity_gpu_hours double, allocation_rate_pct double)""",
    """create table telemetry_coverage (billing_month date, cluster varchar,
    util_metric varchar, series bigint, samples bigint, sampled_gpu_hours double,
    sampled_share_pct double, median_step_s double, min_step_s double, max_step_s double,
    allocated_gpu_hours double, measured_gpu_hours double, measured_share_pct double)""",
]
GOVERNANCE_DDL += [
    """create table availability (billing_month date, level varchar, cluster varchar,
    gpu_model varchar, node varchar, in_service_gpu_hours double, down_gpu_hours double,
    availability_pct double, incidents bigint, recovered bigint, mttr_hours double,
    mtbf_hours double, jobs_hit bigint, inferred_incidents bigint, silent_gpu_hours double)""",
    """create table incidents (billing_month date, cluster varchar, node varchar,
    gpu_model varchar, gpus integer, source varchar, inferred boolean, cause varchar,
    started_at timestamp, ended_at timestamp, duration_hours double,
    recovered_in_month boolean, month_ms bigint, gpu_hours double, jobs_hit bigint,
    job_ids varchar[])""",
]
# (optional marts: a warehouse built before them has none)
GOVERNANCE_TABLES = (
    "quota_compliance", "quota_drift", "queue_stats", "submission_stats", "failure_stats",
    "availability", "incidents", "capacity_evidence", "utilization_daily", "month_trends",
    "demand_forecast", "cost_views", "telemetry_coverage", "user_efficiency",
)  # fmt: skip

# (cluster, metric, series, samples, sampled_h, sampled_pct, median_s, min_s, max_s,
#  allocated_h, measured_h, measured_pct): phillips mixes DCGM and nvidia-smi GPUs (the
#  cluster's figures repeat on each metric row), kube has no telemetry
TELEMETRY = [
    ("phillips", "nvidia-smi utilization.gpu", 2, 300, 5.0, 20.0, 60.0, 30.0, 120.0,
     600.0, 558.0, 93.0),
    ("phillips", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 10, 5000, 20.0, 80.0, 15.0, 15.0, 15.0,
     600.0, 558.0, 93.0),
    ("kube", None, 0, 0, 0.0, None, None, None, None, 3.5, 0.0, 0.0),
]  # fmt: skip

# (tenant, pool, has_quota, guaranteed, limit, reserved, hours, used, mean, peak, peak_at,
#  guaranteed_h, borrowed_h, unused_h, minutes_above_limit, use_pct, borrowing_days, days,
#  breach, idle_quota, chronic_borrowing)
QUOTA = [
    ("chaff", "A100-80GB", True, 2.0, 4.0, False, 720.0, 360.0, 0.5, 5.0,
     "2026-11-02 09:30:00", 1440.0, 30.0, 1110.0, 45.0, 40.0, 3, 30, True, False, False),
    ("r&d", "H100", False, 0.0, None, False, 720.0, 12.0, 0.25, 1.0,
     "2026-11-30 23:00:00", 0.0, 12.0, 0.0, 0.0, None, 20, 30, False, False, True),
]  # fmt: skip

# (cluster, grouping_set, tenant, queue, model, jobs, submitted, started, p50, p90, p95, mean,
#  max, pending_h, ended, completed, failed, timeout, oom, node_fail, cancelled, preempted,
#  success_pct)
QUEUE = [
    ("phillips", "tenant", "chaff", "all", "all", 2, 2, 2, 1800.0, 5400.0, 7200.0, 3600.0,
     9000.0, 12.5, 2, 1, 1, 0, 0, 0, 0, 0, 50.0, 1),
    ("phillips", "queue", "all", "gpu", "all", 2, 2, 2, 1800.0, 5400.0, 7200.0, 3600.0,
     9000.0, 12.5, 2, 1, 1, 0, 0, 0, 0, 0, 50.0, 1),
    ("phillips", "cluster", "all", "all", "all", 3, 3, 3, 900.0, 3600.0, 5400.0, 2700.0,
     9000.0, 13.0, 3, 2, 1, 0, 0, 0, 1, 0, 66.66666666666667, 1),
]  # fmt: skip

# (cluster, job, tenant, allocated_h, idle_zombie_h, allocation, idle_zombie, utilisation,
#  failed_job_h, failed_job)
COST_VIEWS = [
    ("phillips", "10", "chaff", 96.0, 40.0, Decimal("201.60"), Decimal("84.00"), Decimal("117.60"),
     0.0, Decimal("0.00")),
    ("phillips", "11", "chaff", 4.0, 0.0, Decimal("8.40"), Decimal("0.00"), Decimal("8.40"), 4.0,
     Decimal("8.40")),
    ("phillips", "12", "r&d", 10.0, 5.0, Decimal("21.00"), Decimal("10.50"), Decimal("10.50"), 0.0,
     Decimal("0.00")),
]  # fmt: skip

# (tenant, department, user, jobs, allocated_h, productive_share_pct, idle_h, zombie_h,
#  mean_util_pct, mean_memory_pct, peak_memory_pct, power_measured_h, energy_kwh, idlest_jobs,
#  is_notified)
USERS = [
    ("chaff", "Biology", "ann", 2, 100.0, 40.0, 24.0, 36.0, 35.5, 32.5, 75.0, 100.0,
     Decimal("12.345"), "phillips/10 (40.00); phillips/11 (20.00)", True),
    # no sample of zoë's jobs read power: no energy
    ("r&d", "R&D", "zoë", 1, 10.0, 50.0, 5.0, 0.0, 50.0, None, None, 0.0, None,
     "kube/pod-1 (5.00)", False),
    ("chaff", "Biology", None, 1, 4.0, 100.0, 0.0, 0.0, 90.0, 25.0, 25.0, 4.0, Decimal("1.000"),
     None, False),
]  # fmt: skip

# (month, level, cluster, model, tenant, allocation_pct, allocated_h, amount): October and
# November, and a December row no November report may show
TRENDS = [
    (OCT, "cluster_gpu_model", "phillips", "A100-80GB", None, 50.0, 500.0, None),
    (OCT, "tenant", None, None, "chaff", None, 400.0, Decimal("800.00")),
    (NOV, "cluster_gpu_model", "phillips", "A100-80GB", None, 60.0, 600.0, None),
    (NOV, "tenant", None, None, "chaff", None, 500.0, Decimal("1234.56")),
    (NOV, "tenant", None, None, "r&d", None, 300.0, Decimal("789.01")),
    (dt.date(2026, 12, 1), "tenant", None, None, "chaff", None, 1.0, Decimal("1.00")),
]  # fmt: skip
# (cluster, model, month, history, forecast, low, high, capacity, rate_pct, threshold, verdict)
FORECAST = [
    ("phillips", "A100-80GB", dt.date(2026, 12, 1), 2, 700.0, None, None, 1000.0, 70.0,
     dt.date(2027, 1, 1), "allocation 60.0%, rising 100 GPU-hours a month: 80% reached in "
     "2027-01 at this trend"),
]  # fmt: skip

# (cluster, tenant, queue, submitted, started, not_started, cancelled_pending,
#  failed_to_start, pending, completed, ended, submission_pct, job_pct)
DRIFT = [
    ("phillips", "chaff", "A100-80GB", "slurm_qos", "limit_differs", None, 6.0, 2.0, 4.0,
     "QOS gpu-chaff", "scheduler/phillips/qos.psv", "QOS gpu-chaff limits to 6 GPUs, the "
     "catalog to 4 GPUs"),
    ("kube", "r&d", "H100", "kueue", "not_in_catalog", 1.0, None, None, None,
     "ClusterQueue cq-rd", "scheduler/kube/kueue.json", "=cq"),
]  # fmt: skip
SUBMISSIONS = [
    ("phillips", "chaff", "gpu", 4, 2, 2, 1, 0, 1, 1, 2, 66.66666666666667, 50.0),
    ("phillips", "r&d", "debug", 1, 0, 1, 0, 0, 1, 0, 0, None, None),
]  # fmt: skip

# (level, cluster, gpu_model, node, in_service_h, down_h, availability_pct, incidents,
#  recovered, mttr_h, mtbf_h, jobs_hit, inferred, silent_h)
AVAILABILITY = [
    ("node", "phillips", "A100-80GB", "gpu-01", 5760.0, 0.0, 100.0, 0, 0, None, None, 0, 0,
     0.0),
    ("node", "phillips", "A100-80GB", "gpu-02", 5760.0, 96.0, 98.33333333333333, 1, 1, 12.0,
     708.0, 2, 1, 24.0),
    ("cluster", "phillips", None, None, 11520.0, 96.0, 99.16666666666667, 2, 1, 12.0, 714.0,
     3, 1, 24.0),
    ("gpu_model", "phillips", "A100-80GB", None, 11520.0, 96.0, 99.16666666666667, 2, 1,
     12.0, 714.0, 3, 1, 24.0),
]  # fmt: skip
# (cluster, node, gpu_model, gpus, source, inferred, cause, started, ended, duration_h,
#  recovered, month_ms, gpu_hours, jobs_hit, job_ids)
INCIDENTS = [
    ("phillips", "gpu-02", "A100-80GB", 8, "telemetry_silence", True, "telemetry silence",
     "2026-11-21 06:00:00", "2026-11-21 09:00:00", 3.0, True, 10_800_000, 24.0, 0, []),
    ("phillips", "gpu-02", "A100-80GB", 8, "outage_window", False, "hardware",
     "2026-11-18 02:00:00", "2026-11-18 14:00:00", 12.0, True, 43_200_000, 96.0, 2,
     ["j2", "j10"]),
    ("phillips", "gpu-01,gpu-02", "A100-80GB", 16, "node_fail", False, "NODE_FAIL",
     "2026-11-25 01:00:00", None, None, False, None, None, 1, ["j7"]),
]  # fmt: skip

# (cluster, dimension, value, jobs, completed, failed, oom, timeout, node_fail, cancelled,
#  preempted, infra_pct, job_pct, allocated_h, failed_infra_h, failed_job_h, rank)
FAILURES = [
    ("phillips", "node", "gpu-02", 4, 2, 0, 0, 0, 2, 0, 0, 50.0, 0.0, 40.0, 20.0, 0.0, 0.0, 1),
    ("phillips", "node", "gpu-01", 4, 3, 1, 0, 0, 0, 0, 0, 0.0, 25.0, 30.0, 0.0, 2.0, 1.5, 2),
    ("phillips", "fault_domain", "rack-a", 8, 5, 1, 0, 0, 2, 0, 0, 25.0, 12.5, 70.0, 20.0,
     2.0, 1.5, 1),
    ("phillips", "driver_version", "550.54", 8, 5, 1, 0, 0, 2, 0, 0, 25.0, 12.5, 70.0, 20.0,
     2.0, 1.5, 1),
    ("phillips", "exit_code", "0", 5, 5, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 50.0, 0.0, 0.0, 0.0, None),
    ("phillips", "exit_code", "137", 1, 0, 1, 0, 0, 0, 0, 0, 0.0, 100.0, 2.0, 0.0, 2.0, 0.0,
     None),
]  # fmt: skip

RULE = "waste share 28.3% >= 25% → govern first"
# (cluster, model, capacity, allocated, productive, idle, zombie, failed_job, failed_infra,
#  unmeasured, down, unallocated, alloc_pct, productive_pct, waste_pct, unmeasured_pct,
#  wait_p95_s, pending_h, pending_pct, guaranteed_h, idle_quota_h, idle_quota_pct, verdict,
#  rule)
CAPACITY = [
    ("phillips", "A100-80GB", 1000.0, 600.0, 400.0, 100.0, 50.0, 20.0, 10.0, 20.0, 100.0,
     300.0, 60.0, 66.0, 28.3, 3.5, 14400.0, 12.5, 1.25, 1440.0, 360.0, 25.0, 99.5, 2, -12.5,
     "govern first", RULE),
]  # fmt: skip

# (day, cluster, model, level, tenant, allocated_h, capacity_h)
DAILY = [
    ("2026-11-01", "phillips", "A100-80GB", "gpu_model", "all", 10.0, 48.0),
    ("2026-11-01", "kube", "H100", "gpu_model", "all", 2.0, None),
    ("2026-11-01", "phillips", "A100-80GB", "tenant", "chaff", 999.0, None),
    ("2026-11-02", "phillips", "A100-80GB", "gpu_model", "all", 20.0, 48.0),
]

SHA_SACCT = hashlib.sha256(b"sacct").hexdigest()
SHA_DCGM = hashlib.sha256(b"dcgm").hexdigest()
CATALOG_VERSION = hashlib.sha256(b"catalog").hexdigest()
INPUTS = [
    {"file": "telemetry/kube/dcgm-1.csv", "cluster": "kube", "format": "dcgm",
     "sha256": SHA_DCGM},
    {"file": "scheduler/phillips/sacct-1.log", "cluster": "phillips", "format": "slurm",
     "sha256": SHA_SACCT},
]  # fmt: skip

# (tenant_id, name, department, cost_center, cluster, model, category, class, description,
#  gpu_hours, unit_price, amount)
CHARGE_LINES = [
    ("chaff", "Chaffinch Lab", "Biology", "CC-1001", "phillips", "A100-80GB", "Usage", None,
     "A100 GPU-hours", 476.190476, "2.100000", "1000.00"),
    ("chaff", "Chaffinch Lab", "Biology", "CC-1001", "phillips", "A100-80GB", "Credit", None,
     "failed_infra credit", -7.352381, "2.100000", "-15.44"),
    ("chaff", "Chaffinch Lab", "Biology", "CC-1001", "kube", "H100", "Usage", None,
     "=HYPERLINK(\"http://x\")", 83.333333, "3.000000", "250.00"),
    ("r&d", RND_NAME, "Physik", "CC-2002", "phillips", "A100-80GB", "Usage", None,
     "A100 GPU-hours", 333.333333, "2.100000", "700.00"),
    ("r&d", RND_NAME, "Physik", "CC-2002", "phillips", "A100-80GB", "Usage", "Correction",
     "restated October", 42.385714, "2.100000", "89.01"),
    ("unmapped", "unmapped", "", "", "kube", "H100", "Usage", None,
     "H100 GPU-hours", 3.476667, "3.000000", "10.43"),
]  # fmt: skip
TOTAL = Decimal("2034.00")
TENANT_AMOUNTS = {
    "Chaffinch Lab": Decimal("1234.56"),
    RND_NAME: Decimal("789.01"),
    "unmapped": Decimal("10.43"),
}

# (tenant_id, name, dept, cc, allocated, productive, idle, zombie, failed_job, failed_infra,
#  unmeasured, amount, budget, status)
TENANTS = [
    ("chaff", "Chaffinch Lab", "Biology", "CC-1001", 552.0, 400.0, 80.0, 30.0, 20.0, 7.0,
     15.0, "1234.56", "1000.00", "over"),
    ("r&d", RND_NAME, "Physik", "CC-2002", 375.0, 300.0, 20.0, 20.0, 0.0, 3.0, 32.0,
     "789.01", "900.00", "warn"),
    ("unmapped", "unmapped", "", "", 3.5, 0.0, 0.0, 0.0, 0.0, 0.0, 3.5, "10.43", None,
     "no budget"),
]  # fmt: skip

BUCKETS = {
    "capacity": 1000.0,
    "productive": 400.0,
    "idle": 100.0,
    "zombie": 50.0,
    "failed_job": 20.0,
    "failed_infra": 10.0,
    "unmeasured": 20.0,
    "down": 100.0,
    "unallocated": 300.0,
}


def _ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@pytest.fixture
def con(tmp_path):
    # the report queries use the project's macros, as the report assets' connection has them
    con = prepare_connection(duckdb.connect(str(tmp_path / "warehouse.duckdb")))
    for statement in DDL:
        con.execute(statement)
    for line in CHARGE_LINES:
        con.execute(
            "insert into charge_lines values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'USD')",
            [NOV, *line],
        )
    # Another month must never leak into this month's workbook.
    con.execute(
        "insert into charge_lines values (?, 'chaff', 'Chaffinch Lab', 'Biology', 'CC-1001', "
        "'phillips', 'A100-80GB', 'Usage', null, 'x', 1.0, 2.1, 999.99, 'USD')",
        [OCT],
    )
    # the charge type of each line, as computed_charge_lines sets it
    con.execute("alter table charge_lines add column charge_type varchar")
    con.execute(
        "update charge_lines set charge_type = "
        "case when charge_category = 'Credit' then 'credit' else 'usage' end"
    )
    # r&d's A100 usage three quarters measured (its correction line shows it too), chaff's
    # credited time half; the other lines have no coverage row
    con.execute(
        "insert into charge_line_coverage values "
        "(?, 'r&d', 'phillips', 'A100-80GB', 2.1, 'usage', 400, 300, 75.0), "
        "(?, 'chaff', 'phillips', 'A100-80GB', 2.1, 'credit', 7.352381, 3.6761905, 50.0)",
        [NOV, NOV],
    )
    for t in TENANTS:
        con.execute(
            "insert into tenant_month values (?, ?, ?, ?, ?, 'lead@example.com', 1, ?, ?, ?, ?,"
            " ?, ?, ?, ?, 50.0, ?, 'USD', ?, null, ?, null)",
            [NOV, *t[:5], t[4] - t[10], *t[5:]],
        )
    jobs = [
        ("phillips", "10", "chaff", "chaff", "ann", "gpu", "A100-80GB", "COMPLETED", 4.0,
         "2026-11-02 08:00:00", "2026-11-02 09:30:00", "2026-11-03 09:30:00", 96.0, "201.60"),
        ("phillips", "9", "chaff", "chaff", "bob", "gpu", "A100-80GB", "FAILED", 1.0,
         "2026-11-05 10:00:00", "2026-11-05 10:00:00", "2026-11-05 12:00:00", 2.0, "4.20"),
        ("kube", "pod-1", "r&d", "ns-rd", "zoë", "default", "H100", "RUNNING", 0.142857,
         "2026-11-30 22:00:00", "2026-11-30 23:00:00", "2026-12-01 00:00:00", 0.142857, "0.43"),
    ]  # fmt: skip
    for j in jobs:
        con.execute(
            "insert into job_usage values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 42.5, "
            "?, 0, 0, 0, 0, 0, ?, 'USD')",
            [NOV, *j[:9], _ts(j[9]), _ts(j[10]), _ts(j[11]), j[12], j[12], j[12], j[13]],
        )
    for bucket, hours in BUCKETS.items():
        con.execute(
            # priced at 2.10 a GPU-hour
            "insert into capacity_buckets values (?, 'phillips', 'A100-80GB', ?, ?, ?, ?, 'USD')",
            [NOV, bucket, hours, int(hours * 3_600_000), Decimal(str(hours)) * Decimal("2.10")],
        )
    con.execute(
        "insert into data_quality values "
        "(?, 'phillips', 'file', 'scheduler/phillips/sacct-1.log', 10, 8, 2, 1, null, null),"
        "(?, 'kube', 'unmapped_account', 'ns-x', null, null, null, null, 3.5, 'GPU-hours'),"
        "(?, 'phillips', 'telemetry_coverage', 'phillips', null, null, null, null, 0.93, null)",
        [NOV, NOV, NOV],
    )
    con.execute(
        "insert into rejects values "
        "(?, 'scheduler/phillips/sacct-1.log', 7, 'bad time', 'x|y|\x07bell'),"
        "(?, 'scheduler/phillips/sacct-1.log', 3, 'too few fields', '=1+1'),"
        "(?, 'scheduler/phillips/old.log', 1, 'october', 'zzz')",
        [NOV, NOV, OCT],
    )
    _insert_governance(con)
    yield con
    con.close()


def _insert_governance(con):
    for statement in GOVERNANCE_DDL:
        con.execute(statement)
    for q in QUOTA:
        values = [NOV, *q[:10], _ts(q[10]), *q[11:]]
        con.execute(f"insert into quota_compliance values ({', '.join('?' * 22)})", values)
    for q in QUEUE:
        con.execute(f"insert into queue_stats values ({', '.join('?' * 25)})", [NOV, *q])
    for v in COST_VIEWS:
        units = [round(hours * 1_512_000_000) for hours in v[3:5]]
        failed_units = round(v[8] * 1_512_000_000)
        con.execute(f"insert into cost_views values ({', '.join('?' * 15)})",
                    [NOV, *v[:5], *units, *v[5:8], v[8], failed_units, v[9], "USD"])  # fmt: skip
    for u in USERS:
        con.execute(
            f"insert into user_efficiency values ({', '.join('?' * 21)})",
            [NOV, *u[:5], u[4], u[4] * u[5] / 100, u[5], u[6], u[7], u[6] + u[7], u[8], u[4],
             u[9], u[10], 1000, *u[11:]],
        )  # fmt: skip
    # another month never leaks in
    con.execute(
        'insert into user_efficiency (billing_month, tenant_id, "user", idle_zombie_gpu_hours)'
        " values (?, 'chaff', 'october', 99)",
        [OCT],
    )
    for t in TRENDS:
        con.execute(f"insert into month_trends values ({', '.join('?' * 8)})", list(t))
    for f in FORECAST:
        con.execute(f"insert into demand_forecast values ({', '.join('?' * 12)})", [NOV, *f])
    for d in DRIFT:
        con.execute(f"insert into quota_drift values ({', '.join('?' * 13)})", [NOV, *d])
    con.execute(
        "insert into quota_drift (billing_month, cluster, tenant_id, kind) "
        "values (?, 'kube', 'october', 'not_configured')",
        [OCT],
    )
    for q in SUBMISSIONS:
        con.execute(f"insert into submission_stats values ({', '.join('?' * 14)})", [NOV, *q])
    for f in FAILURES:
        con.execute(f"insert into failure_stats values ({', '.join('?' * 19)})", [NOV, *f])
    for a in AVAILABILITY:
        con.execute(f"insert into availability values ({', '.join('?' * 15)})", [NOV, *a])
    for i in INCIDENTS:
        con.execute(f"insert into incidents values ({', '.join('?' * 16)})", [NOV, *i])
    con.execute(
        "insert into incidents (billing_month, cluster, node, started_at) "
        "values (?, 'phillips', 'october', '2026-10-03 00:00:00')",
        [OCT],
    )
    for c in CAPACITY:
        con.execute(f"insert into capacity_evidence values ({', '.join('?' * 28)})", [NOV, *c])
    for day, cluster, model, level, tenant, allocated, capacity in DAILY:
        con.execute(
            "insert into utilization_daily values (?, ?, ?, ?, ?, ?, 1, ?, 0, 0, null, ?, null)",
            [NOV, dt.date.fromisoformat(day), cluster, model, level, tenant, allocated, capacity],
        )
    for t in TELEMETRY:
        con.execute(f"insert into telemetry_coverage values ({', '.join('?' * 13)})", [NOV, *t])
    # another month never leaks in
    con.execute(
        "insert into telemetry_coverage (billing_month, cluster, util_metric) "
        "values (?, 'phillips', 'october')",
        [OCT],
    )
    con.execute(
        "insert into capacity_evidence (billing_month, cluster, gpu_model, verdict) "
        "values (?, 'phillips', 'A100-80GB', 'hold')",
        [OCT],
    )


@pytest.fixture
def written(con, tmp_path):
    out = tmp_path / "reports" / "2026-11" / "chargeback-2026-11.xlsx"
    result = write_chargeback_workbook(
        con, NOV, PARAMETERS, out, inputs=INPUTS, catalog_version=CATALOG_VERSION
    )
    return out, result, openpyxl.load_workbook(out)


# A tiny evaluator for the formulas the workbook uses: =SUM(range), =ref, =ref-ref, =ref/ref.
_REF = r"(?:('[^']+'|[A-Za-z_][\w ]*)!)?(\$?[A-Z]+\$?\d+)"


def _value(wb, sheet, coordinate):
    cell = wb[sheet][coordinate.replace("$", "")]
    if isinstance(cell.value, str) and cell.value.startswith("="):
        return _evaluate(wb, sheet, cell.value)
    return Decimal(str(cell.value))


def _evaluate(wb, sheet, formula):
    body = formula[1:]
    if m := re.fullmatch(r"SUM\(([A-Z]+\d+:[A-Z]+\d+)\)", body):
        min_col, min_row, max_col, max_row = range_boundaries(m.group(1))
        ws = wb[sheet]
        total = Decimal(0)
        for row in ws.iter_rows(min_row, max_row, min_col, max_col):
            for cell in row:
                total += _value(wb, sheet, cell.coordinate) if cell.value is not None else 0
        return total
    if m := re.fullmatch(rf"{_REF}([-/]){_REF}", body):
        left = _ref_value(wb, sheet, m.group(1), m.group(2))
        right = _ref_value(wb, sheet, m.group(4), m.group(5))
        return left - right if m.group(3) == "-" else left / right
    if m := re.fullmatch(_REF, body):
        return _ref_value(wb, sheet, m.group(1), m.group(2))
    raise AssertionError(f"unexpected formula {formula}")


def _ref_value(wb, sheet, ref_sheet, cell):
    return _value(wb, (ref_sheet or sheet).strip("'"), cell)


def _row_of(ws, text, column=1):
    rows = [c.row for c in ws[openpyxl.utils.get_column_letter(column)] if c.value == text]
    assert len(rows) == 1, (text, rows)
    return rows[0]


def test_sheet_names_in_order(written):
    _, _, wb = written
    assert wb.sheetnames == [
        "Summary",
        "Charges",
        "Job lines",
        "Waste",
        "Waste by model",
        "Waste by tenant",
        "Cost views",
        "Users",
        "Quota",
        "Budget",
        "Quota drift",
        "Queue & Service",
        "Submissions",
        "Failures",
        "Reliability",
        "Incidents",
        "Capacity",
        "Capacity by day",
        "Capacity by pool",
        "Trends",
        "Data quality",
        "Rejected rows",
        "Definitions",
        "Audit",
    ]


def test_result_figures(written):
    out, result, _ = written
    assert result["total_amount"] == TOTAL
    assert isinstance(result["total_amount"], Decimal)
    assert result["tenant_total_amount"] == TOTAL
    assert result["charge_lines"] == 6
    assert result["job_lines"] == 3
    assert result["tenants"] == 3
    assert (result["rejects"], result["rejects_shown"]) == (2, 2)
    assert result["path"] == str(out)


def test_summary_total_is_a_sum_over_exactly_the_tenant_rows(written):
    _, _, wb = written
    ws = wb["Summary"]
    header = _row_of(ws, "Tenant")
    total = _row_of(ws, "TOTAL")
    assert ws.cell(header, 5).value == "Amount (USD)"
    assert ws[f"E{total}"].value == f"=SUM(E{header + 1}:E{total - 1})"
    tenant_rows = range(header + 1, total)
    assert [ws[f"A{r}"].value for r in tenant_rows] == [
        "Chaffinch Lab",
        RND_NAME,
        "unmapped",
    ]  # sorted by amount, descending
    assert {ws[f"A{r}"].value: Decimal(str(ws[f"E{r}"].value)) for r in tenant_rows} == (
        TENANT_AMOUNTS
    )
    assert _evaluate(wb, "Summary", ws[f"E{total}"].value) == TOTAL
    assert ws[f"D{total}"].value == f"=SUM(D{header + 1}:D{total - 1})"
    assert ws[f"E{header + 1}"].number_format == "#,##0.00"
    assert ws[f"G{header + 1}"].number_format == "0.0%"
    assert ws[f"G{header + 1}"].value == pytest.approx(1.23456)
    assert ws[f"H{header + 1}"].value == "over"


def test_summary_headline_figures(written):
    _, _, wb = written
    ws = wb["Summary"]
    assert ws["A1"].value == "GPU chargeback — November 2026 (2026-11), amounts in USD"
    assert ws["A2"].value.startswith("Billing period [2026-11-01, 2026-12-01) in UTC;")
    figures = {ws[f"A{r}"].value: ws[f"B{r}"].value for r in range(4, 9)}
    assert figures == {
        "Capacity GPU-hours": 1000.0,
        "Allocated GPU-hours": 930.5,
        "Allocated share of capacity": pytest.approx(0.9305),
        "Productive share of allocated": pytest.approx(700.0 / 930.5),
        "Total charge (USD)": pytest.approx(2034.00),
    }
    assert Decimal(str(ws["B8"].value)) == TOTAL


def test_reconciliation_formulas_tie_out_to_zero(written):
    _, _, wb = written
    ws = wb["Summary"]
    total = _row_of(ws, "TOTAL")
    charges_row = _row_of(ws, "Total of Charges sheet")
    diff_row = _row_of(ws, "Difference (TOTAL above − Charges, must be 0)")
    charges = wb["Charges"]
    charges_total = _row_of(charges, "TOTAL")
    assert ws[f"E{charges_row}"].value == f"='Charges'!$L${charges_total}"
    assert ws[f"E{diff_row}"].value == f"=E{total}-E{charges_row}"
    assert _evaluate(wb, "Summary", ws[f"E{charges_row}"].value) == TOTAL
    assert _evaluate(wb, "Summary", ws[f"E{diff_row}"].value) == Decimal("0.00")


def test_charges_one_row_per_line_with_sum_totals(written):
    _, _, wb = written
    ws = wb["Charges"]
    total = _row_of(ws, "TOTAL")
    assert total - 2 == len(CHARGE_LINES)
    assert ws["L1"].value == "Amount (USD)"
    assert ws["K1"].value == "Unit price (USD per GPU-hour)"
    assert ws[f"L{total}"].value == f"=SUM(L2:L{total - 1})"
    assert ws[f"J{total}"].value == f"=SUM(J2:J{total - 1})"
    assert _evaluate(wb, "Charges", ws[f"L{total}"].value) == TOTAL
    assert sum(Decimal(str(ws[f"L{r}"].value)) for r in range(2, total)) == TOTAL
    hours = _evaluate(wb, "Charges", ws[f"J{total}"].value)
    assert hours == pytest.approx(Decimal(str(sum(line[9] for line in CHARGE_LINES))))
    # ordered by tenant, cluster, model, category
    keys = [tuple(ws.cell(r, c).value for c in (1, 5, 6, 7)) for r in range(2, total)]
    assert keys == sorted(keys)
    assert ws["A2"].value == "chaff" and ws["E2"].value == "kube"
    assert ws["H2"].value is None  # NULL charge class stays empty
    assert "Correction" in [ws[f"H{r}"].value for r in range(2, total)]
    assert ws["L2"].number_format == "#,##0.00"
    assert ws["J2"].number_format == "#,##0.00"
    assert ws["N1"].value == "Measured share"
    measured = {
        (ws[f"B{r}"].value, ws[f"E{r}"].value, ws[f"G{r}"].value, ws[f"H{r}"].value):
        ws[f"N{r}"].value for r in range(2, total)
    }  # fmt: skip
    assert measured == {
        ("Chaffinch Lab", "kube", "Usage", None): None,
        ("Chaffinch Lab", "phillips", "Credit", None): 0.5,
        ("Chaffinch Lab", "phillips", "Usage", None): None,
        (RND_NAME, "phillips", "Usage", None): 0.75,
        (RND_NAME, "phillips", "Usage", "Correction"): 0.75,
        ("unmapped", "kube", "Usage", None): None,
    }
    shown = [r for r in range(2, total) if ws[f"N{r}"].value is not None]
    assert {ws[f"N{r}"].number_format for r in shown} == {sheets.SHARE_FORMAT}


def test_text_that_looks_like_a_formula_stays_text(written):
    _, _, wb = written
    ws = wb["Charges"]
    cell = ws["I2"]
    assert cell.value == '=HYPERLINK("http://x")'
    assert cell.data_type == "s"
    names = [ws[f"B{r}"].value for r in range(2, 8)]
    assert RND_NAME in names


def test_every_table_sheet_has_frozen_header_and_filter(written):
    _, _, wb = written
    expected = {
        "Charges": ("A2", "A1:N7"),
        "Job lines": ("D2", "A1:X4"),  # the job's identity (tenant, cluster, id) stays in view
        "Waste": ("A2", "A1:F10"),
        "Waste by tenant": ("A2", "A1:K4"),
        "Quota": ("A2", "A1:T3"),
        "Quota drift": ("A3", "A2:L4"),  # under its title
        "Queue & Service": ("A2", "A1:W4"),
        "Submissions": ("A3", "A2:L4"),  # under its title
        "Rejected rows": ("A3", "A2:D4"),
        "Failures": ("A3", "A2:Q4"),
        "Reliability": ("A2", "A1:N4"),
        "Incidents": ("A3", "A2:N5"),
        "Capacity by pool": ("A3", "A2:E5"),
        "Capacity": ("A2", "A1:Q2"),
        "Audit": ("A2", "A1:B6"),
    }
    for name, (freeze, ref) in expected.items():
        ws = wb[name]
        assert (ws.freeze_panes, ws.auto_filter.ref) == (freeze, ref), name
        first = ws.auto_filter.ref.split(":")[0]
        assert ws[first].font.bold, name
        assert ws.column_dimensions["A"].width >= 8, name
    # second tables on a sheet carry their own filter as Excel tables (every table of the
    # sheets that start with a section)
    assert set(wb["Waste by model"].tables) == {"WasteByModel"}
    assert set(wb["Budget"].tables) == {"BudgetVsActual"}
    summary = wb["Summary"]
    header, total = _row_of(summary, "Tenant"), _row_of(summary, "TOTAL")
    assert set(summary.tables) == {"WasteInMoney", "Tenants"}
    assert summary.tables["Tenants"].ref == f"A{header}:H{total - 1}"
    assert summary.freeze_panes is None  # the tenants are below the headline sections
    assert set(wb["Data quality"].tables) == {"TelemetryCoverage", "DataQuality"}
    assert set(wb["Definitions"].tables) == {
        "Parameters", "TelemetryPerCluster", "FigureDefinitions"
    }  # fmt: skip


def test_budget_status_fills(written):
    _, _, wb = written
    ws = wb["Summary"]
    rows = {ws[f"A{r}"].value: r for r in range(_row_of(ws, "Tenant") + 1, _row_of(ws, "TOTAL"))}
    for column in "ABCDEFGH":
        over = ws[f"{column}{rows['Chaffinch Lab']}"].fill
        assert (over.fill_type, over.fgColor.rgb) == ("solid", "00FFC7CE")
        warn = ws[f"{column}{rows[RND_NAME]}"].fill
        assert (warn.fill_type, warn.fgColor.rgb) == ("solid", "00FFEB9C")
        assert ws[f"{column}{rows['unmapped']}"].fill.fill_type is None


def test_job_lines(written):
    _, _, wb = written
    ws = wb["Job lines"]
    assert [c.value for c in ws[1]][:3] == ["Tenant ID", "Cluster", "Job ID"]
    assert ws["V1"].value == "Amount (USD)"
    assert [(ws[f"A{r}"].value, ws[f"B{r}"].value, ws[f"C{r}"].value) for r in (2, 3, 4)] == [
        ("chaff", "phillips", "10"),
        ("chaff", "phillips", "9"),
        ("r&d", "kube", "pod-1"),
    ]
    assert ws["E4"].value == "zoë"
    assert ws["K2"].value == dt.datetime(2026, 11, 2, 9, 30)
    assert ws["K2"].number_format == "yyyy-mm-dd hh:mm"
    assert ws["M2"].number_format == "#,##0.00"
    assert ws.max_row == 4


def test_waste_shares_are_formulas_over_the_capacity_row(written):
    _, _, wb = written
    ws = wb["Waste"]
    rows = {ws[f"C{r}"].value: r for r in range(2, 11)}
    assert list(rows) == list(workbook.BUCKET_ORDER)
    for bucket, hours in BUCKETS.items():
        r = rows[bucket]
        assert ws[f"D{r}"].value == hours
        assert ws[f"E{r}"].value == f"=D{r}/D{rows['capacity']}"
        assert _evaluate(wb, "Waste", ws[f"E{r}"].value) == Decimal(str(hours)) / 1000
        assert ws[f"E{r}"].number_format == "0.0%"
        # its amount, as capacity_buckets prices it
        assert (ws["F1"].value, ws[f"F{r}"].value) == ("Amount (USD)", hours * 2.1)
    by_tenant = wb["Waste by tenant"]
    min_col, min_row, max_col, max_row = range_boundaries(by_tenant.auto_filter.ref)
    assert (min_row, max_col, max_row - min_row) == (1, 11, len(TENANTS))
    idle = {by_tenant.cell(r, 1).value: by_tenant.cell(r, 6).value for r in range(2, max_row + 1)}
    assert idle == {"chaff": 80.0, "r&d": 20.0, "unmapped": 0.0}
    assert by_tenant["K2"].value == "=E2/D2"


def test_data_quality_and_rejects(written):
    _, _, wb = written
    ws = wb["Data quality"]
    header = _row_of(ws, "Checks: rows read, loaded and rejected per input") + 1
    assert [c.value for c in ws[header + 1]] == [
        "file",
        "phillips",
        "scheduler/phillips/sacct-1.log",
        10,
        8,
        2,
        1,
        None,
        None,
        f"=D{header + 1}-E{header + 1}-F{header + 1}",
    ]
    assert {ws[f"A{header + 2}"].value, ws[f"A{header + 3}"].value} == {
        "unmapped_account", "telemetry_coverage"
    }  # fmt: skip
    assert ws.tables["DataQuality"].ref == f"A{header}:J{header + 3}"
    # the rejected rows: a sheet of their own, their count in its title
    ws = wb["Rejected rows"]
    title = _row_of(ws, "Rejected rows: 2")
    assert title == 1
    assert [c.value for c in ws[title + 1]][:4] == ["File", "Line", "Reason", "Raw"]
    assert [c.value for c in ws[title + 2]][:4] == [
        "scheduler/phillips/sacct-1.log",
        3,
        "too few fields",
        "=1+1",
    ]
    assert ws.cell(title + 2, 4).data_type == "s"
    # a control character cannot be stored in xlsx: it is shown escaped, not dropped
    assert ws.cell(title + 3, 4).value == "x|y|\\x07bell"
    assert ws.max_row == title + 3


PHILLIPS_METRICS = "DCGM_FI_PROF_GR_ENGINE_ACTIVE 80.0 %, nvidia-smi utilization.gpu 20.0 %"


def _table_rows(ws, name: str) -> list[list]:
    """The header and rows of the sheet's Excel table `name`."""
    min_col, min_row, max_col, max_row = range_boundaries(ws.tables[name].ref)
    return [
        [ws.cell(r, c).value for c in range(min_col, max_col + 1)]
        for r in range(min_row, max_row + 1)
    ]


def test_data_quality_shows_each_clusters_telemetry_above_the_checks(written):
    _, _, wb = written
    ws = wb["Data quality"]
    title = _row_of(ws, workbook.TELEMETRY_TITLE)
    assert title == 1  # first: what the figures rest on
    assert ws.tables["TelemetryCoverage"].ref == "A2:F4"
    assert _table_rows(ws, "TelemetryCoverage") == [
        ["Cluster", "Utilisation metric(s)", "Observed interval", "Allocated GPU-hours",
         "Measured GPU-hours", "Measured share"],
        # no sample: no metric, no interval, nothing measured
        ["kube", "no telemetry", "—", 3.5, 0, 0],
        # two metrics, the larger share of sampled time first, each with its interval (the
        # least and most step when they differ)
        ["phillips", PHILLIPS_METRICS, "15 s, 60 s (30–120 s)", 600, 558, 0.93],
    ]  # fmt: skip
    assert ws.cell(4, 6).number_format == sheets.SHARE_FORMAT
    assert _row_of(ws, "Checks: rows read, loaded and rejected per input") == 4 + 3


def test_definitions_show_each_clusters_telemetry_below_the_parameters(written):
    _, _, wb = written
    ws = wb["Definitions"]
    parameters = _row_of(ws, "Parameter")
    title = _row_of(ws, workbook.TELEMETRY_TITLE)
    assert title == parameters + len(PARAMETERS) + 3
    assert _table_rows(ws, "TelemetryPerCluster") == [
        ["Cluster", "Utilisation metric(s)", "Observed interval", "Measured share"],
        ["kube", "no telemetry", "—", 0],
        ["phillips", PHILLIPS_METRICS, "15 s, 60 s (30–120 s)", 0.93],
    ]
    assert ws.column_dimensions["C"].width >= len("15 s, 60 s (30–120 s)")
    # then the figures' definitions, those of the telemetry terms among them
    figures = _row_of(ws, "Figure")
    assert figures == (title + 3) + 4  # below the two clusters' rows and its own title
    terms = {ws[f"A{r}"].value for r in range(figures + 1, ws.max_row + 1)}
    assert {"Utilisation metric", "Observed sampling interval", "Measured share of a cluster"} <= (
        terms
    )


def test_rejects_are_capped_and_say_so(con, tmp_path, monkeypatch):
    monkeypatch.setattr(workbook, "REJECTS_SHOWN_MAX", 1)
    out = tmp_path / "capped.xlsx"
    result = write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert (result["rejects"], result["rejects_shown"]) == (2, 1)
    ws = openpyxl.load_workbook(out)["Rejected rows"]
    title = _row_of(
        ws,
        "Rejected rows: showing the first 1 of 2 (capped; the full list is in the warehouse "
        "table rejects)",
    )
    assert ws.cell(title + 2, 3).value == "too few fields"
    assert ws.cell(title + 3, 1).value is None


def test_definitions_hold_the_figures_and_every_parameter(written):
    _, _, wb = written
    ws = wb["Definitions"]
    first = _row_of(ws, "Figure") + 1
    terms = [ws[f"A{r}"].value for r in range(first, first + len(workbook.DEFINITIONS))]
    for term in (
        "Billing period",
        "GPU-equivalents (GPU-eq)",
        "Allocated GPU-hours",
        "Capacity GPU-hours",
        "Telemetry sample attribution",
        "Utilization (mean utilization %)",
        *workbook.BUCKET_ORDER[1:],
        "Cost mode rate_card",
        "Rounding (largest remainder)",
        "Budget status",
        "Unmapped tenant",
    ):
        assert term in terms
    meaning = {ws[f"A{r}"].value: ws[f"B{r}"].value for r in range(first, first + len(terms))}
    assert "largest-remainder" in meaning["Rounding (largest remainder)"]
    assert "≥ 80 %" in meaning["Budget status"]
    header = _row_of(ws, "Parameter")
    shown = [
        (ws[f"A{r}"].value, ws[f"B{r}"].value)
        for r in range(header + 1, header + 1 + len(PARAMETERS))
    ]
    assert shown == list(PARAMETERS.items())
    assert ws.tables["Parameters"].ref == f"A{header}:B{header + len(PARAMETERS)}"
    # the parameters first (row 1 their title), the figures last: they run over pages
    assert (ws["A1"].value, header) == ("Parameters of this run", 2)
    definitions = workbook.DEFINITIONS + workbook.GOVERNANCE_DEFINITIONS
    assert ws.tables["FigureDefinitions"].ref == (f"A{first - 1}:B{first - 1 + len(definitions)}")
    assert ws.max_row == first - 1 + len(definitions)


def test_same_tables_give_byte_identical_files(con, tmp_path):
    first = tmp_path / "a" / "chargeback-2026-11.xlsx"
    second = tmp_path / "b" / "chargeback-2026-11.xlsx"
    audit = {"inputs": INPUTS, "catalog_version": CATALOG_VERSION}
    result = write_chargeback_workbook(con, NOV, PARAMETERS, first, **audit)
    write_chargeback_workbook(con, NOV, PARAMETERS, second, **audit)
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as archive:
        # Waste, Spend vs budget, Daily capacity and two on Trends
        assert sum(name.startswith("xl/charts/chart") for name in archive.namelist()) == 5
    # Identical bytes from two quick writes could still hide a clock: check the stamps too.
    with zipfile.ZipFile(first) as archive:
        assert {info.date_time for info in archive.infolist()} == {(2026, 12, 1, 0, 0, 0)}
    props = openpyxl.load_workbook(first).properties
    assert (props.created, props.modified) == (dt.datetime(2026, 12, 1), dt.datetime(2026, 12, 1))
    assert result["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()


def _change_the_month(con):
    con.execute(
        "insert into charge_lines values (?, 'chaff', 'Chaffinch Lab', 'Biology', 'CC-1001', "
        "'phillips', 'A100-80GB', 'Usage', null, 'late line', 1.0, 2.1, 2.10, 'USD', 'usage')",
        [NOV],
    )


def test_failure_while_building_leaves_the_earlier_report(con, tmp_path, monkeypatch):
    out = tmp_path / "2026-11" / "chargeback-2026-11.xlsx"
    write_chargeback_workbook(con, NOV, PARAMETERS, out)
    before = out.read_bytes()
    _change_the_month(con)

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(workbook, "write_job_lines", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert out.read_bytes() == before
    assert [p.name for p in out.parent.iterdir()] == [out.name]


def test_failure_while_writing_the_file_leaves_the_earlier_report(con, tmp_path, monkeypatch):
    out = tmp_path / "2026-11" / "chargeback-2026-11.xlsx"
    write_chargeback_workbook(con, NOV, PARAMETERS, out)
    before = out.read_bytes()
    _change_the_month(con)

    def broken_fsync(fd):
        raise OSError("no space left on device")

    # fsync runs after the new bytes were written: the failure is genuinely mid-write.
    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="no space left"):
        write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert out.read_bytes() == before
    assert [p.name for p in out.parent.iterdir()] == [out.name]
    monkeypatch.undo()
    result = write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert result["total_amount"] == TOTAL + Decimal("2.10")
    assert out.read_bytes() != before


def test_empty_month_still_writes_a_workbook_that_ties_out(con, tmp_path):
    out = tmp_path / "chargeback-2026-09.xlsx"
    result = write_chargeback_workbook(con, dt.date(2026, 9, 1), {"currency": "USD"}, out)
    assert (result["total_amount"], result["charge_lines"], result["job_lines"]) == (
        Decimal("0.00"),
        0,
        0,
    )
    wb = openpyxl.load_workbook(out)
    ws = wb["Summary"]
    assert ws[f"E{_row_of(ws, 'TOTAL')}"].value == 0
    assert ws[f"B{_row_of(ws, 'Capacity GPU-hours')}"].value == "unknown"
    diff_row = _row_of(ws, "Difference (TOTAL above − Charges, must be 0)")
    assert _evaluate(wb, "Summary", ws[f"E{diff_row}"].value) == 0
    assert wb["Charges"].auto_filter.ref == "A1:N1"


def test_mixed_currencies_are_refused(con, tmp_path):
    con.execute("update charge_lines set currency = 'EUR' where tenant_id = 'r&d'")
    out = tmp_path / "chargeback-2026-11.xlsx"
    with pytest.raises(ValueError, match="mixed currencies"):
        write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert not out.exists()


@pytest.mark.slow
def test_opens_in_libreoffice(written, tmp_path):
    soffice = require_tool("soffice", "libreoffice-calc-nogui")
    out, _, _ = written
    converted = tmp_path / "converted"
    subprocess.run(
        [
            soffice,
            f"-env:UserInstallation=file://{tmp_path / 'lo-profile'}",
            "--headless",
            "--convert-to",
            # comma-separated, double quotes, UTF-8 (charset 76), first line 1
            "csv:Text - txt - csv (StarCalc):44,34,76,1",
            "--outdir",
            str(converted),
            str(out),
        ],
        check=True,
        timeout=180,
        capture_output=True,
    )
    # The CSV export holds the first sheet (Summary) with formulas evaluated by LibreOffice.
    with open(converted / "chargeback-2026-11.csv", encoding="utf-8", newline="") as fh:
        rows = {row[0]: row for row in csv.reader(fh) if row}
    assert Decimal(rows["TOTAL"][4].replace(",", "")) == TOTAL
    assert Decimal(rows["Total of Charges sheet"][4].replace(",", "")) == TOTAL
    difference = rows["Difference (TOTAL above − Charges, must be 0)"][4]
    assert Decimal(difference.replace(",", "")) == 0
    # and the whole workbook prints to PDF (what finance forwards), no repair prompt blocking
    subprocess.run(
        [soffice, f"-env:UserInstallation=file://{tmp_path / 'lo-profile'}", "--headless",
         "--convert-to", "pdf", "--outdir", str(converted), str(out)],
        check=True, timeout=180, capture_output=True,
    )  # fmt: skip
    assert (converted / "chargeback-2026-11.pdf").read_bytes().startswith(b"%PDF-")


def _rows(ws, first, last, columns):
    return [
        tuple(ws.cell(row=r, column=c).value for c in range(1, columns + 1))
        for r in range(first, last + 1)
    ]


def test_quota_and_budget_sheets(written):
    _, _, wb = written
    ws = wb["Quota"]
    assert _rows(ws, 2, 3, 20) == [
        ("chaff", "A100-80GB", "yes", 2, 4, "no", 360, 0.5, 5, dt.datetime(2026, 11, 2, 9, 30),
         1440, 30, 1110, 45, 0.4, 3, 30, "yes", "no", "no"),
        ("r&d", "H100", "no", 0, None, "no", 12, 0.25, 1, dt.datetime(2026, 11, 30, 23),
         0, 12, 0, 0, None, 20, 30, "no", "no", "yes"),
    ]  # fmt: skip
    assert ws["O2"].number_format == "0.0%"
    # the breach flag is red, the other flags are not
    breach = [ws[f"{col}{row}"].fill.fgColor.rgb for col in "RST" for row in (2, 3)]
    assert breach == ["00" + sheets.OVER_BUDGET_RGB] + ["00000000"] * 5
    ws = wb["Budget"]
    # below the spend vs budget chart (rows 1-20)
    header = _row_of(ws, "Budget vs actual (USD)") + 1
    assert header == sheets.CHART_ROWS + 4
    assert _rows(ws, header, header + 3, 6) == [
        ("Tenant ID", "Tenant", "Amount (USD)", "Budget (USD)", "Budget used", "Budget status"),
        ("chaff", "Chaffinch Lab", 1234.56, 1000, f"=C{header + 1}/D{header + 1}", "over"),
        ("r&d", RND_NAME, 789.01, 900, f"=C{header + 2}/D{header + 2}", "warn"),
        ("unmapped", "unmapped", 10.43, None, None, "no budget"),
    ]
    assert ws.tables["BudgetVsActual"].ref == f"A{header}:F{header + 3}"
    fills = [ws.cell(row=header + i, column=6).fill.fgColor.rgb for i in (1, 2, 3)]
    assert fills == ["00" + sheets.OVER_BUDGET_RGB, "00" + sheets.WARN_BUDGET_RGB, "00000000"]


def test_quota_drift_sheet_lists_each_disagreement(written):
    _, _, wb = written
    ws = wb["Quota drift"]
    row = _row_of(ws, "Quota drift: scheduler configuration vs catalog quotas")
    assert row == 1
    assert _rows(ws, row + 1, row + 3, 12) == [
        ("Cluster", "Tenant ID", "Pool", "Source", "Disagreement",
         "Configured guaranteed GPUs", "Configured limit GPUs", "Catalog guaranteed GPUs",
         "Catalog limit GPUs", "Configured by", "Configuration file", "Detail"),
        # in the mart's order (cluster first); another month's row never shows
        ("kube", "r&d", "H100", "kueue", "not_in_catalog", 1, None, None, None,
         "ClusterQueue cq-rd", "scheduler/kube/kueue.json", "=cq"),
        ("phillips", "chaff", "A100-80GB", "slurm_qos", "limit_differs", None, 6, 2, 4,
         "QOS gpu-chaff", "scheduler/phillips/qos.psv",
         "QOS gpu-chaff limits to 6 GPUs, the catalog to 4 GPUs"),
    ]  # fmt: skip
    assert ws.auto_filter.ref == f"A{row + 1}:L{row + 3}"
    assert ws[f"L{row + 2}"].data_type == "s"  # text that looks like a formula stays text


def test_quota_drift_sheet_says_when_nothing_disagrees(con, tmp_path):
    con.execute("delete from quota_drift")
    out = tmp_path / "chargeback-2026-11.xlsx"
    write_chargeback_workbook(con, NOV, PARAMETERS, out)
    ws = openpyxl.load_workbook(out)["Quota drift"]
    row = _row_of(ws, "Quota drift: scheduler configuration vs catalog quotas")
    assert ws[f"A{row + 2}"].value == "none: every configured quota agrees with the catalog"
    assert ws.auto_filter.ref == f"A{row + 1}:L{row + 1}"


def test_queue_and_service_sheet_shows_waits_in_hours(written):
    _, _, wb = written
    ws = wb["Queue & Service"]
    assert ws["H1"].value == "Wait p50 (h)"
    assert _rows(ws, 2, 4, 23) == [
        ("cluster", "phillips", "all", "all", "all", 3, 3, 0.25, 1, 1.5, 0.75, 2.5, 13, 3, 2,
         1, 0, 0, 0, 1, 0, 0.6666666666666667, 1),
        ("tenant", "phillips", "chaff", "all", "all", 2, 2, 0.5, 1.5, 2, 1, 2.5, 12.5, 2, 1, 1,
         0, 0, 0, 0, 0, 0.5, 1),
        ("queue", "phillips", "all", "gpu", "all", 2, 2, 0.5, 1.5, 2, 1, 2.5, 12.5, 2, 1, 1, 0,
         0, 0, 0, 0, 0.5, 1),
    ]  # fmt: skip
    assert ws["W1"].value == "Waits from Kueue admission"


def test_submissions_sheet_shows_what_became_of_the_jobs_submitted(written):
    _, _, wb = written
    ws = wb["Submissions"]
    row = _row_of(ws, "Submissions: what became of the jobs submitted this month")
    assert row == 1  # a sheet of its own, its title above its header
    assert _rows(ws, row + 1, row + 3, 12) == [
        ("Cluster", "Tenant", "Queue", "Submitted", "Started", "Cancelled while pending",
         "Failed to start", "Still pending", "Submission success rate", "Ended", "Completed",
         "Job success rate"),
        ("phillips", "chaff", "gpu", 4, 2, 1, 0, 1, 0.6666666666666667, 2, 1, 0.5),
        ("phillips", "r&d", "debug", 1, 0, 0, 0, 1, None, 0, 0, None),
    ]  # fmt: skip
    assert (ws.freeze_panes, ws.auto_filter.ref) == ("A3", "A2:L4")
    # a share, as the queue's Success rate
    assert ws[f"I{row + 2}"].number_format == wb["Queue & Service"]["V2"].number_format


def test_reliability_sheet_shows_availability_and_incidents_sheet_each_in_time_order(written):
    _, _, wb = written
    ws = wb["Reliability"]
    # clusters first, then GPU models, then the nodes with incidents or silences (gpu-01 had
    # none); October's incident stays out
    assert _rows(ws, 1, 4, 14) == [
        ("Level", "Cluster", "GPU model", "Node", "In service GPU-hours",
         "Down GPU-hours (lost)", "Availability", "Incidents", "Recovered", "MTTR (h)",
         "MTBF (h)", "Jobs hit", "Telemetry silences (inferred)", "Silent GPU-hours"),
        ("cluster", "phillips", None, None, 11520, 96, 0.9916666666666667, 2, 1, 12, 714, 3,
         1, 24),
        ("gpu_model", "phillips", "A100-80GB", None, 11520, 96, 0.9916666666666667, 2, 1, 12,
         714, 3, 1, 24),
        ("node", "phillips", "A100-80GB", "gpu-02", 5760, 96, 0.9833333333333333, 1, 1, 12,
         708, 2, 1, 24),
    ]  # fmt: skip
    assert ws.max_row == 4
    ws = wb["Incidents"]
    row = _row_of(ws, "Incidents: outages, node failures, telemetry silences")
    assert row == 1
    assert _rows(ws, row + 1, row + 4, 14) == [
        ("Cluster", "Node", "GPU model", "GPUs", "Source", "Inferred", "Cause",
         "Started (UTC)", "Ended (UTC)", "Duration (h)", "Recovered in month",
         "GPU-hours in month", "Jobs hit", "Jobs hit (first 10)"),
        ("phillips", "gpu-02", "A100-80GB", 8, "outage_window", "no", "hardware",
         dt.datetime(2026, 11, 18, 2), dt.datetime(2026, 11, 18, 14), 12, "yes", 96, 2,
         "j2 j10"),
        ("phillips", "gpu-02", "A100-80GB", 8, "telemetry_silence", "yes", "telemetry silence",
         dt.datetime(2026, 11, 21, 6), dt.datetime(2026, 11, 21, 9), 3, "yes", 24, 0, None),
        ("phillips", "gpu-01,gpu-02", "A100-80GB", 16, "node_fail", "no", "NODE_FAIL",
         dt.datetime(2026, 11, 25, 1), "not recorded", None, "no", None, 1, "j7"),
    ]  # fmt: skip
    assert ws.auto_filter.ref == f"A{row + 1}:N{row + 4}"
    assert ws[f"H{row + 2}"].number_format == sheets.TIMESTAMP_FORMAT


def test_cost_views_sheet_puts_each_tenants_two_views_side_by_side(written):
    _, _, wb = written
    ws = wb["Cost views"]
    assert _rows(ws, 1, 4, 10) == [
        ("Tenant ID", "Tenant", "Jobs", "Allocated GPU-hours", "Idle + zombie GPU-hours",
         "Allocation view (USD)", "Idle + zombie (USD)", "Utilisation view (USD)",
         "Failed-job GPU-hours", "Failed jobs (USD)"),
        ("chaff", "Chaffinch Lab", 2, 100, 40, 210, 84, 126, 4, 8.4),
        ("r&d", RND_NAME, 1, 10, 5, 21, 10.5, 10.5, 0, 0),
        ("TOTAL", None, None, "=SUM(D2:D3)", "=SUM(E2:E3)", "=SUM(F2:F3)", "=SUM(G2:G3)",
         "=SUM(H2:H3)", "=SUM(I2:I3)", "=SUM(J2:J3)"),
    ]  # fmt: skip
    # the views reconcile by the idle and zombie difference, to the cent
    allocation, idle_zombie, utilisation = (_evaluate(wb, "Cost views", ws[f"{c}4"].value)
                                            for c in "FGH")  # fmt: skip
    assert allocation - idle_zombie == utilisation == Decimal("136.50")


def test_users_sheet_lists_each_users_waste_memory_and_energy(written):
    _, _, wb = written
    ws = wb["Users"]
    assert _rows(ws, 1, 5, 16) == [
        ("Tenant ID", "Tenant", "User", "Jobs", "Allocated GPU-hours", "Productive share",
         "Idle GPU-hours", "Zombie GPU-hours", "Idle + zombie GPU-hours", "Mean util. %",
         "Mean memory use", "Peak memory use", "Power-measured GPU-hours", "Energy (kWh)",
         "Notice", "Idlest jobs (idle + zombie GPU-hours)"),
        # the most idle + zombie first; percentages shown as shares
        ("chaff", "Chaffinch Lab", "ann", 2, 100, 0.4, 24, 36, 60, 35.5, 0.325, 0.75, 100,
         12.345, "yes", "phillips/10 (40.00); phillips/11 (20.00)"),
        # unknown GPU memory stays empty; so does the energy of time without power readings
        ("r&d", RND_NAME, "zoë", 1, 10, 0.5, 5, 0, 5, 50, None, None, 0, None, "no",
         "kube/pod-1 (5.00)"),
        # a job without a user in the export
        ("chaff", "Chaffinch Lab", None, 1, 4, 1, 0, 0, 0, 90, 0.25, 0.25, 4, 1, "no", None),
        ("TOTAL", None, None, None, "=SUM(E2:E4)", None, "=SUM(G2:G4)", "=SUM(H2:H4)",
         "=SUM(I2:I4)", None, None, None, "=SUM(M2:M4)", "=SUM(N2:N4)", None, None),
    ]  # fmt: skip
    assert _evaluate(wb, "Users", ws["I5"].value) == 65
    assert _evaluate(wb, "Users", ws["M5"].value) == 104
    assert _evaluate(wb, "Users", ws["N5"].value) == Decimal("13.345")
    assert ws["F2"].number_format == sheets.SHARE_FORMAT
    assert ws.freeze_panes == "A2"


def test_trends_sheet_shows_the_forecast_then_the_months_with_their_charts(written):
    out, _, wb = written
    ws = wb["Trends"]
    assert _rows(ws, 1, 2, 11) == [
        ("Cluster", "GPU model", "Month", "History (months)", "Forecast GPU-hours", "Low",
         "High", "Capacity GPU-hours", "Forecast allocation", "Threshold month", "Trend"),
        ("phillips", "A100-80GB", dt.datetime(2026, 12, 1), 2, 700, None, None, 1000, 0.7,
         dt.datetime(2027, 1, 1), FORECAST[0][-1]),
    ]  # fmt: skip
    assert ws.auto_filter.ref == "A1:K2"
    allocation = _row_of(ws, "Allocation rate by month (cluster × GPU model)") + 1
    assert _rows(ws, allocation, allocation + 2, 2) == [
        ("Month", "phillips A100-80GB"),
        (dt.datetime(2026, 10, 1), 0.5),
        (dt.datetime(2026, 11, 1), 0.6),
    ]
    spend = _row_of(ws, "Spend by tenant and month (USD)") + 1
    assert spend >= allocation + 20  # below the allocation chart
    # December is after this report's month: not history
    assert _rows(ws, spend, spend + 3, 3) == [
        ("Month", "chaff", "r&d"),
        (dt.datetime(2026, 10, 1), 800, None),
        (dt.datetime(2026, 11, 1), 1234.56, 789.01),
        (None, None, None),
    ]
    assert set(ws.tables) == {"TrendsAllocation", "TrendsSpend"}
    charts, _ = _charts(out)
    t = "'Trends'"
    assert charts["Spend by tenant and month (USD)"] == (
        "lineChart",
        sorted([f"{t}!B{spend}", f"{t}!C{spend}", f"{t}!$A${spend + 1}:$A${spend + 2}",
                f"{t}!$B${spend + 1}:$B${spend + 2}", f"{t}!$C${spend + 1}:$C${spend + 2}"]),
    )  # fmt: skip
    assert charts["Allocation rate by month (cluster × GPU model)"][0] == "lineChart"


def test_failures_sheet_has_a_section_per_dimension(written):
    _, _, wb = written
    ws = wb["Failures"]
    assert ws["A1"].value == "Top nodes by failure rank"
    assert _rows(ws, 2, 4, 17) == [
        ("Rank", "Cluster", "Node", "Jobs", "Completed", "Failed", "Out of memory", "Timeout",
         "Node fail", "Cancelled", "Preempted", "Infra failure rate", "Job failure rate",
         "Allocated GPU-hours", "Failed (infra) GPU-hours", "Failed (job) GPU-hours",
         "Interrupted GPU-hours (timeout, cancelled, preempted)"),
        (1, "phillips", "gpu-02", 4, 2, 0, 0, 0, 2, 0, 0, 0.5, 0, 40, 20, 0, 0),
        (2, "phillips", "gpu-01", 4, 3, 1, 0, 0, 0, 0, 0, 0, 0.25, 30, 0, 2, 1.5),
    ]  # fmt: skip
    for title, label, values in (
        ("Fault domains", "Fault domain", [(1, "phillips", "rack-a", 8)]),
        ("Driver versions", "Driver version", [(1, "phillips", "550.54", 8)]),
        ("Exit codes (by jobs)", "Exit code", [(None, "phillips", "0", 5),
                                               (None, "phillips", "137", 1)]),
    ):  # fmt: skip
        row = _row_of(ws, title)
        assert ws.cell(row=row + 1, column=3).value == label
        assert _rows(ws, row + 2, row + 1 + len(values), 4) == values
    assert set(ws.tables) == {"FailuresFaultDomain", "FailuresDriver", "FailuresExitCode"}


def test_failures_shows_only_the_top_nodes(con, tmp_path, monkeypatch):
    monkeypatch.setattr(workbook, "TOP_NODES_SHOWN", 1)
    out = tmp_path / "chargeback-2026-11.xlsx"
    write_chargeback_workbook(con, NOV, PARAMETERS, out)
    ws = openpyxl.load_workbook(out)["Failures"]
    assert ws["A1"].value == "Top nodes by failure rank (the first 1 of 2)"
    assert (ws["C3"].value, ws["C4"].value) == ("gpu-02", None)


def test_capacity_sheet_verdict_and_daily_totals(written):
    _, _, wb = written
    ws = wb["Capacity"]
    assert _rows(ws, 1, 2, 17) == [
        ("Cluster", "GPU model", "Verdict", "Verdict rule", "Capacity GPU-hours",
         "Allocated GPU-hours", "Allocation rate", "Productive share", "Waste share",
         "Unmeasured share", "Wait p95 (h)", "Pending GPU-hours", "Pending share",
         "Guaranteed GPU-hours", "Idle-quota share", "Availability",
         "Trend (GPU-hours a month)"),
        ("phillips", "A100-80GB", "govern first", RULE, 1000, 600, 0.6, 0.66, 0.283, 0.035, 4,
         12.5, 0.0125, 1440, 0.25, 0.995, -12.5),
    ]  # fmt: skip
    assert ws["C2"].font.bold and ws["D2"].font.bold
    assert ws.max_row == 2
    ws = wb["Capacity by day"]
    # below the chart (rows 1-20)
    header = _row_of(ws, "Daily allocation vs capacity (all clusters and GPU models)") + 1
    assert header == sheets.CHART_ROWS + 4
    # level 'tenant' rows stay out; the kube model without inventory adds no capacity
    assert _rows(ws, header + 1, header + 3, 4) == [
        (dt.datetime(2026, 11, 1), 12, 48, f"=B{header + 1}/C{header + 1}"),
        (dt.datetime(2026, 11, 2), 20, 48, f"=B{header + 2}/C{header + 2}"),
        (None, None, None, None),
    ]
    ws = wb["Capacity by pool"]
    assert _row_of(ws, "Daily allocation and capacity by cluster × GPU model") == 1
    assert ws.auto_filter.ref == "A2:E5"


def _charts(path):
    """{chart title: sorted formulas (series names, categories, values)} from the package."""
    c = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
    a = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
    charts = {}
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.startswith("xl/charts/chart"):
                root = ElementTree.fromstring(archive.read(name))
                title = "".join(t.text for t in root.find(f"{c}chart/{c}title").iter(f"{a}t"))
                charts[title] = (
                    root.find(f"{c}chart/{c}plotArea")[0].tag.removeprefix(c),
                    sorted({f.text for f in root.iter(f"{c}f")}),
                )
        drawings = [n for n in archive.namelist() if re.fullmatch(r"xl/drawings/drawing\d+.xml", n)]
    return charts, len(drawings)


def test_native_charts_reference_the_right_ranges(written):
    out, _, wb = written
    charts, drawings = _charts(out)
    assert drawings == 4  # Waste by model, Budget, Capacity by day, Trends

    h = _row_of(wb["Budget"], "Budget vs actual (USD)") + 1
    q = "'Budget'"
    assert charts["Spend vs budget"] == (
        "barChart",
        sorted([f"{q}!C{h}", f"{q}!D{h}", f"{q}!$B${h + 1}:$B${h + 3}",
                f"{q}!$C${h + 1}:$C${h + 3}", f"{q}!$D${h + 1}:$D${h + 3}"]),
    )  # fmt: skip

    cap, c = wb["Capacity by day"], "'Capacity by day'"
    h = _row_of(cap, "Daily allocation vs capacity (all clusters and GPU models)") + 1
    assert (cap[f"B{h}"].value, cap[f"C{h}"].value) == (
        "Allocated GPU-hours",
        "Capacity GPU-hours",
    )
    assert charts["Daily allocation vs capacity"] == (
        "lineChart",
        sorted([f"{c}!B{h}", f"{c}!C{h}", f"{c}!$A${h + 1}:$A${h + 2}",
                f"{c}!$B${h + 1}:$B${h + 2}", f"{c}!$C${h + 1}:$C${h + 2}"]),
    )  # fmt: skip

    waste = wb["Waste by model"]
    h = _row_of(waste, "Waste by cluster × GPU model (GPU-hours)") + 1
    buckets = [waste.cell(row=h, column=col).value for col in range(1, 10)]
    assert buckets == ["Cluster × GPU model", *workbook.BUCKET_ORDER[1:]]
    assert [waste.cell(row=h + 1, column=col).value for col in range(1, 10)] == [
        "phillips × A100-80GB",
        *(BUCKETS[b] for b in workbook.BUCKET_ORDER[1:]),
    ]
    kind, refs = charts["Waste by bucket"]
    letters = "BCDEFGHI"
    assert (kind, refs) == (
        "barChart",
        sorted([f"'Waste by model'!$A${h + 1}"]
               + [f"'Waste by model'!{col}{h}" for col in letters]
               + [f"'Waste by model'!${col}${h + 1}" for col in letters]),
    )  # fmt: skip
    with zipfile.ZipFile(out) as archive:
        waste_chart = next(
            archive.read(n).decode()
            for n in archive.namelist()
            if n.startswith("xl/charts/") and "Waste by bucket" in archive.read(n).decode()
        )
    chart_ns = {"c": "http://schemas.openxmlformats.org/drawingml/2006/chart"}
    grouping = ElementTree.fromstring(waste_chart).find(".//c:barChart/c:grouping", chart_ns)
    assert grouping.get("val") == "stacked"


def test_audit_lists_inputs_hashes_and_table_rows(written):
    _, _, wb = written
    ws = wb["Audit"]
    assert _rows(ws, 2, 4, 2) == [
        ("Billing month", "2026-11"),
        ("Code version", "0.1.0+g1234abc"),
        ("Catalog version (sha256 over the catalog files)", CATALOG_VERSION),
    ]
    header = _row_of(ws, "Input files") + 1
    assert _rows(ws, header + 1, header + 3, 8) == [
        ("scheduler/phillips/sacct-1.log", "phillips", "slurm", SHA_SACCT, 10, 8, 2, 1),
        ("telemetry/kube/dcgm-1.csv", "kube", "dcgm", SHA_DCGM, None, None, None, None),
        (None,) * 8,
    ]
    header = _row_of(ws, "Warehouse tables: rows of 2026-11") + 1
    shown = dict(_rows(ws, header + 1, header + len(workbook.AUDIT_TABLES), 2))
    assert shown == {
        "stg_jobs": "not available", "job_gpu_hours": "not available", "job_usage": 3,
        "capacity_buckets": 9, "charge_lines": 6, "tenant_month": 3, "quota_compliance": 2,
        "quota_drift": 2, "queue_stats": 3, "submission_stats": 2, "failure_stats": 6,
        "incidents": 3, "availability": 4, "capacity_evidence": 1, "utilization_daily": 4,
        "rejects": 2, "data_quality": 3, "telemetry_coverage": 3,
    }  # fmt: skip
    run_id = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-")
    assert not any(run_id.search(str(c.value)) for row in ws.iter_rows() for c in row)


def test_audit_without_inputs_still_lists_the_counted_files(con, tmp_path):
    out = tmp_path / "chargeback-2026-11.xlsx"
    write_chargeback_workbook(con, NOV, PARAMETERS, out)
    ws = openpyxl.load_workbook(out)["Audit"]
    header = _row_of(ws, "Input files") + 1
    assert _rows(ws, header + 1, header + 1, 8) == [
        ("scheduler/phillips/sacct-1.log", "phillips", None, "not computed", 10, 8, 2, 1)
    ]
    assert ws["B4"].value == "unknown"


def test_missing_governance_marts_say_not_available(con, tmp_path):
    for table in GOVERNANCE_TABLES:
        con.execute(f"drop table {table}")
    out = tmp_path / "chargeback-2026-11.xlsx"
    result = write_chargeback_workbook(con, NOV, PARAMETERS, out)
    assert result["total_amount"] == TOTAL
    wb = openpyxl.load_workbook(out)
    for sheet, table in (
        ("Quota", "quota_compliance"),
        ("Queue & Service", "queue_stats"),
        ("Failures", "failure_stats"),
        ("Reliability", "availability"),
        ("Capacity", "capacity_evidence"),
        ("Users", "user_efficiency"),
    ):
        assert wb[sheet]["A1"].value.startswith(
            f"not available: this warehouse has no table {table}"
        )
    cap = wb["Capacity by day"]
    daily = _row_of(cap, "Daily allocation vs capacity (all clusters and GPU models)")
    assert "utilization_daily" in cap[f"A{daily + 1}"].value
    # budgets come from tenant_month, which every warehouse has, so they still show
    assert wb["Budget"].tables["BudgetVsActual"].ref.endswith("F27")
    for sheet, table in (("Quota drift", "quota_drift"), ("Incidents", "incidents")):
        assert wb[sheet]["A2"].value.startswith(
            f"not available: this warehouse has no table {table}"
        )
    for sheet in ("Data quality", "Definitions"):
        title = _row_of(wb[sheet], workbook.TELEMETRY_TITLE)
        assert wb[sheet][f"A{title + 1}"].value.startswith(
            "not available: this warehouse has no table telemetry_coverage"
        )
    charts, _ = _charts(out)
    assert set(charts) == {"Spend vs budget", "Waste by bucket"}


HEADING = "GPU chargeback — November 2026 (2026-11)"
# sheet -> (fitted to width, print title rows, print title columns, row breaks): a sheet of
# one table repeats its frozen header (and the job lines their frozen identity columns); a
# sheet stacking tables or charts starts each later table (at its section title) and each
# chart on a new page, and repeats its last table's title and header from where that table
# begins (not over the tables above). Only Summary and Rejected rows are narrow enough to fit
# the page width at 73 % or more; the others print at 73 % (an 11 pt font at 8 pt).
PRINT_SETUP = {
    # the headline and "Reconciliation by charge type" (row 11), "Waste in money (USD), all
    # clusters" (row 20), then "Tenants" (row 32), last: its title and header repeat
    "Summary": (True, "$32:$33", None, [19, 31]),
    "Charges": (False, "$1:$1", None, []),
    "Job lines": (False, "$1:$1", "$A:$C", []),
    "Waste": (True, "$1:$1", None, []),
    "Waste by model": (True, "$23:$24", None, [22]),  # the chart, then its data (last)
    "Waste by tenant": (False, "$1:$1", None, []),
    "Cost views": (False, "$1:$1", None, []),
    "Users": (False, "$1:$1", None, []),
    "Quota": (False, "$1:$1", None, []),
    "Budget": (True, "$23:$24", None, [22]),  # the chart, then its data (last)
    "Quota drift": (False, "$1:$2", None, []),  # its title and header
    "Queue & Service": (False, "$1:$1", None, []),
    "Submissions": (False, "$1:$2", None, []),  # its title and header
    "Failures": (False, "$17:$18", None, [6, 11, 16]),  # fault domains, drivers, exit codes
    "Reliability": (False, "$1:$1", None, []),
    "Incidents": (False, "$1:$2", None, []),  # its title and header
    "Capacity": (False, "$1:$1", None, []),
    # the month's days, their chart, each pool's days (last)
    "Capacity by day": (True, "$23:$24", None, [22]),  # the chart, then its data (last)
    "Capacity by pool": (True, "$1:$2", None, []),  # its title and header
    "Trends": (False, None, None, [4, 9, 31, 36]),  # allocation, chart, spend, chart (last)
    "Data quality": (False, "$7:$8", None, [6]),  # telemetry per cluster, the checks
    "Rejected rows": (True, "$1:$2", None, []),
    "Definitions": (False, "$21:$22", None, [14, 20]),  # parameters, telemetry, the figures
    "Audit": (False, "$31:$32", None, [8, 30]),  # table rows, input files
}


def test_every_sheet_prints_landscape_readable_with_header_footer_and_breaks(written):
    _, _, wb = written
    assert set(PRINT_SETUP) == set(wb.sheetnames)
    for ws in wb.worksheets:
        fitted, title_rows, title_cols, breaks = PRINT_SETUP[ws.title]
        setup = ws.page_setup
        assert (setup.orientation, setup.paperSize) == ("landscape", 9), ws.title  # A4
        assert (ws.page_margins.left, ws.page_margins.top, ws.page_margins.header) == (
            0.25,
            0.75,
            0.3,
        ), ws.title
        assert ws.oddHeader.left.text == HEADING, ws.title
        assert (ws.oddHeader.right.text, ws.oddFooter.center.text) == ("&A", "Page &P of &N")
        if fitted:
            assert ws.sheet_properties.pageSetUpPr.fitToPage, ws.title
            assert (setup.fitToWidth, setup.fitToHeight, setup.scale) == (1, 0, None), ws.title
        else:
            assert not ws.sheet_properties.pageSetUpPr.fitToPage, ws.title
            assert setup.scale == sheets.MIN_PRINT_SCALE == 73, ws.title
        assert (ws.print_title_rows, ws.print_title_cols) == (title_rows, title_cols), ws.title
        assert [b.id for b in ws.row_breaks.brk] == breaks, ws.title
        assert all(b.man for b in ws.row_breaks.brk), ws.title
    # each break falls right above a section title (or a chart)
    waste = wb["Waste by model"]
    assert waste._charts[0].anchor._from.row == 0  # 0-based: row 1
    assert waste["A23"].value == "Waste by cluster × GPU model (GPU-hours)"
    assert wb["Budget"]["A23"].value == "Budget vs actual (USD)"
    summary = wb["Summary"]
    assert summary["A11"].value == "Reconciliation by charge type"
    assert summary["A20"].value == "Waste in money (USD), all clusters"
    assert (summary["A32"].value, summary["A33"].value) == ("Tenants", "Tenant")


def test_print_scale_is_the_fit_of_the_widths_and_charts():
    wb = openpyxl.Workbook()
    ws = wb.active
    sheets.apply_widths(ws, {1: 50, 2: 50})
    ws["B1"] = "x"
    # 100 characters of 7.2 pt on the 805.9 pt between the narrow margins of A4 landscape
    assert sheets.print_scale(ws) == 111 - 11  # capped at 100
    sheets.apply_widths(ws, {1: 100, 2: 50})
    assert sheets.print_scale(ws) == 74  # 805.9 / (150 x 7.2) = 74.6 %: fitted
    sheets.apply_widths(ws, {1: 110, 2: 50})
    assert sheets.print_scale(ws) == 69
    sheets.set_print_setup(wb, "Q&A")
    assert (ws.page_setup.scale, ws.sheet_properties.pageSetUpPr.fitToPage) == (73, None)
    assert ws.oddHeader.left.text == "Q&&A"  # a lone & would start a code


def test_wrapped_text_rows_are_as_high_as_their_lines(written):
    _, _, wb = written
    trends = wb["Trends"]
    # the trend text (84 characters) in its 60-character wrapped column: 2 lines of 15 pt
    assert len(trends["K2"].value) == 84 and trends["K2"].alignment.wrap_text
    assert trends.row_dimensions[2].height == 30
    definitions = wb["Definitions"]
    for row in range(2, definitions.max_row + 1):
        meaning = definitions.cell(row=row, column=2).value
        if meaning and "\n" not in meaning and len(meaning) <= 89:  # 0.9 x 99 a line
            assert definitions.row_dimensions[row].height is None, row
    waste_taxonomy = _row_of(definitions, "Waste taxonomy (buckets)")
    lines = sheets._wrapped_lines(definitions.cell(row=waste_taxonomy, column=2).value, 100)
    assert lines > 1
    assert definitions.row_dimensions[waste_taxonomy].height == 15 * lines


def test_summary_shows_the_waste_in_money_per_bucket(written):
    _, _, wb = written
    ws = wb["Summary"]
    header = _row_of(ws, "Waste in money (USD), all clusters") + 1
    price = Decimal("2.10")
    assert _rows(ws, header, header + 8, 3) == [
        ("Bucket", "GPU-hours", "Amount (USD)"),
        *((b, BUCKETS[b], float(Decimal(str(BUCKETS[b])) * price))
          for b in ("idle", "zombie", "failed_job", "failed_infra", "unmeasured", "down",
                    "unallocated")),
        ("Waste total", f"=SUM(B{header + 1}:B{header + 7})", f"=SUM(C{header + 1}:C{header + 7})"),
    ]  # fmt: skip
    assert _evaluate(wb, "Summary", ws[f"C{header + 8}"].value) == Decimal("1260.00")
    assert ws.tables["WasteInMoney"].ref == f"A{header}:C{header + 7}"


# Pages of the fixture's workbook printed by LibreOffice, per sheet: each table of a stacked
# sheet starts a page (so at least one page per table and chart), a sheet wider than the page
# at 73 % spans two pages across (Failures: 4 tables x 2), Users three (16 columns).
PDF_PAGES = {
    "Summary": 3, "Charges": 2, "Job lines": 3, "Waste": 1, "Waste by model": 2,
    "Waste by tenant": 2, "Cost views": 2, "Users": 3, "Quota": 2, "Budget": 2, "Quota drift": 2,
    "Queue & Service": 2, "Submissions": 2, "Failures": 8, "Reliability": 2, "Incidents": 2,
    "Capacity": 3, "Capacity by day": 2, "Capacity by pool": 1, "Trends": 6, "Data quality": 4,
    "Rejected rows": 1, "Definitions": 9, "Audit": 4,
}  # fmt: skip
# A distinctive header cell or section title of each table of the stacked sheets: no page
# shows two of a sheet's
PAGE_TABLES = {
    "Summary": ("Reconciliation by charge type", "Waste in money (USD), all clusters"),
    "Waste by model": ("Waste by bucket", "Waste by cluster × GPU model"),  # chart, table
    "Budget": ("Spend vs budget", "Budget vs actual (USD)"),
    "Failures": ("Top nodes by failure rank", "Fault domains", "Driver versions", "Exit codes"),
    "Audit": ("Item Value", "SHA-256", "Table Rows"),
    "Data quality": ("Utilisation metric(s)", "Rows read"),
    "Definitions": ("Parameter Value", "Utilisation metric(s)", "Figure Meaning"),
}


CHART_TITLES = (
    "Waste by bucket",
    "Spend vs budget",
    "Daily allocation vs capacity",
    "Allocation rate by month",
    "Spend by tenant and month",
)


def _pdf_pages(pdf):
    """(sheet name, page text, font sizes in pt) of each page of a printed workbook."""
    pages = []
    for page in pypdf.PdfReader(pdf).pages:
        sizes = []

        def visit(text, cm, tm, font, size, sizes=sizes):
            if text.strip():
                # the vertical scale of text and page matrices (rotated text too: axis titles)
                sizes.append(size * math.hypot(tm[2], tm[3]) * math.hypot(cm[2], cm[3]))

        text = page.extract_text(visitor_text=visit)
        heading, sheet = text.splitlines()[0].split(") ", 1)
        assert heading + ")" == HEADING
        pages.append((sheet, text, sizes))
    return pages


@pytest.mark.slow
def test_prints_to_pdf_readable_with_each_table_on_its_own_pages(written, tmp_path):
    soffice = require_tool("soffice", "libreoffice-calc-nogui")
    out, _, _ = written
    subprocess.run(
        [soffice, f"-env:UserInstallation=file://{tmp_path / 'lo-profile'}", "--headless",
         "--convert-to", "pdf", "--outdir", str(tmp_path), str(out)],
        check=True, timeout=180, capture_output=True,
    )  # fmt: skip
    pages = _pdf_pages(tmp_path / "chargeback-2026-11.pdf")
    counts = {}
    for sheet, _, _ in pages:
        counts[sheet] = counts.get(sheet, 0) + 1
    assert counts == PDF_PAGES
    total = len(pages)
    for number, (sheet, text, sizes) in enumerate(pages, start=1):
        assert f"Page {number} of {total}" in text
        # every text at 8 pt or more, the charts' labels too, less the rounding of
        # LibreOffice's scale (7.99 at 73 %)
        small = {round(size, 1) for size in sizes if size < 7.95}
        assert small == set(), (number, sheet, small)
        shown = [header for header in PAGE_TABLES.get(sheet, ()) if header in text]
        assert len(shown) <= 1, (number, sheet, shown)
        if sheet == "Job lines":  # the header row and the job's identity on every page
            assert "Tenant ID Cluster Job ID" in text, number
    # the charts' text is on the pages, so its sizes were measured above
    for title in CHART_TITLES:
        assert any(title in text for _, text, _ in pages), title
    for sheet, headers in PAGE_TABLES.items():
        for header in headers:
            assert any(s == sheet and header in text for s, text, _ in pages), (sheet, header)
    # the Capacity chart's page holds no table (kept whole on a page of its own)
    capacity = [text for sheet, text, _ in pages if sheet == "Capacity by day"]
    assert any("Daily allocation vs capacity" in t and "Day " not in t for t in capacity)


@pytest.mark.slow
def test_a_long_last_table_repeats_its_header_on_each_of_its_printed_pages(con, tmp_path):
    # 150 input files: the Audit's last table runs over several pages, each with its title and
    # header on top; the run's identity and table rows above it keep their own headers
    soffice = require_tool("soffice", "libreoffice-calc-nogui")
    out = tmp_path / "chargeback-2026-11.xlsx"
    inputs = [
        {"file": f"telemetry/kube/dcgm-{n:03}.csv", "cluster": "kube", "format": "dcgm",
         "sha256": SHA_DCGM}
        for n in range(150)
    ]  # fmt: skip
    write_chargeback_workbook(con, NOV, PARAMETERS, out, inputs=inputs)
    subprocess.run(
        [soffice, f"-env:UserInstallation=file://{tmp_path / 'lo-profile'}", "--headless",
         "--convert-to", "pdf", "--outdir", str(tmp_path), str(out)],
        check=True, timeout=180, capture_output=True,
    )  # fmt: skip
    audit = [text for sheet, text, _ in _pdf_pages(tmp_path / out.with_suffix(".pdf").name)
             if sheet == "Audit"]  # fmt: skip
    # the run's identity, the table rows, then the 151 files over 4 pages, each under the
    # table's title and header, and their last columns on a page across (the sheet is wider
    # than A4 at 73 %)
    assert len(audit) == 7
    assert "Item Value" in audit[0] and "Table Rows" in audit[1]
    for text in audit[:2]:
        assert "Input files" not in text and "SHA-256" not in text
    for text in audit[2:6]:
        assert text.splitlines()[2:4] == ["Input files", "File Cluster Format SHA-256 Rows read"]
    assert audit[6].splitlines()[2:4] == ["Rows loaded Rows rejected Duplicates folded", "8 2 1"]
    shown = [line.split()[0] for text in audit[2:6] for line in text.splitlines()
             if line.startswith(("telemetry/", "scheduler/"))]  # fmt: skip
    assert shown == ["scheduler/phillips/sacct-1.log"] + [i["file"] for i in inputs]
