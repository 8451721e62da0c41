"""A day's rollup reads the samples files with samples in the day or the next, not all of them."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.defs.ingest.telemetry import files_of_day, sample_file_spans


def _samples(path, timestamps: list[str | None]) -> str:
    pq.write_table(pa.table({"ts": pa.array(timestamps, pa.string())}), path)
    return str(path)


def test_spans_give_first_and_last_readable_timestamp_and_the_unreadable_rows(tmp_path):
    nov1 = _samples(tmp_path / "a.parquet", ["2026-11-01 23:59:00", "2026-11-01 00:00:00"])
    broken = _samples(tmp_path / "b.parquet", ["not a time", None, "2026-11-03 10:00:00"])
    unreadable = _samples(tmp_path / "c.parquet", ["never"])
    spans = sample_file_spans(duckdb.connect(), [nov1, broken, unreadable])
    assert {path: (s.first_ts, s.last_ts, s.unreadable_rows) for path, s in spans.items()} == {
        nov1: (dt.datetime(2026, 11, 1), dt.datetime(2026, 11, 1, 23, 59), 0),
        broken: (dt.datetime(2026, 11, 3, 10), dt.datetime(2026, 11, 3, 10), 2),
        unreadable: (None, None, 1),
    }


def test_a_day_reads_its_files_the_next_days_files_and_the_files_it_owns(tmp_path):
    oct31 = _samples(tmp_path / "oct31.parquet", ["2026-10-31 00:00:00", "2026-10-31 23:59:59"])
    nov1 = _samples(tmp_path / "nov1.parquet", ["2026-11-01 00:00:00", "2026-11-01 12:00:00"])
    nov2 = _samples(tmp_path / "nov2.parquet", ["2026-11-02 00:00:00"])  # the look-ahead
    nov3 = _samples(tmp_path / "nov3.parquet", ["2026-11-03 00:00:00"])
    week = _samples(tmp_path / "week.parquet", ["2026-10-28 00:00:00", "2026-11-04 00:00:00"])
    unreadable = _samples(tmp_path / "none.parquet", ["never"])
    schema = _samples(tmp_path / "schema.parquet", [])
    files = [oct31, nov1, nov2, nov3, week, unreadable, schema]
    spans = sample_file_spans(duckdb.connect(), files)

    day = dt.date(2026, 11, 1)
    assert files_of_day(files, spans, day, []) == [nov1, nov2, week, schema]
    assert files_of_day(files, spans, day, [unreadable]) == [nov1, nov2, week, unreadable, schema]
    assert files_of_day(files, spans, dt.date(2026, 10, 30), []) == [oct31, week, schema]


def test_a_month_with_days_rolled_up_by_an_earlier_release_names_them(tmp_path):
    from pipelines.defs.attribution.assets import _check_rollup_format

    con = duckdb.connect()
    files = []
    for day, keys in (("2026-11-01", ", 1::ubigint as series_key, ts as hour"), ("2026-11-02", "")):
        folder = tmp_path / "cluster=c" / f"day={day}"
        folder.mkdir(parents=True)
        files.append(str(folder / "samples_0.parquet"))
        con.execute(
            f"copy (select timestamp '{day} 10:00' as ts, 'n1' as node{keys}) to '{files[-1]}'"
        )
    _check_rollup_format(con, files[:1], "November 2026")  # the current format passes
    with pytest.raises(ValueError) as error:
        _check_rollup_format(con, files, "November 2026")
    assert str(error.value) == (
        "telemetry of November 2026: day=2026-11-02 rolled up by an earlier release (no "
        "series_key and hour columns): materialise gpu_sample_rollup for these days again"
    )
