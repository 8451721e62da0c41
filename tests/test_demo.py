"""The demo generator: determinism, a consistent schedule and telemetry, and every promised case.

Everything runs on the small demo (4 nodes, ~300 jobs) written under tmp_path.
"""

from __future__ import annotations

import hashlib
from fnmatch import fnmatchcase
from pathlib import Path

import duckdb
import hostlist
import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.demo import generate_demo

MONTH = "2026-11"
EXPORT_AT = "2026-12-01 06:00:00"
OUTAGE_START, OUTAGE_END = "2026-11-18 02:00:00", "2026-11-18 14:00:00"
TS_FORMAT = "%Y-%m-%dT%H:%M:%S"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    generate_demo(out, month=MONTH, seed=7, small=True)
    return out


@pytest.fixture(scope="module")
def con(demo: Path) -> duckdb.DuckDBPyConnection:
    """The demo's files as views: `records` (every job row, `part` 1 or 2, `is_bad`), `jobs`
    (the final valid record per job, times typed), `allocations`, `samples`."""
    scheduler = demo / "landing" / "scheduler" / "atlas"
    db = duckdb.connect()
    parts = [
        f"select *, {part} as part "
        f"from read_csv('{scheduler / f'jobs-{MONTH}-part{part}.csv'}', all_varchar = true)"
        for part in (1, 2)
    ]
    db.execute(f"create view raw_records as {' union all '.join(parts)}")
    db.execute(f"""
        create view records as
        select
            *,
            try_strptime(submit_time, '{TS_FORMAT}') as submit_at,
            try_strptime(start_time, '{TS_FORMAT}') as start_at,
            try_strptime(end_time, '{TS_FORMAT}') as end_at,
            try_cast(gpus as integer) is null
                or (submit_time is not null and submit_at is null)
                or (start_time is not null and start_at is null)
                or (end_time is not null and end_at is null)
                or coalesce(end_at < start_at, false) as is_bad
        from raw_records
    """)
    db.execute("""
        create view jobs as
        select * replace (gpus::integer as gpus)
        from records
        where not is_bad
        qualify row_number() over (partition by job_id order by part desc) = 1
    """)
    allocations = scheduler / f"allocations-{MONTH}.csv"
    db.execute(f"""
        create view allocations as
        select job_id, node, gpu_index::integer as gpu_index
        from read_csv('{allocations}', all_varchar = true)
    """)
    telemetry = demo / "landing" / "telemetry" / "atlas" / "*.parquet"
    db.execute(f"create view samples as select * from read_parquet('{telemetry}')")
    return db


def _count(con: duckdb.DuckDBPyConnection, sql: str, *params: object) -> int:
    return con.execute(f"select count(*) from ({sql})", list(params)).fetchone()[0]


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_same_seed_gives_byte_identical_files(demo: Path, tmp_path: Path) -> None:
    generate_demo(tmp_path / "again", month=MONTH, seed=7, small=True)
    generate_demo(tmp_path / "other", month=MONTH, seed=8, small=True)
    digests = _digests(demo)
    assert len(digests) == 3 + 30 + 7  # job dumps and allocations, one file a day, catalog
    assert _digests(tmp_path / "again") == digests
    jobs_file = f"landing/scheduler/atlas/jobs-{MONTH}-part2.csv"
    assert _digests(tmp_path / "other")[jobs_file] != digests[jobs_file]


def test_rerun_replaces_landing_and_catalog_only(tmp_path: Path) -> None:
    (tmp_path / "landing").mkdir()
    (tmp_path / "landing" / "stale.csv").write_text("old export\n")
    (tmp_path / "warehouse.duckdb").write_text("not ours\n")
    generate_demo(tmp_path, month=MONTH, small=True)
    assert not (tmp_path / "landing" / "stale.csv").exists()
    assert (tmp_path / "warehouse.duckdb").read_text() == "not ours\n"
    assert (tmp_path / "catalog" / "tenants.yaml").exists()


def test_no_gpu_is_held_by_two_jobs_at_once(con: duckdb.DuckDBPyConnection) -> None:
    spans = f"""
        select a.job_id, a.node, a.gpu_index, j.start_at,
               coalesce(j.end_at, timestamp '{EXPORT_AT}') as end_at
        from allocations as a join jobs as j using (job_id)
        where j.start_at is not null
    """
    assert _count(con, spans) == _count(con, "select * from allocations") > 1000
    clashes = f"""
        with spans as ({spans})
        select * from spans as x join spans as y
            on x.node = y.node and x.gpu_index = y.gpu_index and x.job_id < y.job_id
            and x.start_at < y.end_at and y.start_at < x.end_at
    """
    assert _count(con, clashes) == 0


def test_every_started_job_holds_exactly_its_gpus(con: duckdb.DuckDBPyConnection) -> None:
    held = con.execute("""
        select j.job_id, j.gpus, j.nodes, j.start_at is not null as started,
               count(a.node) as allocated, list(distinct a.node order by a.node) as alloc_nodes,
               coalesce(bool_and(a.gpu_index between 0 and 7), true) as indices_ok
        from jobs as j left join allocations as a using (job_id)
        group by all
    """).fetchall()
    assert sum(started for _, _, _, started, *_ in held) > 250
    for job_id, gpus, nodes, started, allocated, alloc_nodes, indices_ok in held:
        assert allocated == (gpus if started else 0), job_id
        assert indices_ok, job_id
        if started:
            assert sorted(hostlist.expand_hostlist(nodes)) == alloc_nodes, job_id
        else:
            assert nodes is None, job_id


def test_telemetry_is_silent_on_down_and_uninstalled_nodes(
    con: duckdb.DuckDBPyConnection,
) -> None:
    outage = "select * from samples where node = 'gpu-a02' and ts >= $1 and ts < $2"
    assert _count(con, outage, OUTAGE_START, OUTAGE_END) == 0
    # Not vacuous: all 8 GPUs report up to the outage and again once the node is back.
    at = "select * from samples where node = 'gpu-a02' and ts = $1::timestamp"
    assert _count(con, at, "2026-11-18 01:55:00") == _count(con, at, OUTAGE_END) == 8
    first = con.execute("select min(ts)::varchar from samples where node = 'gpu-h02'").fetchone()
    assert first == ("2026-11-10 00:00:00",)
    early = """
        select * from allocations join jobs using (job_id)
        where node = 'gpu-h02' and start_at < $1
    """
    assert _count(con, early, "2026-11-10 00:00:00") == 0


def test_telemetry_files_have_the_canonical_shape(demo: Path) -> None:
    files = sorted((demo / "landing" / "telemetry" / "atlas").glob("*.parquet"))
    assert [f.name for f in files] == [f"gpu-samples-2026-11-{d:02d}.parquet" for d in range(1, 31)]
    table = pq.read_table(files[0])
    assert [(f.name, str(f.type)) for f in table.schema] == [
        ("ts", "timestamp[us]"),
        ("node", "string"),
        ("gpu_index", "int32"),
        ("util_pct", "double"),
        ("mem_used_mib", "double"),
        ("power_w", "double"),
    ]
    # Day one has no gaps: every in-service GPU reports every 5 minutes, free ones at 0 %.
    assert table.num_rows == 3 * 8 * 288
    keys = ["node", "gpu_index", "ts"]
    assert table.select(keys).equals(table.select(keys).sort_by([(k, "ascending") for k in keys]))


def test_telemetry_values_are_plausible(con: duckdb.DuckDBPyConnection) -> None:
    (bad,) = con.execute("""
        select count(*) filter (
            where util_pct not between 0 and 100 or mem_used_mib not between 0 and 81920
                or power_w not between 40 and 700 or epoch(ts)::bigint % 300 <> 0
        ) from samples
    """).fetchone()
    assert bad == 0


def test_zombie_notebooks_sit_idle_for_hours(con: duckdb.DuckDBPyConnection) -> None:
    zombies = """
        select j.job_id
        from jobs as j
        join allocations as a using (job_id)
        join samples as s on s.node = a.node and s.gpu_index = a.gpu_index
            and s.ts >= j.start_at and s.ts < j.end_at
        where j.queue = 'interactive' and j.gpus = 1
            and j.end_at - j.start_at between interval 4 hour and interval 20 hour
        group by j.job_id
        having count(*) filter (where s.util_pct <= 2) > 0.6 * count(*)
            and count(*) filter (where s.util_pct <= 2) >= 24  -- two hours of 5-minute samples
    """
    assert _count(con, zombies) >= 1


# Each case the demo promises, as a condition on the final job records.
REQUIRED_CASES = {
    "NODE_FAIL at the outage start": (
        f"state = 'NODE_FAIL' and end_at = '{OUTAGE_START}' and nodes like '%gpu-a02%'"
    ),
    "started before the month, ended in it": (
        "start_at < '2026-11-01' and end_at > '2026-11-01' and end_at < '2026-12-01'"
    ),
    "running past the month end": (
        "start_at < '2026-12-01' and (end_at is null or end_at > '2026-12-01')"
    ),
    "running at export": "state = 'RUNNING' and end_time is null and start_at is not null",
    "pending at export": "state = 'PENDING' and start_time is null and nodes is null",
    "unmapped account": "account = 'contractor-x'",
    "preempted": "state = 'PREEMPTED' and queue = 'preemptible'",
    "out of memory": "state = 'OUT_OF_MEMORY'",
    "multi-node": "gpus = 16 and nodes like '%[%'",
}


@pytest.mark.parametrize("case", REQUIRED_CASES)
def test_required_case_occurs(con: duckdb.DuckDBPyConnection, case: str) -> None:
    assert _count(con, f"select * from jobs where {REQUIRED_CASES[case]}") >= 1


def test_no_job_runs_on_the_outage_node_during_the_outage(con: duckdb.DuckDBPyConnection) -> None:
    inside = """
        select * from jobs join allocations using (job_id)
        where node = 'gpu-a02' and start_at < $2 and coalesce(end_at, $3::timestamp) > $1
    """
    assert _count(con, inside, OUTAGE_START, OUTAGE_END, EXPORT_AT) == 0


def test_second_dump_holds_exactly_three_bad_rows(con: duckdb.DuckDBPyConnection) -> None:
    bad = con.execute("select part, job_id from records where is_bad order by job_id").fetchall()
    assert [part for part, _ in bad] == [2, 2, 2]
    bad_ids = [job_id for _, job_id in bad]
    others = "select * from records where not is_bad and job_id in (select unnest($1))"
    assert _count(con, others, bad_ids) == 0
    assert (
        _count(con, "select * from allocations where job_id in (select unnest($1))", bad_ids) == 0
    )
    # One defect each: gpus, end before start, an impossible timestamp.
    defects = con.execute("""
        select
            count(*) filter (where gpus = 'abc'),
            count(*) filter (where end_at < start_at),
            count(*) filter (where start_time = '2026-13-45T99:00:00' and start_at is null)
        from records where is_bad
    """).fetchone()
    assert defects == (1, 1, 1)


def test_overlapping_jobs_appear_first_unfinished_then_final(
    con: duckdb.DuckDBPyConnection,
) -> None:
    pairs = con.execute("""
        select p1.state, p1.end_time, p2.state, p2.end_time
        from records as p1 join records as p2 using (job_id)
        where p1.part = 1 and p2.part = 2
    """).fetchall()
    assert len(pairs) == 12
    assert any(s1 == "RUNNING" and e1 is None and e2 is not None for s1, e1, _, e2 in pairs)
    assert all(s2 not in ("RUNNING", "PENDING") for _, _, s2, _ in pairs)


def test_catalog_matches_the_cluster_and_the_accounts(
    demo: Path, con: duckdb.DuckDBPyConnection
) -> None:
    catalog = demo / "catalog"
    tenants = yaml.safe_load((catalog / "tenants.yaml").read_text())["tenants"]
    assert len(tenants) >= 10
    assert len({t["department"] for t in tenants}) == 3
    assert any("&" in t["name"] for t in tenants)
    accounts = [a for (a,) in con.execute("select distinct account from jobs").fetchall()]
    for account in accounts:
        owners = [t["id"] for t in tenants if any(fnmatchcase(account, p) for p in t["accounts"])]
        assert len(owners) == (0 if account == "contractor-x" else 1), account
    assert {"nlp-train", "nlp-eval"} <= set(accounts)

    quotas = yaml.safe_load((catalog / "quotas.yaml").read_text())["quotas"]
    assert {q["tenant"] for q in quotas} <= {t["id"] for t in tenants}
    assert {q["pool"] for q in quotas} == {"A100-80GB", "H100-80GB"}
    budgets = yaml.safe_load((catalog / "budgets.yaml").read_text())["budgets"]
    assert sorted(b["tenant"] for b in budgets) == sorted(t["id"] for t in tenants)
    assert {b["month"] for b in budgets} == {MONTH}

    nodes = (catalog / "nodes.csv").read_text().splitlines()
    assert nodes[0] == (
        "node,cluster,gpu_model,gpus,rack,fault_domain,driver_version,"
        "in_service_from,in_service_to,monthly_cost"
    )
    reporting = [
        n for (n,) in con.execute("select distinct node from samples order by 1").fetchall()
    ]
    assert [line.split(",")[0] for line in nodes[1:]] == reporting
    outages = yaml.safe_load((catalog / "outages.yaml").read_text())["outages"]
    assert [(o["nodes"], str(o["start"]), o["reason"]) for o in outages] == [
        ("gpu-a02", OUTAGE_START, "hardware")
    ]


def test_vision_runs_over_its_quota_limit(demo: Path, con: duckdb.DuckDBPyConnection) -> None:
    quotas = yaml.safe_load((demo / "catalog" / "quotas.yaml").read_text())["quotas"]
    (limit,) = [
        q["limit_gpus"] for q in quotas if q["tenant"] == "vision" and q["pool"] == "A100-80GB"
    ]
    (peak,) = con.execute(f"""
        with held as (
            select start_at, coalesce(end_at, timestamp '{EXPORT_AT}') as end_at, gpus
            from jobs
            where account = 'vision' and gpu_model = 'A100-80GB' and start_at is not null
        ),
        steps as (
            select start_at as t, gpus as delta from held
            union all
            select end_at, -gpus from held
        )
        -- ends sort before starts at the same instant: a GPU handed over is not held twice
        select max(level) from (
            select sum(delta) over (order by t, delta rows unbounded preceding) as level
            from steps
        )
    """).fetchone()
    assert peak > limit


def test_budgets_put_vision_over_and_nlp_near_its_limit(
    demo: Path, con: duckdb.DuckDBPyConnection
) -> None:
    """Rate-card charge of the month net of NODE_FAIL credits, against each budget."""
    catalog = demo / "catalog"
    tenants = yaml.safe_load((catalog / "tenants.yaml").read_text())["tenants"]
    budgets = yaml.safe_load((catalog / "budgets.yaml").read_text())["budgets"]
    rates = {
        r["gpu_model"]: r["price_per_gpu_hour"]
        for r in yaml.safe_load((catalog / "rates.yaml").read_text())["rates"]
    }
    usage = con.execute(f"""
        select account, gpu_model, sum(gpus * epoch(
            least(coalesce(end_at, timestamp '{EXPORT_AT}'), timestamp '2026-12-01')
            - greatest(start_at, timestamp '2026-11-01')) / 3600) as gpu_hours
        from jobs
        where start_at < '2026-12-01' and coalesce(end_at, timestamp '{EXPORT_AT}') > '2026-11-01'
            and state <> 'NODE_FAIL'
        group by all
    """).fetchall()
    charge = dict.fromkeys((t["id"] for t in tenants), 0.0)
    for account, model, gpu_hours in usage:
        for tenant in tenants:
            if any(fnmatchcase(account, p) for p in tenant["accounts"]):
                charge[tenant["id"]] += gpu_hours * rates[model]
    used = {b["tenant"]: charge[b["tenant"]] / b["amount"] for b in budgets}
    assert used["vision"] > 1.1
    assert 0.8 <= used["nlp"] < 1.0
    assert all(share < 0.8 for tenant, share in used.items() if tenant not in ("vision", "nlp"))
