"""Bad input never loses or stops more than it must: an absurd row is a reject with file, line
and field, and the month completes (issue 16)."""

from __future__ import annotations

import codecs
import gzip
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import materialize_month, query, write
from tests.e2e.test_tiny_month import build_tiny_month

# slow (quick tier: make test-quick): materialises a month per case; rejects and data
# quality are also given/expect-tested in tests/marts/
pytestmark = pytest.mark.slow

ABSURD_JOBS = [
    # 100,000 GPUs on one node of 2 (nodes.csv): once a 5-minute GPU assignment
    "X1,tiny,alpha,ann,batch,normal,A100,100000,n1,2026-11-03T00:00:00,2026-11-03T00:00:00,"
    "2026-11-03T01:00:00,COMPLETED,0",
    # 10^20 GPUs: once an OverflowError that named no file
    "X2,tiny,alpha,ann,batch,normal,A100,100000000000000000000,n1,2026-11-03T00:00:00,"
    "2026-11-03T00:00:00,2026-11-03T01:00:00,COMPLETED,0",
    # a hostlist that is none (python-hostlist's own error once ended the run)
    "X3,tiny,alpha,ann,batch,normal,A100,1,n[1-,2026-11-03T00:00:00,2026-11-03T00:00:00,"
    "2026-11-03T01:00:00,COMPLETED,0",
    # pending: more GPUs than the cluster has (3) is no demand, a broken record
    "X4,tiny,alpha,ann,batch,normal,A100,4,,2026-11-03T00:00:00,,,PENDING,",
    # a node count that fits stays a job: 2 GPUs on n1 (which holds 2)
    "X5,tiny,alpha,ann,batch,normal,A100,2,n1,2026-11-04T00:00:00,2026-11-04T00:00:00,"
    "2026-11-04T01:00:00,COMPLETED,0",
]


def test_absurd_gpu_counts_and_hostlists_are_rejects_and_the_month_completes(tmp_path):
    build_tiny_month(tmp_path)
    jobs = tmp_path / "landing/scheduler/tiny/jobs.csv"
    jobs.write_text(jobs.read_text() + "\n".join(ABSURD_JOBS) + "\n")
    result = materialize_month(tmp_path, "2026-11-01")
    assert result.success
    assert query(
        tmp_path,
        "select line, reason from rejects where file like '%jobs.csv' and line > 9 order by line",
    ) == [
        (10, "field gpus: 100000 GPUs on 1 node(s), more than the 2 a node holds"),
        (11, "field gpus: 100000000000000000000 GPUs on 1 node(s), more than the 2 a node "
             "holds"),
        (12, "field nodes: 'n[1-' is not a hostlist"),
        (13, "field gpus: 4 GPUs asked for, more than the 3 of cluster tiny"),
    ]  # fmt: skip
    assert query(tmp_path, "select allocated_gpu_hours from job_usage where job_id = 'X5'") == [
        (2.0,)
    ]
    assert query(
        tmp_path, "select rows_read, rows_loaded, rows_rejected from data_quality "
        "where subject = 'scheduler/tiny/jobs.csv'"
    ) == [(13, 8, 5)]  # fmt: skip
    # the tiny month's usage (23.14) plus X5's 2 h x 2.0133, less its credits (3.51)
    assert query(tmp_path, "select sum(amount) from charge_lines") == [(Decimal("23.66"),)]


IMPOSSIBLE_ALLOCATIONS = {
    "jobs": [
        "K1,tiny,alpha,ann,batch,normal,A100,1,n1,2026-11-02T00:00:00,2026-11-02T00:00:00,"
        "2026-11-02T05:00:00,COMPLETED,0",
        "K2,tiny,alpha,ann,batch,normal,A100,1,n1,2026-11-22T00:00:00,2026-11-22T00:00:00,"
        "2026-11-22T05:00:00,COMPLETED,0",
    ],
    # GPU 7 of n1, which holds 2 (once: the month stopped on capacity_buckets_sum_to_capacity,
    # naming no file); K2 on n2, not its node (once: its hours on n2's H100 at the '*' rate);
    # a job no export has
    "allocations": ["K1,n1,7", "K2,n2,0", "ZZ,n1,0"],
}


def test_impossible_allocations_are_rejects_and_their_jobs_placed_as_without(tmp_path):
    build_tiny_month(tmp_path)
    for kind, rows in IMPOSSIBLE_ALLOCATIONS.items():
        path = tmp_path / f"landing/scheduler/tiny/{kind}.csv"
        path.write_text(path.read_text() + "\n".join(rows) + "\n")
    result = materialize_month(tmp_path, "2026-11-01")
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["capacity_buckets_sum_to_capacity"] and checks["rows_reconcile"]
    assert query(
        tmp_path,
        "select line, reason from rejects where file like '%allocations.csv' order by line",
    ) == [
        (8, "field gpu_index: 7 is not a GPU of node n1, which holds 2 GPUs (nodes.csv)"),
        (9, "field node: n2 is not one of the nodes of job K2 (n1)"),
        (10, "field job_id: no job ZZ of cluster tiny in the exports"),
    ]
    assert query(
        tmp_path,
        "select rows_read, rows_loaded, rows_rejected from data_quality "
        "where subject = 'scheduler/tiny/allocations.csv'",
    ) == [(9, 6, 3)]
    # both placed on n1's lowest free GPU and charged 5 h of an A100 at 2.0133: 10.0665 each,
    # the tenant's cents shared by the largest remainder
    assert query(
        tmp_path,
        "select g.job_id, g.node, g.gpu_index, g.index_source, u.gpu_model, "
        "u.allocated_gpu_hours, u.amount from job_gpus as g join job_usage as u "
        "using (billing_month, cluster, job_id) where g.job_id like 'K%' order by g.job_id",
    ) == [
        ("K1", "n1", 0, "assigned", "A100", 5.0, Decimal("10.07")),
        ("K2", "n1", 0, "assigned", "A100", 5.0, Decimal("10.06")),
    ]


def sacct_line(job: int, extra: str = "") -> str:
    """A headerless sacct line in Open XDMoD's order: job 90x, 1 GPU on n1 for hour x of
    Nov 5."""
    start, end = f"2026-11-05T{job % 900:02}:00:00", f"2026-11-05T{job % 900 + 1:02}:00:00"
    fields = [
        str(job), str(job), "tiny", "batch", "normal", "alpha", "g", "1", "ann", "1",
        start, start, start, end, "01:00:00", "0:0", "COMPLETED", "1", "1", "1", "1G",
        "cpu=1,gres/gpu=1", "cpu=1,gres/gpu=1", "01:00:00", "n1", "train",
    ]  # fmt: skip
    return "|".join(fields) + extra


def test_a_file_that_loses_most_of_its_rows_blocks_the_month_naming_it(tmp_path):
    build_tiny_month(tmp_path)
    # a collector that added one column the sacct_fields order does not know
    dump = tmp_path / "landing/scheduler/tiny/sacct-2026-11-05.log"
    dump.write_text("".join(sacct_line(900 + i, "|extra") + "\n" for i in range(4)))
    result = materialize_month(tmp_path, "2026-11-01", raise_on_error=False)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    check = evaluations["no_file_mostly_rejected"]
    assert check.passed is False
    assert check.metadata["first_violations"].value == [
        {"cluster": "tiny", "file": "scheduler/tiny/sacct-2026-11-05.log", "rows_read": "4",
         "rows_rejected": "4", "first_reason": "expected 26 fields, found 27"}
    ]  # fmt: skip
    assert not (tmp_path / "reports/2026-11/chargeback-2026-11.xlsx").exists()

    # one bad line of four is a reject, and the month goes on
    dump.write_text("".join(sacct_line(900 + i, "|extra" * (i == 3)) + "\n" for i in range(4)))
    assert materialize_month(tmp_path, "2026-11-01").success
    assert query(
        tmp_path, "select rows_read, rows_loaded, rows_rejected from data_quality "
        "where subject = 'scheduler/tiny/sacct-2026-11-05.log'"
    ) == [(4, 3, 1)]  # fmt: skip


def test_an_empty_or_header_only_export_is_listed_with_no_rows(tmp_path):
    build_tiny_month(tmp_path)
    (tmp_path / "landing/scheduler/tiny/jobs-empty.csv").write_text(
        "job_id,cluster,account,user,queue,qos,gpu_model,gpus,nodes,submit_time,start_time,"
        "end_time,state,exit_code\n"
    )
    (tmp_path / "landing/scheduler/tiny/allocations-empty.csv").write_text(
        "job_id,node,gpu_index\n"
    )
    assert materialize_month(tmp_path, "2026-11-01").success
    assert query(
        tmp_path,
        "select subject, rows_read, rows_loaded, rows_rejected from data_quality "
        "where category = 'file' and subject like 'scheduler/%' order by subject",
    ) == [
        ("scheduler/tiny/allocations-empty.csv", 0, 0, 0),
        ("scheduler/tiny/allocations.csv", 6, 6, 0),
        ("scheduler/tiny/jobs-empty.csv", 0, 0, 0),
        ("scheduler/tiny/jobs.csv", 8, 7, 1),
    ]


NOV_20 = 1_795_132_800  # 2026-11-20 00:00:00 UTC in Unix seconds


def test_telemetry_stamped_outside_every_month_is_rejected_by_the_files_month(tmp_path):
    """Points stamped in 2030, before 1970 or in milliseconds were read by no rolled-up day
    (the rows vanished from the counts), and the pre-1970 one made 1969-12-31 the owner of the
    file's unreadable rows. Each is a reject of the month of the file's plausible samples."""
    build_tiny_month(tmp_path)
    telemetry = tmp_path / "landing/telemetry/tiny"
    series = {
        "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n2", "gpu": "0"},
        "values": [
            *([NOV_20 + 600 * i, "20"] for i in range(4)),
            [1_900_000_000, "40"],  # 2030-03-17
            [-600, "50"],  # 1969-12-31 23:50
            [(NOV_20 + 2400) * 1000, "60"],  # milliseconds
        ],
    }
    body = {"status": "success", "data": {"resultType": "matrix", "result": [series]}}
    (telemetry / "dcgm-n2.json").write_text(json.dumps(body))
    write(
        telemetry / "n2.csv",
        """
        timestamp, index, utilization.gpu [%]
        2026/11/20 00:30:00.000, 0, 40 %
        1969/12/31 23:00:00.000, 0, 41 %
        2030/03/17 00:00:00.000, 0, 42 %
        2026/11/20 00:50:00.000, 0, 40 %
        2026/11/20 01:10:00.000, 0, 40 %
        """,
    )
    write(
        telemetry / "samples.csv",
        """
        ts,node,gpu_index,util_pct
        2026-11-20 00:40:00,n2,0,50
        2099-12-31 23:59:59,n2,0,51
        2100-01-01 00:00:00,n2,0,52
        2026-11-20 01:00:00,n2,0,50
        2026-11-20 01:20:00,n2,0,50
        """,
    )
    result = materialize_month(tmp_path, "2026-11-01")
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["rows_reconcile"] is True
    assert query(
        tmp_path,
        "select subject, rows_read, rows_loaded, rows_rejected from data_quality "
        "where category = 'file' and subject like 'telemetry/tiny/%' order by subject",
    ) == [
        ("telemetry/tiny/a.parquet", 32, 32, 0),
        ("telemetry/tiny/b.parquet", 2, 1, 1),
        ("telemetry/tiny/dcgm-n2.json", 7, 4, 3),
        ("telemetry/tiny/n2.csv", 5, 3, 2),
        ("telemetry/tiny/samples.csv", 5, 3, 2),
    ]
    median = "the median day of the file's samples (a clock or unit error?)"
    assert query(
        tmp_path,
        "select file, line, reason from rejects where file similar to "
        "'telemetry/tiny/(dcgm-n2.json|n2.csv|samples.csv)' order by file, line",
    ) == [
        ("telemetry/tiny/dcgm-n2.json", 1_000_005,
         f"field ts: 2030-03-17 17:46:40 is more than 365 days from 2026-11-20, {median}"),
        ("telemetry/tiny/dcgm-n2.json", 1_000_006,
         "field values[5][0]: -600 is before 1970 (Unix time in seconds)"),
        ("telemetry/tiny/dcgm-n2.json", 1_000_007,
         "field values[6][0]: 1795135200000 is not a Unix time in seconds (milliseconds?)"),
        ("telemetry/tiny/n2.csv", 3, "field ts: 1969-12-31 23:00:00 is before 1970"),
        ("telemetry/tiny/n2.csv", 4,
         f"field ts: 2030-03-17 00:00:00 is more than 365 days from 2026-11-20, {median}"),
        ("telemetry/tiny/samples.csv", 3,
         f"field ts: 2099-12-31 23:59:59 is more than 365 days from 2026-11-20, {median}"),
        ("telemetry/tiny/samples.csv", 4, "field ts: 2100-01-01 00:00:00 is in 2100 or later"),
    ]  # fmt: skip


def test_empty_and_header_only_exports_are_listed_and_do_not_stop_the_month(tmp_path):
    """An exporter with nothing to export writes no bytes, blank lines or a header alone: the
    file is an input of the month with 0 rows (it once stopped the run as an unrecognised
    export, or, in telemetry, was missing from data quality)."""
    build_tiny_month(tmp_path)
    scheduler, telemetry = tmp_path / "landing/scheduler/tiny", tmp_path / "landing/telemetry/tiny"
    (scheduler / "sacct-2026-11-30.log").write_bytes(b"")
    (scheduler / "sacct-2026-12-01.log.gz").write_bytes(gzip.compress(b"\n \r\n", mtime=0))
    (telemetry / "gpu-z9.csv").write_bytes(b"")
    (telemetry / "gpu-z8.log").write_bytes(codecs.BOM_UTF8 + b"\n\n")
    write(telemetry / "gpu-z7.csv", "timestamp, index, utilization.gpu [%]\n")
    write(telemetry / "samples-empty.csv", "ts,node,gpu_index,util_pct\n")
    body = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    (telemetry / "dcgm-empty.json").write_text(json.dumps(body))
    pq.write_table(
        pa.table({"ts": pa.array([], pa.timestamp("us")), "node": pa.array([], pa.string()),
                  "gpu_index": pa.array([], pa.int32()), "util_pct": pa.array([], pa.float64())}),
        telemetry / "samples-empty.parquet",
    )  # fmt: skip
    result = materialize_month(tmp_path, "2026-11-01")
    assert result.success
    assert query(
        tmp_path,
        "select subject, rows_read, rows_loaded, rows_rejected from data_quality "
        "where category = 'file' and rows_read = 0 order by subject",
    ) == [
        ("scheduler/tiny/sacct-2026-11-30.log", 0, 0, 0),
        ("scheduler/tiny/sacct-2026-12-01.log.gz", 0, 0, 0),
        ("telemetry/tiny/dcgm-empty.json", 0, 0, 0),
        ("telemetry/tiny/gpu-z7.csv", 0, 0, 0),
        ("telemetry/tiny/gpu-z8.log", 0, 0, 0),
        ("telemetry/tiny/gpu-z9.csv", 0, 0, 0),
        ("telemetry/tiny/samples-empty.csv", 0, 0, 0),
        ("telemetry/tiny/samples-empty.parquet", 0, 0, 0),
    ]
    # and in every month's run: the file is an input whatever the month
    assert materialize_month(tmp_path, "2026-10-01").success
    assert query(
        tmp_path,
        "select count(*) from data_quality where billing_month = '2026-10-01' "
        "and category = 'file' and rows_read = 0 and subject like 'telemetry/%'",
    ) == [(6,)]
