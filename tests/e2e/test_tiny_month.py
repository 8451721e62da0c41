"""A month small enough to compute by hand: two nodes, seven jobs, a few samples each.

Catalog: n1 has 2 A100 GPUs all month; n2 has 1 H100 GPU in service from Nov 16 (360 h).
Outage on n1, Nov 10 00:00-02:00. Rates: A100 2.0133, anything else ('*') 1.00.
Samples every 10 minutes; the catalog declares that step (settings `telemetry: {step_s: 600}`),
so each sample stands for 600 s. (Estimated, a series needs 10 spacings in a day for a step of
its own: J4's three samples and J7's five would stand for the 60 s default.)

Job  account  GPU      November time                     state      expected buckets (h)
J1   alpha    n1/0     11-01 00:00-03:00 (3 h)           COMPLETED  busy 1 h, then idle 2 h = zombie
J2   beta-x   n1/1     10-31 22:00-11-01 02:00 (2 h)     COMPLETED  productive 1, unmeasured 1
J3   alpha    n1/0     11-10 01:00-04:00 (3 h)           FAILED     1 h in outage = failed_infra,
                                                                    2 h failed_job
J4   ghost    n1/1     11-30 22:00- running (2 h)        RUNNING    idle 0.5 (3 samples),
                                                                    unmeasured 1.5
J6   beta-y   n2/0     11-20 00:00-01:30 (1.5 h)         NODE_FAIL  failed_infra 1.5
J7   alpha    n1/0     11-15 10:00-10:45 (0.75 h)        COMPLETED  productive 0.75 (last sample
                                                                    clipped to 300 s at the job end)
J5   beta-y   -        submitted 12-01 01:00, pending    PENDING    not in November; sets the
                                                                    export time that ends J4
A row with gpus='two' and a sample with util 150 are rejected.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tests.conftest import materialize_month, query, require_tool, write

JOBS = """
job_id,cluster,account,user,queue,qos,gpu_model,gpus,nodes,submit_time,start_time,end_time,state,exit_code
J1,tiny,alpha,ann,batch,normal,A100,1,n1,2026-11-01T00:00:00,2026-11-01T00:00:00,2026-11-01T03:00:00,COMPLETED,0
J2,tiny,beta-x,bob,batch,normal,A100,1,n1,2026-10-31T21:00:00,2026-10-31T22:00:00,2026-11-01T02:00:00,COMPLETED,0
J3,tiny,alpha,ann,batch,normal,A100,1,n1,2026-11-10T00:30:00,2026-11-10T01:00:00,2026-11-10T04:00:00,FAILED,1
J4,tiny,ghost,gus,batch,normal,A100,1,n1,2026-11-30T21:00:00,2026-11-30T22:00:00,,RUNNING,
J5,tiny,beta-y,bob,batch,normal,H100,1,,2026-12-01T01:00:00,,,PENDING,
J6,tiny,beta-y,bob,batch,normal,H100,1,n2,2026-11-19T23:00:00,2026-11-20T00:00:00,2026-11-20T01:30:00,NODE_FAIL,
J7,tiny,alpha,ann,batch,normal,A100,1,n1,2026-11-15T09:00:00,2026-11-15T10:00:00,2026-11-15T10:45:00,COMPLETED,0
J8,tiny,alpha,ann,batch,normal,A100,two,n1,2026-11-15T09:00:00,2026-11-15T11:00:00,2026-11-15T12:00:00,COMPLETED,0
"""

ALLOCATIONS = """
job_id,node,gpu_index
J1,n1,0
J2,n1,1
J3,n1,0
J4,n1,1
J6,n2,0
J7,n1,0
"""


def samples(node: str, gpu: int, first: str, count: int, util: float) -> list[tuple]:
    """`count` samples 10 minutes apart from `first`, all with utilisation `util`."""
    return [(node, gpu, first, i, util) for i in range(count)]


SAMPLE_RUNS = [
    *samples("n1", 0, "2026-11-01 00:00:00", 6, 80.0),  # J1 busy hour
    *samples("n1", 0, "2026-11-01 01:00:00", 12, 1.0),  # J1 idle two hours: zombie
    *samples("n1", 1, "2026-10-31 23:00:00", 6, 50.0),  # J2 in October: not this month's
    *samples("n1", 1, "2026-11-01 00:00:00", 6, 50.0),  # J2 first November hour
    *samples("n1", 1, "2026-11-30 22:00:00", 3, 3.0),  # J4 idle half hour
    *samples("n1", 0, "2026-11-15 10:00:00", 5, 90.0),  # J7
]


def build_tiny_month(root: Path, pdfs: bool = False) -> None:
    """The tiny month's landing and catalog under `root`. Its pages print to PDF only with
    `pdfs` (settings.yaml page_pdfs): Chromium takes about a second a page, and the many runs
    of this month test other things (the PDFs: tests/reports/test_department_reports.py)."""
    write(root / "landing/scheduler/tiny/jobs.csv", JOBS)
    write(root / "landing/scheduler/tiny/allocations.csv", ALLOCATIONS)
    telemetry = root / "landing/telemetry/tiny"
    telemetry.mkdir(parents=True)
    con = duckdb.connect()
    con.execute(
        "create table s (node varchar, gpu_index integer, ts timestamp, util_pct double, "
        "mem_used_mib double, power_w double)"
    )
    for node, gpu, first, i, util in SAMPLE_RUNS:
        con.execute(
            "insert into s values (?, ?, ?::timestamp + to_minutes(10 * ?), ?, 1000, 200)",
            [node, gpu, first, i, util],
        )
    con.execute(f"copy (select * from s order by node, gpu_index, ts) to '{telemetry}/a.parquet'")
    # a second export repeating one sample (folded) and carrying one impossible value (rejected)
    con.execute(
        f"copy (select * from s where ts = '2026-11-15 10:10:00' union all "
        f"select 'n1', 1, '2026-11-05 00:00:00', 150, 0, 0) to '{telemetry}/b.parquet'"
    )
    con.close()
    write(
        root / "catalog/settings.yaml",
        f"currency: EUR\ntelemetry: {{step_s: 600}}\npage_pdfs: {str(pdfs).lower()}\n",
    )
    write(
        root / "catalog/tenants.yaml",
        """
        tenants:
          - {id: alpha, name: Alpha Lab, department: Science, cost_center: CC-1,
             accounts: [alpha]}
          - {id: beta, name: Beta & Co, department: Science, cost_center: CC-2,
             accounts: ["beta-*"]}
        """,
    )
    write(
        root / "catalog/rates.yaml",
        """
        rates:
          - {gpu_model: A100, price_per_gpu_hour: 2.0133}
          - {gpu_model: "*", price_per_gpu_hour: 1.00}
        """,
    )
    write(
        root / "catalog/budgets.yaml",
        """
        budgets:
          - {tenant: alpha, month: 2026-11, amount: 12.00}
          - {tenant: beta, month: 2026-11, amount: 6.00}
        """,
    )
    write(
        root / "catalog/outages.yaml",
        """
        outages:
          - {nodes: n1, start: 2026-11-10T00:00:00, end: 2026-11-10T02:00:00, reason: hardware}
        """,
    )
    write(
        root / "catalog/nodes.csv",
        """
        node,cluster,gpu_model,gpus,in_service_from
        n1,tiny,A100,2,2025-01-01
        n2,tiny,H100,1,2026-11-16
        """,
    )


# The month materialised once for the module: the quick tier's end-to-end run of the real
# assets. Tests that materialise a month again are marked slow.
@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    build_tiny_month(root)
    result = materialize_month(root, "2026-11-01")
    assert result.success
    return root


def test_job_buckets_match_the_hand_computed_hours(tiny):
    rows = query(
        tiny,
        """
        select job_id, tenant_id, allocated_gpu_hours, productive_gpu_hours, idle_gpu_hours,
               zombie_gpu_hours, failed_job_gpu_hours, failed_infra_gpu_hours,
               unmeasured_gpu_hours
        from job_usage order by job_id
        """,
    )
    assert rows == [
        ("J1", "alpha", 3.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0),
        ("J2", "beta", 2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0),
        ("J3", "alpha", 3.0, 0.0, 0.0, 0.0, 2.0, 1.0, 0.0),
        ("J4", "unmapped", 2.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.5),
        ("J6", "beta", 1.5, 0.0, 0.0, 0.0, 0.0, 1.5, 0.0),
        ("J7", "alpha", 0.75, 0.75, 0.0, 0.0, 0.0, 0.0, 0.0),
    ]


def test_capacity_buckets_sum_to_capacity_by_hand(tiny):
    rows = query(
        tiny,
        "select gpu_model, bucket, gpu_hours from capacity_buckets order by gpu_model, bucket",
    )
    assert rows == [
        ("A100", "capacity", 1440.0),
        ("A100", "down", 3.0),  # 2 GPUs x 2 h outage, minus the hour J3 held GPU 0
        ("A100", "failed_infra", 1.0),
        ("A100", "failed_job", 2.0),
        ("A100", "idle", 0.5),
        ("A100", "productive", 2.75),
        ("A100", "unallocated", 1426.25),
        ("A100", "unmeasured", 2.5),
        ("A100", "zombie", 2.0),
        ("H100", "capacity", 360.0),  # in service from Nov 16: 15 days
        ("H100", "down", 0.0),
        ("H100", "failed_infra", 1.5),
        ("H100", "failed_job", 0.0),
        ("H100", "idle", 0.0),
        ("H100", "productive", 0.0),
        ("H100", "unallocated", 358.5),
        ("H100", "unmeasured", 0.0),
        ("H100", "zombie", 0.0),
    ]


def test_charges_use_largest_remainder_cents(tiny):
    # exact: alpha 6.75 h x 2.0133 = 13.589775; beta 2 h x 2.0133 = 4.0266 and 1.5 h x 1.00;
    # ghost (unmapped) 4.0266. Total 23.142975 -> 23.14. Floors sum to 23.12, so the two
    # largest remainders (alpha .9775 ct, then beta .66 ct before unmapped .66 ct) get a cent.
    # Credits give back the failed_infra hours: J3's outage hour (1 h x 2.0133 = 2.0133 -> 2.01)
    # and all of NODE_FAIL J6 (1.5 h x 1.00); credits 3.5133 -> 3.51, rounded on their own.
    rows = query(
        tiny,
        "select tenant_id, gpu_model, charge_category, gpu_hours, unit_price, amount, currency "
        "from charge_lines",
    )
    assert rows == [
        ("alpha", "A100", "Usage", 6.75, Decimal("2.013300"), Decimal("13.59"), "EUR"),
        ("alpha", "A100", "Credit", 1.0, Decimal("2.013300"), Decimal("-2.01"), "EUR"),
        ("beta", "A100", "Usage", 2.0, Decimal("2.013300"), Decimal("4.03"), "EUR"),
        ("beta", "H100", "Usage", 1.5, Decimal("1.000000"), Decimal("1.50"), "EUR"),
        ("beta", "H100", "Credit", 1.5, Decimal("1.000000"), Decimal("-1.50"), "EUR"),
        ("unmapped", "A100", "Usage", 2.0, Decimal("2.013300"), Decimal("4.02"), "EUR"),
    ]
    assert query(tiny, "select sum(amount) from charge_lines") == [(Decimal("19.63"),)]


def test_tenant_month_budget_status(tiny):
    rows = query(
        tiny,
        "select tenant_id, amount, budget, budget_status from tenant_month order by tenant_id",
    )
    assert rows == [
        ("alpha", Decimal("11.58"), Decimal("12.00"), "warn"),  # 96.5 %
        ("beta", Decimal("4.03"), Decimal("6.00"), "ok"),  # 67 %
        ("unmapped", Decimal("4.02"), None, "no budget"),
    ]


def test_rejects_and_reconciliation(tiny):
    rejects = query(tiny, "select file, line, reason from rejects")
    assert rejects == [
        ("scheduler/tiny/jobs.csv", 9, "field gpus: 'two' is not a number"),
        ("telemetry/tiny/b.parquet", 2, "field util_pct: 150.0 is outside 0-100"),
    ]
    files = query(
        tiny,
        """
        select subject, rows_read, rows_loaded, rows_rejected,
               duplicates_folded
        from data_quality where category = 'file' order by 1
        """,
    )
    assert files == [
        ("scheduler/tiny/allocations.csv", 6, 6, 0, 0),
        ("scheduler/tiny/jobs.csv", 8, 7, 1, 0),
        # 38 samples, 6 of them in October; its 10:10 sample on Nov 15 is superseded by b's
        ("telemetry/tiny/a.parquet", 32, 32, 0, 1),
        ("telemetry/tiny/b.parquet", 2, 1, 1, 0),
    ]
    unmapped = query(
        tiny, "select subject, value from data_quality where category = 'unmapped_account'"
    )
    assert unmapped == [("ghost", 2.0)]


@pytest.mark.slow  # materialises the month again
def test_checks_pass_and_the_unmapped_account_warns(tiny):
    # re-run to collect the check results of a fresh run
    result = materialize_month(tiny, "2026-11-01")
    outcomes = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert outcomes == {
        "capacity_buckets_sum_to_capacity": True,
        "charges_tie_out": True,
        "cluster_cost_recovered": True,  # rate_card: nothing to recover
        "every_account_mapped": False,
        "rows_reconcile": True,
        "no_file_mostly_rejected": True,  # b.parquet: 1 of its 2 rows, not more than half
        "gpus_never_oversubscribed": True,
        "quota_compliance_ties_out": True,
        "utilization_daily_ties_out": True,
        "telemetry_labels_agree_with_scheduler": True,  # canonical samples carry no labels
    }


MART_TABLES = (
    "stg_jobs", "job_gpus", "job_gpu_hours", "job_sample_time", "job_time_buckets",
    "gpu_capacity", "capacity_buckets", "job_gpu_charges", "charge_lines", "job_usage",
    "tenant_month", "rejects", "data_quality",
)  # fmt: skip


def table_fingerprints(root: Path) -> dict[str, tuple]:
    """Row count and an order-independent hash of every row of each monthly table."""
    return {
        table: query(root, f"select count(*), sum(hash(t)::hugeint) from {table} as t")[0]
        for table in MART_TABLES
    }


@pytest.mark.slow  # materialises the month again
def test_rerunning_a_month_leaves_identical_tables(tiny):
    before = table_fingerprints(tiny)
    workbook = (tiny / "reports/2026-11/chargeback-2026-11.xlsx").read_bytes()
    assert materialize_month(tiny, "2026-11-01").success
    assert table_fingerprints(tiny) == before
    assert (tiny / "reports/2026-11/chargeback-2026-11.xlsx").read_bytes() == workbook


@pytest.mark.slow  # materialises the month again
def test_a_job_across_the_month_boundary_is_prorated(tmp_path):
    build_tiny_month(tmp_path)
    assert materialize_month(tmp_path, "2026-10-01").success
    assert materialize_month(tmp_path, "2026-11-01").success
    rows = query(
        tmp_path,
        "select billing_month::varchar, allocated_gpu_hours, amount from job_usage "
        "where job_id = 'J2' order by billing_month",
    )
    # J2 ran Oct 31 22:00 - Nov 1 02:00: two hours in each month, priced 2 x 2.0133 each
    assert rows == [
        ("2026-10-01", 2.0, Decimal("4.03")),
        ("2026-11-01", 2.0, Decimal("4.03")),
    ]
    # October's charge is only J2's; November's total is untouched by October's run
    totals = query(
        tmp_path,
        "select billing_month::varchar, sum(amount) from charge_lines group by 1 order by 1",
    )
    assert totals == [("2026-10-01", Decimal("4.03")), ("2026-11-01", Decimal("19.63"))]
    october_buckets = query(
        tmp_path,
        "select bucket, gpu_hours from capacity_buckets "
        "where billing_month = '2026-10-01' and gpu_model = 'A100' order by bucket",
    )
    # n1 in October: 2 GPUs x 744 h; J2's two hours have samples for the first (50 %) hour
    assert october_buckets == [
        ("capacity", 1488.0),
        ("down", 0.0),
        ("failed_infra", 0.0),
        ("failed_job", 0.0),
        ("idle", 0.0),
        ("productive", 1.0),
        ("unallocated", 1486.0),
        ("unmeasured", 1.0),
        ("zombie", 0.0),
    ]


SPARSE_JOBS = """
job_id,cluster,account,user,queue,qos,gpu_model,gpus,nodes,submit_time,start_time,end_time,state,exit_code
JA,{cluster},alpha,ann,batch,normal,A100,1,n1,2026-11-02T05:00:00,2026-11-02T06:00:00,2026-11-02T06:30:00,COMPLETED,0
JB,{cluster},alpha,ann,batch,normal,A100,2,n2,2026-11-02T04:00:00,2026-11-02T05:00:00,2026-11-02T23:01:30,COMPLETED,0
"""


@pytest.mark.slow  # materialises the month again
def test_a_sparse_series_never_stands_for_its_long_gap(tmp_path):
    # Nov 2, cluster c: JA holds n1/0 06:00-06:30, sampled every 60 s (30 samples: a step of
    # its own, 60 s). JB holds n2/0 and n2/1 05:00-23:01:30; n2/0 has samples at 06:00, 06:01
    # and 23:01 only, n2/1 at 06:00 and 23:00: too few spacings for a step of their own, so
    # they take the cluster's typical step of the day, 60 s (n1/0's). Cluster d declares 30 s
    # (settings clusters: {d: {telemetry: {step_s: 30}}}) and runs the same jobs, its JA's GPU
    # also sampled every 60 s; JB's GPUs there have no samples.
    every_minute = [("n1", 0, f"2026-11-02 06:{m:02d}:00", 80.0) for m in range(30)]
    sparse = [
        ("n2", 0, "2026-11-02 06:00:00", 50.0), ("n2", 0, "2026-11-02 06:01:00", 50.0),
        ("n2", 0, "2026-11-02 23:01:00", 50.0),
        ("n2", 1, "2026-11-02 06:00:00", 50.0), ("n2", 1, "2026-11-02 23:00:00", 50.0),
    ]  # fmt: skip
    con = duckdb.connect()
    for cluster, rows in (("c", every_minute + sparse), ("d", every_minute)):
        write(
            tmp_path / f"landing/scheduler/{cluster}/jobs.csv", SPARSE_JOBS.format(cluster=cluster)
        )
        write(
            tmp_path / f"landing/scheduler/{cluster}/allocations.csv",
            "job_id,node,gpu_index\nJA,n1,0\nJB,n2,0\nJB,n2,1\n",
        )
        folder = tmp_path / f"landing/telemetry/{cluster}"
        folder.mkdir(parents=True)
        con.execute(
            "create or replace table s (node varchar, gpu_index integer, ts timestamp, "
            "util_pct double, mem_used_mib double, power_w double)"
        )
        con.executemany("insert into s values (?, ?, ?, ?, 1000, 200)", rows)
        con.execute(f"copy (select * from s order by all) to '{folder}/a.parquet'")
    con.close()
    write(tmp_path / "catalog/settings.yaml", "clusters:\n  d: {telemetry: {step_s: 30}}\n")
    write(
        tmp_path / "catalog/tenants.yaml",
        "tenants:\n  - {id: alpha, name: Alpha, department: Science, cost_center: CC-1, "
        "accounts: [alpha]}\n",
    )
    write(tmp_path / "catalog/rates.yaml", "rates:\n  - {gpu_model: '*', price_per_gpu_hour: 1}\n")
    assert materialize_month(tmp_path, "2026-11-01").success

    job_b = 2 * (18 * 3600 + 90)  # JB: 2 GPUs x 18 h 1 min 30 s, in seconds
    # c/JB measured: n2/0 60 + 60 + 30 s (its 23:01 sample clipped at the job's end, 23:01:30),
    # n2/1 60 + 60 s; the 17 h gaps are unmeasured. (With the plain median step, n2/0's 06:01
    # sample stood for 30,630 s and n2/1's 06:00 one for 17 h: 92,010 s measured.)
    measured = {("c", "JA"): 1800, ("c", "JB"): 270, ("d", "JA"): 900, ("d", "JB"): 0}
    allocated = {"JA": 1800, "JB": job_b}
    units = query(
        tmp_path,
        "select cluster, job_id, measured_units, productive_units, unmeasured_units "
        "from job_time_buckets order by all",
    )
    assert units == [
        (cluster, job, ms * 420_000, ms * 420_000, (allocated[job] - ms) * 420_000)
        for (cluster, job), ms in measured.items()
    ]
    hours = query(
        tmp_path,
        "select cluster, job_id, allocated_gpu_hours, measured_gpu_hours, "
        "productive_gpu_hours, unmeasured_gpu_hours from job_usage order by all",
    )
    assert hours == [
        (cluster, job, allocated[job] / 3600, ms / 3600, ms / 3600, (allocated[job] - ms) / 3600)
        for (cluster, job), ms in measured.items()
    ]


FOCUS_REQUIRED = (
    "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "BillingCurrency",
    "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
    "ChargeCategory", "ChargeClass", "ChargeDescription", "ConsumedQuantity", "ConsumedUnit",
    "PricingQuantity", "PricingUnit", "ListUnitPrice", "ProviderName", "ServiceName",
    "SubAccountId", "SubAccountName", "ResourceId", "SkuId", "SkuPriceId", "Tags",
    "InvoiceId", "ServiceSubcategory",  # FOCUS 1.2 recommended
)  # fmt: skip


def test_focus_export_has_the_columns_types_and_sum(tiny):
    import csv
    import json

    path = tiny / "reports/2026-11/focus-2026-11.csv"
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert set(FOCUS_REQUIRED) <= set(rows[0])
    assert len(rows) == 6  # one per charge line
    assert sum(Decimal(r["BilledCost"]) for r in rows) == Decimal("19.63")
    assert all(r["BilledCost"] == r["EffectiveCost"] == r["ListCost"] for r in rows)
    assert {r["BillingPeriodStart"] for r in rows} == {"2026-11-01T00:00:00Z"}
    assert {r["BillingPeriodEnd"] for r in rows} == {"2026-12-01T00:00:00Z"}
    assert {(r["SubAccountId"], r["ChargeCategory"], r["ConsumedUnit"]) for r in rows} == {
        ("alpha", "Usage", "GPU-Hours"),
        ("alpha", "Credit", ""),  # FOCUS 1.2: a credit consumes nothing
        ("beta", "Usage", "GPU-Hours"),
        ("beta", "Credit", ""),
        ("unmapped", "Usage", "GPU-Hours"),
    }
    alpha = next(r for r in rows if r["SubAccountId"] == "alpha" and r["ChargeCategory"] == "Usage")
    assert (alpha["ConsumedQuantity"], alpha["ListUnitPrice"], alpha["BilledCost"]) == (
        "6.75",
        "2.013300",
        "13.59",
    )
    assert json.loads(alpha["Tags"]) == {
        "department": "Science", "cost_center": "CC-1", "gpu_model": "A100",
    }  # fmt: skip


def test_manifest_records_inputs_outputs_and_run(tiny):
    import hashlib
    import json

    manifest = json.loads((tiny / "reports/2026-11/manifest.json").read_text())
    inputs = {i["file"]: i for i in manifest["inputs"]}
    jobs = tiny / "landing/scheduler/tiny/jobs.csv"
    assert (
        inputs["scheduler/tiny/jobs.csv"]["sha256"] == hashlib.sha256(jobs.read_bytes()).hexdigest()
    )
    assert (inputs["scheduler/tiny/jobs.csv"]["rows_read"],
            inputs["scheduler/tiny/jobs.csv"]["rows_rejected"]) == (8, 1)  # fmt: skip
    assert inputs["telemetry/tiny/b.parquet"]["format"] == "canonical_samples"
    # every file of the month folder but the manifest, in path order (no PDFs: page_pdfs false)
    outputs = {o["file"]: o["sha256"] for o in manifest["outputs"]}
    assert list(outputs) == [
        "chargeback-2026-11.html", "chargeback-2026-11.xlsx",
        "departments/science.html", "departments/science.xlsx",
        "departments/unmapped.html", "departments/unmapped.xlsx",
        "focus-2026-11.csv", "notices-2026-11.csv",
    ]  # fmt: skip
    workbook = tiny / "reports/2026-11/chargeback-2026-11.xlsx"
    assert outputs["chargeback-2026-11.xlsx"] == hashlib.sha256(workbook.read_bytes()).hexdigest()
    for name, sha256 in outputs.items():
        path = tiny / "reports/2026-11" / name
        assert sha256 == hashlib.sha256(path.read_bytes()).hexdigest(), name
    assert manifest["total_charged"] == {"amount": "19.63", "currency": "EUR"}
    assert manifest["tables"]["charge_lines"] == 6
    assert len(manifest["catalog"]["version"]) == 64
    assert manifest["dagster_run_id"]


def test_page_pdfs_false_writes_the_pages_without_their_pdfs(tiny):
    # settings.yaml page_pdfs false, on a machine whose Chromium would print them
    require_tool("chromium", "chromium")
    pages = tiny / "reports/2026-11"
    assert (pages / "chargeback-2026-11.html").exists()
    assert sorted(p.name for p in (pages / "departments").glob("*.html")) == [
        "science.html", "unmapped.html",
    ]  # fmt: skip
    assert not list(pages.rglob("*.pdf"))


@pytest.mark.slow  # materialises the month again
def test_gpu_time_with_no_rate_stops_the_month_before_any_report(tmp_path):
    build_tiny_month(tmp_path)
    # no '*' fallback: J6's 1.5 h on the H100 (Nov 20, 00:00-01:30) has no rate in force
    write(tmp_path / "catalog/rates.yaml", "rates:\n  - {gpu_model: A100, price_per_gpu_hour: 2}\n")
    result = materialize_month(tmp_path, "2026-11-01", raise_on_error=False)
    assert not result.success
    failures = [e for e in result.all_events if e.is_step_failure]
    assert [e.step_key for e in failures] == ["job_gpu_charges"]
    error = failures[0].step_failure_data.error
    assert error.cause is not None and error.cause.cls_name == "CatalogError"
    assert error.cause.message.strip() == (
        f"pipelines.catalog.CatalogError: {tmp_path}/catalog/rates.yaml: no rate in force for "
        "GPU model 'H100' on cluster 'tiny' from 2026-11-20 00:00 to 2026-11-20 01:30 UTC "
        "(1.5 GPU-hours of jobs): add a rate for the model or a '*' fallback"
    )
    # a failed run commits nothing: no warehouse yet (this was the first run); its working
    # copy is kept aside, stopped before job_gpu_charges was written: no NULL charge anywhere
    assert not (tmp_path / "warehouse.duckdb").exists()
    failed = duckdb.connect(str(tmp_path / "warehouse_failed.duckdb"), read_only=True)
    tables = "select count(*) from information_schema.tables where table_name like '%charge%'"
    assert failed.execute(tables).fetchall() == [(0,)]
    assert failed.execute("select count(*) from stg_jobs").fetchall() == [(6,)]  # the month's
    failed.close()
    assert list((tmp_path / "reports").rglob("*.*")) == []  # no workbook, FOCUS CSV, manifest


def test_charges_tie_out_fails_on_null_money(tiny, tmp_path):
    import shutil

    from pipelines.catalog import load_catalog
    from pipelines.defs.resources import prepare_connection
    from pipelines.months import BillingMonth
    from pipelines.sql import replace_month, run

    shutil.copy(tiny / "warehouse.duckdb", tmp_path / "warehouse.duckdb")
    con = prepare_connection(duckdb.connect(str(tmp_path / "warehouse.duckdb")))
    month = BillingMonth.of(dt.date(2026, 11, 1), "UTC")
    params = month.params(load_catalog(tiny / "catalog").settings)
    assert run(con, "checks/charges_tie_out", params).fetchall() == []
    # a job's amount that leaves its tenant's jobs a cent off its lines
    con.execute("update job_usage set amount = amount + 0.01 where job_id = 'J1'")
    [(tenant, amount)] = con.execute(
        "select tenant_id, sum(amount) from job_usage group by all having bool_or(job_id = 'J1')"
    ).fetchall()
    assert run(con, "checks/charges_tie_out", params).fetchall() == [
        ("jobs", tenant, float(amount), float(amount - Decimal("0.01")))
    ]
    con.execute("update job_usage set amount = amount - 0.01 where job_id = 'J1'")
    # what a price missing upstream gave before the run stopped on it: the H100 time priced
    # NULL, and the lines and tenant totals built on it, which still add up
    con.execute(
        "update job_gpu_charges set unit_price = null, charge_numerator = null, "
        "credit_numerator = null where gpu_model = 'H100'"
    )
    replace_month(con, "job_line_cents", "facts/job_line_cents", params)
    for table in ("computed_charge_lines", "charge_lines", "tenant_month"):
        replace_month(con, table, f"marts/{table}", params)
    assert run(con, "checks/charges_tie_out", params).fetchall() == [
        ("null", "charge_lines beta/tiny/H100/credit/no price", None, None),
        ("null", "charge_lines beta/tiny/H100/usage/no price", None, None),
        ("null", "job_gpu_charges tiny/J6/beta/H100", None, None),
    ]
    con.close()
