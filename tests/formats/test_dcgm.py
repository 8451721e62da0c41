"""The DCGM reader (Prometheus query_range JSON) on hand-written bodies, and end to end.

Fixtures: tests/fixtures/dcgm/ (timestamps: 1793491200 = 2026-11-01 00:00 UTC, 15 min apart).

gpu-a01_2026-11-01.json, one series per line, all four metrics (series numbered from 1):
  1 GR_ENGINE_ACTIVE gpu-a01/0 (`Hostname`)  0.9, 0.85, 0.02, NaN   -> util 90, 85, 2, NULL
  2 GPU_UTIL         gpu-a01/0               50 x 4                 -> rows of their own (the
                                                                        rollup prefers 1)
  3 GPU_UTIL         gpu-a01/1 (`hostname`)  80, 80, 80, 101        -> 101 rejected by SQL
  4 FB_USED gpu-a01/0, 5 FB_USED gpu-a01/1, 6 POWER_USAGE gpu-a01/0 only (one NaN)
  7 DCGM_FI_DEV_SM_CLOCK (not a sample), 8 GPU_UTIL with only `instance: gpu-b01:9400`
gpu-a01_fb-used_2026-11-01.json: memory only, two overlapping series (a duplicate), "+Inf".
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest

from pipelines.catalog import ClusterSettings
from pipelines.defs.ingest.telemetry import readable_sample_files
from pipelines.defs.resources import prepare_connection
from pipelines.formats import dcgm
from pipelines.landing import LandingError, discover
from tests.conftest import materialize_month, named_samples, query, write

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
COMBINED = FIXTURES / "gpu-a01_2026-11-01.json"
MEMORY_ONLY = FIXTURES / "gpu-a01_fb-used_2026-11-01.json"
UTC = ClusterSettings()
GR, UTIL = dcgm.GR_ENGINE_ACTIVE, dcgm.GPU_UTIL
A01_0 = ("GPU-8f3c2a71-0000-4e8b-9a1d-5b1f00000000", "NVIDIA A100-SXM4-80GB")
A01_1 = ("GPU-8f3c2a71-0001-4e8b-9a1d-5b1f00000001", "NVIDIA A100-SXM4-80GB")


def at(minute: int) -> dt.datetime:
    return dt.datetime(2026, 11, 1, 0, minute)


def samples(out: Path, tmp_path: Path) -> str:
    """A converted file read as the pipeline reads it: with an empty file of every samples
    column (a column no series fills is not written)."""
    files = readable_sample_files(tmp_path / "telemetry", [str(out)])
    return f"read_parquet({files!r}, union_by_name = true)"


def rows_of(path: Path, tmp_path: Path) -> list[tuple]:
    """The converted rows, sorted, and checks the count to_parquet returns."""
    out = tmp_path / "out.partial"  # the pipeline's name for a conversion in progress
    written = dcgm.to_parquet(path, out, UTC)
    rows = duckdb.execute(
        "select ts, node, gpu_index, util_pct, mem_used_mib, power_w, source_line, job_id, "
        f"gpu_uuid, gpu_model, pod, namespace, util_metric from {samples(out, tmp_path)} "
        "order by node, gpu_index, ts, source_line"
    ).fetchall()
    assert written == len(rows)
    return rows


def _series(name: str | None, values: str = '[[1793491200,"1"]]') -> str:
    metric = f'{{"__name__":"{name}","Hostname":"n1","gpu":"0"}}' if name else '{"gpu":"0"}'
    return f'{{"metric":{metric},"values":{values}}}'


def _body(*series: str) -> str:
    return '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(series) + "]}}"


def test_the_combined_export_gives_one_row_per_gpu_and_timestamp(tmp_path):
    train = ("J1", *A01_0, "train-0", "ml", GR)
    train_util = (*train[:-1], UTIL)
    plain = (None, *A01_1, None, None, UTIL)
    assert rows_of(COMBINED, tmp_path) == [
        # GR_ENGINE_ACTIVE x 100, and the GPU_UTIL of the same GPU (50) in rows of its own,
        # each with the GPU's memory and power: the rollup supersedes GPU_UTIL in the hours of
        # GR_ENGINE_ACTIVE
        (at(0), "gpu-a01", 0, 90.0, 40960.0, 301.25, 1_000_001, *train),
        (at(0), "gpu-a01", 0, 50.0, 40960.0, 301.25, 2_000_001, *train_util),
        (at(15), "gpu-a01", 0, 85.0, 40960.0, None, 1_000_002, *train),  # power NaN
        (at(15), "gpu-a01", 0, 50.0, 40960.0, None, 2_000_002, *train_util),
        (at(30), "gpu-a01", 0, 2.0, 512.0, 62.5, 1_000_003, *train),
        (at(30), "gpu-a01", 0, 50.0, 512.0, 62.5, 2_000_003, *train_util),
        (at(45), "gpu-a01", 0, None, 512.0, 61.5, 1_000_004, *train),  # util NaN: kept
        (at(45), "gpu-a01", 0, 50.0, 512.0, 61.5, 2_000_004, *train_util),
        # lower-case `hostname`; no power series for this GPU
        (at(0), "gpu-a01", 1, 80.0, 2048.0, None, 3_000_001, *plain),
        (at(15), "gpu-a01", 1, 80.0, 2048.0, None, 3_000_002, *plain),
        (at(30), "gpu-a01", 1, 80.0, 2048.0, None, 3_000_003, *plain),
        (at(45), "gpu-a01", 1, 101.0, 2048.0, None, 3_000_004, *plain),  # kept for SQL
        # the node from `instance` when neither Hostname nor hostname is there
        (at(0), "gpu-b01", 0, 7.0, None, None, 8_000_001, None, None,
         "NVIDIA H100 80GB HBM3", None, None, UTIL),
        (at(15), "gpu-b01", 0, 7.0, None, None, 8_000_002, None, None,
         "NVIDIA H100 80GB HBM3", None, None, UTIL),
    ]  # fmt: skip


def test_source_line_points_at_the_series_and_point(tmp_path):
    # series 3 of data.result, point 4 of its values: the 101 % sample
    lines = COMBINED.read_text().splitlines()
    series = json.loads(lines[3].rstrip(","))
    assert series["metric"]["gpu"] == "1"
    assert series["values"][3] == [1793493900, "101"]
    row = next(r for r in rows_of(COMBINED, tmp_path) if r[6] == 3_000_004)
    assert row[3] == 101.0


def test_without_gr_engine_active_gpu_util_is_the_utilisation(tmp_path):
    body = json.loads(COMBINED.read_text())
    body["data"]["result"] = [s for s in body["data"]["result"] if s["metric"]["__name__"] != GR]
    path = tmp_path / "no-gr.json"
    path.write_text(json.dumps(body))
    gpu0 = [(r[3], r[6], r[12]) for r in rows_of(path, tmp_path) if r[1:3] == ("gpu-a01", 0)]
    # GPU_UTIL is now series 1
    assert gpu0 == [(50.0, 1_000_001, UTIL), (50.0, 1_000_002, UTIL), (50.0, 1_000_003, UTIL),
                    (50.0, 1_000_004, UTIL)]  # fmt: skip


def test_a_pretty_printed_body_gives_the_same_rows(tmp_path):
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(COMBINED.read_text()), indent=2, sort_keys=True))
    compact = tmp_path / "compact"
    compact.mkdir()
    assert rows_of(pretty, tmp_path) == rows_of(COMBINED, compact)


def test_a_memory_only_export_keeps_its_duplicate_and_marks_no_utilisation(tmp_path):
    none = (None, None, None, None, None, "none")
    assert rows_of(MEMORY_ONLY, tmp_path) == [
        (at(0), "gpu-a01", 0, None, 40960.0, None, 1_000_001, *none),
        # two exporters (instance) for one GPU: both points stay, the pipeline folds one
        (at(15), "gpu-a01", 0, None, 40960.0, None, 1_000_002, *none),
        (at(15), "gpu-a01", 0, None, 40961.0, None, 2_000_001, *none),
        (at(30), "gpu-a01", 0, None, None, None, 2_000_002, *none),  # "+Inf" MiB
    ]


def test_columns_no_series_fills_are_not_written(tmp_path):
    """A memory-only file has no utilisation or power column, nor columns of labels it lacks
    (UUID, model);
    the combined fixture has the three metrics and its labels, and no MIG instance's."""
    columns = {}
    for path in (MEMORY_ONLY, COMBINED):
        out = tmp_path / f"{path.stem}.parquet"
        dcgm.to_parquet(path, out, UTC)
        columns[path] = [name for (name, *_) in duckdb.execute(
            "describe select * from read_parquet(?)", [str(out)]
        ).fetchall()]  # fmt: skip
    assert columns[MEMORY_ONLY] == [
        "ts", "node", "gpu_index", "mem_used_mib", "source_line", "util_metric", "parse_error",
    ]  # fmt: skip
    assert columns[COMBINED] == [
        "ts", "node", "gpu_index", "util_pct", "mem_used_mib", "power_w", "source_line",
        "job_id", "gpu_uuid", "gpu_model", "pod", "namespace", "util_metric", "parse_error",
    ]  # fmt: skip


def _mig_series(name: str, gpu: str, values: str, instance: str | None = None,
                profile: str = "1g.10gb", pod: str | None = None) -> str:  # fmt: skip
    labels = {"__name__": name, "Hostname": "m1", "gpu": gpu}
    if instance is not None:
        labels |= {"GPU_I_ID": instance, "GPU_I_PROFILE": profile}
    if pod is not None:
        labels |= {"pod": pod, "namespace": "ml"}
    return json.dumps({"metric": labels, "values": json.loads(values)})


def test_a_mig_gpu_is_one_sample_of_its_instances(tmp_path):
    """Instances 1 (3g.40gb), 5 (2g.20gb) and 13 (1g.10gb) of m1/0 at 00:00 and 00:15; the
    power is the device's (a series without GPU_I_ID); m1/1 is a whole GPU."""
    path = tmp_path / "mig.json"
    path.write_text(
        _body(
            _mig_series(
                GR, "0", '[[1793491200,"0.5"],[1793492100,"0.9"]]', "1", "3g.40gb", "train-a"
            ),
            _mig_series(
                GR, "0", '[[1793491200,"0.25"],[1793492100,"NaN"]]', "5", "2g.20gb", "serve-b"
            ),
            _mig_series(GR, "0", '[[1793491200,"0"],[1793492100,"0"]]', "13"),
            _mig_series(
                dcgm.FB_USED,
                "0",
                '[[1793491200,"20000"],[1793492100,"30000"]]',
                "1",
                "3g.40gb",
                "train-a",
            ),
            _mig_series(
                dcgm.FB_USED,
                "0",
                '[[1793491200,"5000"],[1793492100,"5000"]]',
                "5",
                "2g.20gb",
                "serve-b",
            ),
            _mig_series(dcgm.FB_USED, "0", '[[1793491200,"0"],[1793492100,"0"]]', "13"),
            _mig_series(dcgm.POWER_USAGE, "0", '[[1793491200,"250"],[1793492100,"260"]]'),
            _mig_series(GR, "1", '[[1793491200,"0.1"]]'),
        )  # fmt: skip
    )
    out = tmp_path / "mig.parquet"
    written = dcgm.to_parquet(path, out, UTC)
    rows = duckdb.execute(
        "select ts, gpu_index, util_pct, mem_used_mib, power_w, source_line, pod, gpu_instance, "
        "gpu_instance_slices from read_parquet(?) order by gpu_index, ts, source_line",
        [str(out)],
    ).fetchall()
    assert written == len(rows) == 7
    assert rows == [
        # each instance's own values and pod; the last row of the GPU and timestamp carries
        # the GPU: (3 x 50 + 2 x 25 + 1 x 0) / 6 %, 20000 + 5000 + 0 MiB, the device's 250 W
        (at(0), 0, 50.0, 20000.0, None, 1_000_001, "train-a", "1", 3),
        (at(0), 0, 25.0, 5000.0, None, 2_000_001, "serve-b", "5", 2),
        (at(0), 0, 33.3333333333, 25000.0, 250.0, 3_000_001, None, "13", 1),
        # instance 5 has no utilisation at 00:15 (NaN): its row is rejected downstream and
        # the GPU's is (3 x 90 + 1 x 0) / 4 over the instances that report it
        (at(15), 0, 90.0, 30000.0, None, 1_000_002, "train-a", "1", 3),
        (at(15), 0, None, 5000.0, None, 2_000_002, "serve-b", "5", 2),
        (at(15), 0, 67.5, 35000.0, 260.0, 3_000_002, None, "13", 1),
        # a whole GPU: unchanged
        (at(0), 1, 10.0, None, None, 8_000_001, None, None, None),
    ]


def test_a_mig_memory_export_sums_its_instances(tmp_path):
    """Memory alone (no two series of a device overlap, so a row per point): the last
    instance row of each timestamp carries the GPU's sum; instance 8 has no point at 00:15."""
    path = tmp_path / "fb.json"
    path.write_text(
        _body(
            _mig_series(dcgm.FB_USED, "0", '[[1793491200,"100"],[1793492100,"110"]]', "7", pod="a"),
            _mig_series(dcgm.FB_USED, "0", '[[1793491200,"200"]]', "8", pod="b"),
            _mig_series(dcgm.FB_USED, "0", '[[1793491200,"0"],[1793492100,"5"]]', "9"),
        )  # fmt: skip
    )
    rows = [(r[0], r[4], r[6], r[10], r[12]) for r in rows_of(path, tmp_path)]
    assert rows == [
        (at(0), 100.0, 1_000_001, "a", "none"),
        (at(0), 200.0, 2_000_001, "b", "none"),
        (at(0), 300.0, 3_000_001, None, "none"),  # the GPU: 100 + 200 + 0
        (at(15), 110.0, 1_000_002, "a", "none"),
        (at(15), 115.0, 3_000_002, None, "none"),  # 110 + 5
    ]


def test_unreadable_timestamps_stay_rows_of_their_own(tmp_path):
    path = tmp_path / "bad-ts.json"
    path.write_text(
        _body(
            _series(UTIL, '[["soon","1"],[null,"2"],[1793491200,"-Inf"]]'),
            _series(dcgm.FB_USED, '[["soon","10"],[1793491200,"20"]]'),
            _series(UTIL, '[["later","3"],[1793491200,"4"]]'),  # overlaps series 1
            _series(dcgm.FB_USED, '[[null,"30"],[1793491200,"40"]]'),  # overlaps series 2
        )
    )
    rows = [(r[0], r[3], r[4], r[6]) for r in rows_of(path, tmp_path)]
    assert rows == [
        (at(0), float("-inf"), 20.0, 1_000_003),  # out of range, so the SQL rejects it
        (at(0), 4.0, 40.0, 3_000_002),  # the second copy of 00:00: folded downstream
        (None, 1.0, None, 1_000_001),
        (None, 2.0, None, 1_000_002),
        (None, None, 10.0, 2_000_001),
        (None, 3.0, None, 3_000_001),
        (None, None, 30.0, 4_000_001),
    ]


def test_points_stamped_before_1970_after_2099_or_in_another_unit_name_their_value(tmp_path):
    # such a point was a sample of 1969 or 2099 (no rolled-up day reads it, so no month ever
    # counted it), or a row without a timestamp and without a reason
    path = tmp_path / "clock.json"
    path.write_text(
        _body(
            _series(
                UTIL,
                '[[1793491200,"1"],[-600,"2"],[1793491200000,"3"],'
                '[1793491200000000,"4"],[4102444800,"5"],[4102444799,"6"]]',
            ),
            _series(dcgm.FB_USED, '[["soon","10"],[null,"20"]]'),
        )
    )
    out = tmp_path / "out.partial"
    dcgm.to_parquet(path, out, UTC)
    rows = duckdb.execute(
        f"select source_line, ts, parse_error from {samples(out, tmp_path)} order by source_line"
    ).fetchall()
    assert rows == [
        (1_000_001, at(0), None),
        (1_000_002, None, "field values[1][0]: -600 is before 1970 (Unix time in seconds)"),
        (1_000_003, None,
         "field values[2][0]: 1793491200000 is not a Unix time in seconds (milliseconds?)"),
        (1_000_004, None,
         "field values[3][0]: 1793491200000000 is not a Unix time in seconds (microseconds?)"),
        (1_000_005, None, "field values[4][0]: 4102444800 is after 2099 (Unix time in seconds)"),
        (1_000_006, dt.datetime(2099, 12, 31, 23, 59, 59), None),
        (2_000_001, None, "field values[0][0]: 'soon' is not a Unix time"),
        (2_000_002, None, "field values[1][0]: null is not a Unix time"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    # an error body and a cut-off body are recognised, so that their error message is shown
    "name",
    ["gpu-a01_2026-11-01.json", "prometheus-error.json", "truncated.json"],
)
def test_recognised_by_content_not_extension(tmp_path, name):
    target = tmp_path / "telemetry/c1" / name.replace(".json", ".export")
    target.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / name, target)
    assert [f.format.name for f in discover(tmp_path, "telemetry")] == ["dcgm_prometheus"]


@pytest.mark.parametrize(
    "text",
    [
        "this is not JSON\n",
        '{"kind": "PodList", "items": []}',
        "a,b,c\n1,2,3\n",
    ],
)
def test_an_unrecognised_file_stops_with_one_line_naming_it(tmp_path, text):
    path = write(tmp_path / "telemetry/c1/garbage.json", text)
    with pytest.raises(LandingError) as error:
        discover(tmp_path, "telemetry")
    message = str(error.value)
    assert message.startswith(f"{path}: line 1: unrecognised export, expected ")
    assert "query_range" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ((FIXTURES / "truncated.json").read_text(),
         "line 1: field data: malformed JSON (unexpected end of data.)"),
        (COMBINED.read_text().replace('"gpu":"1"', '"gpu":"1",,'),
         "line 4: field data: malformed JSON (unexpected character.)"),
        ((FIXTURES / "instant-query.json").read_text(),
         "line 1: field data.resultType: 'vector', expected 'matrix' (a Prometheus "
         "/api/v1/query_range response body)"),
        ((FIXTURES / "prometheus-error.json").read_text(),
         "line 1: field status: 'error' (bad_data: exceeded maximum resolution of 11,000 points "
         "per timeseries. Try decreasing the query resolution (?step=XX)), expected 'success' "
         "(a Prometheus /api/v1/query_range response body)"),
        ('{"status":"success","data":{"resultType":"matrix","result":{"a":1}}}',
         "line 1: field data: not a Prometheus query_range body (JSON transform error, in "
         "record/value 1: Expected ARRAY, but got OBJECT: {\"a\":1})"),
        (_body(_series("up"), _series("node_load1")),
         "line 1: field data.result: no DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_UTIL, "
         "DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_POWER_USAGE series (found node_load1, up)"),
        (_body(_series(dcgm.GPU_UTIL), _series(None)),
         "line 1: field data.result[1].metric.__name__: missing; export the DCGM metrics "
         "themselves, not an expression over them"),
        (_body() + "\n" + _body(), "line 1: field status: expected one query_range body, "
         "found 2 JSON values"),
    ],
)  # fmt: skip
def test_a_malformed_export_stops_with_file_line_and_field(tmp_path, text, message):
    path = tmp_path / "export.json"
    path.write_text(text)
    with pytest.raises(LandingError) as error:  # the landing error, not any ValueError
        dcgm.to_parquet(path, tmp_path / "out.partial", UTC)
    assert str(error.value) == f"{path}: {message}"


def test_an_empty_result_is_no_rows(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text(_body())
    assert rows_of(path, tmp_path) == []


def test_a_body_with_series_and_a_second_body_is_two_json_values(tmp_path):
    path = tmp_path / "export.json"
    path.write_text(_body(_series(UTIL)) + "\n" + _body())
    with pytest.raises(LandingError) as error:
        dcgm.to_parquet(path, tmp_path / "out.partial", UTC)
    assert str(error.value) == (
        f"{path}: line 1: field status: expected one query_range body, found 2 JSON values"
    )


# ---- a combined export: its series side by side, or grouped by timestamp ------------------

T0, T1, T2 = 1793491200, 1793492100, 1793493000  # 00:00, 00:15, 00:30


def _gpu_series(name: str, gpu: str, points: list[tuple[int, str]], **labels: str) -> dict:
    return {
        "metric": {"__name__": name, "Hostname": "n1", "gpu": gpu, "UUID": f"GPU-{gpu}", **labels},
        "values": [[ts, value] for ts, value in points],
    }


def _combined(power_1_at_t2: str = "120") -> list[dict]:
    """Two GPUs with all four metrics at 00:00, 00:15 and 00:30, in Prometheus' order (by
    metric, then labels); n1/0 has pods on two series (the least is its rows')."""
    return [
        _gpu_series(GR, "0", [(T0, "0.5"), (T1, "0.25"), (T2, "NaN")], pod="train-b",
                    namespace="ml"),
        _gpu_series(GR, "1", [(T0, "1"), (T1, "0"), (T2, "0.125")]),
        _gpu_series(UTIL, "0", [(T0, "50"), (T1, "50"), (T2, "50")]),
        _gpu_series(UTIL, "1", [(T0, "60"), (T1, "60"), (T2, "60")]),
        _gpu_series(dcgm.FB_USED, "0", [(T0, "100"), (T1, "200"), (T2, "300")], pod="Train-a"),
        _gpu_series(dcgm.FB_USED, "1", [(T0, "10"), (T1, "20"), (T2, "30")]),
        _gpu_series(dcgm.POWER_USAGE, "0", [(T0, "250.5"), (T1, "260"), (T2, "NaN")]),
        _gpu_series(dcgm.POWER_USAGE, "1", [(T0, "100"), (T1, "110"), (T2, power_1_at_t2)]),
    ]  # fmt: skip


def _combined_rows(power_1_at_t2: float | None = 120.0) -> list[tuple]:
    """Each GPU's row of GR_ENGINE_ACTIVE and, after it, of GPU_UTIL at each timestamp (the
    rollup supersedes the latter), with the same memory, power and labels."""
    n1_0 = (None, "GPU-0", None, "Train-a", "ml")  # "T" sorts before "t"
    n1_1 = (None, "GPU-1", None, None, None)
    return [
        (at(0), "n1", 0, 50.0, 100.0, 250.5, 1_000_001, *n1_0, GR),
        (at(0), "n1", 0, 50.0, 100.0, 250.5, 3_000_001, *n1_0, UTIL),
        (at(15), "n1", 0, 25.0, 200.0, 260.0, 1_000_002, *n1_0, GR),
        (at(15), "n1", 0, 50.0, 200.0, 260.0, 3_000_002, *n1_0, UTIL),
        # GR_ENGINE_ACTIVE and power NaN: the GPU_UTIL row stands on its own
        (at(30), "n1", 0, None, 300.0, None, 1_000_003, *n1_0, GR),
        (at(30), "n1", 0, 50.0, 300.0, None, 3_000_003, *n1_0, UTIL),
        (at(0), "n1", 1, 100.0, 10.0, 100.0, 2_000_001, *n1_1, GR),
        (at(0), "n1", 1, 60.0, 10.0, 100.0, 4_000_001, *n1_1, UTIL),
        (at(15), "n1", 1, 0.0, 20.0, 110.0, 2_000_002, *n1_1, GR),
        (at(15), "n1", 1, 60.0, 20.0, 110.0, 4_000_002, *n1_1, UTIL),
        (at(30), "n1", 1, 12.5, 30.0, power_1_at_t2, 2_000_003, *n1_1, GR),
        (at(30), "n1", 1, 60.0, 30.0, power_1_at_t2, 4_000_003, *n1_1, UTIL),
    ]


def _write_body(path: Path, result: list[dict]) -> Path:
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                              "result": result}}))  # fmt: skip
    return path


@pytest.mark.parametrize(("power_text", "power"), [("120", 120.0), ("+Inf", None)])
def test_series_that_line_up_give_a_row_per_gpu_and_timestamp_without_grouping(
    tmp_path, monkeypatch, power_text, power
):
    # "+Inf" makes the points be read as text: the same rows
    monkeypatch.setattr(dcgm, "_ROWS_PER_TIMESTAMP", "select error('grouped')")
    path = _write_body(tmp_path / "combined.json", _combined(power_text))
    assert rows_of(path, tmp_path) == _combined_rows(power)


def test_series_with_a_gap_are_grouped_by_timestamp(tmp_path):
    result = _combined()
    result[4]["values"].pop(1)  # n1/0's memory at 00:15
    rows = _combined_rows()
    # without the memory point, the rows' least pod is the utilisation points'
    rows[2:4] = [
        (at(15), "n1", 0, 25.0, None, 260.0, 1_000_002, None, "GPU-0", None, "train-b", "ml", GR),
        (at(15), "n1", 0, 50.0, None, 260.0, 3_000_002, None, "GPU-0", None, "train-b", "ml",
         UTIL),
    ]  # fmt: skip
    assert rows_of(_write_body(tmp_path / "gap.json", result), tmp_path) == rows


def test_series_with_a_point_at_another_time_are_grouped_by_timestamp(tmp_path):
    result = _combined()
    result[4]["values"][1:] = [[T2, "300"], [T2 + 900, "200"]]  # n1/0's memory: 00:15 at 00:45
    rows = _combined_rows()
    rows[2:4] = [
        (at(15), "n1", 0, 25.0, None, 260.0, 1_000_002, None, "GPU-0", None, "train-b", "ml", GR),
        (at(15), "n1", 0, 50.0, None, 260.0, 3_000_002, None, "GPU-0", None, "train-b", "ml",
         UTIL),
    ]  # fmt: skip
    # a row of its own at 00:45, of the memory point alone: of the GPU's preferred metric, with
    # no utilisation (rejected downstream)
    rows.insert(6, (at(45), "n1", 0, None, 200.0, None, 5_000_003, None, "GPU-0", None,
                    "Train-a", None, GR))  # fmt: skip
    assert rows_of(_write_body(tmp_path / "moved.json", result), tmp_path) == rows


def test_series_of_gpus_in_another_order_are_grouped_by_timestamp(tmp_path):
    result = _combined()
    result[4], result[5] = result[5], result[4]  # memory: n1/1 before n1/0
    assert rows_of(_write_body(tmp_path / "order.json", result), tmp_path) == _combined_rows()


def test_a_timestamp_twice_in_every_series_of_a_gpu_is_one_row(tmp_path):
    result = _combined()
    for series in result[::2]:  # n1/0's: 00:00 twice (the same values), then 00:15
        series["values"] = [series["values"][0], series["values"][0], series["values"][1]]
    rows = _combined_rows()
    # 00:15 is the third point now
    rows[2] = (*rows[2][:6], 1_000_003, *rows[2][7:])
    rows[3] = (*rows[3][:6], 3_000_003, *rows[3][7:])
    assert rows_of(_write_body(tmp_path / "twice.json", result), tmp_path) == rows[:4] + rows[6:]


def test_points_of_a_gpu_stamped_in_milliseconds_stay_rows_of_their_own(tmp_path):
    result = _combined()
    for series in result[::2]:  # n1/0's points at 00:30, in every series
        series["values"][2][0] = T2 * 1000
    rows = _combined_rows()
    n1_0 = (None, "n1", 0)
    rows[4:6] = [
        (*n1_0, None, None, None, 1_000_003, None, "GPU-0", None, "train-b", "ml", GR),  # NaN
        (*n1_0, 50.0, None, None, 3_000_003, None, "GPU-0", None, None, None, UTIL),
        (*n1_0, None, 300.0, None, 5_000_003, None, "GPU-0", None, "Train-a", None, GR),
        (*n1_0, None, None, None, 7_000_003, None, "GPU-0", None, None, None, GR),  # NaN
    ]
    assert rows_of(_write_body(tmp_path / "ms.json", result), tmp_path) == rows


def _profiling_gap_series() -> list[dict]:
    """gpu-a01/0 from 00:00 to 01:45 every 15 min: GPU_UTIL 40 % throughout, GR_ENGINE_ACTIVE
    from 01:00 only (0.9, 0.9, 0.5, 0.5), as when profiling is turned on at 01:00; memory
    throughout. One combined query_range body, in Prometheus' order."""
    steps = [T0 + 900 * n for n in range(8)]
    labels = {"Hostname": "gpu-a01", "gpu": "0"}
    engine = ["0.9", "0.9", "0.5", "0.5"]
    return [
        {"metric": {"__name__": GR, **labels},
         "values": [[ts, v] for ts, v in zip(steps[4:], engine, strict=True)]},
        {"metric": {"__name__": dcgm.FB_USED, **labels},
         "values": [[ts, "1000"] for ts in steps]},
        {"metric": {"__name__": UTIL, **labels}, "values": [[ts, "40"] for ts in steps]},
    ]  # fmt: skip


def test_gpu_util_stays_in_the_hours_without_gr_engine_active(tmp_path):
    path = _write_body(tmp_path / "gpu-a01_profiling.json", _profiling_gap_series())
    rows = [(r[0], r[3], r[4], r[6], r[12]) for r in rows_of(path, tmp_path)]
    step = [dt.datetime(2026, 11, 1) + dt.timedelta(minutes=15 * n) for n in range(8)]
    util = [(step[n], 40.0, 1000.0, 3_000_001 + n, UTIL) for n in range(8)]
    assert rows == [
        # 00:00-00:45: GPU_UTIL alone, each row with its memory (was: util_pct NULL, rejected)
        *util[:4],
        # from 01:00 a row of each metric at each timestamp (the rollup keeps GR_ENGINE_ACTIVE)
        (step[4], 90.0, 1000.0, 1_000_001, GR), util[4],
        (step[5], 90.0, 1000.0, 1_000_002, GR), util[5],
        (step[6], 50.0, 1000.0, 1_000_003, GR), util[6],
        (step[7], 50.0, 1000.0, 1_000_004, GR), util[7],
    ]  # fmt: skip


@pytest.mark.parametrize("layout", ["aligned", "grouped", "per point"])
def test_a_gpu_label_that_is_no_number_is_kept_and_named(tmp_path, layout):
    result = _combined()
    for series in result[1::2]:  # n1/1's series
        series["metric"]["gpu"] = "GPU-1"
    if layout == "grouped":
        result[4], result[5] = result[5], result[4]
    elif layout == "per point":
        result = [result[3]]  # n1/1's GPU_UTIL alone
    out = tmp_path / "out.parquet"
    dcgm.to_parquet(_write_body(tmp_path / "label.json", result), out, UTC)
    rows = duckdb.execute(
        "select distinct gpu_index, gpu_index_text, parse_error from read_parquet(?) "
        "where gpu_index_text is not null or gpu_index is null",
        [str(out)],
    ).fetchall()
    assert rows == [(None, "GPU-1", "field metric.gpu: 'GPU-1' is not a GPU index")]


def test_files_converted_at_once_in_threads_give_their_own_rows(tmp_path):
    # each conversion has a connection of its own to the process's database
    combined = _write_body(tmp_path / "combined.json", _combined())
    files = [COMBINED, MEMORY_ONLY, combined] * 3
    outs = [tmp_path / f"{n}.parquet" for n in range(len(files))]
    with ThreadPoolExecutor(max_workers=3) as pool:
        written = list(pool.map(lambda n: dcgm.to_parquet(files[n], outs[n], UTC), range(9)))
    assert written == [14, 4, 12] * 3
    alone = []
    for n, path in enumerate(files[:3]):
        dcgm.to_parquet(path, tmp_path / f"alone{n}.parquet", UTC)
        alone.append(_parquet_rows(tmp_path / f"alone{n}.parquet"))
    assert [_parquet_rows(out) for out in outs] == alone * 3


def _parquet_rows(path: Path) -> list[tuple]:
    return duckdb.execute("from read_parquet(?) order by all", [str(path)]).fetchall()


# ---- end to end ---------------------------------------------------------------------------


JOBS = """
job_id,cluster,account,user,queue,qos,gpu_model,gpus,nodes,submit_time,start_time,end_time,state,exit_code
J1,dc,alpha,ann,batch,normal,A100,1,gpu-a01,2026-11-01T00:00:00,2026-11-01T00:00:00,2026-11-01T01:00:00,COMPLETED,0
J2,dc,alpha,ann,batch,normal,A100,1,gpu-a01,2026-11-01T00:00:00,2026-11-01T00:00:00,2026-11-01T01:00:00,COMPLETED,0
"""

ALLOCATIONS = """
job_id,node,gpu_index
J1,gpu-a01,0
J2,gpu-a01,1
"""


def build_dcgm_month(root: Path, *exports: Path) -> None:
    """Two one-hour jobs on gpu-a01's two GPUs, and the DCGM `exports` as cluster `dc`."""
    write(root / "landing/scheduler/dc/jobs.csv", JOBS)
    write(root / "landing/scheduler/dc/allocations.csv", ALLOCATIONS)
    for export in exports:
        target = root / "landing/telemetry/dc" / export.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(export, target)
    write(
        root / "catalog/tenants.yaml",
        """
        tenants:
          - {id: alpha, name: Alpha Lab, department: Science, cost_center: CC-1,
             accounts: [alpha]}
        """,
    )
    write(root / "catalog/rates.yaml", "rates:\n  - {gpu_model: '*', price_per_gpu_hour: 2.00}\n")
    write(root / "catalog/nodes.csv", "node,cluster,gpu_model,gpus\ngpu-a01,dc,A100,2\n")
    # the exports' 15-minute step, declared: a few samples a series are too few to estimate it
    write(root / "catalog/settings.yaml", "telemetry: {step_s: 900}\n")


@pytest.fixture(scope="module")
def dcgm_month(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dcgm")
    build_dcgm_month(root, COMBINED)
    assert materialize_month(root, "2026-11-01").success
    return root


@pytest.mark.slow
def test_jobs_are_measured_by_the_preferred_metric(dcgm_month):
    rows = query(
        dcgm_month,
        "select job_id, mean_util_pct, measured_gpu_hours, productive_gpu_hours, "
        "idle_gpu_hours, unmeasured_gpu_hours from job_usage order by job_id",
    )
    assert rows == [
        # samples 90, 85, 2 (GR_ENGINE_ACTIVE, not GPU_UTIL's 50) of 15 min; 00:45 is NaN
        ("J1", 59.0, 0.75, 0.5, 0.25, 0.25),
        # 80 % three times; 00:45 (101 %) rejected
        ("J2", 80.0, 0.75, 0.75, 0.0, 0.25),
    ]


@pytest.mark.slow
def test_rows_reconcile_and_rejects_name_series_and_point(dcgm_month):
    name = "telemetry/dc/gpu-a01_2026-11-01.json"
    files = query(
        dcgm_month,
        "select subject, rows_read, rows_loaded, rows_rejected, duplicates_folded "
        "from data_quality where category = 'file' and subject like 'telemetry/%'",
    )
    # 4 + 4 rows of gpu-a01/0 (GR_ENGINE_ACTIVE, and GPU_UTIL: superseded in its hour, so
    # folded), 4 of gpu-a01/1, 2 of gpu-b01
    assert files == [(name, 14, 12, 2, 4)]
    rejects = query(dcgm_month, "select file, line, reason from rejects order by line")
    assert rejects == [
        (name, 1_000_004, "field util_pct: missing"),
        (name, 3_000_004, "field util_pct: 101.0 is outside 0-100"),
    ]


@pytest.mark.slow
def test_a_malformed_export_stops_the_run_naming_it(tmp_path):
    build_dcgm_month(tmp_path, COMBINED, FIXTURES / "instant-query.json")
    with pytest.raises(ValueError) as error:
        materialize_month(tmp_path, "2026-11-01")
    path = tmp_path / "landing/telemetry/dc/instant-query.json"
    assert str(error.value).startswith(f"{path}: line 1: field data.resultType: 'vector'")
    assert "\n" not in str(error.value)


@pytest.mark.slow
def test_each_hour_is_measured_by_the_metric_it_has(tmp_path):
    """J1 holds gpu-a01/0 00:00-02:00; the combined export has GPU_UTIL (40 %) all along and
    GR_ENGINE_ACTIVE from 01:00 only: hour 0 is measured by GPU_UTIL, hour 1 by
    GR_ENGINE_ACTIVE (its GPU_UTIL rows folded), nothing rejected."""
    export = _write_body(tmp_path / "gpu-a01_profiling.json", _profiling_gap_series())
    root = tmp_path / "month"
    build_dcgm_month(root, export)
    write(
        root / "landing/scheduler/dc/jobs.csv",
        JOBS.splitlines()[1]
        + "\nJ1,dc,alpha,ann,batch,normal,A100,1,gpu-a01,2026-11-01T00:00:00,2026-11-01T00:00:00,"
        "2026-11-01T02:00:00,COMPLETED,0\n",
    )
    write(root / "landing/scheduler/dc/allocations.csv", "job_id,node,gpu_index\nJ1,gpu-a01,0\n")
    assert materialize_month(root, "2026-11-01").success
    con = duckdb.connect()
    prepare_connection(con)
    samples = con.execute(
        f"select ts, util_pct, mem_used_mib, cover_ms from {named_samples(root)} order by ts"
    ).fetchall()
    step = [dt.datetime(2026, 11, 1) + dt.timedelta(minutes=15 * n) for n in range(8)]
    util = [40.0] * 4 + [90.0, 90.0, 50.0, 50.0]
    assert samples == [(step[n], util[n], 1000.0, 900_000) for n in range(8)]
    assert query(
        root,
        "select job_id, mean_util_pct, measured_gpu_hours, unmeasured_gpu_hours from job_usage",
    ) == [("J1", 55.0, 2.0, 0.0)]  # (4 x 40 + 2 x 90 + 2 x 50) / 8
    assert query(
        root,
        "select util_metric, samples, sampled_gpu_hours from telemetry_coverage "
        "order by util_metric",
    ) == [(UTIL, 4, 1.0), (GR, 4, 1.0)]  # DEV_ before PROF_
    name = "telemetry/dc/gpu-a01_profiling.json"
    assert query(
        root,
        "select subject, rows_read, rows_loaded, rows_rejected, duplicates_folded "
        "from data_quality where category = 'file' and subject like 'telemetry/%'",
    ) == [(name, 12, 12, 0, 4)]  # 01:00-01:45's GPU_UTIL rows superseded: folded
    assert query(root, "select count(*) from rejects where file like 'telemetry/%'") == [(0,)]


@pytest.mark.slow
def test_a_gpu_label_that_is_no_number_is_a_reject_with_its_text(tmp_path):
    export = _write_body(
        tmp_path / "gpu-a01_label.json",
        [{"metric": {"__name__": UTIL, "Hostname": "gpu-a01", "gpu": "0"},
          "values": [[T0, "40"], [T1, "40"], [T2, "40"]]},
         {"metric": {"__name__": UTIL, "Hostname": "gpu-a01", "gpu": "GPU-1"},
          "values": [[T0, "40"], [T1, "41"]]}],
    )  # fmt: skip
    build_dcgm_month(tmp_path, export)
    assert materialize_month(tmp_path, "2026-11-01").success
    name = "telemetry/dc/gpu-a01_label.json"
    reason = "field metric.gpu: 'GPU-1' is not a GPU index"
    assert query(tmp_path, "select file, line, reason, raw from rejects order by line") == [
        (name, 2_000_001, reason, "ts=2026-11-01 00:00:00 node=gpu-a01 gpu_index=GPU-1 "
         "util_pct=40.0"),
        (name, 2_000_002, reason, "ts=2026-11-01 00:15:00 node=gpu-a01 gpu_index=GPU-1 "
         "util_pct=41.0"),
    ]  # fmt: skip
