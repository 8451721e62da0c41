"""Given/expect tests for the SQL steps: a handful of rows in, exact rows out.

Each test builds the input tables of one SQL file in an in-memory DuckDB and runs the file
exactly as the pipeline does (pipelines.sql.run with bound parameters).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.defs.ingest.loading import RAW_COLUMNS, write_node_lists
from pipelines.defs.ingest.telemetry import readable_sample_files, sample_file_spans
from pipelines.defs.resources import prepare_connection
from pipelines.sql import bind, create_table, replace_month, run, sql_text

NOV = {
    "billing_month": dt.date(2026, 11, 1),
    "month_start": dt.datetime(2026, 11, 1),
    "month_end": dt.datetime(2026, 12, 1),
    "currency": "USD",
}
T = dt.datetime


@pytest.fixture
def con():
    con = prepare_connection(duckdb.connect())
    yield con
    con.close()


def given_raw_jobs(con, rows: list[tuple]) -> None:
    con.execute(
        "create table raw_jobs (cluster varchar, file varchar, line bigint, raw varchar, "
        'parse_error varchar, job_id varchar, account varchar, "user" varchar, '
        "queue varchar, qos varchar, gpu_model varchar, gpus varchar, nodes varchar, "
        "submit_time varchar, start_time varchar, end_time varchar, state varchar, "
        "exit_code varchar, job_name varchar, record_type varchar, owner_uid varchar, "
        "eligible_time varchar)"
    )
    for row in rows:
        con.execute("insert into raw_jobs values (" + ", ".join("?" * 22) + ")", row)
    write_node_lists(con)
    con.execute("create table if not exists catalog_nodes (cluster varchar, gpus integer)")


def raw_job(line, job_id, gpus="1", start="2026-11-02T10:00:00", end="2026-11-02T12:00:00",
            state="COMPLETED", cluster="c1", nodes="n1", error=None, file="jobs.csv",
            record_type="job", account="acct", eligible=None):  # fmt: skip
    return (cluster, file, line, "raw", error, job_id, account, "u", "q", "normal", "A100",
            gpus, nodes, "2026-11-02T09:00:00", start, end, state, "0", None,
            record_type, None, eligible)  # fmt: skip


class TestStgJobRecords:
    def test_types_normalises_and_rejects_with_the_field_named(self, con):
        given_raw_jobs(con, [
            raw_job(2, "1", state="CANCELLED by 1234"),
            raw_job(3, "2", gpus="abc"),
            raw_job(4, "3", start="2026-13-45T99:00:00"),
            raw_job(5, "4", start="2026-11-02T12:00:00", end="2026-11-02T10:00:00"),
            raw_job(6, "5", state="EXPLODED"),
            raw_job(7, "6", error="expected 14 fields, found 13"),
            raw_job(8, "7", start="Unknown", end="None", state="PENDING", nodes="None assigned"),
        ])  # fmt: skip
        con.execute("create table catalog_clusters (cluster varchar, scheduler_timezone varchar)")
        rows = run(con, "staging/stg_job_records").fetchall()
        by_line = {row[2]: row for row in rows}
        columns = [c[0] for c in run(con, "staging/stg_job_records").description]
        reason = columns.index("reject_reason")
        state = columns.index("state")
        assert by_line[2][state] == "CANCELLED" and by_line[2][reason] is None
        assert [by_line[line][reason] for line in range(3, 8)] == [
            "field gpus: 'abc' is not a number",
            "field start_time: '2026-13-45T99:00:00' is not a timestamp",
            "field end_time: 2026-11-02T10:00:00 is before start_time 2026-11-02T12:00:00",
            "field state: 'EXPLODED' is not a known state",
            "expected 14 fields, found 13",
        ]
        # Unknown / None times are unknown, not errors
        start_at = columns.index("start_at")
        assert by_line[8][reason] is None and by_line[8][start_at] is None

    def test_times_a_record_cannot_have_are_rejected_not_billed(self, con):
        """Held to the export time like a running job, a finished job without an end, or one
        ending years ahead, would be billed for every hour up to it."""
        given_raw_jobs(con, [
            raw_job(2, "1"),
            raw_job(3, "2", end="2029-11-02T12:00:00"),  # a clock error: the year
            raw_job(4, "3", start="1970-01-01T00:00:00"),  # an epoch zero
            raw_job(5, "4", end=None),  # COMPLETED, started, no end
            raw_job(6, "5", end=None, state="CANCELLED", start="Unknown"),  # never started
            raw_job(7, "6", end=None, state="RUNNING"),
            raw_job(8, "7", end="2100-01-01T00:00:00"),
            # a year less a minute; and a dump of jobs years apart (XDMoD's parser cases)
            raw_job(9, "8", start="2025-11-02T12:01:00"),
            raw_job(10, "9", start="2016-08-01T06:00:00", end="2016-08-01T07:00:00"),
        ])  # fmt: skip
        con.execute("create table catalog_clusters (cluster varchar, scheduler_timezone varchar)")
        rows = con.execute(
            "select line, reject_reason from ("
            + _sql("staging/stg_job_records")
            + ") order by line"
        ).fetchall()
        assert rows == [
            (2, None),
            (3, "field end_time: 2029-11-02T12:00:00 is more than 365 days after start_time "
             "2026-11-02T10:00:00"),
            (4, "field start_time: '1970-01-01T00:00:00' is not a plausible time"),
            (5, "field end_time: missing for a COMPLETED job that started (only a running job "
             "has no end)"),
            (6, None),
            (7, None),
            (8, "field end_time: '2100-01-01T00:00:00' is not a plausible time"),
            (9, None),
            (10, None),
        ]  # fmt: skip

    def test_slurm_quirks(self, con):
        given_raw_jobs(con, [
            raw_job(2, "1", state="RUNNING", end=None),
            raw_job(3, "2", state="BOOT_FAIL"),
            raw_job(4, "2.batch", record_type="step", account=None),  # still loads
        ])  # fmt: skip
        con.execute("create table catalog_clusters (cluster varchar, scheduler_timezone varchar)")
        rows = con.execute(
            "select job_id, state, end_at, reject_reason, record_rank from ("
            + _sql("staging/stg_job_records")
            + ") order by line"
        ).fetchall()
        assert rows == [
            ("1", "RUNNING", None, None, 1),
            ("2", "NODE_FAIL", T(2026, 11, 2, 12), None, 1),
            ("2.batch", "COMPLETED", T(2026, 11, 2, 12), None, None),
        ]

    def test_scheduler_timezone_becomes_utc(self, con):
        eligible = "2026-11-02T09:30:00"
        given_raw_jobs(con, [raw_job(2, "1", cluster="ny", eligible=eligible),
                             raw_job(3, "2", cluster="utc", eligible=eligible)])  # fmt: skip
        con.execute("create table catalog_clusters as select 'ny' as cluster, "
                    "'America/New_York' as scheduler_timezone")  # fmt: skip
        rows = con.execute(
            "select cluster, start_at, eligible_at from ("
            + _sql("staging/stg_job_records")
            + ") order by 1"
        ).fetchall()
        assert rows == [
            ("ny", T(2026, 11, 2, 15, 0), T(2026, 11, 2, 14, 30)),
            ("utc", T(2026, 11, 2, 10, 0), T(2026, 11, 2, 9, 30)),
        ]

    def test_eligible_time_unknown_is_null_and_malformed_is_a_reject(self, con):
        given_raw_jobs(con, [
            raw_job(2, "1", eligible="2026-11-02T09:30:00"),
            raw_job(3, "2", eligible="Unknown"),
            raw_job(4, "3", eligible="None"),
            raw_job(5, "4", eligible="2026-11-31T09:30:00"),
            raw_job(6, "5"),
        ])  # fmt: skip
        con.execute("create table catalog_clusters (cluster varchar, scheduler_timezone varchar)")
        rows = con.execute(
            "select file, line, eligible_at, reject_reason from ("
            + _sql("staging/stg_job_records")
            + ") order by line"
        ).fetchall()
        assert rows == [
            ("jobs.csv", 2, T(2026, 11, 2, 9, 30), None),
            ("jobs.csv", 3, None, None),
            ("jobs.csv", 4, None, None),
            ("jobs.csv", 5, None, "field eligible_time: '2026-11-31T09:30:00' is not a timestamp"),
            ("jobs.csv", 6, None, None),
        ]

    @pytest.mark.parametrize(
        ("text", "zone", "utc"),
        [
            ("2026-11-10 12:00:00+01:00", "UTC", T(2026, 11, 10, 11)),
            ("2026-11-10 12:00:00+0100", "UTC", T(2026, 11, 10, 11)),
            ("2026-11-10 12:00:00+01", "UTC", T(2026, 11, 10, 11)),  # an hour-only offset
            ("2026-11-10T12:00-05", "Europe/Berlin", T(2026, 11, 10, 17)),
            ("2026-11-10T12:00:00Z", "Europe/Berlin", T(2026, 11, 10, 12)),
            ("2026-11-10 12:00:00", "Europe/Berlin", T(2026, 11, 10, 11)),
            ("2026-11-10", "Europe/Berlin", T(2026, 11, 9, 23)),  # a date has no offset
        ],
    )
    def test_to_utc_keeps_an_offset_else_takes_the_zone(self, con, text, zone, utc):
        assert con.execute(
            "select to_utc($text, $zone)", {"text": text, "zone": zone}
        ).fetchone() == (utc,)

    @pytest.mark.parametrize(
        ("text", "zone", "utc"),
        [
            # Berlin goes back at 03:00 CEST to 02:00 CET: 02:50 is first 00:50 UTC
            ("2026-10-25 02:50:00", "Europe/Berlin", T(2026, 10, 25, 0, 50)),
            ("2026-10-25 01:50:00", "Europe/Berlin", T(2026, 10, 24, 23, 50)),  # once
            ("2026-10-25 03:10:00", "Europe/Berlin", T(2026, 10, 25, 2, 10)),  # once
            # just after clocks go forward the offset of an hour before does not map back
            ("2026-03-29 03:10:00", "Europe/Berlin", T(2026, 3, 29, 1, 10)),
            ("2026-11-01 01:30:00", "America/New_York", T(2026, 11, 1, 5, 30)),
            # Lord Howe goes back by half an hour, 02:00 +11 to 01:30 +10:30
            ("2026-04-05 01:45:00", "Australia/Lord_Howe", T(2026, 4, 4, 14, 45)),
            ("2026-10-25 02:50:00+01:00", "Europe/Berlin", T(2026, 10, 25, 1, 50)),
        ],
    )
    def test_to_utc_first_reads_a_repeated_hour_as_its_first_pass(self, con, text, zone, utc):
        assert con.execute(
            "select to_utc_first($text, $zone)", {"text": text, "zone": zone}
        ).fetchone() == (utc,)

    def test_a_job_across_the_repeated_hour_starts_in_its_first_pass(self, con):
        # Europe/Berlin, 2026-10-25: 02:00-03:00 local happens twice (CEST, then CET).
        # DuckDB reads a repeated time as its second pass, so a job from 02:50 (first pass,
        # 00:50 UTC) to 02:10 (second pass, 01:10 UTC) read as ending 40 minutes before it
        # started and was rejected; its start and submit now read as the first pass. A job
        # whose end is before its start in either reading is still a reject.
        given_raw_jobs(con, [
            raw_job(2, "1", cluster="de", start="2026-10-25T02:50:00",
                    end="2026-10-25T02:10:00"),
            raw_job(3, "2", cluster="de", start="2026-10-25T01:30:00",
                    end="2026-10-25T02:30:00"),
            raw_job(4, "3", cluster="de", start="2026-10-25T02:50:00",
                    end="2026-10-25T01:50:00"),
        ])  # fmt: skip
        con.execute(
            "update raw_jobs set submit_time = "
            "if(job_id = '1', '2026-10-25T02:40:00', '2026-10-25T01:00:00')"
        )
        con.execute("create table catalog_clusters as select 'de' as cluster, "
                    "'Europe/Berlin' as scheduler_timezone")  # fmt: skip
        rows = con.execute(
            "select job_id, submit_at, start_at, end_at, reject_reason from ("
            + _sql("staging/stg_job_records")
            + ") order by line"
        ).fetchall()
        assert rows == [
            ("1", T(2026, 10, 25, 0, 40), T(2026, 10, 25, 0, 50), T(2026, 10, 25, 1, 10), None),
            # a repeated end keeps its second pass: a 2-hour job, as DuckDB reads it
            ("2", T(2026, 10, 24, 23), T(2026, 10, 24, 23, 30), T(2026, 10, 25, 1, 30), None),
            ("3", T(2026, 10, 24, 23), T(2026, 10, 25, 1, 50), T(2026, 10, 24, 23, 50),
             "field end_time: 2026-10-25T01:50:00 is before start_time 2026-10-25T02:50:00"),
        ]  # fmt: skip

    def test_latest_most_complete_record_ranks_first(self, con):
        given_raw_jobs(con, [
            raw_job(2, "9", end=None, state="RUNNING", file="dump-1.csv"),
            raw_job(2, "9", end="2026-11-02T11:00:00", state="COMPLETED", file="dump-2.csv"),
            raw_job(3, "9", end=None, state="RUNNING", file="dump-3.csv"),
            raw_job(4, "9", end="2026-11-02T11:30:00", file="dump-3.csv", record_type="step"),
        ])  # fmt: skip
        con.execute("create table catalog_clusters (cluster varchar, scheduler_timezone varchar)")
        rows = con.execute(
            "select file, record_rank from (" + _sql("staging/stg_job_records") + ") order by 2"
        ).fetchall()
        # the step is loaded (no reject) but never competes with its job's records
        assert rows == [
            ("dump-2.csv", 1), ("dump-3.csv", 2), ("dump-1.csv", 3), ("dump-3.csv", None),
        ]  # fmt: skip

    def test_pending_array_records_give_way_to_their_tasks(self, con):
        def pending(line, job_id, file):
            return raw_job(line, job_id, start=None, end=None, state="PENDING", nodes=None,
                           file=file)  # fmt: skip

        given_raw_jobs(con, [
            pending(2, "50_[1-9]", "dump-1"),
            pending(3, "60_[1-3%2]", "dump-1"),
            pending(4, "70_[1-2]", "dump-1"),
            raw_job(5, "70_5", file="dump-1"),  # not one of 1-2
            raw_job(2, "50_1", file="dump-2"),
            pending(3, "50_[2-9]", "dump-2"),
            pending(4, "60_[1-3]", "dump-2"),  # the same array, still waiting: one job
            raw_job(2, "50_4", state="RUNNING", end=None, file="dump-3"),  # one of 2-9
            raw_job(3, "80_[1-3]", state="TIMEOUT", file="dump-3"),  # not pending: its own job
            raw_job(4, "80_2", file="dump-3"),
        ])  # fmt: skip
        con.execute("create table catalog_clusters (cluster varchar, scheduler_timezone varchar)")
        rows = con.execute(
            "select file, job_id, reject_reason, record_rank from ("
            + _sql("staging/stg_job_records")
            + ") order by file, line"
        ).fetchall()
        # every record loads; a pending array record whose tasks are listed is folded (rank
        # > 1), and of one array's pending records only the latest ranks 1
        assert rows == [
            ("dump-1", "50_[1-9]", None, 3),
            ("dump-1", "60_[1-3%2]", None, 2),
            ("dump-1", "70_[1-2]", None, 1),
            ("dump-1", "70_5", None, 1),
            ("dump-2", "50_1", None, 1),
            ("dump-2", "50_[2-9]", None, 2),
            ("dump-2", "60_[1-3]", None, 1),
            ("dump-3", "50_4", None, 1),
            ("dump-3", "80_[1-3]", None, 1),
            ("dump-3", "80_2", None, 1),
        ]


def test_stg_quota_configs_rejects_the_first_field_that_does_not_type(con):
    def raw_quota(line, error=None, guaranteed="4", limit="8", created="2026-11-02T09:00:00Z",
                  reserved=None, admitted=None):  # fmt: skip
        quota = dict.fromkeys(RAW_COLUMNS["quotas"]) | {
            "source": "kueue", "guaranteed_gpus": guaranteed, "limit_gpus": limit,
            "created_time": created, "quota_reserved_time": reserved,
            "admitted_time": admitted,
        }  # fmt: skip
        return {"cluster": "c1", "file": "kueue.json", "line": line, "raw": "raw",
                "parse_error": error} | quota  # fmt: skip

    rows = [
        raw_quota(2),
        raw_quota(3, guaranteed="four", created="yesterday"),  # the guarantee is checked first
        raw_quota(4, limit="lots"),
        raw_quota(5, created="yesterday"),
        raw_quota(6, reserved="2026-11-02T09:00:00Z", admitted="later"),
        raw_quota(7, reserved="soon"),
        raw_quota(8, error="field grptres: missing", guaranteed="four"),  # the reader's first
        raw_quota(9, guaranteed=None, limit=None, created=None),  # nothing given: nothing wrong
    ]
    con.register("quota_rows", pa.Table.from_pylist(rows))
    con.execute("create table raw_quotas as from quota_rows")
    reasons = con.execute(
        "select line, reject_reason from (" + _sql("staging/stg_quota_configs") + ") order by 1"
    ).fetchall()
    assert reasons == [
        (2, None),
        (3, "field guaranteed_gpus: 'four' is not a GPU count"),
        (4, "field limit_gpus: 'lots' is not a GPU count"),
        (5, "field creationTimestamp: 'yesterday' is not a timestamp"),
        (6, "field Admitted lastTransitionTime: 'later' is not a timestamp"),
        (7, "field QuotaReserved lastTransitionTime: 'soon' is not a timestamp"),
        (8, "field grptres: missing"),
        (9, None),
    ]


def _sql(name: str) -> str:
    from pipelines.sql import sql_text

    return sql_text(name)


def test_stg_jobs_keeps_the_month_and_ends_running_jobs_at_the_export_time(con):
    con.execute(
        """
        create table stg_job_records as select * from (values
            ('c', 'a', '1', 'COMPLETED', T '2026-10-30 00:00', T '2026-10-31 00:00', 1),
            ('c', 'a', '2', 'COMPLETED', T '2026-10-31 20:00', T '2026-11-01 04:00', 1),
            ('c', 'a', '3', 'RUNNING',   T '2026-11-30 20:00', null, 1),
            ('c', 'a', '4', 'PENDING',   null, null, 1),
            ('c', 'a', '5', 'COMPLETED', T '2026-12-01 01:00', T '2026-12-01 06:00', 1)
        ) as v(cluster, file, job_id, state, start_at, end_at, record_rank)
    """.replace(" T '", " timestamp '")
    )
    con.execute("""
        create or replace table stg_job_records as select
            cluster, file, 1 as line, job_id, 'acct' as account, 'u' as "user", 'q' as queue,
            'n' as qos, 'A100' as gpu_model, 1.0 as gpus, 'n1' as nodes,
            coalesce(start_at, timestamp '2026-11-15 00:00') - interval 1 hour as submit_at,
            null::timestamp as eligible_at, start_at, end_at, state, state as raw_state,
            '0' as exit_code,
            null::varchar as owner_uid, null::varchar as reject_reason, record_rank
        from stg_job_records
    """)
    rows = run(con, "staging/stg_jobs", NOV).fetchall()
    columns = [c[0] for c in run(con, "staging/stg_jobs", NOV).description]
    picked = [(r[columns.index("job_id")], r[columns.index("held_until")]) for r in rows]
    # job 1 ended before November; job 5 starts in December; job 3 runs until the export time
    # (job 5's end, the latest timestamp of the cluster's exports); job 4 was submitted in Nov
    assert picked == [("2", T(2026, 11, 1, 4)), ("3", T(2026, 12, 1, 6)), ("4", None)]


def given_one_job_gpu(con, start_at: str, held_until: str, gpu_index: int, gpu_share: int):
    """Job j of cluster c holding GPU `gpu_index` of n1 (an A100; `gpu_share` of 420) from
    `start_at` to `held_until` in November: job_gpu_hours' inputs, without outage windows."""
    con.execute(
        "create table stg_jobs as select date '2026-11-01' as billing_month, 'c' as cluster, "
        "'j' as job_id, 'A100' as gpu_model, $start::timestamp as start_at, "
        "$until::timestamp as held_until",
        {"start": start_at, "until": held_until},
    )
    con.execute(
        "create table job_gpus as select date '2026-11-01' as billing_month, 'c' as cluster, "
        "'j' as job_id, 'n1' as node, $index as gpu_index, $share as gpu_share",
        {"index": gpu_index, "share": gpu_share},
    )
    con.execute("create table catalog_nodes (cluster varchar, node varchar, gpu_model varchar)")
    con.execute("""create table catalog_outage_windows (cluster varchar, node varchar,
        outage_from timestamp, outage_to timestamp)""")


def test_job_gpu_hours_splits_at_hours_and_outage_edges_and_weighs_the_share(con):
    given_one_job_gpu(con, "2026-11-05 10:30", "2026-11-05 12:15", gpu_index=3, gpu_share=60)
    con.execute("""insert into catalog_outage_windows values
        ('c', 'n1', timestamp '2026-11-05 11:20', timestamp '2026-11-05 11:40')""")
    rows = con.execute(
        "select hour::time, seg_from::time, seg_to::time, gpu_ms, gpu_units, in_outage from ("
        + _sql("facts/job_gpu_hours")
        + ")",
        {k: v for k, v in NOV.items() if k != "currency"},
    ).fetchall()
    # a 1g MIG slice: 60/420 of the GPU, so GPU units = ms x 60
    assert [tuple(str(v) for v in row) for row in rows] == [
        ("10:00:00", "10:30:00", "11:00:00", "1800000", "108000000", "False"),
        ("11:00:00", "11:00:00", "11:20:00", "1200000", "72000000", "False"),
        ("11:00:00", "11:20:00", "11:40:00", "1200000", "72000000", "True"),
        ("11:00:00", "11:40:00", "12:00:00", "1200000", "72000000", "False"),
        ("12:00:00", "12:00:00", "12:15:00", "900000", "54000000", "False"),
    ]


def test_job_gpu_hours_cut_where_a_billing_day_begins_inside_an_hour(con):
    # billing in Asia/Kolkata (+05:30): November's days begin at 18:30 UTC, inside an hour;
    # each part of the 18:00 hour is its own segment, of its own day, priced from its start
    given_one_job_gpu(con, "2026-11-01 17:45", "2026-11-01 19:10", gpu_index=0, gpu_share=420)
    kolkata = {
        **{k: v for k, v in NOV.items() if k != "currency"},
        "month_start": T(2026, 10, 31, 18, 30),
        "month_end": T(2026, 11, 30, 18, 30),
    }
    rows = con.execute(
        "select seg_from::time, seg_to::time, day_index, priced_at::time from ("
        + _sql("facts/job_gpu_hours")
        + ")",
        kolkata,
    ).fetchall()
    assert [tuple(str(v) for v in row) for row in rows] == [
        ("17:45:00", "18:00:00", "0", "17:00:00"),
        ("18:00:00", "18:30:00", "0", "18:00:00"),
        ("18:30:00", "19:00:00", "1", "18:30:00"),
        ("19:00:00", "19:10:00", "1", "19:00:00"),
    ]


def given_declared_steps(con, steps: dict[str, int] | None = None) -> None:
    """declared_steps: the telemetry step in ms the catalog declares per cluster."""
    con.execute("create table declared_steps (cluster varchar, step_ms bigint)")
    for cluster, step_ms in (steps or {}).items():
        con.execute("insert into declared_steps values (?, ?)", [cluster, step_ms])


def given_inventory(con, gpus: dict[tuple[str, str], int] | None = None) -> None:
    """inventory_gpus: the GPUs of each `(cluster, node)` of nodes.csv (none by default)."""
    con.execute("create table inventory_gpus (cluster varchar, node varchar, gpus integer)")
    for (cluster, node), count in (gpus or {}).items():
        con.execute("insert into inventory_gpus values (?, ?, ?)", [cluster, node, count])


def given_day_samples(con, values: str, declared_steps: dict[str, int] | None = None) -> None:
    """day_samples of valid utilisation rows `(cluster, file, line, ts, node, gpu_index,
    util_pct)`, numbered as the rollup numbers series and files (sample_sources), with the
    columns the rollup does not look at; declared_steps (none by default)."""
    given_declared_steps(con, declared_steps)
    con.execute(f"""create table given as select * from (values {values})
        as v(cluster, file, line, ts, node, gpu_index, util_pct)""")
    con.execute("""create table sample_sources as select 'path/' || file as path, file, cluster,
        (row_number() over (order by file) - 1)::integer as file_id
        from (select distinct file, cluster from given)""")
    con.execute("""create table day_samples as select
        dense_rank() over (order by g.cluster, g.node, g.gpu_index)::integer as series_id,
        src.file_id, g.line, g.ts, g.node, g.gpu_index, g.util_pct,
        null::double as mem_used_mib, null::double as power_w, 1 as util_rank,
        false as superseded, null::varchar as reject_reason,
        date '2026-11-01' as billing_month, false as look_ahead, false as carried
        from given as g join sample_sources as src using (file)""")


def given_ordered_samples(con, idle_threshold_pct: float) -> None:
    """The rollup's temporary tables over day_samples, of a day in one chunk: ordered_samples
    and series_steps."""
    params = {"idle_threshold_pct": idle_threshold_pct, "last_chunk": True}
    con.execute("create table prior_own_steps (cluster varchar, own_step_ms bigint)")
    create_table(con, "ordered_samples", "rollup/ordered_samples", params)
    create_table(con, "series_steps", "rollup/series_steps", params)


def rollup_rows(con, idle_threshold_pct: float, day_end: dt.datetime) -> duckdb.DuckDBPyConnection:
    """The rollup's samples (gpu_sample_rollup.sql) of the day before `day_end`, every cluster's
    (the rollup writes a file per cluster), with their series' names and step from series_steps
    (a sample names its series by series_key only; step_ms NULL for a series with two metrics,
    each with its step): cluster, node, gpu_index, ts, util_pct, mem_used_mib, power_w,
    cover_ms, step_ms, run, then series_key, hour, silent_until."""
    sql = _sql("rollup/gpu_sample_rollup")
    clusters = [c for (c,) in con.execute("select distinct cluster from series_steps").fetchall()]
    for number, cluster in enumerate(clusters):
        params = {"cluster": cluster, "idle_threshold_pct": idle_threshold_pct, "day_end": day_end}
        add = "create temp table rolled_up as" if number == 0 else "insert into rolled_up"
        con.execute(f"{add} select $cluster as cluster, * from ({sql})", bind(sql, params))
    return con.execute(
        "select r.cluster, st.node, st.gpu_index, r.ts, r.util_pct, r.mem_used_mib, r.power_w, "
        "r.cover_ms, st.step_ms, r.run, r.series_key, r.hour, r.silent_until "
        "from rolled_up as r join (select cluster, series_key, any_value(node) as node, "
        "any_value(gpu_index) as gpu_index, if(count(*) = 1, any_value(step_ms), null) as step_ms "
        "from series_steps group by all) as st using (cluster, series_key)"
    )


def day_in_one_chunk(params: dict) -> dict:
    """day_samples' parameters of a day read in one chunk (every node, series from 1)."""
    return {**params, "node_from": None, "node_until": None, "series_before": 0}


def given_nov2_day_samples(
    con, files: list[str], inventory: dict[tuple[str, str], int] | None = None
) -> None:
    """day_samples of 2 November (UTC) read from `files` in one chunk, after their spans (the
    files' windows of timestamps) and the `inventory` (given_inventory), with the empty file
    of every samples column, as the rollup reads them."""
    files = readable_sample_files(Path(files[0]).parent, files)
    sample_file_spans(con, files)
    given_inventory(con, inventory)
    con.execute(
        "create table day_samples as " + _sql("rollup/day_samples"),
        day_in_one_chunk({"files": files, "owned_files": [], "day_start": T(2026, 11, 2),
         "day_end": T(2026, 11, 3), "billing_month": NOV["billing_month"],
         "next_billing_month": dt.date(2026, 12, 1), "next_billing_month_at": NOV["month_end"]}),
    )  # fmt: skip


def day_file_counts(con) -> list[tuple]:
    """day_sample_file_counts of a day in one chunk: its parts, summed."""
    create_table(con, "sample_count_parts", "rollup/sample_count_parts")
    return run(con, "rollup/day_sample_file_counts").fetchall()


def test_sample_rollup_folds_duplicates_and_clips_cover(con):
    given_day_samples(
        con,
        """
        ('c', 'a.parquet', 1, timestamp '2026-11-30 23:57', 'n1', 0, 10.0),
        ('c', 'a.parquet', 2, timestamp '2026-11-30 23:58', 'n1', 0, 20.0),
        ('c', 'b.parquet', 1, timestamp '2026-11-30 23:58', 'n1', 0, 30.0),
        ('c', 'a.parquet', 3, timestamp '2026-11-30 23:59:30', 'n1', 0, 40.0)
    """,
    )
    given_ordered_samples(con, 15.0)
    rows = rollup_rows(con, 15.0, T(2026, 12, 1)).fetchall()
    # spacings 60 s and 90 s: too few (under 10) for a step of the series' own, and no other
    # series of the cluster has one: the step is 60 s (it was their median, 75 s, before steps
    # became robust; covers were 60, 75, 75 s). The duplicate at 23:58 keeps the last read
    # (b.parquet, 30 %). Cover: up to the next sample, at most the step. The month end no
    # longer clips here (attribution clips at the job's end in the month), and no sample of
    # the next day was looked ahead to: the last sample covers a step.
    # run: 0 for an idle sample before the day's first busy sample (>= 15 %); NULL when busy
    assert [(r[3].time().isoformat(), r[4], r[7], r[8], r[9]) for r in rows] == [
        ("23:57:00", 10.0, 60000, 60000, 0),
        ("23:58:00", 30.0, 60000, 60000, None),
        ("23:59:30", 40.0, 60000, 60000, None),
    ]


def test_unix_ms_rounds_sub_milliseconds_as_epoch_ms_does(con):
    # the rollup's covers, steps and idle-run labels take unix_ms of each sample (epoch_ms
    # costs twice as much); a clock of microseconds must give the milliseconds it gave before
    rows = con.execute(
        "select unix_ms(t), epoch_ms(t) from (values "
        "(timestamp '1970-01-01 00:00:00'), (timestamp '2026-11-02 00:00:00.0004'), "
        "(timestamp '2026-11-02 00:00:00.0005'), (timestamp '2026-11-02 00:00:00.0009'), "
        "(timestamp '2099-12-31 23:59:59.9995')) as v(t)"
    ).fetchall()
    assert rows == [
        (0, 0),
        (1_793_577_600_000, 1_793_577_600_000),
        (1_793_577_600_001, 1_793_577_600_001),
        (1_793_577_600_001, 1_793_577_600_001),
        (4_102_444_800_000, 4_102_444_800_000),
    ]


def test_a_busy_folded_duplicate_does_not_break_an_idle_run(con):
    # n1 at 00:01 was read twice: busy in a.parquet, idle in b.parquet (the last read, which
    # wins). The idle run 00:00-00:02 is unbroken, as if the busy reading had never come.
    # n2 has no duplicate: its labels come from the window that finds next_ts.
    given_day_samples(
        con,
        """
        ('c', 'a.parquet', 1, timestamp '2026-11-02 00:00', 'n1', 0, 1.0),
        ('c', 'a.parquet', 2, timestamp '2026-11-02 00:01', 'n1', 0, 50.0),
        ('c', 'b.parquet', 1, timestamp '2026-11-02 00:01', 'n1', 0, 1.0),
        ('c', 'a.parquet', 3, timestamp '2026-11-02 00:02', 'n1', 0, 1.0),
        ('c', 'a.parquet', 4, timestamp '2026-11-02 00:03', 'n1', 0, 60.0),
        ('c', 'a.parquet', 5, timestamp '2026-11-02 00:04', 'n1', 0, 1.0),
        ('c', 'a.parquet', 6, timestamp '2026-11-02 00:00', 'n2', 0, 70.0),
        ('c', 'a.parquet', 7, timestamp '2026-11-02 00:01', 'n2', 0, 2.0),
        ('c', 'a.parquet', 8, timestamp '2026-11-02 00:02', 'n2', 0, 80.0)
    """,
    )
    given_ordered_samples(con, 5.0)
    rows = rollup_rows(con, 5.0, T(2026, 11, 3)).fetchall()
    # run: an idle sample's label is 1 + the milliseconds from midnight to the latest busy
    # sample before it (0 before the first); busy samples have none
    assert sorted((r[1], r[3].time().isoformat(), r[4], r[9]) for r in rows) == [
        ("n1", "00:00:00", 1.0, 0),
        ("n1", "00:01:00", 1.0, 0),
        ("n1", "00:02:00", 1.0, 0),
        ("n1", "00:03:00", 60.0, None),
        ("n1", "00:04:00", 1.0, 180_001),
        ("n2", "00:00:00", 70.0, None),
        ("n2", "00:01:00", 2.0, 1),
        ("n2", "00:02:00", 80.0, None),
    ]


def test_a_day_looks_ahead_to_the_next_days_first_valid_sample(con, tmp_path):
    # Nov 30 (UTC) in a billing timezone where December begins at 23:00 UTC (Europe/Berlin);
    # the next day's first row is rejected, its first valid sample is at 00:00:20
    con.execute(
        "copy (select ts, 'n1' as node, 0 as gpu_index, util_pct, source_line, "
        "null::double as mem_used_mib, null::double as power_w, null as util_metric, "
        "null as parse_error from (values "
        "(timestamp '2026-11-30 22:59', 5.0, 1), (timestamp '2026-11-30 23:57', 10.0, 2), "
        "(timestamp '2026-11-30 23:58', 20.0, 3), (timestamp '2026-11-30 23:59:30', 40.0, 4), "
        "(timestamp '2026-12-01 00:00', 150.0, 5), (timestamp '2026-12-01 00:00:20', 50.0, 6)"
        f") as v(ts, util_pct, source_line)) to '{tmp_path}/a.parquet'"
    )
    con.execute(
        "create table sample_sources as select ? as path, 'a.csv' as file, 'c' as cluster, "
        "0 as file_id",
        [str(tmp_path / "a.parquet")],
    )
    given_declared_steps(con)
    given_inventory(con)
    # the file's window of timestamps; read with the empty file of every samples column
    files = readable_sample_files(tmp_path, [str(tmp_path / "a.parquet")])
    sample_file_spans(con, files)
    con.execute(
        "create table day_samples as " + _sql("rollup/day_samples"),
        day_in_one_chunk({"files": files, "owned_files": [],
         "day_start": T(2026, 11, 30), "day_end": T(2026, 12, 1),
         "billing_month": NOV["billing_month"], "next_billing_month": dt.date(2026, 12, 1),
         "next_billing_month_at": T(2026, 11, 30, 23)}),
    )  # fmt: skip
    given_ordered_samples(con, 5.0)
    rows = rollup_rows(con, 5.0, T(2026, 12, 1)).fetchall()
    # spacings 58 min, 60 s, 90 s and 50 s (to the look-ahead): four, too few for a step of
    # the series' own, and the cluster has no other series: the step is 60 s (it was their
    # median, 75 s, before steps became robust; covers were 75, 60, 75, 50 s). The last
    # sample covers only the 50 s to the look-ahead; all busy
    assert [(r[3].time().isoformat(), r[7], r[8], r[9]) for r in rows] == [
        ("22:59:00", 60000, 60000, None),
        ("23:57:00", 60000, 60000, None),
        ("23:58:00", 60000, 60000, None),
        ("23:59:30", 50000, 60000, None),
    ]
    counts = day_file_counts(con)
    # only the day's rows count, in the billing month of their time
    assert [(str(r[0]), r[2], r[3], r[4]) for r in counts] == [
        ("2026-11-01", "a.csv", 1, 1),
        ("2026-12-01", "a.csv", 3, 3),
    ]


def test_a_series_of_a_gpu_its_node_lacks_is_rejected_whole_and_not_numbered(con, tmp_path):
    # n1 holds 2 GPUs (nodes.csv): its GPU 2 is none, on the 2nd as on the 3rd; n9 is in no
    # inventory and keeps its GPU 7. A chunk after one of 10 series: numbered from 11
    path = str(tmp_path / "a.parquet")
    con.execute(
        "copy (select ts, node, gpu_index, util_pct, null::double as mem_used_mib, "
        "null::double as power_w, null::varchar as util_metric, null::varchar as parse_error, "
        "source_line from (values "
        "(timestamp '2026-11-02 00:00', 'n1', 0, 50.0, 1), "
        "(timestamp '2026-11-02 00:10', 'n1', 0, 50.0, 2), "
        "(timestamp '2026-11-02 00:00', 'n1', 2, 50.0, 3), "
        "(timestamp '2026-11-02 00:10', 'n1', 2, 150.0, 4), "
        "(timestamp '2026-11-02 00:00', 'n1', 1, 50.0, 5), "
        "(timestamp '2026-11-02 00:00', 'n9', 7, 50.0, 6), "
        "(timestamp '2026-11-03 00:00', 'n1', 0, 50.0, 7), "
        "(timestamp '2026-11-03 00:00', 'n1', 2, 50.0, 8)"
        f") as v(ts, node, gpu_index, util_pct, source_line)) to '{path}'"
    )
    con.execute(
        "create table sample_sources as select ? as path, 'a.csv' as file, 'c' as cluster, "
        "0 as file_id, null::varchar as util_metric",
        [path],
    )
    files = readable_sample_files(tmp_path, [path])  # with the empty file of every column
    sample_file_spans(con, files)
    given_inventory(con, {("c", "n1"): 2})
    con.execute(
        "create table day_samples as " + _sql("rollup/day_samples"),
        {**day_in_one_chunk({"files": files, "owned_files": [], "day_start": T(2026, 11, 2),
         "day_end": T(2026, 11, 3), "billing_month": NOV["billing_month"],
         "next_billing_month": dt.date(2026, 12, 1), "next_billing_month_at": NOV["month_end"]}),
         "series_before": 10},
    )  # fmt: skip
    assert con.execute(
        "select line, node, gpu_index, series_id, reject_reason, superseded, look_ahead, ts "
        "from day_samples order by look_ahead, line"
    ).fetchall() == [
        (1, "n1", 0, 11, None, False, False, T(2026, 11, 2)),
        (2, "n1", 0, 11, None, False, False, T(2026, 11, 2, 0, 10)),
        (3, "n1", 2, None,
         "field gpu_index: 2 is not a GPU of node n1, which holds 2 GPUs (nodes.csv)", False,
         False, T(2026, 11, 2)),
        # a row another check rejects keeps that reason
        (4, "n1", 2, None, "field util_pct: 150.0 is outside 0-100", False, False,
         T(2026, 11, 2, 0, 10)),
        (5, "n1", 1, 12, None, False, False, T(2026, 11, 2)),
        (6, "n9", 7, 13, None, False, False, T(2026, 11, 2)),
        # the look-ahead of n1's GPU 0 only
        (None, None, None, 11, None, False, True, T(2026, 11, 3)),
    ]  # fmt: skip


def test_a_look_ahead_is_the_first_sample_the_next_day_keeps(con, tmp_path):
    # The look-ahead is the first sample the next day keeps: the first row, of the best metric
    # in that hour, of the series' first hour with rows (the next day supersedes GPU_UTIL by
    # GR_ENGINE_ACTIVE, preferred, only in the hours that have both); it is looked for in the
    # next day's first hour first (day_samples.sql). n1: ten samples 5 min apart to 23:55,
    # then none until 01:30. n2: GPU_UTIL and GR_ENGINE_ACTIVE at 23:58 and 23:59; the next
    # day's first hour has only GPU_UTIL (00:00:10), its first GR_ENGINE_ACTIVE row comes at
    # 02:00. n3: as n2, but its next GR_ENGINE_ACTIVE row comes at 00:00:30, in the first hour
    # too. n4 and n5: as n2, but nothing in the next day's first hour; n4 has GPU_UTIL at
    # 01:00:10 and GR_ENGINE_ACTIVE at 01:00:40, n5 GPU_UTIL at 01:10 and GR_ENGINE_ACTIVE at
    # 02:00
    def write(name: str, node: str, metric: str | None, times: list[str]) -> str:
        path = str(tmp_path / f"{name}.parquet")
        values = ", ".join(f"(timestamp '{ts}', {line})" for line, ts in enumerate(times, 1))
        metric_sql = "null::varchar" if metric is None else f"'{metric}'"
        con.execute(
            f"copy (select ts, '{node}' as node, 0 as gpu_index, 50.0 as util_pct, "
            "null::double as mem_used_mib, null::double as power_w, "
            f"{metric_sql} as util_metric, null::varchar as parse_error, source_line "
            f"from (values {values}) as v(ts, source_line)) to '{path}'"
        )
        return path

    engine, util = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"
    last_two = ["2026-11-02 23:58:00", "2026-11-02 23:59:00"]
    files = [
        write("a", "n1", None, [*every(300, "2026-11-02 23:10:00", 10), "2026-11-03 01:30:00"]),
        write("engine", "n2", engine, [*last_two, "2026-11-03 02:00:00"]),
        write("util", "n2", util, [*last_two, "2026-11-03 00:00:10"]),
        write("engine3", "n3", engine, [*last_two, "2026-11-03 00:00:30"]),
        write("util3", "n3", util, [*last_two, "2026-11-03 00:00:10"]),
        write("engine4", "n4", engine, [*last_two, "2026-11-03 01:00:40"]),
        write("util4", "n4", util, [*last_two, "2026-11-03 01:00:10"]),
        write("engine5", "n5", engine, [*last_two, "2026-11-03 02:00:00"]),
        write("util5", "n5", util, [*last_two, "2026-11-03 01:10:00"]),
    ]
    con.execute(
        "create table sample_sources as select path, file, 'c' as cluster, "
        "(row_number() over (order by file) - 1)::integer as file_id, "
        "'DCGM_FI_DEV_GPU_UTIL' as util_metric "
        "from (select unnest($files) as path, parse_filename(path) as file)",
        {"files": files},
    )
    given_declared_steps(con)
    given_nov2_day_samples(con, files)
    assert con.execute(
        "select n.node, d.ts from day_samples as d join (select distinct series_id, node "
        "from day_samples where not look_ahead) as n using (series_id) where d.look_ahead "
        "order by n.node"
    ).fetchall() == [
        ("n1", T(2026, 11, 3, 1, 30)),
        # GPU_UTIL: no GR_ENGINE_ACTIVE row supersedes it in its hour (it was 02:00's
        # GR_ENGINE_ACTIVE row while a day's GR_ENGINE_ACTIVE row superseded all its GPU_UTIL)
        ("n2", T(2026, 11, 3, 0, 0, 10)),
        ("n3", T(2026, 11, 3, 0, 0, 30)),  # GR_ENGINE_ACTIVE supersedes 00:00:10's GPU_UTIL
        ("n4", T(2026, 11, 3, 1, 0, 40)),  # likewise in n4's first hour with rows
        ("n5", T(2026, 11, 3, 1, 10)),  # the first hour with rows first: not 02:00's
    ]  # fmt: skip
    given_ordered_samples(con, 5.0)
    rows = rollup_rows(con, 5.0, T(2026, 11, 3)).fetchall()
    # n1's tenth spacing (to 01:30) gives it a step of its own, the median 5 min (without the
    # look-ahead, nine spacings: the 60 s of a cluster without one), which the others take as
    # the cluster's; n2's last sample covers the 70 s to the next day's GPU_UTIL row (the step
    # when that row was passed over), n3's the 90 s to its GR_ENGINE_ACTIVE one, n4's and
    # n5's the step
    assert sorted((r[1], r[3].time().isoformat(), r[7], r[8]) for r in rows) == [
        *(("n1", ts[11:], 300_000, 300_000) for ts in every(300, "2026-11-02 23:10:00", 10)),
        ("n2", "23:58:00", 60_000, 300_000),
        ("n2", "23:59:00", 70_000, 300_000),
        ("n3", "23:58:00", 60_000, 300_000),
        ("n3", "23:59:00", 90_000, 300_000),
        ("n4", "23:58:00", 60_000, 300_000),
        ("n4", "23:59:00", 300_000, 300_000),
        ("n5", "23:58:00", 60_000, 300_000),
        ("n5", "23:59:00", 300_000, 300_000),
    ]


def sample_values(series: dict[tuple[str, str], list[str]]) -> str:
    """given_day_samples values (GPU 0, 50 %, a file per cluster) of each `(cluster, node)`'s
    timestamps."""
    return ", ".join(
        f"('{cluster}', '{cluster}.parquet', {line}, timestamp '{ts}', '{node}', 0, 50.0)"
        for line, (cluster, node, ts) in enumerate(
            (cluster, node, ts) for (cluster, node), times in series.items() for ts in times
        )
    )


def every(seconds: int, first: str, count: int) -> list[str]:
    """`count` timestamps `seconds` apart from `first`."""
    start = dt.datetime.fromisoformat(first)
    return [str(start + dt.timedelta(seconds=seconds * i)) for i in range(count)]


def rollup_steps_and_covers(con) -> dict[tuple[str, str], tuple[int, list[int]]]:
    """The rollup of the day: per (cluster, node), its step and its samples' covers (ms)."""
    cursor = rollup_rows(con, 5.0, T(2026, 11, 3))
    columns = [c[0] for c in cursor.description]
    result: dict[tuple[str, str], tuple[int, list[int]]] = {}
    rows = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
    for row in sorted(rows, key=lambda r: (r["cluster"], r["node"], r["ts"])):
        step, covers = result.setdefault((row["cluster"], row["node"]), (row["step_ms"], []))
        assert row["step_ms"] == step
        covers.append(row["cover_ms"])
    return result


def test_a_series_with_few_spacings_takes_its_clusters_typical_step(con):
    # A series' own step needs 10 spacings that day; a series with fewer takes the lower median
    # of its cluster's own steps, and 60 s when its cluster has none.
    sparse = ["2026-11-02 06:00", "2026-11-02 06:01", "2026-11-02 23:01"]
    one_gap = ["2026-11-02 06:00", "2026-11-02 23:00"]
    given_day_samples(con, sample_values({
        # cluster c: two 60 s series, a 15 s one, and one at 60 s for 5 minutes then hourly
        ("c", "n1"): every(60, "2026-11-02 06:00", 11),
        ("c", "n2"): every(60, "2026-11-02 06:00", 11),
        ("c", "n3"): every(15, "2026-11-02 06:00", 11),
        ("c", "n4"): every(60, "2026-11-02 06:00", 6) + every(3600, "2026-11-02 07:05", 5),
        ("c", "n5"): sparse,
        ("c", "n6"): one_gap,
        # cluster d: a 20 s and a 40 s series
        ("d", "m1"): every(20, "2026-11-02 06:00", 11),
        ("d", "m2"): every(40, "2026-11-02 06:00", 11),
        ("d", "m3"): sparse,
        # cluster e: no series with 10 spacings
        ("e", "k1"): one_gap,
    }))  # fmt: skip
    given_ordered_samples(con, 5.0)
    assert rollup_steps_and_covers(con) == {
        # 10 spacings of 60 s, of 15 s: their own steps, even next to 60 s series
        ("c", "n1"): (60000, [60000] * 11),
        ("c", "n2"): (60000, [60000] * 11),
        ("c", "n3"): (15000, [15000] * 11),
        # 5 spacings of 60 s and 5 of an hour: the lower median is 60 s, a spacing it had (the
        # median, 1,830 s, would let each hourly sample stand for 30.5 minutes)
        ("c", "n4"): (60000, [60000] * 11),
        # 2 spacings (60 s, then 17 h; their median was 30,630 s, so 06:01 covered that) and 1
        # spacing (17 h, which was its step): c's typical step, the lower median of 15, 60,
        # 60, 60 s, so the 17 h gap is unmeasured, never covered
        ("c", "n5"): (60000, [60000, 60000, 60000]),
        ("c", "n6"): (60000, [60000, 60000]),
        ("d", "m1"): (20000, [20000] * 11),
        ("d", "m2"): (40000, [40000] * 11),
        # d's typical step: the lower median of 20 and 40 s, 20 s (never their mean, 30 s)
        ("d", "m3"): (20000, [20000, 20000, 20000]),
        # no series of e has a step of its own: 60 s
        ("e", "k1"): (60000, [60000, 60000]),
    }


def test_a_declared_step_overrides_the_estimate(con):
    # the catalog declares 30 s for cluster c (settings telemetry: {step_s: 30}); d declares none
    given_day_samples(
        con,
        sample_values(
            {
                ("c", "n1"): every(60, "2026-11-02 06:00", 11),
                ("c", "n2"): every(15, "2026-11-02 06:00", 11),
                ("c", "n3"): ["2026-11-02 06:00", "2026-11-02 23:00"],
                ("d", "m1"): every(60, "2026-11-02 06:00", 11),
            }
        ),
        declared_steps={"c": 30000},
    )
    given_ordered_samples(con, 5.0)
    assert rollup_steps_and_covers(con) == {
        # 60 s apart: each sample stands for the declared 30 s, the rest is unmeasured
        ("c", "n1"): (30000, [30000] * 11),
        # 15 s apart: never past the next sample; the last one covers the declared step
        ("c", "n2"): (30000, [15000] * 10 + [30000]),
        ("c", "n3"): (30000, [30000, 30000]),
        ("d", "m1"): (60000, [60000] * 11),
    }


def test_the_rollup_marks_where_a_series_leaves_a_minute_or_more_uncovered(con):
    # declared step 60 s: a sample covers a minute, the time to the next sample beyond that is
    # uncovered. n2's next sample is the next day's (looked ahead to).
    n1 = ["00:00", "00:01", "00:03", "00:04:59", "00:06", "23:59"]
    given_day_samples(
        con,
        sample_values({
            ("c", "n1"): [f"2026-11-02 {at}" for at in n1],
            ("c", "n2"): ["2026-11-02 23:50"],
        }),
        declared_steps={"c": 60000},
    )  # fmt: skip
    con.execute(
        "insert into day_samples by name select series_id, timestamp '2026-11-03 00:30' as ts, "
        "1 as util_rank, false as superseded, true as look_ahead, false as carried "
        "from (select distinct series_id from day_samples where node = 'n2')"
    )
    given_ordered_samples(con, 5.0)
    rows = rollup_rows(con, 5.0, T(2026, 11, 3)).fetchall()
    marks = sorted((r[1], r[3].strftime("%H:%M:%S"), r[12]) for r in rows)
    assert marks == [
        ("n1", "00:00:00", None),
        # 60 s uncovered (00:02-00:03): the floor, marked with the next sample's time
        ("n1", "00:01:00", T(2026, 11, 2, 0, 3)),
        # 59 s uncovered, then 1 s: not marked
        ("n1", "00:03:00", None),
        ("n1", "00:04:59", None),
        ("n1", "00:06:00", T(2026, 11, 2, 23, 59)),
        # the day's last sample: where its silence ends is another day's (incidents.sql finds
        # it from each series' first and last covered time of each day)
        ("n1", "23:59:00", None),
        ("n2", "23:50:00", None),
    ]


def write_rollup(con, select: str, path, params: list | None = None) -> str:
    """A daily rollup of cluster `c`: its samples at `path` from `select` (node, gpu_index, ts,
    util_pct, cover_ms, idle_run), named by the join keys the rollup stores, with the idle-run
    label of idle samples (run; idle threshold 5 %), and their sums per series-hour (the
    rollup's own SQL) beside it, whose path it returns."""
    con.execute(
        "copy (select * exclude (idle_run, node, gpu_index), "
        "series_key('c', node, gpu_index) as series_key, "
        "date_trunc('hour', ts) as hour, case when util_pct < 5 then idle_run end as run, "
        # no memory or power readings: these tests are about time
        "null::double as mem_used_mib, null::double as power_w "
        f"from ({select})) to '{path}'",
        params,
    )
    hours = Path(path).with_name("hours.parquet")
    sql = sql_text("rollup/gpu_sample_hours")
    con.execute(
        f"copy ({sql}) to '{hours}'",
        bind(sql, {"samples_file": str(path), "idle_threshold_pct": 5.0}),
    )
    return str(hours)


def test_zombie_needs_an_unbroken_idle_run_of_the_minimum_length(con, tmp_path):
    # one job GPU, 10-minute samples: 1 h idle, one busy sample, then 2 h idle
    utils = [1.0] * 6 + [50.0] + [1.0] * 12
    con.execute("""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'n1' as node, 0 as gpu_index, 'A100' as gpu_model,
        420 as gpu_share, false as in_outage, h as hour, h as seg_from,
        h + interval 1 hour as seg_to, timestamp '2026-11-02 04:00' as cover_until
        from unnest(range(timestamp '2026-11-02 00:00', timestamp '2026-11-02 04:00',
                          interval 1 hour)) as t(h)""")
    (tmp_path / "cluster=c/day=2026-11-02").mkdir(parents=True)
    hours = write_rollup(
        con,
        "select 'n1' as node, 0 as gpu_index, "
        "timestamp '2026-11-02 00:00' + to_minutes(10 * i) as ts, "
        "utils[i + 1] as util_pct, 600000::bigint as cover_ms, "
        # the rollup's idle-run number: busy samples so far that day
        "count(*) filter (utils[i + 1] >= 5) over (order by i) as idle_run "
        f"from (select range(19) as r, {utils} as utils), unnest(r) as t(i)",
        tmp_path / "cluster=c/day=2026-11-02/s.parquet",
    )
    params = {
        **NOV,
        "sample_files": [str(tmp_path / "cluster=c/day=2026-11-02/s.parquet")],
        "hour_files": [hours],
        "idle_threshold_pct": 5.0,
        "zombie_min_ms": 2 * 3_600_000,
    }
    cursor = run(con, "facts/job_sample_time", params)
    row = dict(zip([c[0] for c in cursor.description], cursor.fetchone(), strict=True))
    # a whole GPU: units are 420 x ms
    assert (row["productive_units"], row["idle_units"], row["zombie_units"]) == (
        600_000 * 420,
        3_600_000 * 420,
        7_200_000 * 420,
    )


def test_a_zombie_run_spans_midnight_and_a_busy_sample_before_it_breaks_it(con, tmp_path):
    # one job holds GPUs 0 and 1 of n1, 11-02 20:00 - 11-03 04:00; 10-minute samples in two
    # daily rollups. GPU 0: busy 20:00-22:50, idle 23:00-00:50 (1 h each side of midnight: one
    # 2 h run, zombie), busy 01:00, idle 01:10-01:50, no samples 02:00-02:20, idle 02:30-03:50
    # (a gap does not break a run: 140 min, zombie). GPU 1: idle 22:00-23:40, busy 23:50, idle
    # 00:00-00:50: the busy sample breaks the run (110 + 60 min, idle, not zombie).
    def at(day: int, hhmm: str) -> dt.datetime:
        return dt.datetime.combine(dt.date(2026, 11, day), dt.time.fromisoformat(hhmm))

    def every_10_min(gpu: int, first: dt.datetime, last: dt.datetime, util: float) -> list:
        count = int((last - first).total_seconds() // 600) + 1
        return [(gpu, first + dt.timedelta(minutes=10 * i), util) for i in range(count)]

    samples = [
        *every_10_min(0, at(2, "20:00"), at(2, "22:50"), 80.0),
        *every_10_min(0, at(2, "23:00"), at(3, "00:50"), 1.0),
        *every_10_min(0, at(3, "01:00"), at(3, "01:00"), 80.0),
        *every_10_min(0, at(3, "01:10"), at(3, "01:50"), 1.0),
        *every_10_min(0, at(3, "02:30"), at(3, "03:50"), 1.0),
        *every_10_min(1, at(2, "22:00"), at(2, "23:40"), 1.0),
        *every_10_min(1, at(2, "23:50"), at(2, "23:50"), 80.0),
        *every_10_min(1, at(3, "00:00"), at(3, "00:50"), 1.0),
    ]
    con.execute("create table s (gpu_index integer, ts timestamp, util_pct double)")
    con.executemany("insert into s values (?, ?, ?)", samples)
    con.execute("""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'n1' as node, g as gpu_index, 'A100' as gpu_model,
        420 as gpu_share, false as in_outage, h as hour, h as seg_from,
        h + interval 1 hour as seg_to, timestamp '2026-11-03 04:00' as cover_until
        from unnest(range(timestamp '2026-11-02 20:00', timestamp '2026-11-03 04:00',
                          interval 1 hour)) as t(h), unnest([0, 1]) as u(g)""")
    files, hour_files = [], []
    for day in ("2026-11-02", "2026-11-03"):
        folder = tmp_path / f"cluster=c/day={day}"
        folder.mkdir(parents=True)
        files.append(str(folder / "s.parquet"))
        # the rollup's idle-run number: busy samples of the GPU so far that day
        hours = write_rollup(
            con,
            "select 'n1' as node, gpu_index, ts, util_pct, 600000::bigint as cover_ms, "
            "count(*) filter (util_pct >= 5) over (partition by gpu_index order by ts) "
            "as idle_run from s where ts::date = ?::date",
            files[-1],
            [day],
        )
        hour_files.append(hours)
    params = {**NOV, "sample_files": files, "hour_files": hour_files,
              "idle_threshold_pct": 5.0, "zombie_min_ms": 2 * 3_600_000}  # fmt: skip
    cursor = run(con, "facts/job_sample_time", params)
    columns = [c[0] for c in cursor.description]
    days = {
        row["day"].day: row
        for row in (dict(zip(columns, r, strict=True)) for r in cursor.fetchall())
    }
    minute = 60_000 * 420  # a whole GPU: units are 420 x ms
    # (productive, idle, zombie) of each billing day; the zombie run across midnight counts
    # an hour on each side
    assert {
        day: (row["productive_units"], row["idle_units"], row["zombie_units"])
        for day, row in days.items()
    } == {
        # GPU 0: busy 20:00-22:50, idle 23:00-23:50 (zombie); GPU 1: idle 22:00-23:40, busy
        # 23:50 (its run is broken: idle)
        2: (190 * minute, 110 * minute, 60 * minute),
        # GPU 0: idle 00:00-00:50 (the run from the 2nd), busy 01:00, idle 01:10-03:50 across
        # the gap (zombie); GPU 1: idle 00:00-00:50 after its busy sample
        3: (10 * minute, 60 * minute, (60 + 140) * minute),
    }


def test_a_samples_time_past_midnight_counts_in_the_next_billing_day(con, tmp_path):
    # one job GPU until 00:02, 10-minute samples from 22:05: 20 % until 23:45, then 60 % at
    # 23:55, whose 10 minutes are clipped at the job's end (7 min), 2 of them after midnight
    con.execute("""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'n1' as node, 0 as gpu_index, 'A100' as gpu_model,
        420 as gpu_share, false as in_outage, date_trunc('hour', f) as hour, f as seg_from,
        t as seg_to, timestamp '2026-11-03 00:02' as cover_until
        from (values (timestamp '2026-11-02 22:00', timestamp '2026-11-02 23:00'),
                     (timestamp '2026-11-02 23:00', timestamp '2026-11-03 00:00'),
                     (timestamp '2026-11-03 00:00', timestamp '2026-11-03 00:02')) as v(f, t)""")
    folder = tmp_path / "cluster=c/day=2026-11-02"
    folder.mkdir(parents=True)
    hours = write_rollup(
        con,
        "select 'n1' as node, 0 as gpu_index, ts, "
        "case when ts < timestamp '2026-11-02 23:50' then 20.0 else 60.0 end as util_pct, "
        "600000::bigint as cover_ms, row_number() over (order by ts) as idle_run "
        "from unnest(range(timestamp '2026-11-02 22:05', timestamp '2026-11-03 00:00', "
        "interval 10 minute)) as t(ts)",
        folder / "s.parquet",
    )
    params = {**NOV, "sample_files": [str(folder / "s.parquet")], "hour_files": [hours],
              "idle_threshold_pct": 5.0, "zombie_min_ms": 3_600_000}  # fmt: skip
    cursor = run(con, "facts/job_sample_time", params)
    columns = [c[0] for c in cursor.description]
    rows = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
    minute = 60_000 * 420  # a whole GPU: units are 420 x ms
    assert sorted(
        (r["day"].day, r["measured_units"], r["util_weighted_units"], r["productive_units"])
        for r in rows
    ) == [
        (2, 115 * minute, (110 * 20 + 5 * 60) * minute, 115 * minute),
        (3, 2 * minute, 2 * 60 * minute, 2 * minute),
    ]


def test_gpu_capacity_sweeps_shares_overlaps_and_outages(con):
    # one GPU: j1 holds it whole 00:00-02:00, j2 whole 01:00-03:00 (overlap 01:00-02:00), two
    # 1g MIG jobs m1 00:00-04:00 and m2 02:00-04:00 on top; outage 02:30-04:00. o1 held it
    # since October (the month counts from Nov 1 00:00); z held it for no time.
    con.execute("""create table catalog_nodes as select 'c' as cluster, 'n1' as node,
        'A100' as gpu_model, 1 as gpus, timestamp '1900-01-01' as in_service_from,
        timestamp '9999-12-31' as in_service_to""")
    con.execute("""create table stg_jobs as select date '2026-11-01' as billing_month,
        'c' as cluster, * from (values
        ('j1', timestamp '2026-11-02 00:00', timestamp '2026-11-02 02:00'),
        ('j2', timestamp '2026-11-02 01:00', timestamp '2026-11-02 03:00'),
        ('m1', timestamp '2026-11-03 00:00', timestamp '2026-11-03 04:00'),
        ('m2', timestamp '2026-11-03 02:00', timestamp '2026-11-03 04:00'),
        ('o1', timestamp '2026-10-31 20:00', timestamp '2026-11-01 01:00'),
        ('z', timestamp '2026-11-05 00:00', timestamp '2026-11-05 00:00')
    ) as v(job_id, start_at, held_until)""")
    con.execute("""create table job_gpus as select date '2026-11-01' as billing_month,
        'c' as cluster, job_id, 'n1' as node, 0 as gpu_index, gpu_share from (values
        ('j1', 420), ('j2', 420), ('m1', 60), ('m2', 60), ('o1', 420), ('z', 420)
    ) as v(job_id, gpu_share)""")
    con.execute("""create table catalog_outage_windows as select 'c' as cluster, 'n1' as node,
        timestamp '2026-11-02 02:30' as outage_from, timestamp '2026-11-02 04:00' as outage_to""")
    cursor = run(con, "facts/gpu_capacity", NOV)
    row = dict(zip([c[0] for c in cursor.description], cursor.fetchone(), strict=True))
    hour = 3_600_000  # ms; a whole GPU for an hour is 420 x hour units
    assert (
        row["capacity_units"], row["busy_units"], row["overlap_units"], row["down_units"],
        row["unallocated_units"],
    ) == (
        720 * 420 * hour,
        # j1+j2 cover 3 h whole; MIG slices 6 slice-hours; o1 1 h in November
        (3 * 420 + 4 * 60 + 2 * 60 + 420) * hour,
        1 * 420 * hour,  # the hour both held it whole
        int(1.5 * 420 * hour) - int(0.5 * 420 * hour),  # outage 02:30-04:00, j2 until 03:00
        (720 * 420 - 3 * 420 - 6 * 60 - 420 - 420) * hour,
    )  # fmt: skip


def given_rate_card_month(con, tiers: tuple[tuple, ...] = ()) -> None:
    """No cost pools (rate_card) and no reserved quota; `tiers` the price tiers as (queue,
    qos, multiplier, valid_from, valid_to) rows."""
    con.execute(
        "create table catalog_price_tiers (queue varchar, qos varchar, multiplier decimal(10, 4), "
        "multiplier_e4 bigint, valid_from timestamp, valid_to timestamp)"
    )
    for queue, qos, multiplier, valid_from, valid_to in tiers:
        con.execute(
            "insert into catalog_price_tiers values (?, ?, ?, ?, ?, ?)",
            [queue, qos, Decimal(multiplier), int(Decimal(multiplier) * 10_000),
             valid_from or T(1900, 1, 1), valid_to or T(9999, 12, 31)],
        )  # fmt: skip
    con.execute(
        "create table cost_pools (billing_month date, cluster varchar, gpu_model varchar, "
        "capacity_units bigint, cost_cents bigint, price_micro bigint, "
        "unit_price decimal(18, 6), idle_sharing varchar)"
    )
    con.execute(
        "create table reserved_quota_unused (billing_month date, tenant_id varchar, "
        "capacity_reservation_id varchar, cluster varchar, gpu_model varchar, "
        "unit_price decimal(18, 6), gpu_units bigint, guaranteed_units bigint, "
        "charge_numerator hugeint)"
    )


def test_charge_lines_round_by_largest_remainder(con):
    # three lines of 33 1/3 cents each (1.512e13 charge_numerator units per cent): exactly 1.00
    con.execute("""create table job_gpu_charges as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j-' || t as job_id, t as tenant_id, 'A100' as gpu_model,
        1.0::decimal(18, 6) as unit_price,
        1000::bigint as gpu_units, 504000000000000::hugeint as charge_numerator,
        0::bigint as credit_gpu_units, 0::hugeint as credit_numerator,
        null::varchar as price_tier
        from unnest(['a', 'b', 'c']) as u(t)""")
    con.execute("create table catalog_tenants (tenant_id varchar, name varchar, "
                "department varchar, cost_center varchar)")  # fmt: skip
    given_rate_card_month(con)
    run(con, "marts/issued_charge_lines")  # none: the month is open
    create_table(con, "job_line_cents", "facts/job_line_cents", NOV)
    rows = run(con, "marts/computed_charge_lines", NOV).fetchall()
    amounts = [row[-2] for row in rows]
    # each is 33.333 cents: floors 0.33 x 3 = 0.99, one cent to the first by tie-break
    assert amounts == [Decimal("0.34"), Decimal("0.33"), Decimal("0.33")]
    assert sum(amounts) == Decimal("1.00")


def test_a_line_is_split_over_its_jobs_to_the_cent(con):
    # one tenant's line of three jobs of 33 1/3 cents each, and a credit of 1/3 cent on one:
    # the line is 1.00 (floors 0.33 x 3, one cent more to the first job by cluster and job
    # id); the credit line rounds to 0.00, and so does its job's share
    con.execute("""create table job_gpu_charges as select date '2026-11-01' as billing_month,
        'c' as cluster, j as job_id, 'a' as tenant_id, 'A100' as gpu_model,
        1.0::decimal(18, 6) as unit_price,
        1000::bigint as gpu_units, 504000000000000::hugeint as charge_numerator,
        (j = 'j2')::bigint * 10 as credit_gpu_units,
        (j = 'j2')::hugeint * 5040000000000 as credit_numerator,
        null::varchar as price_tier
        from unnest(['j3', 'j1', 'j2']) as u(j)""")
    run(con, "marts/issued_charge_lines")  # none: the month is open
    create_table(con, "job_line_cents", "facts/job_line_cents", NOV)
    assert con.execute(
        "select job_id, charge_type, cents from job_line_cents order by all"
    ).fetchall() == [("j1", "usage", 34), ("j2", "credit", 0), ("j2", "usage", 33),
                     ("j3", "usage", 33)]  # fmt: skip


def test_job_gpu_charges_split_at_a_rate_change_and_a_reorganisation(con):
    # one job 11-14 22:00 -> 11-15 02:00 on one GPU; on the 15th the A100 price goes from 2.00
    # to 2.50 and account 'cv' moves from tenant vision to tenant robotics
    con.execute("""create table stg_jobs as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'cv' as account, 'batch' as queue, null as qos,
        'COMPLETED' as state""")
    con.execute("""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'A100' as gpu_model, h as hour, h as seg_from,
        h as priced_at, (3600000 * 420)::bigint as gpu_units, false as in_outage
        from unnest(range(timestamp '2026-11-14 22:00', timestamp '2026-11-15 02:00',
                          interval 1 hour)) as t(h)""")
    con.execute("""create table catalog_account_tenants as select * from (values
        ('cv', 'vision', 0, timestamp '1900-01-01', timestamp '2026-11-15'),
        ('cv', 'robotics', 1, timestamp '2026-11-15', timestamp '9999-12-31')
    ) as v(account, tenant_id, priority, valid_from, valid_to)""")
    con.execute("""create table catalog_rates as select *, null::varchar as cluster from (values
        ('A100', 2.00::decimal(18, 6), 2000000, timestamp '1900-01-01',
         timestamp '2026-11-15', 0),
        ('A100', 2.50::decimal(18, 6), 2500000, timestamp '2026-11-15',
         timestamp '9999-12-31', 1),
        ('*', 1.00::decimal(18, 6), 1000000, timestamp '1900-01-01',
         timestamp '9999-12-31', 2)
    ) as v(gpu_model, price_per_gpu_hour, price_micro, valid_from, valid_to, priority)""")
    given_rate_card_month(con)
    rows = con.execute(
        "select tenant_id, unit_price, gpu_units // 420, charge_numerator // 15120000000000 from ("
        + _sql("facts/job_gpu_charges")
        + ") order by tenant_id",
        {"billing_month": dt.date(2026, 11, 1)},
    ).fetchall()
    assert rows == [
        ("robotics", Decimal("2.500000"), 7_200_000, 500),
        ("vision", Decimal("2.000000"), 7_200_000, 400),
    ]


def test_a_reorganisation_at_a_half_hour_midnight_splits_the_hour(con):
    # billing in Asia/Kolkata (+05:30): the 15th begins at 11-14 18:30 UTC, where account 'cv'
    # moves from vision to robotics and the A100 price from 2.00 to 2.50; a job on one GPU
    # 18:00-19:00 UTC is half an hour of each (it was all vision's at 2.00, by the hour)
    con.execute("""create table stg_jobs as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'cv' as account, 'batch' as queue, null as qos,
        'COMPLETED' as state, 'A100' as gpu_model, timestamp '2026-11-14 18:00' as start_at,
        timestamp '2026-11-14 19:00' as held_until""")
    con.execute("""create table job_gpus as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'n1' as node, 0 as gpu_index, 420 as gpu_share""")
    con.execute("create table catalog_nodes (cluster varchar, node varchar, gpu_model varchar)")
    con.execute("""create table catalog_outage_windows (cluster varchar, node varchar,
        outage_from timestamp, outage_to timestamp)""")
    midnight = "timestamp '2026-11-14 18:30'"
    con.execute(f"""create table catalog_account_tenants as select * from (values
        ('cv', 'vision', 0, timestamp '1900-01-01', {midnight}),
        ('cv', 'robotics', 1, {midnight}, timestamp '9999-12-31')
    ) as v(account, tenant_id, priority, valid_from, valid_to)""")
    con.execute(f"""create table catalog_rates as select *, null::varchar as cluster from (values
        ('A100', 2.00::decimal(18, 6), 2000000, timestamp '1900-01-01', {midnight}, 0),
        ('A100', 2.50::decimal(18, 6), 2500000, {midnight}, timestamp '9999-12-31', 1)
    ) as v(gpu_model, price_per_gpu_hour, price_micro, valid_from, valid_to, priority)""")
    given_rate_card_month(con)
    kolkata = {
        **{k: v for k, v in NOV.items() if k != "currency"},
        "month_start": T(2026, 10, 31, 18, 30),
        "month_end": T(2026, 11, 30, 18, 30),
    }
    create_table(con, "job_gpu_hours", "facts/job_gpu_hours", kolkata)
    rows = con.execute(
        "select tenant_id, unit_price, gpu_units // 420, charge_numerator // 15120000000000 from ("
        + _sql("facts/job_gpu_charges")
        + ") order by tenant_id",
        {"billing_month": dt.date(2026, 11, 1)},
    ).fetchall()
    assert rows == [
        ("robotics", Decimal("2.500000"), 1_800_000, 125),
        ("vision", Decimal("2.000000"), 1_800_000, 100),
    ]


def test_a_queue_or_qos_tier_multiplies_the_rate_the_queues_first(con):
    # one GPU-hour each at the A100 rate of 1.000001; preemptible queue x0.5, QoS low x0.8,
    # QoS premium x1.25 from 11-15 on. Tiered prices in millionths round half up once.
    con.execute("""create table stg_jobs as select * from (values
        ('j1', 'preemptible', 'normal'), ('j2', 'batch', 'low'), ('j3', 'preemptible', 'low'),
        ('j4', 'batch', 'premium'), ('j5', 'batch', 'normal'), ('j6', null, 'low')
    ) as v(job_id, queue, qos), (select date '2026-11-01' as billing_month, 'c' as cluster,
        'acct' as account, 'COMPLETED' as state)""")
    # j4 runs 11-14 23:00 to 11-15 01:00: its second hour is in the premium tier
    con.execute("""create table job_gpu_hours as select billing_month, cluster, job_id,
        'A100' as gpu_model, h as hour, h as seg_from, h as priced_at,
        (3600000 * 420)::bigint as gpu_units, false as in_outage
        from stg_jobs, unnest(case job_id when 'j4'
            then [timestamp '2026-11-14 23:00', timestamp '2026-11-15 00:00']
            else [timestamp '2026-11-14 10:00'] end) as t(h)""")
    con.execute("""create table catalog_account_tenants as select 'acct' as account,
        't' as tenant_id, 0 as priority, timestamp '1900-01-01' as valid_from,
        timestamp '9999-12-31' as valid_to""")
    given_rates(con, [("A100", "1.000001", None, None, None)])
    given_rate_card_month(con, tiers=(
        ("preemptible", None, "0.5", None, None),
        (None, "low", "0.8", None, None),
        (None, "premium", "1.25", T(2026, 11, 15), None),
    ))  # fmt: skip
    rows = con.execute(
        "select job_id, unit_price, price_tier, charge_numerator // 1512000000 from ("
        + _sql("facts/job_gpu_charges")
        + ") order by job_id, unit_price",
        {"billing_month": dt.date(2026, 11, 1)},
    ).fetchall()
    assert rows == [
        ("j1", Decimal("0.500001"), "queue preemptible × 0.5", 500_001),  # 0.5000005 up
        ("j2", Decimal("0.800001"), "QoS low × 0.8", 800_001),  # 0.8000008
        ("j3", Decimal("0.500001"), "queue preemptible × 0.5", 500_001),  # the queue's tier
        ("j4", Decimal("1.000001"), None, 1_000_001),  # before the premium tier begins
        ("j4", Decimal("1.250001"), "QoS premium × 1.25", 1_250_001),  # 1.25000125
        ("j5", Decimal("1.000001"), None, 1_000_001),
        ("j6", Decimal("0.800001"), "QoS low × 0.8", 800_001),  # no queue: the QoS's tier
    ]


def given_rates(con, rows: list[tuple]) -> None:
    """catalog_rates from (gpu_model, price, cluster, valid_from, valid_to) rows."""
    con.execute(
        "create table catalog_rates (gpu_model varchar, price_per_gpu_hour decimal(18, 6), "
        "price_micro bigint, valid_from timestamp, valid_to timestamp, priority integer, "
        "cluster varchar)"
    )
    for i, (model, price, cluster, valid_from, valid_to) in enumerate(rows):
        con.execute(
            "insert into catalog_rates values (?, ?, ?, ?, ?, ?, ?)",
            [model, price, int(Decimal(price) * 1_000_000), valid_from or T(1900, 1, 1),
             valid_to or T(9999, 12, 31), i, cluster],
        )  # fmt: skip


def test_a_models_rate_beats_the_fallback_and_a_clusters_rate_the_all_clusters_one(con):
    # one hour of A100 and one of H100 on each of clusters a, b, c
    con.execute("""create table stg_jobs as select date '2026-11-01' as billing_month,
        c as cluster, c || m as job_id, 'acct' as account, null as queue, null as qos,
        'COMPLETED' as state
        from unnest(['a', 'b', 'c']) as x(c), unnest(['A100', 'H100']) as y(m)""")
    con.execute("""create table job_gpu_hours as select billing_month, cluster, job_id,
        substr(job_id, 2) as gpu_model, timestamp '2026-11-14 10:00' as hour,
        timestamp '2026-11-14 10:00' as seg_from, timestamp '2026-11-14 10:00' as priced_at,
        (3600000 * 420)::bigint as gpu_units,
        false as in_outage
        from stg_jobs""")
    con.execute("""create table catalog_account_tenants as select 'acct' as account,
        't' as tenant_id, 0 as priority, timestamp '1900-01-01' as valid_from,
        timestamp '9999-12-31' as valid_to""")
    # the cluster rates listed last: the catalog's order decides nothing
    given_rates(con, [
        ("A100", "2.00", None, None, None),
        ("*", "1.00", None, None, None),
        ("*", "0.50", "c", None, None),
        ("A100", "3.00", "b", None, None),
    ])  # fmt: skip
    given_rate_card_month(con)
    rows = con.execute(
        "select cluster, gpu_model, unit_price from (" + _sql("facts/job_gpu_charges") + ") "
        "order by cluster, gpu_model",
        {"billing_month": dt.date(2026, 11, 1)},
    ).fetchall()
    assert rows == [
        ("a", "A100", Decimal("2.000000")),  # the model's rate for every cluster
        ("a", "H100", Decimal("1.000000")),  # the fallback for every cluster
        ("b", "A100", Decimal("3.000000")),  # b's own A100 rate
        ("b", "H100", Decimal("1.000000")),
        ("c", "A100", Decimal("2.000000")),  # the model's rate beats c's own fallback
        ("c", "H100", Decimal("0.500000")),  # c's own fallback
    ]


def test_job_time_no_rate_prices_is_found_with_its_model_cluster_and_period(con):
    # a: A100 priced until Nov 10 and from Nov 11 (a gap between), H100 by a's own rate;
    # b: H100 with no rate for b; p: no rate either, but full_recovery's pool prices it
    con.execute("""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        cluster, gpu_model, hour, hour as seg_from, hour as priced_at,
        least(hour + interval 1 hour, seg_end) as seg_to,
        (epoch_ms(least(hour + interval 1 hour, seg_end)) - epoch_ms(hour)) * 420 as gpu_units
        from (values
            ('a', 'A100', timestamp '2026-11-09 23:00', timestamp '2026-11-10 02:30'),
            ('a', 'A100', timestamp '2026-11-12 00:00', timestamp '2026-11-12 01:00'),
            ('a', 'H100', timestamp '2026-11-05 00:00', timestamp '2026-11-05 01:00'),
            ('b', 'H100', timestamp '2026-11-05 00:00', timestamp '2026-11-05 01:00'),
            ('p', 'H100', timestamp '2026-11-05 00:00', timestamp '2026-11-05 01:00')
        ) as v(cluster, gpu_model, seg_start, seg_end),
        unnest(range(seg_start, seg_end, interval 1 hour)) as t(hour)""")
    given_rates(con, [
        ("A100", "2.00", None, None, T(2026, 11, 10)),
        ("A100", "2.50", None, T(2026, 11, 11), None),
        ("H100", "1.00", "a", None, None),
    ])  # fmt: skip
    con.execute("""create table cost_pools as select date '2026-11-01' as billing_month,
        'p' as cluster, 'H100' as gpu_model, 1000000::bigint as price_micro""")
    rows = run(con, "checks/job_time_has_a_rate", NOV).fetchall()
    assert rows == [
        ("a", "A100", T(2026, 11, 10, 0), T(2026, 11, 10, 2, 30), 2.5),
        ("b", "H100", T(2026, 11, 5, 0), T(2026, 11, 5, 1), 1.0),
    ]


def test_unused_reservations_are_priced_at_each_clusters_rate(con):
    # t reserves 1 A100 all November and uses none; clusters a and b hold the same A100
    # capacity, so each carries half; b has its own rate, 3.00 until Nov 11, then 4.00
    con.execute("""create table quota_steps as select date '2026-11-01' as billing_month,
        't' as tenant_id, 'A100' as pool, step_from,
        epoch_ms(step_to) - epoch_ms(step_from) as step_ms, 0 as share, true as in_quota,
        true as reserved, 420.0 as guaranteed_share
        from (values (timestamp '2026-11-01', timestamp '2026-11-11'),
                     (timestamp '2026-11-11', timestamp '2026-12-01')) as v(step_from, step_to)""")
    con.execute("""create table job_gpu_hours (billing_month date, cluster varchar,
        job_id varchar, gpu_model varchar, gpu_units bigint)""")
    con.execute("""create table job_usage (billing_month date, cluster varchar,
        job_id varchar, queue varchar)""")
    con.execute("create table catalog_nodes as select 'A100' as gpu_model")
    con.execute("""create table gpu_capacity as select date '2026-11-01' as billing_month,
        c as cluster, 'A100' as gpu_model, 1000::bigint as capacity_units
        from unnest(['a', 'b']) as x(c)""")
    given_rates(con, [
        ("A100", "2.00", None, None, None),
        ("A100", "3.00", "b", None, T(2026, 11, 11)),
        ("A100", "4.00", "b", T(2026, 11, 11), None),
    ])  # fmt: skip
    given_rate_card_month(con)
    con.execute("drop table reserved_quota_unused")
    rows = run(con, "facts/reserved_quota_unused", NOV).fetchall()
    columns = ["cluster", "unit_price", "gpu_hours", "charge_numerator"]
    names = [c[0] for c in run(con, "facts/reserved_quota_unused", NOV).description]
    picked = [tuple(row[names.index(c)] for c in columns) for row in rows]
    assert picked == [
        ("a", Decimal("2.000000"), 360.0, 360 * 2 * 15120000000000 * 100),  # 30 days / 2
        ("b", Decimal("3.000000"), 120.0, 120 * 3 * 15120000000000 * 100),  # 10 days / 2
        ("b", Decimal("4.000000"), 240.0, 240 * 4 * 15120000000000 * 100),  # 20 days / 2
    ]


def test_a_reservation_no_rate_prices_stops_the_month(con, tmp_path):
    from pipelines.catalog import Catalog, CatalogError, Settings
    from pipelines.defs.costing.assets import stop_on_unpriced_reservations

    # t reserves a queue that ran nothing: priced as '*', and the catalog has no '*' rate
    con.execute("""create table reserved_quota_unused as select
        date '2026-11-01' as billing_month, 't/train' as capacity_reservation_id,
        '*' as cluster, '*' as gpu_model, 720.0 as gpu_hours, null::bigint as price_micro""")
    catalog = Catalog(settings=Settings(), tenants=[], rates=[], source=tmp_path)
    with pytest.raises(CatalogError) as error:
        stop_on_unpriced_reservations(con, "2026-11", NOV, catalog)
    assert str(error.value) == (
        f"{tmp_path}/rates.yaml: no rate in force for GPU model '*' on any cluster in 2026-11, "
        "which prices reserved quota t/train: add a rate for the model or a '*' fallback"
    )
    con.execute("update reserved_quota_unused set price_micro = 1000000")
    stop_on_unpriced_reservations(con, "2026-11", NOV, catalog)  # priced: goes on


def test_gr_engine_active_supersedes_gpu_util_and_memory_joins_from_its_own_series(con, tmp_path):
    # three converted DCGM files for one GPU at 00:00 and 00:01: GPU_UTIL, GR_ENGINE_ACTIVE
    # (preferred) and FB_USED (a memory-only series, util_metric 'none')
    for name, metric, util, mem in [
        ("util", "DCGM_FI_DEV_GPU_UTIL", "90.0", "null"),
        ("engine", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "40.0", "null"),
        ("fb", "none", "null", "1234.0"),
    ]:
        con.execute(
            f"copy (select timestamp '2026-11-02 00:00' + to_minutes(i) as ts, 'n1' as node, "
            f"0 as gpu_index, {util}::double as util_pct, {mem}::double as mem_used_mib, "
            f"null::double as power_w, '{metric}' as util_metric, null::varchar as parse_error,"
            f" i + 1 as source_line from range(2) as r(i)) to '{tmp_path}/{name}.parquet'"
        )
    con.execute(
        "create table sample_sources as select format('{}/{}.parquet', ?, n) as path, "
        "n || '.json' as file, 'c' as cluster, file_id, 'DCGM_FI_DEV_GPU_UTIL' as util_metric "
        "from (values ('engine', 0), ('fb', 1), ('util', 2)) as t(n, file_id)",
        [str(tmp_path)],
    )
    given_declared_steps(con)
    given_nov2_day_samples(con, [str(tmp_path / f"{n}.parquet") for n in ("util", "engine", "fb")])
    given_ordered_samples(con, 5.0)
    rows = con.execute(
        "select ts::time, util_pct, mem_used_mib, file from ordered_samples "
        "join sample_sources using (file_id) order by ts"
    ).fetchall()
    assert [tuple(str(v) for v in row) for row in rows] == [
        ("00:00:00", "40.0", "1234.0", "engine.json"),
        ("00:01:00", "40.0", "1234.0", "engine.json"),
    ]
    counts = day_file_counts(con)
    # read, loaded, rejected, folded per file: GPU_UTIL's two samples were superseded
    assert [(r[2], r[3], r[4], r[5], r[6]) for r in counts] == [
        ("engine.json", 2, 2, 0, 0),
        ("fb.json", 2, 2, 0, 0),
        ("util.json", 2, 2, 0, 2),
    ]
    # the series is named by the metric it kept: GR_ENGINE_ACTIVE, not the files' GPU_UTIL
    # (sample_sources.util_metric names a file's lower-ranked metric); 2 samples of 60 s (no
    # series has 10 spacings): its step, and 2 minutes covered
    series = run(con, "rollup/day_sample_series", {"day_start": T(2026, 11, 2)}).fetchall()
    assert series == [
        (dt.date(2026, 11, 1), dt.date(2026, 11, 2), "c", "n1", 0,
         "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 60_000, 2, 120_000, T(2026, 11, 2), T(2026, 11, 2, 0, 2)),
    ]  # fmt: skip


def test_gr_engine_active_supersedes_gpu_util_only_in_the_hours_it_has(con, tmp_path):
    # One GPU exported by DCGM, a file per metric: GPU_UTIL (90 %) every 60 s all day, at :30
    # past each minute, and on into Nov 3 from 00:00:10; GR_ENGINE_ACTIVE (40 %) every 15 s
    # from 12:00 to 18:00 but for 14:00-15:00 (a user profiling the GPU: Nsight holds DCGM's
    # profiling counters, GPU_UTIL goes on), and on Nov 3 from 01:00
    def write(name: str, metric: str, util: float, first: str, seconds: int, count: int):
        path = tmp_path / f"{name}.parquet"
        con.execute(
            "copy (select ts::timestamp as ts, 'n1' as node, 0 as gpu_index, $util as util_pct, "
            "null::double as mem_used_mib, null::double as power_w, $metric as util_metric, "
            "null::varchar as parse_error, "
            "row_number() over (order by ts::timestamp) as source_line "
            f"from unnest($times) as t(ts)) to '{path}'",
            {"util": util, "metric": metric, "times": every(seconds, first, count)},
        )
        return path

    gpu_util, gr_engine = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    util = [
        write("util", gpu_util, 90.0, "2026-11-02 00:00:30", 60, 1440),
        write("util3", gpu_util, 90.0, "2026-11-03 00:00:10", 60, 120),
    ]
    engine = [
        write(f"engine{hour}", gr_engine, 40.0, f"2026-11-02 {hour}:00", 15, 240)
        for hour in (12, 13, 15, 16, 17)
    ]
    engine.append(write("engine3", gr_engine, 40.0, "2026-11-03 01:00", 15, 240))
    files = [str(path) for path in util + engine]
    con.execute(
        "create table sample_sources as select path, parse_filename(path, true) || '.json' "
        "as file, 'c' as cluster, (row_number() over (order by path) - 1)::integer as file_id, "
        "'DCGM_FI_DEV_GPU_UTIL' as util_metric from unnest($files) as f(path)",
        {"files": files},
    )
    given_declared_steps(con)
    given_nov2_day_samples(con, files)
    # the next day's first sample: its first hour has GPU_UTIL only, kept there (Nov 3's
    # GR_ENGINE_ACTIVE begins at 01:00)
    assert con.execute("select ts from day_samples where look_ahead").fetchall() == [
        (T(2026, 11, 3, 0, 0, 10),)
    ]
    given_ordered_samples(con, 5.0)
    hours: dict[int, tuple[int, int, set[float]]] = {}
    rows = rollup_rows(con, 5.0, T(2026, 11, 3)).fetchall()
    for row in rows:
        samples, cover_ms, utils = hours.get(row[3].hour, (0, 0, set()))
        hours[row[3].hour] = (samples + 1, cover_ms + row[7], utils | {row[4]})
    # each hour is one metric's: GR_ENGINE_ACTIVE's 240 samples of 15 s where it has rows,
    # GPU_UTIL's 60 of 60 s in the others (00:00-12:00, 14:00-15:00 and 18:00-24:00), whose
    # samples of 12:00-14:00 and 15:00-18:00 are superseded. Each metric has its own step: a
    # step of both, the lower median of 1,140 spacings of about 60 s and 1,200 of about 15 s,
    # would be 15 s, and GPU_UTIL's samples would stand for a quarter of their time. 11:59:30's
    # and 14:59:30's GPU_UTIL samples cover the 30 s to the GR_ENGINE_ACTIVE one at 12:00 and
    # 15:00, 23:59:30's the 40 s to Nov 3's first GPU_UTIL sample
    util_hour, engine_hour = (60, 3_600_000, {90.0}), (240, 3_600_000, {40.0})
    assert hours == {
        **{hour: util_hour for hour in (*range(12), 14, *range(18, 24))},
        **{hour: engine_hour for hour in (12, 13, 15, 16, 17)},
        11: (60, 3_570_000, {90.0}),
        14: (60, 3_570_000, {90.0}),
        23: (60, 3_580_000, {90.0}),
    }
    # Σ covered ms × utilisation: GPU_UTIL's 68,320 s at 90 %, GR_ENGINE_ACTIVE's 18,000 s at 40 %
    assert sum(row[7] * row[4] for row in rows) == 90 * 68_320_000 + 40 * 18_000_000
    # read = loaded + rejected per file; folded: the 300 GPU_UTIL rows of GR_ENGINE_ACTIVE's
    # five hours. Loaded less folded, 1,440 + 1,200 - 300, are the day's 2,340 samples
    counts = day_file_counts(con)
    assert [(r[2], r[3], r[4], r[5], r[6]) for r in counts] == [
        *((f"engine{hour}.json", 240, 240, 0, 0) for hour in (12, 13, 15, 16, 17)),
        ("util.json", 1440, 1440, 0, 300),
    ]
    assert sum(hour[0] for hour in hours.values()) == 2340
    # a row per metric of the series: GPU_UTIL's 1,140 samples cover 68,320 s (1,137 of 60 s,
    # 2 of 30 s, 1 of 40 s) and GR_ENGINE_ACTIVE's 1,200 cover 18,000 s: 79.1 % and 20.9 % of
    # the GPU's sampled time. (A day's rule kept GR_ENGINE_ACTIVE's samples alone, 18,000 s:
    # the other 68,320 s of the day were unmeasured.) 14:00-14:00:30 and 18:00-18:00:30 are
    # uncovered: GR_ENGINE_ACTIVE's 13:59:45 and 17:59:45 cover its 15 s step
    series = run(con, "rollup/day_sample_series", {"day_start": T(2026, 11, 2)}).fetchall()
    assert sorted(series, key=lambda row: row[5]) == [
        (dt.date(2026, 11, 1), dt.date(2026, 11, 2), "c", "n1", 0, "DCGM_FI_DEV_GPU_UTIL",
         60_000, 1140, 68_320_000, T(2026, 11, 2, 0, 0, 30), T(2026, 11, 3, 0, 0, 10)),
        (dt.date(2026, 11, 1), dt.date(2026, 11, 2), "c", "n1", 0,
         "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 15_000, 1200, 18_000_000, T(2026, 11, 2, 12),
         T(2026, 11, 2, 18)),
    ]  # fmt: skip


def test_a_jobs_gpus_are_summed_per_gpu_model(con, tmp_path):
    # job j holds two A100s (n1) and an H100 (n2), job k one A100 (n3), all 00:00-01:00,
    # sampled every 60 s: a row per job x GPU model x day, its GPUs' time summed
    gpus = [("j", "n1", 0, "A100"), ("j", "n1", 1, "A100"), ("j", "n2", 0, "H100"),
            ("k", "n3", 0, "A100")]  # fmt: skip
    con.execute(f"""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        'c' as cluster, g.job_id, g.node, g.gpu_index, g.gpu_model, 420 as gpu_share,
        false as in_outage, timestamp '2026-11-02 00:00' as hour,
        timestamp '2026-11-02 00:00' as seg_from, timestamp '2026-11-02 01:00' as seg_to,
        timestamp '2026-11-02 01:00' as cover_until
        from (values {", ".join(map(str, gpus))}) as g(job_id, node, gpu_index, gpu_model)""")
    folder = tmp_path / "cluster=c/day=2026-11-02"
    folder.mkdir(parents=True)
    series = ", ".join(f"('{node}', {index})" for _, node, index, _ in gpus)
    hours = write_rollup(
        con,
        "select g.node, g.gpu_index, timestamp '2026-11-02 00:00' + to_seconds(60 * i) as ts, "
        "50.0 as util_pct, 60000::bigint as cover_ms, 1 as idle_run "
        f"from (values {series}) as g(node, gpu_index), range(60) as r(i)",
        folder / "s.parquet",
    )
    params = {**NOV, "sample_files": [str(folder / "s.parquet")], "hour_files": [hours],
              "idle_threshold_pct": 5.0, "zombie_min_ms": 7_200_000}  # fmt: skip
    cursor = run(con, "facts/job_sample_time", params)
    rows = sorted(
        (job_id, gpu_model, str(day), measured)
        for _, _, job_id, gpu_model, day, measured, *_ in cursor.fetchall()
    )
    hour = 3_600_000 * 420
    assert rows == [
        ("j", "A100", "2026-11-02", 2 * hour),
        ("j", "H100", "2026-11-02", hour),
        ("k", "A100", "2026-11-02", hour),
    ]


def test_a_sample_before_the_hour_covers_into_the_next_hour(con, tmp_path):
    # a job holds the GPU 00:00-02:00; samples every 60 s but 30 s off the minute: the sample at
    # 00:59:30 stands for 60 s although the hour segment ends at 01:00:00
    con.execute("""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'n1' as node, 0 as gpu_index, 'A100' as gpu_model,
        420 as gpu_share, false as in_outage, h as hour, h as seg_from,
        h + interval 1 hour as seg_to, timestamp '2026-11-02 02:00' as cover_until
        from unnest([timestamp '2026-11-02 00:00', timestamp '2026-11-02 01:00']) as t(h)""")
    folder = tmp_path / "cluster=c/day=2026-11-02"
    folder.mkdir(parents=True)
    hours = write_rollup(
        con,
        "select 'n1' as node, 0 as gpu_index, "
        "timestamp '2026-11-02 00:00:30' + to_seconds(60 * i) as ts, 50.0 as util_pct, "
        "60000::bigint as cover_ms, i + 1 as idle_run from range(120) as r(i)",
        folder / "s.parquet",
    )
    params = {**NOV, "sample_files": [str(folder / "s.parquet")], "hour_files": [hours],
              "idle_threshold_pct": 5.0, "zombie_min_ms": 7_200_000}  # fmt: skip
    cursor = run(con, "facts/job_sample_time", params)
    row = dict(zip([c[0] for c in cursor.description], cursor.fetchone(), strict=True))
    # 120 samples x 60 s, the last (01:59:30) clipped at the job end: 119.5 minutes
    assert row["measured_units"] == (119 * 60_000 + 30_000) * 420


def test_a_sample_across_midnight_counts_its_time_in_each_day(con, tmp_path):
    # a job holds the GPU 11-02 23:00 - 11-03 01:00; samples every 60 s, 30 s off the minute,
    # at 20 % until midnight and 80 % after: the one at 23:59:30 covers 30 s of each day
    con.execute("""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'n1' as node, 0 as gpu_index, 'A100' as gpu_model,
        420 as gpu_share, false as in_outage, h as hour, h as seg_from,
        h + interval 1 hour as seg_to, timestamp '2026-11-03 01:00' as cover_until
        from unnest([timestamp '2026-11-02 23:00', timestamp '2026-11-03 00:00']) as t(h)""")
    files, hour_files = [], []
    for day, util in (("2026-11-02", 20.0), ("2026-11-03", 80.0)):
        folder = tmp_path / f"cluster=c/day={day}"
        folder.mkdir(parents=True)
        files.append(str(folder / "s.parquet"))
        first = "2026-11-02 23:00:30" if day == "2026-11-02" else "2026-11-03 00:00:30"
        hour_files.append(write_rollup(
            con,
            f"select 'n1' as node, 0 as gpu_index, timestamp '{first}' "
            f"+ to_seconds(60 * i) as ts, {util} as util_pct, 60000::bigint as cover_ms, "
            "i + 1 as idle_run from range(60) as r(i)",
            files[-1],
        ))  # fmt: skip
    params = {**NOV, "sample_files": files, "hour_files": hour_files,
              "idle_threshold_pct": 5.0, "zombie_min_ms": 7_200_000}  # fmt: skip
    cursor = run(con, "facts/job_sample_time", params)
    columns = [c[0] for c in cursor.description]
    rows = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
    rows.sort(key=lambda row: row["day"])
    second = 1000 * 420  # a whole GPU: units are 420 x ms
    # the 2nd: 23:00:30-24:00 (the first 30 s are not measured); the 3rd: 30 s from the 2nd's
    # last sample, then 00:00:30-01:00 (the last sample clipped at the job's end)
    assert [
        (row["day"].day, row["measured_units"], row["util_weighted_units"]) for row in rows
    ] == [
        (2, 3570 * second, 3570 * second * 20.0),
        (3, 3600 * second, 30 * second * 20.0 + 3570 * second * 80.0),
    ]


def test_utilisation_weighted_time_is_exact_in_any_row_order(con, tmp_path):
    # a job holds the GPU 11-02 10:30 - 12:00: 10:30-11:00 from its samples, 11:00-12:00 from
    # the rollup's sums of the hour; 60 s samples at utilisations no double holds exactly, the
    # rollup written in time order and in reverse (as threads may write it)
    con.execute("""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        'c' as cluster, 'j' as job_id, 'n1' as node, 0 as gpu_index, 'A100' as gpu_model,
        420 as gpu_share, false as in_outage, h as hour, greatest(h, timestamp '2026-11-02 10:30')
        as seg_from, h + interval 1 hour as seg_to, timestamp '2026-11-02 12:00' as cover_until
        from unnest([timestamp '2026-11-02 10:00', timestamp '2026-11-02 11:00']) as t(h)""")
    utils = [round(33.3 + 0.0101 * i, 4) for i in range(120)]  # 10:00 - 11:59
    results = []
    for order in ("asc", "desc"):
        folder = tmp_path / order / "cluster=c/day=2026-11-02"
        folder.mkdir(parents=True)
        hours = write_rollup(
            con,
            "select 'n1' as node, 0 as gpu_index, "
            "timestamp '2026-11-02 10:00' + to_minutes(i) as ts, "
            "$utils[i + 1] as util_pct, 60000::bigint as cover_ms, null as idle_run "
            f"from range(120) as r(i) order by ts {order}",
            folder / "s.parquet",
            {"utils": utils},
        )
        params = {**NOV, "sample_files": [str(folder / "s.parquet")], "hour_files": [hours],
                  "idle_threshold_pct": 5.0, "zombie_min_ms": 7_200_000}  # fmt: skip
        cursor = run(con, "facts/job_sample_time", params)
        row = dict(zip([c[0] for c in cursor.description], cursor.fetchone(), strict=True))
        results.append((row["measured_units"], row["util_weighted_units"]))
    # utilisation in thousandths of a percent (util_milli_pct), 60 s x 420 units a sample
    exact = sum(Decimal(str(u)).quantize(Decimal("0.001")) for u in utils[30:]) * 60_000 * 420
    assert results == [(90 * 60_000 * 420, exact)] * 2
    assert isinstance(results[0][1], Decimal)


def test_telemetry_labels_are_checked_against_the_scheduler(con, tmp_path):
    """Samples every 10 minutes in hour 10 of Nov 2; the scheduler holds n1/0 by J1 (account
    a) until 10:30, n1/1 by J2 (b) all hour, and the MIG GPU n2/0 by pod web-1 (uid u1,
    namespace team); pod web-2 (u2) is known but holds nothing."""

    def at(minute: int) -> dt.datetime:
        return T(2026, 11, 2, 10, minute)

    # (node, gpu, first minute, samples, job_id, pod, namespace, MIG instance, its slices)
    spans = [
        ("n1", 0, 0, 6, "J1", None, None, None, None),  # J1 until 10:30, then nobody
        ("n1", 0, 0, 2, "J9", None, None, None, None),  # a job the scheduler never saw
        ("n1", 1, 0, 3, "J1", None, None, None, None),  # J1, but on n1/0 by the scheduler
        ("n1", 1, 30, 3, None, None, "a", None, None),  # a namespace; J2's account is b
        ("n2", 0, 0, 6, None, "web-1", "team", "7", 1),  # agrees, on a 1g slice
        ("n2", 0, 0, 6, None, "web-1", "other", "8", 2),  # the pod, another namespace, 2g
        ("n2", 0, 0, 6, None, "web-2", "team", "9", 1),  # a pod that held nothing
        ("n2", 0, 0, 1, None, "", "", None, None),  # empty labels: not a label
    ]
    rows = [
        (at(first + 10 * k), node, gpu, 50.0, job, pod, ns, instance, slices)
        for node, gpu, first, count, job, pod, ns, instance, slices in spans
        for k in range(count)
    ] + [(T(2026, 12, 1, 0, 0), "n1", 0, 50.0, "J1", None, None, None, None)]  # December
    labelled = pa.table(
        list(zip(*rows, strict=True)),
        names=["ts", "node", "gpu_index", "util_pct", "job_id", "pod", "namespace",
               "gpu_instance", "gpu_instance_slices"],
    )  # fmt: skip
    pq.write_table(labelled, tmp_path / "labelled.parquet")
    # the same J1 samples again in a file without labels columns but job_id (another metric)
    con.execute(
        f"copy (select timestamp '2026-11-02 10:00' + to_minutes(10 * i) as ts, 'n1' as node, "
        f"0 as gpu_index, 'J1' as job_id from range(3) as r(i)) to '{tmp_path}/memory.parquet'"
    )
    con.execute(
        f"copy (select timestamp '2026-11-02 10:00' as ts, 'n1' as node, 0 as gpu_index, "
        f"1.0 as util_pct) to '{tmp_path}/plain.parquet'"
    )
    names = ["labelled", "memory", "plain"]
    con.execute(
        "create table sample_sources as select format('{}/{}.parquet', ?, n) as path, "
        "n || '.json' as file, 'k' as cluster from unnest(?) as t(n)",
        [str(tmp_path), names],
    )
    files = readable_sample_files(tmp_path, [str(tmp_path / f"{n}.parquet") for n in names])
    con.execute("""create table job_gpu_hours as select date '2026-11-01' as billing_month,
        'k' as cluster, * from (values
        ('J1', 'n1', 0, timestamp '2026-11-02 10:00', timestamp '2026-11-02 10:00',
         timestamp '2026-11-02 10:30'),
        ('J2', 'n1', 1, timestamp '2026-11-02 10:00', timestamp '2026-11-02 10:00',
         timestamp '2026-11-02 11:00'),
        ('u1', 'n2', 0, timestamp '2026-11-02 10:00', timestamp '2026-11-02 10:00',
         timestamp '2026-11-02 11:00')
    ) as v(job_id, node, gpu_index, hour, seg_from, seg_to)""")
    con.execute("""create table stg_jobs as select date '2026-11-01' as billing_month,
        'k' as cluster, * from (values ('J1', 'a'), ('J2', 'b'), ('u1', 'team'))
        as v(job_id, account)""")
    con.execute("""create table stg_job_records as select 'k' as cluster, *,
        null as reject_reason, 'job' as record_type, 1 as record_rank from (values
        ('J1', 'a', 'J1,k,a,...', null), ('J2', 'b', 'J2,k,b,...', null),
        ('u1', 'team', 'team/web-1 uid=u1 phase=Running', 'web-1'),
        ('u2', 'team', 'team/web-2 uid=u2 phase=Succeeded', 'web-2')
    ) as v(job_id, account, raw, job_name)""")
    result = run(con, "marts/telemetry_label_checks", {**NOV, "files": files}).fetchall()
    hour = 600_000 * 420 / 1_512_000_000  # one whole-GPU sample of 10 minutes, in GPU-hours
    assert [row[1:] for row in result] == [
        ("k", "n1", 0, "J1", None, None, "agrees", "J1", "a", None, at(0), at(50), 3,
         3 * hour),
        ("k", "n1", 0, "J1", None, None, "gpu_unallocated_by_scheduler", "J1", "a", None,
         at(0), at(50), 3, 3 * hour),
        ("k", "n1", 0, "J9", None, None, "label_job_not_in_scheduler", "J1", "a", None,
         at(0), at(10), 2, 2 * hour),
        ("k", "n1", 1, "J1", None, None, "different_gpu", "J2", "b", "0", at(0), at(20), 3,
         3 * hour),
        ("k", "n1", 1, None, None, "a", "namespace_mismatch", "J2", "b", None, at(30), at(50),
         3, 3 * hour),
        ("k", "n2", 0, None, "web-1", "other", "namespace_mismatch", "u1", "team", None,
         at(0), at(50), 6, pytest.approx(6 * hour * 2 / 7)),
        ("k", "n2", 0, None, "web-1", "team", "agrees", "u1", "team", None, at(0), at(50), 6,
         pytest.approx(6 * hour / 7)),
        ("k", "n2", 0, None, "web-2", "team", "different_job", "u1", "team", None, at(0),
         at(50), 6, pytest.approx(6 * hour / 7)),
    ]  # fmt: skip
    assert {row[0] for row in result} == {dt.date(2026, 11, 1)}


def test_a_column_added_since_a_warehouse_was_built_is_added_to_its_table(con, monkeypatch):
    # a table an earlier release built (no column b), with October in it; this release's
    # select has b: November gets it, October keeps NULL until it is re-run
    con.execute("create table t as select date '2026-10-01' as billing_month, 1 as a")
    monkeypatch.setattr(
        "pipelines.sql.sql_text",
        lambda name: "select $billing_month::date as billing_month, 2 as a, 'x' as b",
    )
    assert replace_month(con, "t", "marts/t", {"billing_month": dt.date(2026, 11, 1)}) == 1
    assert con.execute("select * from t order by billing_month").fetchall() == [
        (dt.date(2026, 10, 1), 1, None),
        (dt.date(2026, 11, 1), 2, "x"),
    ]
