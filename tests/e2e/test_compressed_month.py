"""The small demo month landed with every export gzipped (sacct dumps, pod lists, DCGM bodies,
nvidia-smi logs) gives exactly the marts of the month landed plain; rejects and data quality
name the same rows, in the gzipped files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.formats import GZIP_MAGIC
from simulator.demo import gzip_landing
from tests.conftest import materialize_month, query

# Every column compared exactly, but one: a job's mean_util_pct is a ratio of float sums whose
# order DuckDB's parallel aggregation does not fix, so two runs of the same plain month differ
# in its last bits (~1e-15) for a few MIG pods; 9 decimals is far above that noise.
MARTS = {
    "job_usage": "select * replace (round(mean_util_pct, 9) as mean_util_pct) from job_usage",
    "capacity_buckets": "select * from capacity_buckets",
    "charge_lines": "select * from charge_lines",
    "tenant_month": "select * from tenant_month",
}


def landed(root: Path) -> list[str]:
    landing = root / "landing"
    return sorted(p.relative_to(landing).as_posix() for p in landing.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def gzipped_month(demo_month, tmp_path_factory) -> tuple[Path, Path]:
    """(the plain demo month, the same month landed gzipped), both materialised."""
    plain, _ = demo_month
    root = tmp_path_factory.mktemp("gzipped")
    for folder in ("landing", "catalog"):  # the shared month stays as it is
        shutil.copytree(plain / folder, root / folder)
    # the marts are compared, not the reports: no PDFs of the pages (a second a page)
    with (root / "catalog/settings.yaml").open("a") as settings:
        settings.write("page_pdfs: false\n")
    names = landed(plain)
    assert not [name for name in names if name.endswith((".parquet", ".gz"))]  # all text
    assert gzip_landing(root / "landing") == len(names)
    assert landed(root) == [f"{name}.gz" for name in names]
    for name in landed(root):
        assert (root / "landing" / name).read_bytes()[:2] == GZIP_MAGIC
    assert materialize_month(root, "2026-11-01").success
    return plain, root


@pytest.mark.slow
@pytest.mark.parametrize("mart", MARTS)
def test_the_marts_are_those_of_the_plain_month(gzipped_month, mart):
    plain, gzipped = gzipped_month
    sql = f"{MARTS[mart]} order by all"
    rows = query(plain, sql)
    assert len(rows) > 10
    assert query(gzipped, sql) == rows


@pytest.mark.slow
def test_rejects_and_data_quality_name_the_gzipped_files(gzipped_month):
    plain, gzipped = gzipped_month
    rejects = "select file, line, reason, raw from rejects order by all"
    plain_rejects = query(plain, rejects)
    assert len(plain_rejects) == 3  # the demo's malformed sacct lines
    assert query(gzipped, rejects) == [(f"{file}.gz", *rest) for file, *rest in plain_rejects]
    # a file's counts (subject: its landing-relative name) and every other figure
    quality = (
        "select * replace (case when category = 'file' then subject || '.gz' else subject end "
        "as subject) from data_quality order by all"
    )
    plain_quality = query(plain, quality)
    assert len([row for row in plain_quality if row[2] == "file"]) > 100
    assert query(gzipped, "select * from data_quality order by all") == plain_quality
