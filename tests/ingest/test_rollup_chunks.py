"""A large day is rolled up in chunks of nodes (telemetry.node_chunks): the same files as in one
chunk, row for row."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.catalog import load_catalog
from pipelines.defs.ingest import telemetry
from pipelines.defs.resources import prepare_connection
from tests.conftest import resource_for
from tests.ingest.test_catalog_and_landing import catalog_dir

DAY = dt.date(2026, 11, 2)
MIDNIGHT = dt.datetime(2026, 11, 2)


def _write(path: Path, rows: list[tuple]) -> None:
    """A canonical samples file of `(ts, node, gpu_index, util_pct, util_metric)` rows."""
    ts, node, gpu, util, metric = (list(column) for column in zip(*rows, strict=True))
    pq.write_table(
        pa.table({
            "ts": pa.array(ts, pa.timestamp("us")), "node": pa.array(node, pa.string()),
            "gpu_index": pa.array(gpu, pa.int32()), "util_pct": pa.array(util, pa.float64()),
            "util_metric": pa.array(metric, pa.string()),
        }),
        path,
        row_group_size=50,
    )  # fmt: skip


def messy_site(root: Path, odd_node: str = "n07") -> None:
    """One cluster, nodes n01-n12 with two GPUs, sampled every minute from 08:00 to 10:00 (n12
    every 30 s) and looked ahead into the next day, sorted by node; with what a day must get
    right whatever its chunks:
    - n05 GPU 0 has four samples (too few spacings for a step of its own: the cluster's, the
      lower median of its series' own steps, 60 s; n12's alone would give 30 s);
    - repeated samples in a second export (later by name: it wins), and n09 GPU 1 also read
      as DCGM GR_ENGINE_ACTIVE (its GPU_UTIL rows are superseded);
    - rejected rows: no node, an empty node, a bad GPU index, utilisation over 100, and a
      timestamp far from the file's (the day owns that unreadable row);
    - idle and busy samples; `odd_node` names n07 (' n07' is a name with white space)."""
    folder = root / "landing/telemetry/c1"
    folder.mkdir(parents=True)
    rows = []
    for n in range(1, 13):
        node = odd_node if n == 7 else f"n{n:02d}"
        for gpu in (0, 1):
            minutes = [0, 1, 2, 30] if (n, gpu) == (5, 0) else range(0, 120)
            if n == 12:
                minutes = [half / 2 for half in range(0, 240)]
            for minute in minutes:
                util = float((int(minute) * 7 + n * 13 + gpu) % 100)
                rows.append(
                    (MIDNIGHT + dt.timedelta(hours=8, minutes=minute), node, gpu, util, None)
                )
            rows.append(
                (MIDNIGHT + dt.timedelta(days=1, hours=1, minutes=n), node, gpu, 40.0, None)
            )
    rows += [
        (MIDNIGHT + dt.timedelta(hours=9), None, 0, 50.0, None),
        (MIDNIGHT + dt.timedelta(hours=9), "", 0, 50.0, None),
        (MIDNIGHT + dt.timedelta(hours=9), "n02", -1, 50.0, None),
        (MIDNIGHT + dt.timedelta(hours=9), "n11", 0, 150.0, None),
        (dt.datetime(2031, 1, 1), "n12", 0, 50.0, None),
    ]
    _write(folder / "a.parquet", sorted(rows, key=lambda row: (row[1] or "", row[2], row[0])))
    repeated = [
        (MIDNIGHT + dt.timedelta(hours=8, minutes=minute), f"n{n:02d}", 0, 99.0, None)
        for n in (3, 8, 10) for minute in (5, 6, 50)
    ]  # fmt: skip
    engine = [
        (MIDNIGHT + dt.timedelta(hours=8, minutes=minute), "n09", 1, 5.0,
         "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        for minute in range(0, 120, 2)
    ]  # fmt: skip
    _write(folder / "b.parquet", repeated + engine)


def rolled_up(root: Path, chunk_samples: int, monkeypatch) -> tuple[dict, dict[str, list]]:
    """Roll up DAY with chunks of `chunk_samples`: the counts, and every file's rows by name
    (the samples' and hours' files by kind, their rows sorted: chunks split them)."""
    monkeypatch.setattr(telemetry, "CHUNK_SAMPLES", chunk_samples)
    chargeback = resource_for(root)
    counts = telemetry.roll_up_days(chargeback, load_catalog(catalog_dir(root)), [DAY])
    folder = chargeback.telemetry_dir
    files: dict[str, list] = {}
    for kind in ("samples", "hours"):
        paths = sorted(str(p) for p in folder.glob(f"cluster=c1/day={DAY}/{kind}_*.parquet"))
        files[kind] = duckdb.execute(
            "select * from read_parquet($paths) order by all", {"paths": paths}
        ).fetchall()
        files[f"{kind} files"] = [Path(p).name for p in paths]
    for path in sorted(folder.glob(f"quality/day={DAY}/*.parquet")):
        files[path.name] = duckdb.execute(f"select * from '{path}'").fetchall()
    return counts, files


def test_a_day_in_chunks_writes_what_it_writes_in_one(tmp_path, monkeypatch):
    messy_site(tmp_path)
    whole = rolled_up(tmp_path, 1_000_000, monkeypatch)
    chunked = rolled_up(tmp_path, 500, monkeypatch)
    counts, files = chunked
    # 24 series of 120 samples, n12's two of 240, less n05 GPU 0's 116 and the 60 of n09 GPU
    # 1's superseded
    assert counts == {"2026-11-02": {"samples": 2944, "rejected": 5, "files": 2}}
    # 3,077 rows of the day in chunks of about 500: six, each with its samples and hours
    assert files["samples files"] == [f"samples_{k}_0.parquet" for k in range(6)]
    assert whole[1]["samples files"] == ["samples_0_0.parquet"]
    assert whole[0] == counts
    for name in files:
        if not name.endswith(" files"):
            assert chunked[1][name] == whole[1][name], name
    # lines of a.parquet as sorted: no node and '' first, n02's GPU -1 after n01's 242 rows,
    # n11 GPU 0's 150 % after its 09:00, n12 GPU 0's 2031 after its look-ahead
    rejects = [(row[3], row[4]) for row in files["sample_rejects.parquet"]]
    assert rejects == [
        (1, "field node: missing"),
        (2, "field node: missing"),
        (245, "field gpu_index: not a GPU index"),
        (2369, "field util_pct: 150.0 is outside 0-100"),
        (2792, "field ts: 2031-01-01 00:00:00 is more than 365 days from 2026-11-02, the median "
            "day of the file's samples (a clock or unit error?)"),
    ]  # fmt: skip
    # read, loaded, rejected, folded: 9 repeated samples of b.parquet win over a.parquet's,
    # and n09 GPU 1's 120 GPU_UTIL samples are superseded by b.parquet's 60 GR_ENGINE_ACTIVE
    assert [row[2:7] for row in files["sample_file_counts.parquet"]] == [
        ("telemetry/c1/a.parquet", 3009, 3004, 5, 129),
        ("telemetry/c1/b.parquet", 69, 69, 0, 0),
    ]
    # n05 GPU 0 (4 samples, in the third chunk) waited for the cluster's step, 60 s (the last
    # chunk's series alone, n11's and n12's, would give 30 s): the last chunk writes it, with
    # that step, 4 minutes covered
    steps = {(row[3], row[4]): row[6:9] for row in files["sample_series.parquet"]}
    assert steps[("n05", 0)] == (60_000, 4, 240_000)
    assert steps[("n09", 1)] == (120_000, 60, 7_200_000)  # GR_ENGINE_ACTIVE, every 2 minutes
    telemetry_dir = tmp_path / "warehouse_telemetry"
    last = telemetry_dir / f"cluster=c1/day={DAY}/samples_5_0.parquet"
    series = (
        f"select distinct s.node, s.gpu_index, s.step_ms from '{last}' as r "
        f"join '{telemetry_dir}/quality/day={DAY}/sample_series.parquet' as s "
        "on r.series_key = series_key(s.cluster, s.node, s.gpu_index) order by all limit 1"
    )
    assert prepare_connection(duckdb.connect()).sql(series).fetchall() == [("n05", 0, 60_000)]


def test_a_series_whose_metric_waits_for_the_clusters_step_waits_whole(tmp_path, monkeypatch):
    # n02 GPU 0 has GPU_UTIL every 30 s from 08:00 to 10:00 and GR_ENGINE_ACTIVE at 08:00:00,
    # :10, :20 and :30 only: its GPU_UTIL rows of 08:00-09:00 are superseded, those of
    # 09:00-10:00 its samples (a step of their own, 30 s), and GR_ENGINE_ACTIVE's four samples
    # take the cluster's step. n01 and n03 are sampled every 120 s. In chunks of 200 rows, n03
    # is the second chunk's: n02 waits for it whole (both metrics, written once), and its
    # GPU_UTIL step counts once among the cluster's: the lower median of 120 (n01), 30 (n02)
    # and 120 s (n03) is 120 s (counted twice, 30 s)
    folder = tmp_path / "landing/telemetry/c1"
    folder.mkdir(parents=True)
    rows = [
        (MIDNIGHT + dt.timedelta(hours=8, seconds=seconds), node, 0, 50.0, None)
        for node, every_s in (("n01", 120), ("n02", 30), ("n03", 120))
        for seconds in range(0, 7200, every_s)
    ]
    _write(folder / "a.parquet", rows)
    _write(folder / "b.parquet", [
        (MIDNIGHT + dt.timedelta(hours=8, seconds=seconds), "n02", 0, 40.0,
         "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        for seconds in (0, 10, 20, 30)
    ])  # fmt: skip
    whole = rolled_up(tmp_path, 1_000_000, monkeypatch)
    counts, files = rolled_up(tmp_path, 200, monkeypatch)
    assert files["samples files"] == ["samples_0_0.parquet", "samples_1_0.parquet"]
    # 60 + 60 samples of n01 and n03, n02's 120 GPU_UTIL and 4 GR_ENGINE_ACTIVE samples
    assert counts == whole[0] == {"2026-11-02": {"samples": 244, "rejected": 0, "files": 2}}
    for name in files:
        if not name.endswith(" files"):
            assert files[name] == whole[1][name], name
    # read, loaded, rejected, folded: n02's 120 GPU_UTIL rows of 08:00-09:00 superseded
    assert [row[2:7] for row in files["sample_file_counts.parquet"]] == [
        ("telemetry/c1/a.parquet", 360, 360, 0, 120),
        ("telemetry/c1/b.parquet", 4, 4, 0, 0),
    ]
    # node, metric: step, samples, covered ms. n02's GR_ENGINE_ACTIVE samples cover the 10 s to
    # the next three times, then the cluster's step (to GPU_UTIL's 09:00 sample, an hour on)
    series = {(row[3], row[5]): row[6:9] for row in files["sample_series.parquet"]}
    assert series == {
        ("n01", "canonical util_pct"): (120_000, 60, 7_200_000),
        ("n02", "canonical util_pct"): (30_000, 120, 3_600_000),
        ("n02", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"): (120_000, 4, 150_000),
        ("n03", "canonical util_pct"): (120_000, 60, 7_200_000),
    }


def threads_of_steps(monkeypatch) -> dict[str, set[str]]:
    """The threads that read chunks (the day_samples statement) and that write their files
    (the samples COPY), recorded as the rollup runs."""
    threads: dict[str, set[str]] = {"read": set(), "write": set()}
    create_table, copy = telemetry.create_table, telemetry._copy

    def recorded_create_table(con, table, name, *args, **kwargs):
        if name == "rollup/day_samples":
            threads["read"].add(threading.current_thread().name)
        return create_table(con, table, name, *args, **kwargs)

    def recorded_copy(con, name, *args):
        if name == "rollup/gpu_sample_rollup":
            threads["write"].add(threading.current_thread().name)
        return copy(con, name, *args)

    monkeypatch.setattr(telemetry, "create_table", recorded_create_table)
    monkeypatch.setattr(telemetry, "_copy", recorded_copy)
    return threads


def test_a_day_alone_writes_a_chunk_while_it_reads_the_next(tmp_path, monkeypatch):
    # a day rolled up alone writes each chunk's files on a thread of its own (ChunkWriter);
    # days rolled up at once each write theirs on their own thread (the demo test above
    # checks their rows)
    messy_site(tmp_path)
    threads = threads_of_steps(monkeypatch)
    rolled_up(tmp_path, 500, monkeypatch)
    assert len(threads["read"]) == len(threads["write"]) == 1
    assert threads["read"] != threads["write"]
    second_day = tmp_path / "landing/telemetry/c1/c.parquet"
    _write(second_day, [(MIDNIGHT + dt.timedelta(days=1, hours=h), "n01", 0, 50.0, None)
                        for h in range(2, 12)])  # fmt: skip
    threads = threads_of_steps(monkeypatch)
    chargeback = resource_for(tmp_path)
    telemetry.roll_up_days(
        chargeback, load_catalog(catalog_dir(tmp_path)), [DAY, DAY + dt.timedelta(days=1)]
    )
    assert len(threads["read"]) == 2
    assert threads["write"] == threads["read"]


@pytest.mark.parametrize("failing", ["writing chunk 2", "reading chunk 3"])
def test_a_chunk_that_fails_fails_the_day_and_leaves_nothing(tmp_path, monkeypatch, failing):
    # the writer's thread writes chunk 2 while the day's cursor reads chunk 3: a failure on
    # either side fails the day once the other is done, and nothing of the day is published
    messy_site(tmp_path)
    chargeback = resource_for(tmp_path)
    monkeypatch.setattr(telemetry, "CHUNK_SAMPLES", 500)
    copy, create_table = telemetry._copy, telemetry.create_table
    chunks_read = []

    def failing_copy(con, name, params, target):
        if failing == "writing chunk 2" and target.name == "hours_2_0.parquet":
            raise duckdb.IOException("disk full")
        return copy(con, name, params, target)

    def failing_create_table(con, table, name, *args, **kwargs):
        if name == "rollup/day_samples":
            chunks_read.append(table)
            if failing == "reading chunk 3" and len(chunks_read) == 4:
                raise duckdb.IOException("disk full")
        return create_table(con, table, name, *args, **kwargs)

    monkeypatch.setattr(telemetry, "_copy", failing_copy)
    monkeypatch.setattr(telemetry, "create_table", failing_create_table)
    with pytest.raises(duckdb.IOException, match="disk full"):
        telemetry.roll_up_days(chargeback, load_catalog(catalog_dir(tmp_path)), [DAY])
    folder = chargeback.telemetry_dir
    assert not list(folder.glob("cluster=*")) and not list(folder.glob("quality"))
    assert not list((folder / ".staging").iterdir())
    # a run after it rolls the day up whole
    monkeypatch.setattr(telemetry, "_copy", copy)
    monkeypatch.setattr(telemetry, "create_table", create_table)
    counts = telemetry.roll_up_days(chargeback, load_catalog(catalog_dir(tmp_path)), [DAY])
    assert counts == {"2026-11-02": {"samples": 2944, "rejected": 5, "files": 2}}


def test_a_day_with_a_node_name_in_white_space_is_one_chunk(tmp_path, monkeypatch):
    # ' n07' is n07's series (names are trimmed): a chunk read by the names as written could
    # split it, so the day is read whole
    messy_site(tmp_path, odd_node=" n07")
    counts, files = rolled_up(tmp_path, 500, monkeypatch)
    assert files["samples files"] == ["samples_0_0.parquet"]
    assert counts == {"2026-11-02": {"samples": 2944, "rejected": 5, "files": 2}}


@pytest.mark.parametrize(
    ("chunk_samples", "cuts"),
    [
        (10_000, []),
        (2_000, ["n08"]),  # 1,570 of 3,077 rows before n08
        # a cut where the rows so far reach the next seventh: 483 before n03 (no node, '',
        # n01, n02 with its GPU -1), ... 2,597 before n11; n11 and n12 (721) are the last
        (500, ["n03", "n05", "n07", "n09", "n11"]),
    ],
)
def test_chunks_are_cut_between_nodes_about_evenly(tmp_path, monkeypatch, chunk_samples, cuts):
    messy_site(tmp_path)
    files = sorted(str(p) for p in (tmp_path / "landing/telemetry/c1").glob("*.parquet"))
    params = {"files": files, "day_start": MIDNIGHT, "day_end": MIDNIGHT + dt.timedelta(days=1)}
    monkeypatch.setattr(telemetry, "CHUNK_SAMPLES", chunk_samples)
    bounds = [None, *cuts, None]
    assert telemetry.node_chunks(duckdb.connect(), params, 3_077) == list(
        itertools.pairwise(bounds)
    )


def test_the_demo_sites_days_in_chunks_write_what_they_write_in_one(tmp_path, monkeypatch):
    # two clusters (DCGM with GPU_UTIL superseded by GR_ENGINE_ACTIVE, nvidia-smi, Kubernetes)
    from simulator.demo import generate_demo

    generate_demo(tmp_path, month="2026-11", seed=7, small=True)
    days = [dt.date(2026, 11, 1), dt.date(2026, 11, 15), dt.date(2026, 11, 30)]
    written = []
    for chunk_samples in (1_000_000, 15_000):
        monkeypatch.setattr(telemetry, "CHUNK_SAMPLES", chunk_samples)
        chargeback = resource_for(tmp_path)
        counts = telemetry.roll_up_days(chargeback, chargeback.catalog(), days)
        folder = chargeback.telemetry_dir
        rows = {
            kind: duckdb.execute(
                f"select * from read_parquet('{folder}/cluster=*/day=*/{kind}_*.parquet', "
                "hive_partitioning = true) order by all"
            ).fetchall()
            for kind in ("samples", "hours")
        }
        for path in sorted(folder.glob("quality/day=*/*.parquet")):
            rows[path.relative_to(folder).as_posix()] = duckdb.execute(
                f"select * from '{path}'"
            ).fetchall()
        files = len(list(folder.glob("cluster=*/day=*/samples_*.parquet")))
        written.append((files, rows))
        assert len(rows["samples"]) == sum(day["samples"] for day in counts.values())
    (whole_files, whole), (chunked_files, chunked) = written
    # 66,816 rows a day in chunks of about 15,000: five, each of one cluster's nodes
    assert (whole_files, chunked_files) == (6, 15)
    assert len(whole["samples"]) > 50_000  # about 20,000 a day
    assert chunked == whole


def test_a_clusters_folder_names_it_as_duckdbs_partitions_do(tmp_path):
    # each chunk writes its clusters' files itself (not through COPY ... PARTITION_BY): a
    # cluster named with a space, '=' and a non-ASCII letter reads back as it is written
    clusters = ["plain-1", "lab a=1", "Zürich"]
    for cluster in clusters:
        folder = tmp_path / "landing/telemetry" / cluster
        folder.mkdir(parents=True)
        _write(folder / "a.parquet", [(MIDNIGHT + dt.timedelta(hours=8), "n1", 0, 50.0, None)])
    chargeback = resource_for(tmp_path)
    telemetry.roll_up_days(chargeback, load_catalog(catalog_dir(tmp_path)), [DAY])
    out = chargeback.telemetry_dir
    rows = duckdb.execute(
        f"select cluster, day, ts from read_parquet('{out}/cluster=*/day=*/samples_*.parquet') "
        "order by cluster"
    ).fetchall()
    assert rows == [
        (cluster, DAY, MIDNIGHT + dt.timedelta(hours=8)) for cluster in sorted(clusters)
    ]
    partitioned = tmp_path / "partitioned"
    duckdb.execute(
        f"copy (select unnest($clusters) as cluster, 1 as v) to '{partitioned}' "
        "(format parquet, partition_by (cluster))",
        {"clusters": clusters},
    )
    assert sorted(p.name for p in out.glob("cluster=*")) == sorted(
        p.name for p in partitioned.iterdir()
    )
