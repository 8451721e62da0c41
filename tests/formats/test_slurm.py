"""The Slurm `sacct --parsable2` reader on real Open XDMoD exports and on hand-made ugly rows.

Fixtures: tests/fixtures/xdmod-slurm/ (Open XDMoD test artifacts, LGPL-3.0, see SOURCE.txt).
Expected counts come from the files themselves with shell tools, shown next to each number
(run from tests/fixtures/xdmod-slurm/; the default field order puts AllocTRES at $23, State
at $17, NodeList at $25; `mawk` with TZ=UTC for the GPU-hours).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from pipelines.catalog import ClusterSettings
from pipelines.defs.ingest.assets import catalog as catalog_step
from pipelines.defs.ingest.assets import catalog_account_tenants, scheduler_exports
from pipelines.defs.ingest.loading import RAW_COLUMNS, write_node_lists
from pipelines.defs.ingest.tables import write_table
from pipelines.defs.resources import prepare_connection
from pipelines.formats import registered_formats, slurm
from pipelines.landing import LandingError, discover
from pipelines.sql import create_table
from tests.conftest import month_run, query, write

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures/xdmod-slurm"
CASES = FIXTURES / "parser-cases"
UTC = ClusterSettings()


def rows_of(path: Path, settings: ClusterSettings = UTC) -> list[dict]:
    return list(slurm.read_rows(path, settings))


def pick(row: dict, *names: str) -> tuple:
    return tuple(row[name] for name in names)


def xdmod_line(alloc_tres: str) -> str:
    """accounting-logs.log line 3 (a job that ran, headerless) with another AllocTRES."""
    base = (CASES / "accounting-logs.log").read_text(encoding="utf-8").splitlines()[2]
    values = base.split("|")
    values[slurm.DEFAULT_FIELDS.index("alloctres")] = alloc_tres
    return "|".join(values)


# --- Open XDMoD's parser cases -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("alloc_tres", "expected"),
    json.loads((CASES / "alloc-tres-gpu-count.json").read_text(encoding="utf-8")),
)
def test_gpu_count_of_every_xdmod_alloc_tres_pair(tmp_path, alloc_tres, expected):
    path = write(tmp_path / "jobs.log", xdmod_line(alloc_tres) + "\n")
    [row] = rows_of(path)
    assert row["parse_error"] is None
    assert row["gpus"] == str(expected)
    assert slurm.gpu_count(alloc_tres)[0] == expected


SHARDED = ClusterSettings(
    sharing=[{"nodes": "s[1-4]", "mode": "shard", "replicas": 4},
             {"nodes": "t*", "mode": "shard", "replicas": 2}],
    mig_profiles={"1g.6gb": "1/4"},
)  # fmt: skip


@pytest.mark.parametrize(
    ("tres", "expected"),
    [
        ("cpu=4,gres/gpu:a100=4,gres/gpu=4", (4, "a100", 0)),
        # MIG: the untyped total counts instances; the typed profiles decide
        ("cpu=1,gres/gpu=1,gres/gpu:1g.10gb=1", (Fraction(1, 7), None, 0)),
        ("gres/gpu=3,gres/gpu:1g.10gb=1,gres/gpu:3g.40gb=2", (1, None, 0)),
        ("gres/gpu=2,gres/gpu:nvidia_a100_3g.40gb=2", (Fraction(6, 7), "nvidia_a100", 0)),
        ("gres/gpu:a100=1,gres/gpu:a100_2g.20gb=1,gres/gpu=2", (Fraction(9, 7), "a100", 0)),
        ("gres/gpu=1,gres/gpu:7g.80gb=1", (1, None, 0)),
        ("gres/gpu=1,gres/gpu:1g.6gb=1", (Fraction(1, 4), None, 0)),  # the catalog's table
        # shards are counted apart, typed or not, once
        ("cpu=2,gres/shard=2", (0, None, 2)),
        ("gres/shard:a100=3,gres/shard=3", (0, None, 3)),
        ("gres/shard:a100=1,gres/shard:h100=2", (0, None, 3)),
    ],
)  # fmt: skip
def test_gpu_equivalents_of_mig_slices_and_shards(tres, expected):
    assert slurm.gpu_count(tres, SHARDED) == expected


@pytest.mark.parametrize(
    ("start", "tres", "nodes", "gpus", "error"),
    [
        ("2026-11-02T00:00:00", "gres/shard=2", "s1", "0.5", None),
        ("2026-11-02T00:00:00", "gres/shard=2", "s[1-2]", "0.5", None),
        ("2026-11-02T00:00:00", "gres/shard=1,gres/gpu=1", "t1", "1.5", None),
        ("2026-11-02T00:00:00", "gres/shard=2", "g1", None,
         "field alloctres: gres/shard=2 on node g1, which no sharing pool of the cluster holds "
         "(settings.yaml clusters: <cluster>: sharing)"),
        ("2026-11-02T00:00:00", "gres/shard=2", "s1,t1", None,
         "field alloctres: gres/shard=2 over pools of [2, 4] replicas: a job's shards must be "
         "of one size"),
        # pending: the cluster's shard pools decide, if they agree
        ("Unknown", "gres/shard=2", "None assigned", None,
         "field reqtres: gres/shard=2 over pools of [2, 4] replicas: a job's shards must be of "
         "one size"),
        # shards on a hostlist that is none: python-hostlist's own error once ended the load
        ("2026-11-02T00:00:00", "gres/shard=2", "s[1-", None,
         "field nodes: 's[1-' is not a hostlist"),
        ("2026-11-02T00:00:00", "gres/shard=2", "s[1-9999999]", None,
         "field nodes: 's[1-9999999]' is not a hostlist"),
    ],
)  # fmt: skip
def test_shards_are_a_fraction_of_the_nodes_gpu(tmp_path, start, tres, nodes, gpus, error):
    path = write(
        tmp_path / "jobs.log",
        "JobID|Account|Start|End|State|ReqTRES|AllocTRES|NodeList\n"
        f"7|phys|{start}|2026-11-02T04:00:00|COMPLETED|{tres}|{tres}|{nodes}\n",
    )
    [row] = rows_of(path, SHARDED)
    assert (row["gpus"], row["parse_error"]) == (gpus, error)


@pytest.mark.parametrize(
    ("tres", "gpus", "error"),
    [
        ("gres/gpu=1,gres/gpu:a100_3g.40gb=1", repr(3 / 7), None),
        # once a whole GPU (min(9/7, 1)) and nothing (0/7): a charge no hardware gave
        ("gres/gpu=1,gres/gpu:a100_9g.99gb=1", None,
         "field alloctres: gres/gpu:a100_9g.99gb: unknown MIG profile '9g.99gb': NVIDIA's are "
         "1g to 7g with 1 to 288 GB (declare any other in rates.yaml mig_profiles)"),
        ("gres/gpu=1,gres/gpu:0g.5gb=1", None,
         "field alloctres: gres/gpu:0g.5gb: unknown MIG profile '0g.5gb': NVIDIA's are 1g to 7g "
         "with 1 to 288 GB (declare any other in rates.yaml mig_profiles)"),
    ],
)  # fmt: skip
def test_an_unknown_mig_profile_rejects_the_job_naming_the_field(tmp_path, tres, gpus, error):
    path = write(
        tmp_path / "jobs.log",
        "JobID|Account|Start|End|State|ReqTRES|AllocTRES|NodeList\n"
        f"7|phys|2026-11-02T00:00:00|2026-11-02T04:00:00|COMPLETED|{tres}|{tres}|g1\n",
    )
    [row] = rows_of(path)
    assert (row["gpus"], row["parse_error"]) == (gpus, error)


def test_accounting_logs_case():
    rows = rows_of(CASES / "accounting-logs.log")
    names = ("line", "job_id", "record_type", "account", "user", "queue", "qos", "gpus",
             "gpu_model", "state", "exit_code", "submit_time", "start_time",
             "end_time")  # fmt: skip
    assert [pick(r, *names) for r in rows] == [
        (1, "4103947", "job", "anon", "unknown", "general-compute", "qos", "0", None,
         "TIMEOUT", "1:0", "2015-06-26T13:57:00", "2015-06-28T02:55:50", "2015-07-01T02:55:50"),
        (2, "4107166", "job", "dspumpkins", "hanx", "general-compute", "qos", "0", None,
         "CANCELLED by 102216", "0:0", "2015-06-26T19:51:25", "2015-06-28T15:14:49",
         "2015-07-01T13:17:53"),
        (3, "4107219", "job", "anonacct", "anonuser", "general-compute", "qos", "0", None,
         "COMPLETED", "0:0", "2015-06-26T20:22:22", "2015-06-30T12:04:04", "2015-07-01T02:04:53"),
        # empty Partition; AllocTRES gres/gpu=2 with an empty ReqTRES (Open XDMoD: ngpus 2)
        (4, "5692623", "job", "ccr", "xms", None, "qos", "2", None, "COMPLETED", "0:0",
         "2016-08-01T06:01:08", "2016-08-01T07:04:09", "2016-08-01T07:04:09"),
    ]  # fmt: skip
    assert rows[0]["nodes"] == (
        "d07n07s02,d07n19s02,d07n25s01,d07n28s01,d07n29s01,d07n31s02,d07n38s02,d09n04s[01-02],"
        "d09n05s02,d09n06s01,d09n07s01,d09n08s[01-02],d09n09s01,d09n11s[01-02],d09n13s01,"
        "d09n14s01,d09n15s01,d09n16s01,d09n17s01,d09n24s01,d09n25s02,d09n28s01,d09n35s01,"
        "d09n38s02,d13n[03,05,07-08,16]"
    )
    assert rows[3]["nodes"] == "cpn-k16-35-01,cpn-k16-37-01"
    assert all(r["parse_error"] is None for r in rows)


def test_job_array_case_keeps_slurm_ids_as_shown():
    rows = rows_of(CASES / "accounting-logs-with-job-arrays.log")
    assert [pick(r, "job_id", "record_type", "gpus", "parse_error") for r in rows] == [
        ("4103947_100", "job", "0", None),
        ("4103947_[1-3]", "job", "0", None),
        ("4103947_[1,5]", "job", "0", None),
        ("4103947_[9-11,20]", "job", "0", None),
        ("4103947_[91,100-102]", "job", "0", None),
        ("4103947_[9-11,13,16-20]", "job", "0", None),
    ]


def test_non_ended_and_unknown_state_cases_pass_the_raw_state_and_times():
    names = ("job_id", "state", "start_time", "end_time", "gpus", "parse_error")
    assert [pick(r, *names) for r in rows_of(CASES / "non-ended-job-state.log")] == [
        # a job not ended has no end, whatever sacct shows: the pipeline ends it at export
        ("3451067", "RUNNING", "2020-06-30T19:24:08", None, "0", None),
        ("3483276", "PENDING", "Unknown", None, "0", None),
    ]
    assert [pick(r, *names) for r in rows_of(CASES / "unknown-job-state.log")] == [
        ("3451067", "FOO", "2020-06-30T19:24:08", "2020-06-30T19:24:08", "0", None),
        ("3483276", "BAR", "Unknown", "2020-07-01T15:28:17", "0", None),
    ]


def test_utf8_multibyte_names_survive():
    [row] = rows_of(CASES / "utf8-multibyte-chars.log")
    assert row["raw"].endswith("|d07n07s02|aàb")
    assert pick(row, "job_id", "nodes", "parse_error") == ("4103947", "d07n07s02", None)


def staged(files: dict[str, list[dict]], columns: str) -> list[tuple]:
    """The reader's rows typed by sql/staging/stg_job_records.sql, as the pipeline runs it."""
    con = prepare_connection(duckdb.connect())
    con.execute("create table catalog_clusters (cluster varchar, scheduler_timezone varchar)")
    names = ("cluster", "file", "line", "raw", "parse_error", *RAW_COLUMNS["jobs"])
    schema = pa.schema([(c, pa.int64() if c == "line" else pa.string()) for c in names])
    rows = [
        {**{c: row.get(c) for c in names}, "cluster": "c", "file": file}
        for file, file_rows in files.items()
        for row in file_rows
    ]
    write_table(con, "raw_jobs", rows, schema)
    write_node_lists(con)
    con.execute("create table catalog_nodes (cluster varchar, gpus integer)")
    create_table(con, "stg_job_records", "staging/stg_job_records")
    return con.execute(f"select {columns} from stg_job_records order by file, line").fetchall()


def test_parser_cases_through_the_staging_sql():
    """Unknown states (FOO, BAR) are rejected with the field named, `Unknown` start is NULL,
    `CANCELLED by` is CANCELLED."""
    files = {
        name: rows_of(CASES / f"{name}.log")
        for name in ("accounting-logs", "non-ended-job-state", "unknown-job-state")
    }
    assert staged(files, "file, line, state, start_at is null, reject_reason") == [
        ("accounting-logs", 1, "TIMEOUT", False, None),
        ("accounting-logs", 2, "CANCELLED", False, None),
        ("accounting-logs", 3, "COMPLETED", False, None),
        ("accounting-logs", 4, "COMPLETED", False, None),
        ("non-ended-job-state", 1, "RUNNING", False, None),
        ("non-ended-job-state", 2, "PENDING", True, None),
        ("unknown-job-state", 1, None, False, "field state: 'FOO' is not a known state"),
        ("unknown-job-state", 2, None, True, "field state: 'BAR' is not a known state"),
    ]


def test_array_records_that_are_not_pending_stay_jobs_of_their_own():
    """Only a PENDING collapsed record gives way to its tasks: Open XDMoD's array case lists
    TIMEOUT records `4103947_[91,100-102]` next to its task `4103947_100`, each its own job."""
    rows = rows_of(CASES / "accounting-logs-with-job-arrays.log")
    assert staged({"arrays": rows}, "job_id, state, record_rank, reject_reason") == [
        ("4103947_100", "TIMEOUT", 1, None),
        ("4103947_[1-3]", "TIMEOUT", 1, None),
        ("4103947_[1,5]", "TIMEOUT", 1, None),
        ("4103947_[9-11,20]", "TIMEOUT", 1, None),
        ("4103947_[91,100-102]", "TIMEOUT", 1, None),
        ("4103947_[9-11,13,16-20]", "TIMEOUT", 1, None),
    ]


# --- the whole reference exports -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "lines", "states", "none_assigned", "gpu_jobs", "gpus"),
    [
        (
            "phillips.log",
            4285,  # wc -l < phillips.log
            # awk -F'|' '{split($17,s," "); print s[1]}' phillips.log | sort | uniq -c
            {"CANCELLED": 243, "COMPLETED": 2324, "FAILED": 1717, "TIMEOUT": 1},
            239,  # awk -F'|' '$25=="None assigned"' phillips.log | wc -l
            2,  # awk -F'|' '$23 ~ /gres\/gpu/' phillips.log | wc -l  (both gres/gpu=2)
            4,  # grep -o 'gres/gpu=[0-9]*' phillips.log | cut -d= -f2 | paste -sd+ | bc
        ),
        (
            "pozidriv.log",
            11704,  # wc -l < pozidriv.log
            # awk -F'|' '{split($17,s," "); print s[1]}' pozidriv.log | sort | uniq -c
            {"CANCELLED": 468, "COMPLETED": 10134, "FAILED": 1007, "PREEMPTED": 86, "TIMEOUT": 9},
            419,  # awk -F'|' '$25=="None assigned"' pozidriv.log | wc -l
            0,  # awk -F'|' '$23 ~ /gres\/gpu/' pozidriv.log | wc -l
            0,
        ),
    ],
)
def test_every_line_of_a_reference_export_is_a_row(
    name, lines, states, none_assigned, gpu_jobs, gpus
):
    rows = rows_of(FIXTURES / name)
    assert len(rows) == lines
    assert [r["line"] for r in rows] == list(range(1, lines + 1))
    assert Counter(r["state"].split(" ")[0] for r in rows) == states
    # awk -F'|' '$1 ~ /\./' FILE | wc -l  -> 0 step rows in both files
    assert Counter(r["record_type"] for r in rows) == {"job": lines}
    # awk -F'|' 'NF != 26' FILE | wc -l  -> 0 lines of a wrong width
    assert [r for r in rows if r["parse_error"] is not None] == []
    assert sum(r["nodes"] is None for r in rows) == none_assigned
    assert sum(r["gpus"] != "0" for r in rows) == gpu_jobs
    assert sum(int(r["gpus"]) for r in rows) == gpus
    assert all(r["gpu_model"] is None for r in rows)  # untyped gres/gpu only
    # the raw line is kept whole
    assert rows[0]["raw"] == (FIXTURES / name).read_text(encoding="utf-8").split("\n")[0]


def test_the_gpu_jobs_of_phillips():
    rows = [r for r in rows_of(FIXTURES / "phillips.log") if r["gpus"] != "0"]
    names = ("line", "job_id", "account", "user", "queue", "qos", "gpus", "nodes", "start_time",
             "end_time", "state")  # fmt: skip
    # grep -n 'gres/gpu' phillips.log
    assert [pick(r, *names) for r in rows] == [
        (1, "163485", "chaff", "noror", "focaccia", "chestnut", "2", "cpn-f11-31",
         "2016-12-22T07:15:13", "2017-01-01T20:42:19", "CANCELLED by 380693"),
        (4269, "196835", "chaff", "noror", "focaccia", "chestnut", "2", "cpn-f11-31",
         "2017-01-01T21:44:50", "2017-01-01T21:45:07", "COMPLETED"),
    ]  # fmt: skip


# --- the ugly rows -----------------------------------------------------------------------------

HEADER = (
    "JobID|JobIDRaw|Cluster|Partition|QOS|Account|User|Submit|Start|End|ExitCode|State|"
    "ReqTRES|AllocTRES|NodeList|JobName"
)
T0, T1, T2 = "2016-12-01T10:00:00", "2016-12-01T11:00:00", "2016-12-01T13:00:00"


def line(job_id, state="COMPLETED", req="", alloc="", nodes="gpu-[01-04,07]", start=T1, end=T2,
         user="ann", partition="gpu", name="train"):  # fmt: skip
    return "|".join([job_id, job_id, "c", partition, "normal", "chaff", user, T0, start, end,
                     "0:0", state, req, alloc, nodes, name])  # fmt: skip


UGLY = [
    HEADER,
    line("1001", req="cpu=4,gres/gpu=4", alloc="billing=4,cpu=4,gres/gpu:a100=4,gres/gpu=4"),
    line("1001.batch", alloc="cpu=4,gres/gpu:a100=4,gres/gpu=4", user="", partition=""),
    line("1001.extern", alloc="cpu=4,gres/gpu:a100=4,gres/gpu=4", user="", partition=""),
    line("1001.0", alloc="cpu=4,gres/gpu=4", user="", partition=""),
    "",
    line("1002_4", alloc="cpu=2,gres/gpu:h100=2", nodes="cpn-f13-03-[01-02]"),
    line(
        "1002_[5-9%2]",
        "PENDING",
        req="cpu=1,gres/gpu:h100=2",
        nodes="None assigned",
        start="Unknown",
        end="Unknown",
    ),  # fmt: skip
    line("1003+0", alloc="gres/gpu=1", nodes="n1"),
    line("1003+1", alloc="gres/gpu:v100=1,gres/gpu:t4=1", nodes="n2"),
    line("1003+1.0", alloc="gres/gpu:v100=1,gres/gpu:t4=1", nodes="n2", user=""),
    line("1004", "CANCELLED by 1234", req="gres/gpu=8", nodes="None assigned", start=T1, end=T1),
    line("1005", alloc="cpu=1,gres/gpumem=40G,gres/gpu=1,gres/gpu:a100=0", nodes="n3"),
    "   ",
    "1006|1006|c|gpu|normal|chaff|ann",
    HEADER.upper(),  # the header again (dumps appended to one file): no row
    line("abc"),
    line("1007", alloc="gres/gpu=two"),
    line("1008", alloc="cpu=8,mem=4G", nodes="n4", user="zoë"),
    line("1009", alloc="gres/gpu=1", nodes="n5") + "|",  # `sacct --parsable` ends with '|'
    line("1010", alloc="gres/gpu=²"),
    line(
        "1011",
        "CANCELLED by 1234",
        alloc="cpu=8,gres/gpu=2",
        nodes="None assigned",
        start=T1,
        end=T1,
    ),  # fmt: skip
    line(
        "1012",
        "PENDING",
        alloc="gres/gpu:a100=3",
        nodes="None assigned",
        start="None",
        end="Unknown",
    ),  # fmt: skip
]


def test_ugly_rows(tmp_path):
    data = "\n".join(UGLY).encode("utf-8") + b"\n"
    data = data.replace(b"|train\n", b"|tr\xffain\r\n", 1)  # a bad byte and a CRLF, line 2
    path = tmp_path / "sacct.log"
    path.write_bytes(data)
    rows = rows_of(path)
    names = ("line", "job_id", "record_type", "gpus", "gpu_model", "nodes", "user", "queue",
             "parse_error")  # fmt: skip
    nodes = "gpu-[01-04,07]"
    assert [pick(r, *names) for r in rows] == [
        (2, "1001", "job", "4", "a100", nodes, "ann", "gpu", None),  # total counted once
        (3, "1001.batch", "step", "4", "a100", nodes, None, None, None),
        (4, "1001.extern", "step", "4", "a100", nodes, None, None, None),
        (5, "1001.0", "step", "4", None, nodes, None, None, None),
        (7, "1002_4", "job", "2", "h100", "cpn-f13-03-[01-02]", "ann", "gpu", None),
        # never started, nothing allocated: the requested GPUs (pending demand)
        (8, "1002_[5-9%2]", "job", "2", "h100", None, "ann", "gpu", None),
        (9, "1003+0", "job", "1", None, "n1", "ann", "gpu", None),
        (10, "1003+1", "job", "2", "t4+v100", "n2", "ann", "gpu", None),
        (11, "1003+1.0", "step", "2", "t4+v100", "n2", None, "gpu", None),
        # cancelled while pending (Slurm sets Start = End): never started, the request
        (12, "1004", "job", "8", None, None, "ann", "gpu", None),
        (13, "1005", "job", "1", None, "n3", "ann", "gpu", None),
        (15, "1006", "job", None, None, None, None, None, "expected 16 fields, found 7"),
        (17, "abc", "job", None, None, None, None, None,
         "field jobid: 'abc' is not a Slurm job id"),
        (18, "1007", "job", None, None, nodes, "ann", "gpu",
         "field alloctres: 'gres/gpu=two' is not a GPU count"),
        (19, "1008", "job", "0", None, "n4", "zoë", "gpu", None),
        (20, "1009", "job", "1", None, "n5", "ann", "gpu", None),
        (21, "1010", "job", None, None, nodes, "ann", "gpu",
         "field alloctres: 'gres/gpu=²' is not a GPU count"),
        # older Slurm repeats the request in AllocTRES of a job that never ran: the request
        (22, "1011", "job", "2", None, None, "ann", "gpu", None),
        (23, "1012", "job", "3", "a100", None, "ann", "gpu", None),
    ]  # fmt: skip
    assert rows[0]["raw"].endswith("|gpu-[01-04,07]|tr\ufffdain")
    assert pick(rows[0], "state", "exit_code", "submit_time", "start_time", "end_time") == (
        "COMPLETED", "0:0", T0, T1, T2
    )  # fmt: skip
    assert pick(rows[9], "state", "start_time", "end_time") == ("CANCELLED by 1234", None, T1)


def test_ugly_rows_through_the_staging_sql(tmp_path):
    """Only the malformed lines are rejected; steps load but never rank as their job; jobs that
    never ran load with no GPU-hours to hold (no start: a job cancelled while pending too)."""
    path = write(tmp_path / "sacct.log", "\n".join(UGLY) + "\n")
    result = staged({"sacct.log": rows_of(path)}, "line, record_type, record_rank, reject_reason")
    rejected = {
        15: "expected 16 fields, found 7",
        17: "field jobid: 'abc' is not a Slurm job id",
        18: "field alloctres: 'gres/gpu=two' is not a GPU count",
        21: "field alloctres: 'gres/gpu=²' is not a GPU count",
    }
    steps = {3, 4, 5, 11}
    lines = [2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 15, 17, 18, 19, 20, 21, 22, 23]
    assert result == [
        (n, "step" if n in steps else "job",
         None if n in steps or n in rejected else 1, rejected.get(n))
        for n in lines
    ]  # fmt: skip


# --- dumps appended to one file (`sacct -p --format=... >> jobs.log`) ------------------------

STANDARD = (
    "JobID|JobIDRaw|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|"
    "Elapsed|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|Timelimit|NodeList|"
    "JobName"
)
SWAPPED = STANDARD.replace("|Account|Group|GID|User|", "|User|Group|GID|Account|")


def record(job_id: str, first: str, second: str, start: str, end: str, name: str) -> str:
    """A one-GPU job on n1 in either order: `first` in the 6th field, `second` in the 9th."""
    return "|".join([
        job_id, job_id, "tiny", "batch", "normal", first, "g", "1", second, "1", start, start,
        start, end, "01:00:00", "0:0", "COMPLETED", "1", "1", "1", "1G", "cpu=1,gres/gpu=1",
        "cpu=1,gres/gpu=1", "01:00:00", "n1", name,
    ])  # fmt: skip


def hour(day: int, at: int) -> str:
    return f"2026-11-{day:02d}T{at:02d}:00:00"


# A tester's file: a standard `sacct -p` dump, then one with User and Account swapped
CONCATENATED = [
    STANDARD,
    record("901", "alpha", "ann", hour(2, 1), hour(2, 2), "a"),
    record("902", "alpha", "ann", hour(2, 2), hour(2, 3), "a"),
    record("903", "alpha", "ann", hour(2, 3), hour(2, 4), "a"),
    SWAPPED,
    record("904", "ann", "alpha", hour(3, 4), hour(3, 5), "b"),
    record("905", "ann", "alpha", hour(3, 5), hour(3, 6), "b"),
    record("906", "ann", "alpha", hour(3, 6), hour(3, 7), "b"),
]
JOBS_901_TO_906 = [
    (2, "901", "alpha", "ann", hour(2, 1), None),
    (3, "902", "alpha", "ann", hour(2, 2), None),
    (4, "903", "alpha", "ann", hour(2, 3), None),
    (6, "904", "alpha", "ann", hour(3, 4), None),
    (7, "905", "alpha", "ann", hour(3, 5), None),
    (8, "906", "alpha", "ann", hour(3, 6), None),
]


def test_each_header_names_the_fields_of_the_lines_below_it(tmp_path):
    """The second header is no row and no reject: it switches the field order, so jobs
    904-906 keep account alpha and user ann (read in the first order, they were swapped)."""
    path = write(tmp_path / "sacct-concat.log", "\n".join(CONCATENATED) + "\n")
    names = ("line", "job_id", "account", "user", "start_time", "parse_error")
    assert [pick(r, *names) for r in rows_of(path)] == JOBS_901_TO_906
    assert slurm.sniff(path, path.read_text(encoding="utf-8"))


def test_appended_dumps_of_other_widths_and_the_same_header_again(tmp_path):
    """A later dump may have fewer fields (its own --format, any case); a header repeated as
    it was is no row either; a header further down a headerless file names the lines after
    it, the lines before keep the configured order."""
    narrow = "jobid|user|account|start|end|state|alloctres|nodelist"
    path = write(
        tmp_path / "jobs.log",
        "\n".join([
            xdmod_line("gres/gpu=2"),  # headerless, Open XDMoD's order: job 4107219
            STANDARD,
            record("901", "alpha", "ann", hour(2, 1), hour(2, 2), "a"),
            narrow,
            f"907|bob|beta-x|{hour(4, 1)}|{hour(4, 3)}|FAILED|gres/gpu:a100=4|n[1-2]",
            narrow.upper(),
            f"908|bob|beta-x|{hour(4, 3)}|{hour(4, 4)}|COMPLETED|gres/gpu=1|n1",
            "909|bob|beta-x",
        ]) + "\n",
    )  # fmt: skip
    names = ("line", "job_id", "account", "user", "state", "gpus", "gpu_model", "nodes",
             "parse_error")  # fmt: skip
    assert [pick(r, *names) for r in rows_of(path)] == [
        (1, "4107219", "anonacct", "anonuser", "COMPLETED", "2", None,
         "k07n07s01,k08n02s01,k08n05s01,k08n13s01", None),
        (3, "901", "alpha", "ann", "COMPLETED", "1", None, "n1", None),
        (5, "907", "beta-x", "bob", "FAILED", "4", "a100", "n[1-2]", None),
        (7, "908", "beta-x", "bob", "COMPLETED", "1", None, "n1", None),
        (8, "909", None, None, None, None, None, None, "expected 8 fields, found 3"),
    ]  # fmt: skip
    assert slurm.sniff(path, path.read_text(encoding="utf-8"))


def test_a_later_dump_of_more_lines_and_another_width_is_still_recognised(tmp_path):
    """The sniffer reads the lines below each header by that header: a short first dump
    followed by a longer one of another width is a sacct file, not a mostly unfitting one."""
    narrow = "JobID|Account|User|Start|End|State|AllocTRES|NodeList"
    later = [f"{910 + i}|alpha|ann|{hour(5, i)}|{hour(5, i + 1)}|COMPLETED|gres/gpu=1|n1"
             for i in range(4)]  # fmt: skip
    text = "\n".join([STANDARD, CONCATENATED[1], narrow, *later]) + "\n"
    path = write(tmp_path / "jobs.log", text)
    assert slurm.sniff(path, text)
    assert [r["parse_error"] for r in rows_of(path)] == [None] * 5


@pytest.mark.parametrize(
    ("header", "field"),
    [
        (SWAPPED.replace("|AllocTRES|", "|ReqTRES2|"), "alloctres"),
        ("JobID|User|Start|End|State|AllocTRES|NodeList", "account"),
        ("JobID", "account"),
    ],
)
def test_a_later_header_a_job_cannot_be_billed_by_stops_the_load(tmp_path, header, field):
    """As a first line without them is no sacct file at all (test_not_taken_for_sacct), a
    later header without a required field stops the load: one line, file, line and field."""
    path = write(tmp_path / "jobs.log", "\n".join([*CONCATENATED[:4], header, "904|x"]) + "\n")
    with pytest.raises(LandingError) as raised:
        rows_of(path)
    assert str(raised.value) == (
        f"{path}: line 5: field {field}: missing from the sacct header (a job is not billed "
        "without jobid, account, start, end, state, alloctres, nodelist)"
    )


def test_appended_dumps_through_the_load_reconcile(tmp_path):
    """Through the scheduler exports step and the tenant mapping: 6 rows read (the two header
    lines are not rows), 6 loaded, none rejected, every job billed to alpha (not unmapped)."""
    write(tmp_path / "landing/scheduler/tiny/sacct-concat.log", "\n".join(CONCATENATED) + "\n")
    write(
        tmp_path / "catalog/tenants.yaml",
        """
        tenants:
          - {id: alpha, name: Alpha Lab, department: Science, cost_center: CC-1,
             accounts: [alpha]}
        """,
    )
    write(tmp_path / "catalog/rates.yaml", 'rates:\n  - {gpu_model: "*", price_per_gpu_hour: 1}\n')
    con = prepare_connection(duckdb.connect())
    run = month_run(con, tmp_path)
    for step in (catalog_step, scheduler_exports, catalog_account_tenants):
        step.build(run)
    assert con.execute("select file, rows_read from stg_scheduler_files").fetchall() == [
        ("scheduler/tiny/sacct-concat.log", 6)
    ]
    assert con.execute("select count(*) from stg_job_records where reject_reason is not null"
                       ).fetchall() == [(0,)]  # fmt: skip
    assert con.execute(
        """
        select r.line, r.job_id, r.account, r."user", t.tenant_id
        from stg_job_records as r
        left join catalog_account_tenants as t using (account)
        order by r.line
        """
    ).fetchall() == [(line, job, account, user, "alpha")
                     for line, job, account, user, _, _ in JOBS_901_TO_906]  # fmt: skip


def test_headerless_files_follow_the_configured_field_order(tmp_path):
    fields = ["JobID", "State", "Account", "Start", "End", "AllocTRES", "NodeList", "Partition"]
    path = write(tmp_path / "sacct", f"77|FAILED|chaff|{T1}|{T2}|gres/gpu:a100=8|g[1-2]|gpu\n")
    [row] = rows_of(path, ClusterSettings(sacct_fields=fields))
    assert pick(row, "job_id", "state", "account", "start_time", "gpus", "gpu_model", "nodes",
                "queue", "user", "parse_error") == (
        "77", "FAILED", "chaff", T1, "8", "a100", "g[1-2]", "gpu", None, None
    )  # fmt: skip
    # the default (26-field) order does not fit this 8-field line: every row says so
    [row] = rows_of(path)
    assert row["parse_error"] == "expected 26 fields, found 8"
    # an order without AllocTRES cannot be billed: rejected, naming the missing field
    [row] = rows_of(path, ClusterSettings(sacct_fields=[f for f in fields if f != "AllocTRES"]))
    assert (
        row["parse_error"]
        == "field alloctres: not in the sacct field order (settings sacct_fields)"
    )


def test_eligible_time_in_the_default_order_and_by_a_header(tmp_path):
    """Eligible passes through as text like Submit, headerless in Open XDMoD's order ($12) or
    named by a header in any position; `Unknown`/`None` become NULL in SQL (known())."""
    # awk -F'|' '{print NR, $11, $12}' accounting-logs.log: line 2 became eligible a second
    # after its submission, line 4's eligible time is Unknown
    rows = rows_of(CASES / "accounting-logs.log")
    assert [pick(r, "line", "submit_time", "eligible_time", "start_time") for r in rows] == [
        (1, "2015-06-26T13:57:00", "2015-06-26T13:57:00", "2015-06-28T02:55:50"),
        (2, "2015-06-26T19:51:25", "2015-06-26T19:51:26", "2015-06-28T15:14:49"),
        (3, "2015-06-26T20:22:22", "2015-06-26T20:22:22", "2015-06-30T12:04:04"),
        (4, "2016-08-01T06:01:08", "Unknown", "2016-08-01T07:04:09"),
    ]  # fmt: skip
    path = write(
        tmp_path / "jobs.log",
        "JobID|Account|Start|End|State|AllocTRES|NodeList|Eligible|Submit\n"
        f"7|phys|{T1}|{T2}|COMPLETED|gres/gpu=1|n1|{T0}|2016-12-01T09:00:00\n"
        f"8|phys|{T1}|{T2}|COMPLETED|gres/gpu=1|n1|None|2016-12-01T09:00:00\n",
    )
    assert [pick(r, "job_id", "submit_time", "eligible_time", "parse_error")
            for r in rows_of(path)] == [
        ("7", "2016-12-01T09:00:00", T0, None),
        ("8", "2016-12-01T09:00:00", "None", None),
    ]  # fmt: skip
    # a header without Eligible: none, and the record is still read
    [row] = rows_of(write(tmp_path / "old.log", "\n".join([HEADER, line("9")]) + "\n"))
    assert pick(row, "eligible_time", "parse_error") == (None, None)


def test_eligible_time_through_the_staging_sql(tmp_path):
    """Typed in the cluster's zone like Submit; Unknown is NULL; a malformed one rejects its
    row, naming the field (the row keeps its file and line)."""
    path = write(
        tmp_path / "jobs.log",
        "JobID|Account|Submit|Eligible|Start|End|State|AllocTRES|NodeList\n"
        f"7|phys|{T0}|2016-12-01T10:30:00|{T1}|{T2}|COMPLETED|gres/gpu=1|n1\n"
        f"8|phys|{T0}|Unknown|{T1}|{T2}|COMPLETED|gres/gpu=1|n1\n"
        f"9|phys|{T0}|2016-12-01T25:00:00|{T1}|{T2}|COMPLETED|gres/gpu=1|n1\n",
    )
    assert staged({"jobs.log": rows_of(path)}, "file, line, eligible_at, reject_reason") == [
        ("jobs.log", 2, dt.datetime(2016, 12, 1, 10, 30), None),
        ("jobs.log", 3, None, None),
        ("jobs.log", 4, None,
         "field eligible_time: '2016-12-01T25:00:00' is not a timestamp"),
    ]  # fmt: skip


# --- recognition ---------------------------------------------------------------------------


def test_recognised_by_content_whatever_the_extension(tmp_path):
    folder = tmp_path / "landing/scheduler/phillips"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "phillips.log", folder / "phillips.log")
    shutil.copy(CASES / "accounting-logs.log", folder / "dump.psv")
    shutil.copy(CASES / "utf8-multibyte-chars.log", folder / "sacct-noext")
    (folder / "ugly.out").write_text("\n".join(UGLY) + "\n", encoding="utf-8")
    (folder / "header-only.sacct").write_text(HEADER + "\n", encoding="utf-8")
    # `sacct ... > file.txt` is a common way to save a dump: read, not passed over by its name
    shutil.copy(CASES / "accounting-logs.log", folder / "sacct-2026-11.txt")
    (folder / "notes.md").write_text("ignored\n", encoding="utf-8")
    found = discover(tmp_path / "landing", "scheduler")
    assert [(f.name, f.format.name) for f in found] == [
        ("scheduler/phillips/dump.psv", "slurm_sacct"),
        ("scheduler/phillips/header-only.sacct", "slurm_sacct"),
        ("scheduler/phillips/phillips.log", "slurm_sacct"),
        ("scheduler/phillips/sacct-2026-11.txt", "slurm_sacct"),
        ("scheduler/phillips/sacct-noext", "slurm_sacct"),
        ("scheduler/phillips/ugly.out", "slurm_sacct"),
    ]
    assert rows_of(folder / "header-only.sacct") == []


@pytest.mark.parametrize(
    "text",
    [
        "job_id,account,gpus,start_time,end_time,state\n1,a,1,x,y,COMPLETED\n",  # canonical CSV
        '{"kind": "PodList", "items": []}\n',
        "a|b|c|d|e|f|g|h\nx|y|z|1|2|3|4|5\n",  # pipes, but no job ids
        "1|2|3\n4|5|6\n",  # job ids, but too few fields for a job record
        "JobID|State|Start\n1|COMPLETED|2016-12-01T00:00:00\n",  # header without AllocTRES...
        "",
    ],
)
def test_not_taken_for_sacct(tmp_path, text):
    path = tmp_path / "export.log"
    path.write_text(text, encoding="utf-8")
    assert not slurm.sniff(path, text)


def test_a_malformed_first_line_does_not_stop_recognition(tmp_path):
    lines = (FIXTURES / "phillips.log").read_text(encoding="utf-8").split("\n")[:5]
    text = "1|truncated\n" + "\n".join(lines) + "\n"
    path = tmp_path / "phillips.log"
    path.write_text(text, encoding="utf-8")
    assert slurm.sniff(path, text)
    assert [r["parse_error"] for r in rows_of(path)] == ["expected 26 fields, found 2"] + [None] * 5


def test_registered_as_a_scheduler_jobs_format():
    [found] = [f for f in registered_formats() if f.name == "slurm_sacct"]
    assert (found.area, found.kind, found.read_rows) == ("scheduler", "jobs", slurm.read_rows)


# --- end to end ----------------------------------------------------------------------------

# tests/conftest.py imports pipelines.definitions, so the monthly partitions are built (from
# CHARGEBACK_FIRST_MONTH, default 2024-01) before this module runs and setting the variable
# here would change nothing. The months 2016-12 and 2017-01 are materialised in a child
# process that has CHARGEBACK_FIRST_MONTH=2016-01 from its start, with conftest's helper.
_MATERIALISE = """
import sys
from pathlib import Path
from tests.conftest import materialize_month
for month in sys.argv[2:]:
    assert materialize_month(Path(sys.argv[1]), month).success, month
"""


@pytest.fixture(scope="module")
def phillips(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("phillips")
    folder = root / "landing/scheduler/phillips"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "phillips.log", folder / "phillips.log")
    # tenants from the accounts: awk -F'|' '{print $6}' phillips.log | sort -u
    write(
        root / "catalog/tenants.yaml",
        """
        tenants:
          - {id: chaff, name: Chaffinch Lab, department: Biology, cost_center: CC-1,
             accounts: [chaff]}
          - {id: taifl, name: Taifl Group, department: Physics, cost_center: CC-2,
             accounts: [taifl]}
          - {id: aytinis, name: Aytinis Lab, department: Chemistry, cost_center: CC-3,
             accounts: [aytinis]}
        """,
    )
    write(root / "catalog/rates.yaml", 'rates:\n  - {gpu_model: "*", price_per_gpu_hour: 1.00}\n')
    env = {**os.environ, "CHARGEBACK_FIRST_MONTH": "2016-01", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", _MATERIALISE, str(root), "2016-12-01", "2017-01-01"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return root


# GPU-seconds of chaff clipped to a month [A, B) (UTC), from AllocTRES gres/gpu=N:
#   TZ=UTC awk -F'|' 'function t(s){gsub(/[-T:]/," ",s); return mktime(s)}
#     function clip(s,e,a,b){if(s<a)s=a; if(e>b)e=b; return e>s?e-s:0}
#     $6=="chaff" && match($23,/gres\/gpu=[0-9]+/) {n=substr($23,RSTART+9,RLENGTH-9);
#       g+=n*clip(t($13),t($14),t(A),t(B))} END{print g}' phillips.log
#   A=2016-12-01T00:00:00 B=2017-01-01T00:00:00 -> 1675774 s (job 163485: 2 x 837887 s)
#   A=2017-01-01T00:00:00 B=2017-02-01T00:00:00 -> 149112 s (163485: 2 x 74539, 196835: 2 x 17)
@pytest.mark.slow
def test_chaff_gpu_hours_clipped_at_the_month_boundary(phillips):
    rows = query(
        phillips,
        "select billing_month::varchar, sum(allocated_gpu_hours), sum(amount) from job_usage "
        "where cluster = 'phillips' and account = 'chaff' group by all order by all",
    )
    assert rows == [
        ("2016-12-01", pytest.approx(1675774 / 3600, abs=1e-9), Decimal("465.49")),  # 465.4928 h
        # 41.42 h; each job's amount rounded: 149078 s -> 41.41, 34 s -> 0.01
        ("2017-01-01", pytest.approx(149112 / 3600, abs=1e-9), Decimal("41.42")),
    ]
    # no other account held a GPU: awk -F'|' '$23 ~ /gres\/gpu/ {print $6}' -> chaff, chaff
    others = query(
        phillips,
        "select sum(allocated_gpu_hours) from job_usage where account <> 'chaff'",
    )
    assert others == [(0.0,)]


# Jobs of a month in job_usage: held GPUs in it or submitted in it. Every Start and End is
# known (grep -c Unknown phillips.log -> 0) and no job id repeats (cut -d'|' -f1 | sort |
# uniq -d -> none), so per month [A, B):
#   awk -F'|' -v a=A -v b=B '($13<b && $14>a) || ($11>=a && $11<b) {split($17,s," ");
#     print s[1]}' phillips.log | sort | uniq -c
@pytest.mark.slow
def test_job_counts_per_normalised_state(phillips):
    rows = query(
        phillips,
        "select billing_month::varchar, state, count(*) from job_usage "
        "where cluster = 'phillips' group by all order by all",
    )
    assert rows == [
        ("2016-12-01", "CANCELLED", 242),
        ("2016-12-01", "COMPLETED", 2135),
        ("2016-12-01", "FAILED", 1481),
        ("2016-12-01", "TIMEOUT", 1),
        ("2017-01-01", "CANCELLED", 2),
        ("2017-01-01", "COMPLETED", 249),
        ("2017-01-01", "FAILED", 236),
        ("2017-01-01", "TIMEOUT", 1),
    ]


@pytest.mark.slow
def test_every_row_of_the_file_is_loaded_or_rejected(phillips):
    rows = query(
        phillips,
        "select billing_month::varchar, rows_read, rows_loaded, rows_rejected from data_quality "
        "where category = 'file' and subject = 'scheduler/phillips/phillips.log' order by 1",
    )
    # wc -l < phillips.log -> 4285; awk -F'|' 'NF != 26' phillips.log | wc -l -> 0 rejected
    assert rows == [("2016-12-01", 4285, 4285, 0), ("2017-01-01", 4285, 4285, 0)]
    assert all(read == loaded + rejected for _, read, loaded, rejected in rows)
    assert query(phillips, "select count(*) from rejects") == [(0,)]
