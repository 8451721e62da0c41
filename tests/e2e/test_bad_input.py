"""Bad input never loses or stops more than it must: an absurd row is a reject with file, line
and field, and the month completes (issue 16)."""

from __future__ import annotations

from decimal import Decimal

from tests.conftest import materialize_month, query
from tests.e2e.test_tiny_month import build_tiny_month

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
