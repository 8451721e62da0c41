"""End to end: DCGM labels that disagree with the scheduler on purpose, and a MIG GPU.

The Kubernetes month of tests/formats/test_kubernetes.py (three pod lists of 2026-11-10,
cluster `k8s`) plus tests/fixtures/dcgm/k8s-labels_2026-11-10.json: GR_ENGINE_ACTIVE every
30 minutes with the `pod` / `namespace` labels below, and the MIG GPU gpu-h100-01/0 as seven
1g.10gb instances (GPU_I_ID 7-13) with GR_ENGINE_ACTIVE, FB_USED and POWER_USAGE each. The
catalog declares that 30-minute step (settings `telemetry: {step_s: 1800}`): with two samples a
series, estimated, each would stand for the 60 s default.

The scheduler (GPU indices assigned lowest-free-first in start order): A llama-pretrain
(nlp-prod) gpu-a100-01/0-3 07:00-15:30; F llm-serve (nlp-prod) gpu-a100-01/4 from 10:00;
B ft-mistral (nlp-dev) gpu-a100-02/0 04:00-09:15; C yolo-train (vision) gpu-a100-03/0-1
02:00-10:30; D sweep-lr-3 (nlp-prod) gpu-a100-04/0-1 05:00-11:00; E notebook-dana (vision)
2 x 1g.10gb on gpu-h100-01/0 08:00-15:00.

Labels: A on a100-01/0 at 08:00, 08:30 (agree), 15:00 (agrees), 15:30, 16:00 (A has ended);
F on a100-01/1 at 08:00, 08:30 (A holds it; F starts at 10:00) and on /4 at 10:00, 10:30
(agree); B on a100-02/1 at 05:00, 05:30 (B is on /0); ghost-0 on a100-03/0 at 03:00, 03:30
(no such pod); C on a100-03/1 at 12:00, 12:30 (C has ended); sweep-lr-3 as nlp-dev on
a100-04/0 at 06:00, 06:30 (it is nlp-prod's); on gpu-h100-01/0 at 09:00 and 09:30 instances
7 and 8 say notebook-dana (agree), 9 says notebook-erin (no such pod), 10-13 no pod.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import dagster as dg
import openpyxl
import pytest

from tests.conftest import materialize_month, query, write
from tests.formats.test_kubernetes import A, B, C, D, E, F, build_k8s_month

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/dcgm/k8s-labels_2026-11-10.json"
HOUR = 1.0  # two 30-minute samples of a whole GPU
SLICE = 1 / 7  # a 1g.10gb instance


def at(hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, 10, hour, minute)


@pytest.fixture(scope="module")
def labelled_month(tmp_path_factory):
    root = tmp_path_factory.mktemp("labels")
    build_k8s_month(root)
    write(root / "catalog/settings.yaml", "telemetry: {step_s: 1800}\npage_pdfs: false\n")
    telemetry = root / "landing/telemetry/k8s"
    telemetry.mkdir(parents=True)
    shutil.copy(FIXTURE, telemetry / FIXTURE.name)
    result = materialize_month(root, "2026-11-01")
    assert result.success
    return root, result


@pytest.mark.slow
def test_each_gpu_and_label_against_the_scheduler(labelled_month):
    root, _ = labelled_month
    rows = query(
        root,
        "select node, gpu_index, label_pod, label_namespace, kind, scheduler_job_ids, "
        "scheduler_accounts, label_job_gpu_indexes, first_sample_at, last_sample_at, samples, "
        "gpu_hours from telemetry_label_checks order by all",
    )
    assert rows == [
        ("gpu-a100-01", 0, "llama-pretrain-0-7x2kq", "nlp-prod", "agrees", A, "nlp-prod", None,
         at(8), at(15, 30), 3, 1.5),
        # 15:30 and 16:00: A ended at 15:30 (the span of hour 15 lists it)
        ("gpu-a100-01", 0, "llama-pretrain-0-7x2kq", "nlp-prod",
         "gpu_unallocated_by_scheduler", A, "nlp-prod", None, at(15), at(16), 2, HOUR),
        ("gpu-a100-01", 1, "llm-serve-6f7d9c5b8-xk2lp", "nlp-prod", "different_job", A,
         "nlp-prod", None, at(8), at(8, 30), 2, HOUR),
        ("gpu-a100-01", 4, "llm-serve-6f7d9c5b8-xk2lp", "nlp-prod", "agrees", F, "nlp-prod",
         None, at(10), at(10, 30), 2, HOUR),
        ("gpu-a100-02", 1, "ft-mistral-7b-0-q8r4t", "nlp-dev", "different_gpu", None, None,
         "0", at(5), at(5, 30), 2, HOUR),
        ("gpu-a100-03", 0, "ghost-0", "vision", "label_job_not_in_scheduler", C, "vision", None,
         at(3), at(3, 30), 2, HOUR),
        ("gpu-a100-03", 1, "yolo-train-0-m5n2p", "vision", "gpu_unallocated_by_scheduler",
         None, None, None, at(12), at(12, 30), 2, HOUR),
        ("gpu-a100-04", 0, "sweep-lr-3", "nlp-dev", "namespace_mismatch", D, "nlp-prod", None,
         at(6), at(6, 30), 2, HOUR),
        # two instances x two samples, each 1/7 of the GPU
        ("gpu-h100-01", 0, "notebook-dana", "vision", "agrees", E, "vision", None, at(9),
         at(9, 30), 4, pytest.approx(4 * SLICE / 2)),
        ("gpu-h100-01", 0, "notebook-erin", "vision", "label_job_not_in_scheduler", E,
         "vision", None, at(9), at(9, 30), 2, pytest.approx(2 * SLICE / 2)),
    ]  # fmt: skip
    assert query(root, "select distinct label_job_id from telemetry_label_checks") == [(None,)]


@pytest.mark.slow
def test_data_quality_has_a_row_per_kind_and_the_workbook_shows_them(labelled_month):
    root, _ = labelled_month
    rows = query(
        root,
        "select subject, value, detail from data_quality "
        "where category = 'telemetry_labels' order by subject",
    )
    assert rows == [
        ("agrees", pytest.approx(1.5 + 1 + 2 / 7),
         "9 labelled samples on 3 GPU(s): the labelled job held the GPU"),
        ("different_gpu", 1.0,
         "2 labelled samples on 1 GPU(s): the labelled job held another GPU of the node"),
        ("different_job", 1.0, "2 labelled samples on 1 GPU(s): another job held the GPU"),
        ("gpu_unallocated_by_scheduler", 2.0,
         "4 labelled samples on 2 GPU(s): no job held the GPU"),
        ("label_job_not_in_scheduler", pytest.approx(1 + 1 / 7),
         "4 labelled samples on 2 GPU(s): no scheduler export has the job or pod"),
        ("namespace_mismatch", 1.0,
         "2 labelled samples on 1 GPU(s): the labelled pod held it, in another namespace"),
    ]  # fmt: skip
    sheet = openpyxl.load_workbook(root / "reports/2026-11/chargeback-2026-11.xlsx")["Data quality"]
    shown = {
        row[2]: row[7] for row in sheet.iter_rows(values_only=True) if row[0] == "telemetry_labels"
    }
    assert shown == {subject: pytest.approx(value) for subject, value, _ in rows}


@pytest.mark.slow
def test_the_check_warns_with_the_disagreements(labelled_month):
    _, result = labelled_month
    [evaluation] = [
        e for e in result.get_asset_check_evaluations()
        if e.check_name == "telemetry_labels_agree_with_scheduler"
    ]  # fmt: skip
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    assert evaluation.metadata["violations"].value == 7
    assert evaluation.metadata["gpu_hours_by_kind"].value == {
        "different_gpu": 1.0, "different_job": 1.0, "gpu_unallocated_by_scheduler": 2.0,
        "label_job_not_in_scheduler": round(1 + 1 / 7, 6), "namespace_mismatch": 1.0,
    }  # fmt: skip


@pytest.mark.slow
def test_the_mig_gpu_is_one_sample_of_its_seven_instances(labelled_month):
    root, _ = labelled_month
    # 31 rows: 13 of whole GPUs, 7 instances x 2 timestamps; 6 of 7 instance rows folded
    assert query(
        root,
        "select rows_read, rows_loaded, rows_rejected, duplicates_folded from data_quality "
        "where subject = 'telemetry/k8s/k8s-labels_2026-11-10.json'",
    ) == [(31, 31, 0, 12)]
    # notebook-dana is measured by its GPU: (60 + 40 + 20) / 7 % at 09:00 and (80 + 0 + 20)
    # / 7 % at 09:30, each sample 30 minutes of 2/7 of the GPU; utilisation is summed to the
    # thousandth of a percent (exact in any order): 120 / 7 % counts 17.143 %, 100 / 7 % 14.286 %
    [(util, measured)] = query(
        root, "select mean_util_pct, measured_gpu_hours from job_usage where job_id = $e", {"e": E}
    )
    assert util == pytest.approx((17.143 + 14.286) / 2, abs=1e-9)
    assert measured == pytest.approx(2 / 7)
    # B held gpu-a100-02/0, never /1, where its label was: it is unmeasured
    assert query(root, "select measured_gpu_hours from job_usage where job_id = $b", {"b": B}) == [
        (0.0,)
    ]
