"""The machine-readable outputs of a month: the FOCUS CSV, the idle-GPU notices CSV and the
audit manifest."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import duckdb

from pipelines.sql import Params, bind, sql_text
from pipelines.version import code_version


def write_focus_csv(con: duckdb.DuckDBPyConnection, params: Params, out: Path) -> int:
    """Write `focus-YYYY-MM.csv` (one row per charge line); returns the rows written."""
    return _write_csv(con, "reports/focus_charges", params, out)


def write_notices_csv(con: duckdb.DuckDBPyConnection, params: Params, out: Path) -> int:
    """Write `notices-YYYY-MM.csv`: one row per user to notify of idle GPUs (a header alone
    when nobody is past the threshold); returns the rows written."""
    return _write_csv(con, "reports/notices", params, out)


def _write_csv(con: duckdb.DuckDBPyConnection, name: str, params: Params, out: Path) -> int:
    """Write the rows of `sql/<name>.sql` as CSV with a header; returns the rows written.

    Written beside the target and renamed, so a failure leaves an earlier file intact.
    """
    sql = sql_text(name)
    partial = out.with_name(f".{out.name}.partial")
    con.execute(
        f"copy ({sql}) to '{partial.as_posix()}' (format csv, header true)", bind(sql, params)
    )
    os.replace(partial, out)
    return con.execute(f"select count(*) from ({sql})", bind(sql, params)).fetchone()[0]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def catalog_version(catalog_dir: Path) -> str:
    """One hash over every catalog file's name and content: changes whenever the catalog does."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(catalog_dir).rglob("*") if p.is_file()):
        digest.update(path.relative_to(catalog_dir).as_posix().encode() + b"\0")
        digest.update(sha256_of(path).encode() + b"\n")
    return digest.hexdigest()


def write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """Write `manifest.json` atomically, keys sorted so the same run facts give the same text."""
    partial = out.with_name(f".{out.name}.partial")
    partial.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(partial, out)


def folder_name(path: str) -> str:
    """A configured folder as reports record it: its name only (`/srv/cb/landing/` and
    `data/landing` are both `landing`). Where the folder sits is no part of the inputs (their
    sha256 and the catalog version identify them), so the same inputs in another folder give
    the same bytes."""
    return Path(os.path.abspath(path)).name


def report_parameters(month, catalog, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parameters a report's Definitions sheet shows. No run id: the same inputs and code
    must give the same bytes."""
    settings = catalog.settings
    return {
        "billing_month": month.label,
        "period_start_utc": month.start.isoformat(sep=" "),
        "period_end_utc": month.end.isoformat(sep=" "),
        "billing_timezone": settings.billing_timezone,
        "currency": settings.currency,
        "cost_mode": settings.cost_mode,
        "idle_threshold_pct": str(settings.idle_threshold_pct),
        "zombie_min_hours": str(settings.zombie_min_hours),
        "telemetry_step_s": _declared_telemetry_steps(settings),
        "notice_idle_gpu_hours": str(settings.notice_idle_gpu_hours),
        "gpu_memory_mib": _gpu_memory(settings),
        **(extra or {}),
        "code_version": code_version(),
    }


def _gpu_memory(settings) -> str:
    """The catalog's GPU memory per model, e.g. `A100-80GB: 81920; H100-80GB: 81559` ('none
    given' without any: no memory ratios)."""
    given = sorted(settings.gpu_memory_mib.items())
    return "; ".join(f"{model}: {mib}" for model, mib in given) or "none given"


def _declared_telemetry_steps(settings) -> str:
    """The catalog's declared telemetry step ('estimated' without one), then the clusters that
    declare their own, e.g. `estimated (atlas: 15)`."""
    overall = settings.telemetry.step_s
    own = [
        f"{name}: {cluster.telemetry.step_s}"
        for name, cluster in sorted(settings.clusters.items())
        if cluster.telemetry.step_s is not None
    ]
    text = "estimated" if overall is None else str(overall)
    return f"{text} ({', '.join(own)})" if own else text
