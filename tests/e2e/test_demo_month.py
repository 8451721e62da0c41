"""End to end on the small demo month in the real export formats (sacct dumps, pod lists, DCGM
and nvidia-smi telemetry for `atlas` and `kube`): every invariant of DESIGN.md holds, MIG
instances (Slurm and Kubernetes) and time-sliced replicas included."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path

import duckdb
import openpyxl
import pytest

from pipelines.definitions import all_assets
from pipelines.defs.resources import prepare_connection
from pipelines.reports import sheets
from simulator.demo import generate_demo
from simulator.site import make_kube_layout, make_layout
from tests.conftest import materialize_monthly, named_samples, query

# slow (quick tier: make test-quick): materialises the demo month, in both cost modes
pytestmark = pytest.mark.slow

MONTH = "2026-11-01"
CORE_CHECKS = {
    "capacity_buckets_sum_to_capacity": True,
    "charges_tie_out": True,
    "every_account_mapped": False,  # contractor-x, on purpose
    "gpus_never_oversubscribed": True,  # MIG and time-sliced GPUs are shared, never beyond 1
    "rows_reconcile": True,
    "telemetry_labels_agree_with_scheduler": True,
}
BLOCKING = {spec.name for step in all_assets for spec in step.check_specs if spec.blocking}
VERDICTS = {"govern first", "expansion justified", "hold"}
GPU_HOUR_UNITS = 3_600_000 * 420  # the pipeline's GPU units: 1/420 GPU-millisecond


@pytest.fixture(scope="module")
def demo(demo_month) -> tuple[Path, object]:
    return demo_month


def test_checks_pass_and_the_unmapped_account_is_listed(demo):
    _, result = demo
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert {name: evaluations[name].passed for name in CORE_CHECKS} == CORE_CHECKS
    assert {"capacity_buckets_sum_to_capacity", "charges_tie_out", "rows_reconcile"} <= BLOCKING
    assert all(evaluations[name].passed for name in BLOCKING if name in evaluations)
    unmapped = evaluations["every_account_mapped"].metadata["unmapped_accounts"].value
    assert unmapped == "contractor-x"


def test_buckets_sum_exactly_to_capacity(demo):
    root, _ = demo
    rows = query(
        root,
        """
        select cluster, gpu_model,
               sum(gpu_units) filter (bucket <> 'capacity'),
               sum(gpu_units) filter (bucket = 'capacity')
        from capacity_buckets group by 1, 2 order by 1, 2
        """,
    )
    assert [(cluster, model) for cluster, model, _, _ in rows] == [
        ("atlas", "A100-80GB"), ("atlas", "H100-80GB"), ("kube", "A100-80GB"), ("kube", "H100-80GB")
    ]  # fmt: skip
    for *_, buckets, capacity in rows:
        assert buckets == capacity
    # capacity from the inventory: atlas 4 A100 nodes (two MIG-partitioned) all month, 1 H100
    # node all month and one from day 10 (21 days); kube 2 A100 nodes (one MIG-partitioned, one
    # time-sliced) and an H100 node; 8 GPUs each, however they are shared
    assert [capacity for *_, capacity in rows] == [
        4 * 8 * 720 * GPU_HOUR_UNITS,
        (8 * 720 + 8 * 21 * 24) * GPU_HOUR_UNITS,
        2 * 8 * 720 * GPU_HOUR_UNITS,
        8 * 720 * GPU_HOUR_UNITS,
    ]


def test_both_clusters_are_charged(demo):
    root, _ = demo
    rows = dict(query(root, "select cluster, sum(amount) from charge_lines group by 1"))
    assert set(rows) == {"atlas", "kube"} and all(amount > 0 for amount in rows.values())
    tenants = {t for (t,) in query(root, "select distinct tenant_id from charge_lines "
                                         "where cluster = 'kube'")}  # fmt: skip
    assert {"genai", "nlp", "notebooks", "platform"} <= tenants


@pytest.fixture(scope="module")
def workbook(demo) -> openpyxl.Workbook:
    """The demo month's finance workbook, loaded once for the tests that read it."""
    root, _ = demo
    return openpyxl.load_workbook(root / "reports/2026-11/chargeback-2026-11.xlsx")


def test_money_ties_from_lines_to_tenants_to_workbook(demo, workbook):
    root, _ = demo
    [(lines_total,)] = query(root, "select sum(amount) from charge_lines")
    [(tenants_total,)] = query(root, "select sum(amount) from tenant_month")
    assert lines_total == tenants_total > 0
    summary, charges = workbook["Summary"], workbook["Charges"]
    total_row = next(r for r in summary.iter_rows() if r[0].value == "TOTAL")
    formula = total_row[4].value
    first, last = re.fullmatch(r"=SUM\(E(\d+):E(\d+)\)", formula).groups()
    summary_total = sum(
        Decimal(str(summary.cell(row=r, column=5).value)) for r in range(int(first), int(last) + 1)
    )
    charge_amounts = [
        Decimal(str(row[11].value))
        for row in charges.iter_rows(min_row=2)
        if row[0].value not in (None, "TOTAL")
    ]
    assert summary_total == sum(charge_amounts) == lines_total
    [(line_count,)] = query(root, "select count(*) from charge_lines")
    assert len(charge_amounts) == line_count


# A4 landscape between the top and bottom margins (sheets.MARGINS), in points
PRINTABLE_HEIGHT_PT = (210 / 25.4 - 0.75 * 2) * 72
CHART_LAST = {"Trends"}


def test_every_printed_table_but_a_sheets_last_fits_its_page(workbook):
    # A stacked sheet repeats only its last table's header on printed pages: every table
    # above it (from its section title to the next page break) fits one page at the sheet's
    # print scale, rows of wrapped text at their heights.
    for ws in workbook.worksheets:
        scale = (ws.page_setup.scale or sheets.print_scale(ws)) / 100
        first = 1
        for last in (b.id for b in ws.row_breaks.brk):
            heights = (ws.row_dimensions[r].height or sheets.LINE_HEIGHT_PT
                       for r in range(first, last + 1))  # fmt: skip
            assert sum(heights) * scale <= PRINTABLE_HEIGHT_PT, (ws.title, first, last)
            first = last + 1
        # the rest prints under its header, or is a chart (kept whole on its page)
        assert ws.print_title_rows or ws.title in CHART_LAST, ws.title


def test_every_export_file_is_loaded_or_rejected(demo):
    root, _ = demo
    files = query(
        root,
        "select subject, rows_read, rows_loaded, rows_rejected from data_quality "
        "where category = 'file' order by subject",
    )
    landing = sorted(
        p.relative_to(root / "landing").as_posix()
        for p in (root / "landing").rglob("*")
        if p.is_file()
    )
    assert [subject for subject, *_ in files] == landing
    assert all(read == loaded + rejected > 0 for _, read, loaded, rejected in files)
    rejected = {subject: n for subject, _, _, n in files if n}
    assert rejected == {"scheduler/atlas/sacct-2026-11-20.log": 3}
    reasons = {reason.split(":")[0] for (reason,) in query(root, "select reason from rejects")}
    assert reasons == {"field alloctres", "field end_time", "field start_time"}


def test_repeated_records_are_folded_not_counted(demo):
    root, _ = demo
    # every job counts once though the dumps overlap and one was sent twice
    [(folded,)] = query(
        root,
        "select sum(duplicates_folded) from data_quality "
        "where category = 'file' and subject like 'scheduler/%'",
    )
    [(jobs,)] = query(root, "select count(*) from job_usage")
    [(distinct,)] = query(root, "select count(distinct cluster || job_id) from job_usage")
    assert folded > jobs == distinct


def test_each_jobs_samples_are_its_own(demo):
    """The demo places GPUs by the rule the pipeline assigns them with (lowest free first in
    start order; a share to the lowest GPU with room) and a held GPU always reads some memory,
    a free one none: so a sample the pipeline attributes to a job reads memory, and a sample it
    attributes to nobody reads none, on every GPU the exports report whole (atlas's MIG GPUs
    and kube's time-sliced ones too: one held slot makes the GPU read memory)."""
    root, _ = demo
    plain = {key: n for key, n in _held_vs_memory(root).items() if not key[1]}
    assert set(plain) == {
        (cluster, False, held, held) for cluster in ("atlas", "kube") for held in (False, True)
    }
    assert min(plain.values()) > 1000


def test_a_mig_gpu_is_one_sample_of_its_seven_instances(demo):
    """DCGM reports the MIG GPUs of kube-m01 per GPU instance (GPU_I_ID 7-13, 1g.10gb each);
    the pipeline measures each GPU by all seven: utilisation their mean (a 1g instance is
    1/7 of the GPU), memory their sum. So a GPU some pod holds reads memory, a free one none,
    and the samples equal what the exports say, computed here from the JSON itself."""
    root, _ = demo
    mig = {key: n for key, n in _held_vs_memory(root).items() if key[1]}
    # (cluster, on the MIG node, held, memory used): a held GPU reads memory, a free one none
    assert set(mig) == {("kube", True, True, True), ("kube", True, False, False)}
    instances: dict[tuple[str, int, int], list[float]] = {}
    for path in sorted((root / "landing/telemetry/kube/dcgm").glob("*.json")):
        metric = "util" if "gr_engine_active" in path.name else "mem"
        for series in json.loads(path.read_text(encoding="utf-8"))["data"]["result"]:
            labels = series["metric"]
            if labels["hostname"] != "kube-m01":
                continue
            assert labels["GPU_I_PROFILE"] == "1g.10gb"
            for ts, value in series["values"]:
                key = (metric, int(labels["gpu"]), int(ts))
                instances.setdefault(key, []).append(float(value))
    assert {len(values) for values in instances.values()} == {7}
    expected = {
        (gpu, ts): (round(100 * sum(util) / 7, 10), sum(instances[("mem", gpu, ts)]))
        for (metric, gpu, ts), util in instances.items()
        if metric == "util"
    }
    con = prepare_connection(duckdb.connect())
    measured = {
        (gpu, ts): (util, mem)
        for gpu, ts, util, mem in con.execute(
            "select gpu_index, epoch(ts)::bigint, util_pct, mem_used_mib "
            f"from {named_samples(root, 'kube')} where node = 'kube-m01'"
        ).fetchall()
    }
    con.close()
    assert len(measured) == len(expected) > 0
    assert measured == expected


def _held_vs_memory(root: Path) -> dict[tuple, int]:
    """(cluster, on the MIG node, held by a job, memory used) -> samples."""
    con = prepare_connection(duckdb.connect(str(root / "warehouse.duckdb"), read_only=True))
    try:
        return {
            tuple(key): n
            for *key, n in con.execute(
                f"""
                with s as (
                    select * from {named_samples(root)}
                ),
                held as (
                    select s.cluster, s.node, s.gpu_index, s.ts, s.mem_used_mib,
                           count(g.job_id) as holders
                    from s
                    left join job_gpu_hours as g
                        on g.cluster = s.cluster and g.node = s.node
                        and g.gpu_index = s.gpu_index and g.hour = date_trunc('hour', s.ts)
                        and s.ts >= g.seg_from and s.ts < g.seg_to
                    group by all
                )
                select cluster, node = 'kube-m01', holders > 0, mem_used_mib > 0, count(*)
                from held where mem_used_mib is not null group by all
                """
            ).fetchall()
        }
    finally:
        con.close()


def test_array_records_superseded_by_their_tasks_are_not_pending_jobs(demo):
    """sacct lists an array's waiting tasks as one record (`123_[1-5]`) and, once they run,
    each task: the collapsed record then counts as folded, not as a PENDING job. Expected
    from the dumps themselves: a collapsed record is folded when any dump lists one of its
    tasks, and of one array's other collapsed records only the latest counts."""
    root, _ = demo
    dumps = sorted((root / "landing/scheduler/atlas").glob("*.log"))
    records = [
        (path.name, number, line.split("|"))
        for path in dumps
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
    ]
    ids = {fields[0] for _, _, fields in records}
    collapsed = [(name, number, fields[0]) for name, number, fields in records
                 if re.fullmatch(r"\d+_\[[\d,%-]+\]", fields[0])]  # fmt: skip

    def tasks(job_id: str) -> set[str]:
        base, ranges = re.fullmatch(r"(\d+)_\[([\d,-]+)(?:%\d+)?\]", job_id).groups()
        bounds = [[int(n) for n in part.split("-")] for part in ranges.split(",")]
        return {f"{base}_{t}" for b in bounds for t in range(b[0], b[-1] + 1)}

    folded = {job_id for _, _, job_id in collapsed if tasks(job_id) & ids}
    assert folded and len(folded) < len({job_id for *_, job_id in collapsed})
    rows = query(
        root,
        "select job_id, reject_reason, record_rank from stg_job_records "
        "where contains(job_id, '_[') order by file, line",
    )
    assert [(job_id, reason) for job_id, reason, _ in rows] == [
        (job_id, None) for *_, job_id in collapsed
    ]
    # one record of each array still waiting ranks 1; the folded ones never do
    ranked_first = [job_id for job_id, _, rank in rows if rank == 1]
    assert sorted(ranked_first) == sorted({job_id for *_, job_id in collapsed} - folded)
    # the arrays still waiting at the export were submitted after the month
    assert query(root, "select job_id from job_usage where contains(job_id, '_[')") == []


def test_every_pod_label_names_the_pod_the_scheduler_placed_there(demo):
    """The demo places GPUs by the pipeline's rule, so the `pod` / `namespace` labels of every
    kube sample (whole GPUs and MIG instances) agree with the scheduler's attribution: every
    labelled point of the exports (one per GPU or instance and timestamp) is counted, and
    agrees."""
    root, _ = demo
    labelled = {
        (labels["hostname"], labels["gpu"], labels.get("GPU_I_ID"), ts)
        for path in (root / "landing/telemetry/kube/dcgm").glob("*.json")
        for series in json.loads(path.read_text(encoding="utf-8"))["data"]["result"]
        if (labels := series["metric"]).get("pod")
        for ts, _ in series["values"]
    }
    assert query(root, "select kind, sum(samples) from telemetry_label_checks group by all") == [
        ("agrees", len(labelled))
    ]


def test_mig_pods_are_billed_as_fractions(demo):
    root, _ = demo
    rows = query(
        root,
        """
        select gpus, count(*), sum(allocated_gpu_hours),
               sum(gpus * epoch(least(coalesce(end_at, timestamp '2026-12-01 06:00:00'),
                                      timestamp '2026-12-01')
                                - greatest(start_at, timestamp '2026-11-01')) / 3600)
        from job_usage
        where cluster = 'kube' and gpus < 1 and gpus > 0 and start_at is not null
            and job_id in (select job_id from job_gpus where node = 'kube-m01')
        group by 1 order by 1
        """,
    )
    assert [round(gpus * 7, 9) for gpus, *_ in rows] == [1, 2]
    for _, pods, allocated, expected in rows:
        assert pods > 0 and allocated == pytest.approx(expected)
    [(lines, hours, amount)] = query(
        root,
        "select count(*), sum(gpu_hours), sum(amount) from charge_lines "
        "where cluster = 'kube' and gpu_model = 'A100-80GB' and charge_category = 'Usage'",
    )
    # the MIG and time-sliced nodes' usage at the A100 rate; each line is rounded to the cent
    assert 0 < hours < 2 * 8 * 720
    assert abs(amount - Decimal("2.10") * Decimal(hours)) <= Decimal("0.005") * lines


# Shared GPUs of the small demo: node -> each job's share of its GPU, in 1/420ths
SHARED_NODES = {"gpu-m01": 60, "gpu-m02": 180, "kube-ts01": 105}  # 1g.10gb, 3g.40gb, a replica


def _jobs_on_shared_gpus(root: Path) -> list[tuple]:
    """(node, job_id, gpus, gpu_share, held from, held to (epoch s, clipped to the month),
    allocated, measured and unmeasured GPU-hours, amount, state) of every job of the month
    holding a shared GPU."""
    return query(
        root,
        """
        select g.node, j.job_id, j.gpus, g.gpu_share,
               epoch(greatest(j.start_at, timestamp '2026-11-01'))::bigint,
               epoch(least(j.held_until, timestamp '2026-12-01'))::bigint,
               u.allocated_gpu_hours, u.measured_gpu_hours, u.unmeasured_gpu_hours, u.amount,
               u.state
        from stg_jobs as j
        join job_gpus as g using (billing_month, cluster, job_id)
        join job_usage as u using (billing_month, cluster, job_id)
        where g.node in ('gpu-m01', 'gpu-m02', 'kube-ts01')
            and j.start_at < '2026-12-01' and j.held_until > '2026-11-01'
        order by all
        """,
    )


def test_slurm_mig_jobs_are_billed_their_gpu_equivalents(demo):
    """A job on gpu-m01 asked for one 1g.10gb instance (`gres/gpu=1,gres/gpu:a100_1g.10gb=1`):
    1/7 of a GPU, so its GPU-hours are its hours / 7; on gpu-m02 a 3g.40gb: 3/7. Each is one
    share of one GPU, charged at the A100 rate: its amount is its share of its charge line
    (job_line_cents), within a cent of its exact charge."""
    root, _ = demo
    rows = [row for row in _jobs_on_shared_gpus(root) if row[0].startswith("gpu-m")]
    assert Counter(node for node, *_ in rows).keys() == {"gpu-m01", "gpu-m02"}
    assert min(Counter(node for node, *_ in rows).values()) > 10
    for node, job_id, gpus, share, held_from, held_to, allocated, _, _, amount, _ in rows:
        assert (gpus, share) == ((1 / 7, 60) if node == "gpu-m01" else (3 / 7, 180)), job_id
        assert allocated == pytest.approx(share / 420 * (held_to - held_from) / 3600, rel=1e-12)
        charge = Decimal("2.10") * share * (held_to - held_from) / (420 * 3600)
        assert abs(amount - charge) < Decimal("0.01"), job_id
    # a 1g.10gb job's GPU-hours are exactly its hours / 7
    node, job_id, _, _, held_from, held_to, allocated, *_ = rows[0]
    assert node == "gpu-m01" and allocated == pytest.approx((held_to - held_from) / 3600 / 7)


def test_time_sliced_pods_are_billed_a_quarter_of_a_gpu(demo):
    """On kube-ts01 (a time-slicing pool of 4 replicas per GPU in settings.yaml) each
    `nvidia.com/gpu: 1` is a replica: 1/4 of a GPU, billed as such."""
    root, _ = demo
    rows = [row for row in _jobs_on_shared_gpus(root) if row[0] == "kube-ts01"]
    assert len(rows) > 50
    for _, job_id, gpus, share, held_from, held_to, allocated, *_ in rows:
        assert (gpus, share) == (0.25, 105), job_id
        assert allocated == pytest.approx((held_to - held_from) / 3600 / 4, rel=1e-12), job_id


def test_shared_gpus_fill_up_and_never_beyond(demo):
    """At its fullest a GPU of gpu-m01 holds seven 1g.10gb jobs, one of kube-ts01 four pods
    (a whole GPU each), one of gpu-m02 two 3g.40gb jobs (6/7: a seventh never allocated); no
    GPU ever holds more than itself (the check gpus_never_oversubscribed agrees)."""
    root, _ = demo
    most = query(
        root,
        """
        with held as (
            select g.node, g.gpu_index, g.gpu_share,
                   greatest(j.start_at, timestamp '2026-11-01') as held_from,
                   least(j.held_until, timestamp '2026-12-01') as held_to
            from stg_jobs as j join job_gpus as g using (billing_month, cluster, job_id)
            where j.start_at < '2026-12-01' and j.held_until > '2026-11-01'
        ),
        steps as (
            select node, gpu_index, held_from as t, gpu_share as delta from held
            union all
            select node, gpu_index, held_to, -gpu_share from held
        ),
        levels as (
            -- ends sort before starts at the same instant
            select node, sum(delta) over (
                partition by node, gpu_index order by t, delta rows unbounded preceding
            ) as level
            from steps
        )
        select node, max(level) from levels group by all order by all
        """,
    )
    assert {node: level for node, level in most if node in SHARED_NODES} == {
        "gpu-m01": 7 * 60, "gpu-m02": 2 * 180, "kube-ts01": 4 * 105
    }  # fmt: skip
    assert max(level for _, level in most) == 420


def test_the_samples_of_a_shared_gpu_are_split_by_the_shares(demo):
    """A shared GPU reports one sample every 5 minutes without gaps (atlas's MIG GPUs and the
    time-sliced ones one series per GPU). Each sample's time goes to every holder times its
    share, so a job is measured for its share of the time from its first sample to its end,
    never for the whole GPU: four pods on a time-sliced GPU are measured a quarter each. The
    time before a job's first sample is unmeasured (a failed job's time is all failed_job)."""
    root, _ = demo
    rows = _jobs_on_shared_gpus(root)
    assert len(rows) > 200
    for row in rows:
        _, job_id, _, share, held_from, held_to, allocated, measured, unmeasured, _, state = row
        first_sample = -(-held_from // 300) * 300
        expected = share / 420 * max(0, held_to - first_sample) / 3600
        assert measured == pytest.approx(expected, rel=1e-12, abs=1e-12), job_id
        if state not in ("FAILED", "OUT_OF_MEMORY"):
            assert unmeasured == pytest.approx(allocated - expected, rel=1e-9, abs=1e-12), job_id


def test_pod_states_come_through(demo):
    root, _ = demo
    states = dict(
        query(root, "select state, count(*) from job_usage where cluster = 'kube' group by 1")
    )
    assert {"COMPLETED", "FAILED", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT", "RUNNING",
            "PENDING"} <= set(states)  # fmt: skip


def test_failures_land_in_their_buckets(demo):
    root, _ = demo
    rows = query(
        root,
        """
        select state, sum(allocated_gpu_hours), sum(failed_infra_gpu_hours),
               sum(failed_job_gpu_hours)
        from job_usage where state in ('NODE_FAIL', 'FAILED', 'OUT_OF_MEMORY') group by 1
        """,
    )
    assert {state for state, *_ in rows} == {"NODE_FAIL", "FAILED", "OUT_OF_MEMORY"}
    for state, allocated, failed_infra, failed_job in rows:
        if state == "NODE_FAIL":
            assert failed_infra == pytest.approx(allocated) and failed_job == 0
        else:
            assert failed_job + failed_infra == pytest.approx(allocated)
    [(down,)] = query(root, "select sum(gpu_hours) from capacity_buckets where bucket = 'down'")
    assert down > 0  # the outage on gpu-a02
    [(zombie,)] = query(
        root, "select sum(zombie_gpu_hours) from job_usage where queue = 'interactive'"
    )
    assert zombie > 0


def test_budgets_put_vision_over_and_nlp_on_warning(demo):
    root, _ = demo
    status = dict(query(root, "select tenant_id, budget_status from tenant_month"))
    assert status["vision"] == "over" and status["nlp"] == "warn"


def test_the_month_shows_each_capacity_verdict(demo):
    """bio's barely used A100 guarantee (30 % of the pool) governs both A100 rows; atlas's H100
    partition (tuned batch work, a queue that never empties) justifies expansion; kube's H100
    pool is moderately allocated with modest waste: hold."""
    root, _ = demo
    rows = query(
        root,
        "select cluster, gpu_model, verdict, verdict_rule, allocation_rate_pct, "
        "waste_share_pct, idle_quota_share_pct, wait_p95_s from capacity_evidence "
        "where billing_month = $1 order by 1, 2",
        [MONTH],
    )
    verdicts = {(cluster, model): verdict for cluster, model, verdict, *_ in rows}
    assert verdicts == {
        ("atlas", "A100-80GB"): "govern first",
        ("atlas", "H100-80GB"): "expansion justified",
        ("kube", "A100-80GB"): "govern first",
        ("kube", "H100-80GB"): "hold",
    }
    assert set(verdicts.values()) == {"govern first", "expansion justified", "hold"}
    evidence = {(cluster, model): rest for cluster, model, *rest in rows}
    for model_rows in (evidence["atlas", "A100-80GB"], evidence["kube", "A100-80GB"]):
        rule, _, _, idle_quota, _ = model_rows[1:]
        assert idle_quota >= 20 and "idle quota share" in rule
    rule, allocation, waste, idle_quota, wait = evidence["atlas", "H100-80GB"][1:]
    assert allocation >= 80 and waste < 15 and idle_quota < 20 and wait >= 4 * 3600
    assert rule.startswith("allocation ") and rule.endswith("→ expansion justified")
    rule, allocation, waste, idle_quota, _ = evidence["kube", "H100-80GB"][1:]
    assert allocation < 80 and waste < 25 and idle_quota < 20
    assert "but allocation" in rule and rule.endswith("→ hold")


def test_assist_pays_for_its_unused_reserved_h100s(demo):
    root, _ = demo
    # the reserved guarantee's unused hours, split over the clusters holding H100s pro rata
    # to capacity (atlas 8 × 720 + 8 × 504 GPU-h, kube 8 × 720), at the H100 rate of 3.85
    [(unused,)] = query(
        root,
        "select unused_guaranteed_gpu_hours from quota_compliance "
        "where tenant_id = 'assist' and pool = 'H100-80GB' and reserved",
    )
    rows = query(
        root,
        "select cluster, capacity_reservation_id, gpu_hours, unit_price, amount "
        "from charge_lines where charge_type = 'reserved_unused' order by cluster",
    )
    assert [(c, r, p) for c, r, _, p, _ in rows] == [
        ("atlas", "assist/H100-80GB", Decimal("3.850000")),
        ("kube", "assist/H100-80GB", Decimal("3.850000")),
    ]
    assert unused > 0
    assert sum(hours for _, _, hours, _, _ in rows) == pytest.approx(unused)
    assert rows[0][2] / rows[1][2] == pytest.approx((720 + 504) / 720)
    for _, _, hours, _, amount in rows:
        assert abs(amount - Decimal("3.85") * Decimal(hours)) <= Decimal("0.01")


def test_the_demo_recovers_each_clusters_cost_in_full_recovery(demo, tmp_path):
    # The demo month again with the demo's full_recovery catalog settings (weighted idle
    # sharing; the other policies are pinned by hand in test_full_recovery). The telemetry
    # rollups do not depend on the cost mode: only the monthly assets run again.
    root = tmp_path / "full_recovery"
    shutil.copytree(demo[0], root)
    generate_demo(tmp_path / "generated", month="2026-11", seed=7, small=True,
                  cost_mode="full_recovery")  # fmt: skip
    shutil.copy(tmp_path / "generated/catalog/settings.yaml", root / "catalog/settings.yaml")
    result = materialize_monthly(root, MONTH)
    assert result.success
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations["cluster_cost_recovered"] and evaluations["charges_tie_out"]
    costs = dict(query(root, "select cluster, sum(amount) from cost_pools group by 1"))
    charged = dict(query(root, "select cluster, sum(amount) from charge_lines group by 1"))
    # small demo: atlas 4 A100 nodes (14,000.00 each, MIG-partitioned or not) and 1 H100 node
    # (26,000.00) all month, one H100 node from day 10 (21 of 30 days: 18,200.00), overhead
    # 6,000.00; kube 2 A100 nodes and an H100 node, overhead 2,500.00
    assert costs == charged == {"atlas": Decimal("106200.00"), "kube": Decimal("56500.00")}
    types = {t for (t,) in query(root, "select distinct charge_type from charge_lines")}
    assert {"usage", "reserved_unused"} <= types
    # weighted shares the idle capacity among the tenants
    assert "idle_share" in types


# --------------------------------------------------------------------------------------------
# the governance marts on the demo month

GOVERNANCE_CHECKS = {"quota_compliance_ties_out", "utilization_daily_ties_out"}


def test_demo_month_governance_marts_make_sense(demo):
    root, result = demo
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert {name: evaluations.get(name) for name in GOVERNANCE_CHECKS} == dict.fromkeys(
        GOVERNANCE_CHECKS, True
    )

    quota_pairs = set(query(root, "select tenant_id, pool from catalog_quotas"))
    rows = query(root, "select tenant_id, pool from quota_compliance where has_quota")
    assert set(rows) == quota_pairs and len(rows) == len(quota_pairs)

    [(breach, minutes, peak, limit)] = query(
        root,
        "select breach, minutes_above_limit, peak_gpus, limit_gpus from quota_compliance "
        "where tenant_id = 'vision' and pool = 'A100-80GB'",
    )
    assert breach and minutes > 0 and peak > limit

    verdicts = query(
        root,
        "select gpu_model, verdict, verdict_rule from capacity_evidence "
        "where cluster = 'atlas' order by 1",
    )
    assert [model for model, _, _ in verdicts] == ["A100-80GB", "H100-80GB"]
    for _, verdict, rule in verdicts:
        assert verdict in VERDICTS and rule.endswith(f"→ {verdict}")

    # every model's queue total counts each GPU job of the month once
    [(jobs, model_jobs)] = query(
        root,
        "select (select count(*) from job_usage where gpus > 0), "
        "sum(jobs) filter (grouping_set = 'gpu_model') from queue_stats",
    )
    assert jobs == model_jobs > 0

    [(nodes, ranked)] = query(
        root,
        "select (select count(*) from catalog_nodes), count(failure_rank) "
        "from failure_stats where dimension = 'node'",
    )
    assert nodes == ranked > 0


def test_incidents_are_the_months_outage_and_exporter_gaps(demo):
    """The simulated outage (its NODE_FAIL jobs hit), the atlas exporter that stopped for 12 h
    and the kube exporter gap of 3 h, and nothing else: no other node fell silent."""
    root, _ = demo
    layout = make_layout("2026-11", small=True)
    kube = make_kube_layout(layout)

    def utc(epoch: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(epoch, dt.UTC).replace(tzinfo=None)

    expected = [
        *(("atlas", node, "outage_window", False, *map(utc, layout.outage))
          for node in layout.outage_nodes),
        ("atlas", layout.exporter_outage[0], "telemetry_silence", True,
         *map(utc, layout.exporter_outage[1:])),
        ("kube", kube.exporter_gap[0], "telemetry_silence", True,
         *map(utc, kube.exporter_gap[1:])),
    ]  # fmt: skip
    rows = query(
        root,
        "select cluster, node, source, inferred, started_at, ended_at from incidents "
        "order by cluster, started_at, node",
    )
    assert rows == expected
    [(node_fail_jobs,)] = query(
        root, "select count(*) from stg_jobs where state = 'NODE_FAIL' and cluster = 'atlas'"
    )
    [(hit,)] = query(root, "select sum(jobs_hit) from incidents where source = 'outage_window'")
    assert hit >= node_fail_jobs > 0
    [(availability, mttr)] = query(
        root,
        "select availability_pct, mttr_hours from availability "
        "where level = 'cluster' and cluster = 'atlas'",
    )
    assert 99 < availability < 100 and mttr == 12.0
