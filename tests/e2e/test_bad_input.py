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
