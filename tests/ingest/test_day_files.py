"""A day's rollup reads the samples files with samples in the day or the next, not all of them."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.defs.ingest.telemetry import FileSpan, files_of_day, sample_file_spans
from pipelines.defs.resources import prepare_connection


def _samples(path, timestamps: list[str | None]) -> str:
    pq.write_table(pa.table({"ts": pa.array(timestamps, pa.string())}), path)
    return str(path)


def stop_message(check, *args) -> str:
    """What `check(*args)` stops the month with (it must stop: a ValueError)."""
    with pytest.raises(ValueError) as error:
        check(*args)
    return str(error.value)


def test_spans_give_first_and_last_readable_timestamp_and_the_unreadable_rows(tmp_path):
    nov1 = _samples(tmp_path / "a.parquet", ["2026-11-01 23:59:00", "2026-11-01 00:00:00"])
    broken = _samples(tmp_path / "b.parquet", ["not a time", None, "2026-11-03 10:00:00"])
    unreadable = _samples(tmp_path / "c.parquet", ["never"])
    spans = sample_file_spans(prepare_connection(duckdb.connect()), [nov1, broken, unreadable])
    nov1_rows, nov3_rows = ((dt.date(2026, 11, 1), 2),), ((dt.date(2026, 11, 3), 1),)
    assert spans == {
        nov1: FileSpan(dt.datetime(2026, 11, 1), dt.datetime(2026, 11, 1, 23, 59), 0, 2, nov1_rows),
        broken: FileSpan(
            dt.datetime(2026, 11, 3, 10), dt.datetime(2026, 11, 3, 10), 2, 1, nov3_rows
        ),
        unreadable: FileSpan(None, None, 1, 0),
    }


def test_a_files_span_is_found_once_and_again_when_the_file_is_written_anew(tmp_path, monkeypatch):
    from pipelines.defs.ingest import telemetry

    nov1 = _samples(tmp_path / "a.parquet", ["2026-11-01 23:59:00", "2026-11-01 00:00:00"])
    broken = _samples(tmp_path / "b.parquet", ["not a time", None, "2026-11-03 10:00:00"])
    read = []
    create_table = telemetry.create_table

    def reading(con, table, name, params=None, **kwargs):
        read.append(sorted(params["files"]))
        return create_table(con, table, name, params, **kwargs)

    monkeypatch.setattr(telemetry, "create_table", reading)
    cache = tmp_path / "spans"

    def spans() -> tuple[dict, list]:
        con = prepare_connection(duckdb.connect())
        found = sample_file_spans(con, [nov1, broken], cache)
        return found, con.execute("select * from sample_file_spans order by path").fetchall()

    first = spans()
    nov1_rows, nov3_rows = ((dt.date(2026, 11, 1), 2),), ((dt.date(2026, 11, 3), 1),)
    assert first[0] == {
        nov1: FileSpan(dt.datetime(2026, 11, 1), dt.datetime(2026, 11, 1, 23, 59), 0, 2, nov1_rows),
        broken: FileSpan(
            dt.datetime(2026, 11, 3, 10), dt.datetime(2026, 11, 3, 10), 2, 1, nov3_rows
        ),
    }
    assert spans() == first  # the whole table, windows included, from the cache
    assert read == [[nov1, broken]] and len(list(cache.glob("*.json"))) == 2
    (tmp_path / "a.parquet").unlink()
    _samples(tmp_path / "a.parquet", ["2026-11-02 08:00:00"])
    again, _ = spans()
    assert read[1:] == [[nov1]]
    assert again[nov1] == FileSpan(
        dt.datetime(2026, 11, 2, 8), dt.datetime(2026, 11, 2, 8), 0, 1, ((dt.date(2026, 11, 2), 1),)
    )


def test_small_days_and_days_in_chunks_are_rolled_up_two_at_once_others_one_by_one(
    monkeypatch,
):
    from pipelines.defs.ingest import telemetry

    monkeypatch.setattr(telemetry, "SMALL_DAY_SAMPLES", 100)
    nov1, nov2, nov3 = (dt.date(2026, 11, d) for d in (1, 2, 3))
    spans = {
        # 100 rows a day over 1-2 November, 50 on the 3rd; a file without timestamps
        "week": FileSpan(dt.datetime(2026, 11, 1), dt.datetime(2026, 11, 2, 23), 0, 200),
        "nov3": FileSpan(dt.datetime(2026, 11, 3), dt.datetime(2026, 11, 3, 1), 0, 50),
        "none": FileSpan(None, None, 7, 0),
    }

    def at_once(days: list[dt.date]) -> int:
        return telemetry.days_at_once(telemetry.estimated_day_samples(spans, days), days)

    assert at_once([nov1, nov2, nov3]) == 2
    assert at_once([nov3]) == 1  # one day: nothing to overlap
    spans["nov3"] = FileSpan(dt.datetime(2026, 11, 3), dt.datetime(2026, 11, 3, 1), 0, 101)
    assert at_once([nov1, nov2, nov3]) == 1
    assert at_once([nov1, nov2]) == 2
    # a day rolled up in chunks holds a chunk at a time: two at once again
    monkeypatch.setattr(telemetry, "CHUNK_SAMPLES", 101)
    assert at_once([nov1, nov2, nov3]) == 1
    spans["nov3"] = FileSpan(dt.datetime(2026, 11, 3), dt.datetime(2026, 11, 3, 1), 0, 102)
    assert at_once([nov1, nov2, nov3]) == 2
    assert at_once([nov3]) == 1


def test_a_day_reads_its_files_the_next_days_files_and_the_files_it_owns(tmp_path):
    oct31 = _samples(tmp_path / "oct31.parquet", ["2026-10-31 00:00:00", "2026-10-31 23:59:59"])
    nov1 = _samples(tmp_path / "nov1.parquet", ["2026-11-01 00:00:00", "2026-11-01 12:00:00"])
    nov2 = _samples(tmp_path / "nov2.parquet", ["2026-11-02 00:00:00"])  # the look-ahead
    nov3 = _samples(tmp_path / "nov3.parquet", ["2026-11-03 00:00:00"])
    week = _samples(tmp_path / "week.parquet", ["2026-10-28 00:00:00", "2026-11-04 00:00:00"])
    unreadable = _samples(tmp_path / "none.parquet", ["never"])
    schema = _samples(tmp_path / "schema.parquet", [])
    files = [oct31, nov1, nov2, nov3, week, unreadable, schema]
    spans = sample_file_spans(prepare_connection(duckdb.connect()), files)

    day = dt.date(2026, 11, 1)
    assert files_of_day(files, spans, day, []) == [nov1, nov2, week, schema]
    assert files_of_day(files, spans, day, [unreadable]) == [nov1, nov2, week, unreadable, schema]
    assert files_of_day(files, spans, dt.date(2026, 10, 30), []) == [oct31, week, schema]


def test_a_month_with_days_rolled_up_by_an_earlier_release_names_them(tmp_path):
    from pipelines.defs.attribution.assets import _check_rollup_format

    con = duckdb.connect()
    files = []
    current = ", 1::ubigint as series_key, ts as hour, 0 as run"
    for day, keys in (("2026-11-01", current), ("2026-11-02", ", 1::ubigint as series_key")):
        folder = tmp_path / "cluster=c" / f"day={day}"
        folder.mkdir(parents=True)
        files.append(str(folder / "samples_0_0.parquet"))
        con.execute(
            f"copy (select timestamp '{day} 10:00' as ts, 'n1' as node{keys}) to '{files[-1]}'"
        )
    _check_rollup_format(con, files[:1], "November 2026")  # the current format passes
    assert stop_message(_check_rollup_format, con, files, "November 2026") == (
        "telemetry of November 2026: day=2026-11-02 rolled up by an earlier release (without "
        "the columns series_key, hour, run): materialise gpu_sample_rollup for these days again"
    )


def test_a_month_with_days_rolled_up_without_their_series_or_nodes_names_them(tmp_path):
    # the series' metrics and steps (sample_series.parquet) came with issue 18: a day rolled
    # up before has its quality folder without them, and the month stops naming it
    from pipelines.defs.ingest.telemetry import month_quality_files
    from pipelines.months import BillingMonth

    month = BillingMonth.parse("2026-11", "UTC")
    for day in month.utc_days():
        quality = tmp_path / "quality" / f"day={day.isoformat()}"
        quality.mkdir(parents=True)
        if day.day not in (3, 4):
            (quality / "sample_series.parquet").touch()
    assert stop_message(month_quality_files, tmp_path, month) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-03, 2026-11-04 rolled up by an earlier release "
        "(without each series' metric and step): materialise gpu_sample_rollup for these days "
        "again"
    )
    for day in (3, 4):
        (tmp_path / "quality" / f"day=2026-11-0{day}" / "sample_series.parquet").touch()
    # the catalog each day judged its nodes by (sample_nodes.parquet) came later
    for day in month.utc_days():
        if day.day != 5:
            (tmp_path / "quality" / f"day={day.isoformat()}" / "sample_nodes.parquet").touch()
    assert stop_message(month_quality_files, tmp_path, month) == (
        "telemetry of 2026-11: UTC day(s) 2026-11-05 rolled up by an earlier release (without "
        "the catalog it judged each node by): materialise gpu_sample_rollup for these days again"
    )
    (tmp_path / "quality/day=2026-11-05/sample_nodes.parquet").touch()
    files = month_quality_files(tmp_path, month)
    assert files["series_files"] == [
        str(tmp_path / "quality" / f"day={day.isoformat()}" / "sample_series.parquet")
        for day in month.utc_days()
    ]


def test_days_whose_rollups_cannot_give_silences_are_named(tmp_path):
    # incidents finds silences from the samples' marks (silent_until) and each series' first
    # and last covered time of a day, which earlier releases did not write
    from pipelines.defs.governance.assets import _check_silence_marks
    from pipelines.defs.ingest.assets import _check_series_columns

    con = duckdb.connect()
    samples, series = [], []
    for day, marks, covered in (
        (
            "2026-11-01",
            ", null::timestamp as silent_until",
            ", ts as first_ts, ts as covered_until",
        ),
        ("2026-11-02", "", ", ts as first_ts"),
    ):
        folder = tmp_path / "cluster=c" / f"day={day}"
        quality = tmp_path / "quality" / f"day={day}"
        folder.mkdir(parents=True)
        quality.mkdir(parents=True)
        samples.append(str(folder / "samples_0_0.parquet"))
        series.append(str(quality / "sample_series.parquet"))
        con.execute(f"copy (select timestamp '{day}' as ts{marks}) to '{samples[-1]}'")
        con.execute(f"copy (select timestamp '{day}' as ts{covered}) to '{series[-1]}'")
    _check_silence_marks(con, samples[:1], "November 2026")  # the current format passes
    _check_series_columns(con, series[:1], "November 2026")
    assert stop_message(_check_silence_marks, con, samples, "November 2026") == (
        "telemetry of November 2026: day=2026-11-02 rolled up by an earlier release (without "
        "the marks of uncovered stretches): materialise gpu_sample_rollup for these days again"
    )
    assert stop_message(_check_series_columns, con, series, "November 2026") == (
        "telemetry of November 2026: day=2026-11-02 rolled up by an earlier release (without "
        "each series' first and last covered time): materialise gpu_sample_rollup for these "
        "days again"
    )


def test_a_day_whose_hour_sums_are_doubles_is_named(tmp_path):
    from pipelines.defs.attribution.assets import _check_exact_hour_sums

    con = duckdb.connect()
    files = []
    for day, sums in (("2026-11-01", "12.5::decimal(18, 3)"), ("2026-11-02", "12.5::double")):
        folder = tmp_path / "cluster=c" / f"day={day}"
        folder.mkdir(parents=True)
        files.append(str(folder / "hours_0.parquet"))
        con.execute(f"copy (select {sums} as util_weighted_ms) to '{files[-1]}'")
    _check_exact_hour_sums(con, files[:1], "November 2026")  # exact sums pass
    assert stop_message(_check_exact_hour_sums, con, files, "November 2026") == (
        "telemetry of November 2026: day=2026-11-02 rolled up by an earlier release (utilisation "
        "summed as a double): materialise gpu_sample_rollup for these days again"
    )


def test_a_day_whose_hours_lack_memory_power_or_the_idle_threshold_is_named(tmp_path):
    from pipelines.defs.attribution.assets import HOURS_COLUMNS_ADDED, _check_hours_columns

    con = duckdb.connect()
    files = []
    current = "".join(f", 0::bigint as {column}" for column in HOURS_COLUMNS_ADDED)
    # day 3: memory and power summed, the idle threshold still on the samples (before it moved)
    without_threshold = current.replace(", 0::bigint as idle_threshold_pct", "")
    days = (("2026-11-01", current), ("2026-11-02", ""), ("2026-11-03", without_threshold))
    for day, sums in days:
        folder = tmp_path / "cluster=c" / f"day={day}"
        folder.mkdir(parents=True)
        files.append(str(folder / "hours_0.parquet"))
        con.execute(f"copy (select 1::bigint as cover_ms{sums}) to '{files[-1]}'")
    _check_hours_columns(con, files[:1], "November 2026")  # the current format passes
    assert stop_message(_check_hours_columns, con, files, "November 2026") == (
        "telemetry of November 2026: day=2026-11-02, day=2026-11-03 rolled up by an earlier "
        "release (without the sums of memory and power or the idle threshold per hour): "
        "materialise gpu_sample_rollup for these days again"
    )


def test_a_day_rolled_up_with_another_idle_threshold_stops_the_month(tmp_path):
    from pipelines.defs.attribution.assets import _check_idle_threshold

    con = duckdb.connect()
    files = []
    for day, threshold in (("2026-11-01", 5.0), ("2026-11-02", 10.0)):
        folder = tmp_path / "cluster=c" / f"day={day}"
        folder.mkdir(parents=True)
        files.append(str(folder / "hours_0_0.parquet"))
        con.execute(f"copy (select {threshold}::double as idle_threshold_pct) to '{files[-1]}'")
    _check_idle_threshold(con, files[:1], 5.0, "November 2026")  # the catalog's threshold
    assert stop_message(_check_idle_threshold, con, files, 5.0, "November 2026") == (
        "telemetry of November 2026: days rolled up with idle_threshold_pct [5.0, 10.0], the "
        "catalog says 5.0: materialise gpu_sample_rollup for the month's days again"
    )


def test_of_equal_samples_the_export_last_by_name_wins(tmp_path):
    # one GPU read at 10:00 by two exports: the rollup keeps the reading of the export last by
    # landing name (whatever order the files are found in) and counts the other as folded
    from pipelines.catalog import load_catalog
    from pipelines.defs.ingest.telemetry import roll_up_days
    from tests.conftest import resource_for
    from tests.ingest.test_catalog_and_landing import catalog_dir

    folder = tmp_path / "landing/telemetry/c1"
    folder.mkdir(parents=True)
    ten = pa.array([dt.datetime(2026, 11, 2, 10)], pa.timestamp("us"))
    for name, util in (("b-late.parquet", 30.0), ("a-early.parquet", 10.0)):
        columns = {"ts": ten, "node": ["n1"], "gpu_index": [0], "util_pct": [util]}
        pq.write_table(pa.table(columns), folder / name)
    chargeback = resource_for(tmp_path)
    roll_up_days(chargeback, load_catalog(catalog_dir(tmp_path)), [dt.date(2026, 11, 2)])
    day = chargeback.telemetry_dir / "cluster=c1/day=2026-11-02"
    # the sample names its series by key: n1's GPU 0 of cluster c1
    samples = (
        "select series_key = series_key('c1', 'n1', 0), ts, util_pct "
        f"from '{day}/samples_0_0.parquet'"
    )
    assert prepare_connection(duckdb.connect()).sql(samples).fetchall() == [
        (True, dt.datetime(2026, 11, 2, 10), 30.0)
    ]
    counts = chargeback.telemetry_dir / "quality/day=2026-11-02/sample_file_counts.parquet"
    assert duckdb.sql(
        f"select file, rows_read, rows_loaded, duplicates_folded from '{counts}'"
    ).fetchall() == [
        ("telemetry/c1/a-early.parquet", 1, 1, 1),
        ("telemetry/c1/b-late.parquet", 1, 1, 0),
    ]


def test_timestamps_far_from_the_files_median_day_are_unreadable_rows(tmp_path):
    # a point in 2030 made every day up to 2030 read the file, and 1969's made 1969-12-31 the
    # owner of its unreadable rows: neither day is ever rolled up, so the rows vanished
    clock = _samples(tmp_path / "clock.parquet", [
        "2026-11-02 10:00:00", "2026-11-03 10:00:00", "2026-11-03 11:00:00",
        "2025-11-03 00:00:00", "2027-11-03 23:59:59",  # 365 days from the median day: kept
        "2025-11-02 23:59:59", "2027-11-04 00:00:00",  # 366 days from it
        "2030-03-17 00:00:00", "1969-12-31 23:00:00", "2100-01-01 00:00:00", "never",
    ])  # fmt: skip
    schema = _samples(tmp_path / "schema.parquet", [])
    con = prepare_connection(duckdb.connect())
    spans = sample_file_spans(con, [clock, schema])
    # the plausible rows per day: the days that read them
    day_rows = tuple(
        (dt.date(*day), rows)
        for day, rows in [((2025, 11, 3), 1), ((2026, 11, 2), 1), ((2026, 11, 3), 2),
                          ((2027, 11, 3), 1)]
    )  # fmt: skip
    assert spans == {
        clock: FileSpan(
            dt.datetime(2025, 11, 3), dt.datetime(2027, 11, 3, 23, 59, 59), 6, 5, day_rows
        )
    }
    assert con.execute(
        "select median_day, ts_from, ts_until from sample_file_spans"
    ).fetchall() == [(dt.date(2026, 11, 3), dt.datetime(2025, 11, 3), dt.datetime(2027, 11, 4))]
    assert files_of_day([clock, schema], spans, dt.date(2027, 11, 4), []) == [schema]
    assert files_of_day([clock, schema], spans, dt.date(2030, 3, 17), []) == [schema]


def test_a_day_owns_the_rows_stamped_outside_every_month_and_rejects_them(tmp_path):
    # canonical Parquet, read in place: no converter sees its timestamps, the rollup does
    from pipelines.catalog import load_catalog
    from pipelines.defs.ingest.telemetry import roll_up_days
    from tests.conftest import resource_for
    from tests.ingest.test_catalog_and_landing import catalog_dir

    folder = tmp_path / "landing/telemetry/c1"
    folder.mkdir(parents=True)
    stamps = ["2026-11-02 10:00", "2026-11-02 10:10", "2026-11-02 10:20", "2030-03-17 00:00",
              "1969-07-20 20:17", "2100-01-01 00:00"]  # fmt: skip
    pq.write_table(
        pa.table({
            "ts": pa.array([dt.datetime.fromisoformat(s) for s in stamps], pa.timestamp("us")),
            "node": ["n1"] * 6, "gpu_index": [0] * 6, "util_pct": [50.0] * 6,
        }),
        folder / "samples.parquet",
    )  # fmt: skip
    chargeback = resource_for(tmp_path)
    counts = roll_up_days(chargeback, load_catalog(catalog_dir(tmp_path)), [dt.date(2026, 11, 2)])
    assert counts == {"2026-11-02": {"samples": 3, "rejected": 3, "files": 1}}
    quality = chargeback.telemetry_dir / "quality/day=2026-11-02"
    assert duckdb.sql(
        f"select billing_month, file, rows_read, rows_loaded, rows_rejected "
        f"from '{quality}/sample_file_counts.parquet'"
    ).fetchall() == [(dt.date(2026, 11, 1), "telemetry/c1/samples.parquet", 6, 3, 3)]
    assert duckdb.sql(
        f"select line, reason from '{quality}/sample_rejects.parquet' order by line"
    ).fetchall() == [
        (4, "field ts: 2030-03-17 00:00:00 is more than 365 days from 2026-11-02, the median "
            "day of the file's samples (a clock or unit error?)"),
        (5, "field ts: 1969-07-20 20:17:00 is before 1970"),
        (6, "field ts: 2100-01-01 00:00:00 is in 2100 or later"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("small_day_samples", "failing", "started", "reported", "published"),
    [
        # one by one: the day after the failed one never starts
        (0, 1, [0, 1], [(1, 0)], [0]),
        # two at once: the day beside the failed one finishes; none is started after it
        (1_000_000, 0, [0, 1], [], [1]),
    ],
    ids=["one-by-one", "two-at-once"],
)
def test_a_failed_day_stops_the_rollup_before_the_next_day_starts(
    tmp_path, monkeypatch, small_day_samples, failing, started, reported, published
):
    # the day's failure is injected here, the other days are rolled up for real
    from pipelines.catalog import load_catalog
    from pipelines.defs.ingest import telemetry
    from tests.conftest import resource_for
    from tests.ingest.test_catalog_and_landing import catalog_dir

    folder = tmp_path / "landing/telemetry/c1"
    folder.mkdir(parents=True)
    days = [dt.date(2026, 11, d) for d in (1, 2, 3)]
    pq.write_table(
        pa.table({
            "ts": pa.array([dt.datetime.combine(d, dt.time(10)) for d in days],
                           pa.timestamp("us")),
            "node": ["n1"] * 3, "gpu_index": [0] * 3, "util_pct": [50.0] * 3,
        }),
        folder / "samples.parquet",
    )  # fmt: skip
    monkeypatch.setattr(telemetry, "SMALL_DAY_SAMPLES", small_day_samples)
    days_started, days_reported = [], []
    roll_up_day = telemetry._roll_up_day

    def failing_day(con, telemetry_dir, day, *rest, **options):
        days_started.append(day)
        if day == days[failing]:
            raise RuntimeError("disk full")
        return roll_up_day(con, telemetry_dir, day, *rest, **options)

    monkeypatch.setattr(telemetry, "_roll_up_day", failing_day)
    chargeback = resource_for(tmp_path)
    with pytest.raises(RuntimeError, match="disk full"):
        telemetry.roll_up_days(
            chargeback, load_catalog(catalog_dir(tmp_path)), days,
            lambda k, day, counts, seconds: days_reported.append((k, day, counts)),
        )  # fmt: skip
    one_sample = {"samples": 1, "rejected": 0, "files": 1}
    assert sorted(days_started) == [days[i] for i in started]
    assert days_reported == [(k, days[i], one_sample) for k, i in reported]
    assert [p.name for p in sorted(chargeback.telemetry_dir.glob("cluster=c1/day=*"))] == [
        f"day={days[i].isoformat()}" for i in published
    ]


def test_a_killed_runs_partial_cache_entries_are_removed_and_the_live_ones_kept(tmp_path):
    from pipelines.leftovers import HOST, replace_text
    from tests.conftest import resource_for
    from tests.reports.test_publish import dead_pid

    telemetry = resource_for(tmp_path).telemetry_dir
    pid = dead_pid()
    seen, spans = telemetry / "converted/c1/seen", telemetry / "spans"
    for folder in (seen, spans):
        folder.mkdir(parents=True)
    replace_text(seen / "a1", "x.parquet")  # written whole by this process
    replace_text(spans / "b2.json", "{}")
    dead = [seen / f"a3@{HOST}@{pid}.partial", spans / f"b4.json@{HOST}@{pid}.partial"]
    for path in dead:
        path.write_text("half")
    assert sorted(resource_for(tmp_path).remove_dead_leftovers()) == sorted(dead)
    assert sorted(p.name for p in [*seen.iterdir(), *spans.iterdir()]) == ["a1", "b2.json"]
