"""GPU indices for jobs whose export does not name them: lowest free first, shares packed."""

import datetime as dt

import duckdb

from pipelines.catalog import Settings
from pipelines.defs.ingest.loading import assign_gpu_indices, gpu_shares, missing_shares
from pipelines.months import BillingMonth

T = dt.datetime


# the month's SQL parameters (only billing_month is read)
NOVEMBER = BillingMonth.parse("2026-11", "UTC").params(Settings())
OCTOBER = BillingMonth.parse("2026-10", "UTC").params(Settings())


def test_gpu_shares_split_whole_gpus_and_a_fraction():
    assert gpu_shares(2, 1) == [420, 420]
    assert gpu_shares(16, 2) == [420] * 8
    assert gpu_shares(2 / 7, 1) == [120]  # two 1g MIG slices
    assert gpu_shares(1.5, 1) == [420, 210]


def test_missing_shares_go_to_the_nodes_the_rows_name_the_fewest_gpus_of():
    # 2.5 GPUs beyond the one GPU of n1 the rows name: n2, then n1 and n2 level, n2 first
    assert missing_shares(["n1", "n2"], 1050, {"n1": 1}) == {"n2": [420, 210], "n1": [420]}
    assert missing_shares(["n1", "n2"], 420, {"n2": 1}) == {"n1": [420]}
    assert missing_shares(["n1"], 210, {"n1": 1}) == {"n1": [210]}


def test_fractional_jobs_share_a_gpu_and_whole_jobs_take_the_lowest_free():
    con = duckdb.connect()
    con.execute("create table catalog_nodes as select 'c' as cluster, 'n1' as node, 2 as gpus")
    con.execute("""create table stg_jobs as select * from (values
        ('a', 'n1', 1.0, timestamp '2026-11-02 00:00', timestamp '2026-11-02 05:00'),
        ('m1', 'n1', 3 / 7, timestamp '2026-11-02 01:00', timestamp '2026-11-02 05:00'),
        ('m2', 'n1', 4 / 7, timestamp '2026-11-02 02:00', timestamp '2026-11-02 05:00'),
        ('m3', 'n1', 1 / 7, timestamp '2026-11-02 03:00', timestamp '2026-11-02 05:00'),
        ('b', 'n1', 1.0, timestamp '2026-11-02 06:00', timestamp '2026-11-02 07:00')
    ) as v(job_id, nodes, gpus, start_at, held_until)""")
    con.execute("create or replace table stg_jobs as select date '2026-11-01' as billing_month, "
                "'c' as cluster, * from stg_jobs")  # fmt: skip
    con.execute("create table placement_jobs as from stg_jobs")
    con.execute("""create table exported_job_gpus (billing_month date, cluster varchar,
        job_id varchar, node varchar, gpu_index integer, gpu_share integer,
        index_source varchar)""")
    rows = assign_gpu_indices(con, NOVEMBER)
    assert [(r["job_id"], r["gpu_index"], r["gpu_share"]) for r in rows] == [
        ("a", 0, 420),
        ("m1", 1, 180),
        ("m2", 1, 240),  # fills GPU 1 exactly: 3/7 + 4/7
        ("m3", 0, 60),  # no room anywhere: the lowest index, over-subscribed (an overlap)
        ("b", 0, 420),  # after the others ended: the lowest index again
    ]


def test_what_exported_allocations_hold_is_never_taken():
    # x's export names GPU 0 of n1 until 05:00; a (no GPUs in its export) starts at 01:00 and
    # gets GPU 1; b starts after x ended and gets GPU 0 again
    con = duckdb.connect()
    con.execute("create table catalog_nodes as select 'c' as cluster, 'n1' as node, 2 as gpus")
    con.execute("""create table stg_jobs as select date '2026-11-01' as billing_month,
        'c' as cluster, * from (values
        ('x', 'n1', 1.0, timestamp '2026-11-02 00:00', timestamp '2026-11-02 05:00'),
        ('a', 'n1', 1.0, timestamp '2026-11-02 01:00', timestamp '2026-11-02 02:00'),
        ('b', 'n1', 1.0, timestamp '2026-11-02 05:00', timestamp '2026-11-02 06:00')
    ) as v(job_id, nodes, gpus, start_at, held_until)""")
    con.execute("create table placement_jobs as from stg_jobs")
    con.execute("""create table exported_job_gpus as select date '2026-11-01' as billing_month,
        'c' as cluster, 'x' as job_id, 'n1' as node, 0 as gpu_index, 420 as gpu_share,
        'export' as index_source""")
    rows = assign_gpu_indices(con, NOVEMBER)
    assert [(r["job_id"], r["gpu_index"], r["index_source"]) for r in rows] == [
        ("a", 1, "assigned"),
        ("b", 0, "assigned"),
    ]


def test_a_job_across_the_month_boundary_keeps_its_gpus_in_both_months():
    # e holds GPU 0 of n1 on Oct 31 until 23:00; x starts at 22:00 and gets GPU 1 until Nov 2.
    # November's jobs are x and y (e ended in October): x still holds GPU 1 there, and y,
    # starting on Nov 1 at 01:00, takes GPU 0 (free since e ended), not GPU 1 (x's).
    con = duckdb.connect()
    con.execute("create table catalog_nodes as select 'c' as cluster, 'n1' as node, 2 as gpus")
    con.execute("""create table placement_jobs as select 'c' as cluster, * from (values
        ('e', 'n1', 1.0, timestamp '2026-10-31 20:00', timestamp '2026-10-31 23:00'),
        ('x', 'n1', 1.0, timestamp '2026-10-31 22:00', timestamp '2026-11-02 00:00'),
        ('y', 'n1', 1.0, timestamp '2026-11-01 01:00', timestamp '2026-11-01 05:00')
    ) as v(job_id, nodes, gpus, start_at, held_until)""")
    con.execute("""create table stg_jobs as
        select date '2026-10-01' as billing_month, * from placement_jobs where job_id in ('e', 'x')
        union all
        select date '2026-11-01', * from placement_jobs where job_id in ('x', 'y')""")
    con.execute("""create table exported_job_gpus (billing_month date, cluster varchar,
        job_id varchar, node varchar, gpu_index integer, gpu_share integer,
        index_source varchar)""")
    by_month = {
        params.billing_month.month: [(r["job_id"], r["gpu_index"]) for r in assign_gpu_indices(
            con, params)]
        for params in (OCTOBER, NOVEMBER)
    }  # fmt: skip
    assert by_month == {10: [("e", 0), ("x", 1)], 11: [("x", 1), ("y", 0)]}
