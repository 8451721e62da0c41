"""Ingest: scheduler exports into `stg_jobs` / `job_gpus`, telemetry into daily Parquet.

Python reads the files and hands rows to DuckDB as text; typing, validation and rejects are
SQL (`sql/staging/`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import hostlist
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.catalog import Catalog, ClusterSettings
from pipelines.defs.ingest.catalog_tables import ACCOUNT_TENANTS_SCHEMA, account_tenants
from pipelines.defs.ingest.tables import write_table
from pipelines.formats import canonical
from pipelines.landing import ExportFile, discover
from pipelines.sql import bind, create_table, replace_month, run, sql_text


def load_scheduler_exports(
    con: duckdb.DuckDBPyConnection, landing_dir: Path, catalog: Catalog
) -> dict[str, int]:
    """Read every scheduler export into raw_jobs / raw_allocations and type them.

    Builds stg_job_records, stg_allocation_records (all months, rejects marked) and
    catalog_account_tenants (the tenant mappings of every account seen).
    """
    rows: dict[str, list[dict]] = {"jobs": [], "allocations": []}
    columns = {
        "jobs": (*canonical.JOB_COLUMNS, "record_type"),
        "allocations": canonical.ALLOCATION_COLUMNS,
    }
    for export in discover(landing_dir, "scheduler"):
        settings = catalog.settings.clusters.get(export.cluster, ClusterSettings())
        aliases = {name.lower(): model for name, model in settings.gpu_models.items()}
        for row in export.format.read_rows(export.path, settings):
            row["cluster"] = export.cluster
            row["file"] = export.name
            if row.get("gpu_model"):
                row["gpu_model"] = aliases.get(row["gpu_model"].lower(), row["gpu_model"])
            rows[export.kind].append(row)
    for kind, names in columns.items():
        schema = pa.schema(
            [("cluster", pa.string()), ("file", pa.string()), ("line", pa.int64()),
             ("raw", pa.string()), ("parse_error", pa.string())]
            + [(name, pa.string()) for name in names]
        )  # fmt: skip
        write_table(con, f"raw_{kind}", rows[kind], schema)
    counts = {
        "job_records": create_table(con, "stg_job_records", "staging/stg_job_records"),
        "allocation_records": create_table(
            con, "stg_allocation_records", "staging/stg_allocation_records"
        ),
    }
    accounts = [a for (a,) in con.execute(
        "select distinct account from stg_job_records where account is not null"
    ).fetchall()]  # fmt: skip
    write_table(
        con, "catalog_account_tenants", account_tenants(catalog, accounts), ACCOUNT_TENANTS_SCHEMA
    )
    return counts


# A GPU's time is counted in 1/420ths: 420 = lcm(1..7), so MIG slices (1/7), halves, thirds,
# quarters... of a GPU are whole numbers and every sum stays exact.
WHOLE_GPU = 420


def build_month_jobs(con: duckdb.DuckDBPyConnection, params: dict[str, Any]) -> dict[str, int]:
    """stg_jobs and job_gpus of one billing month."""
    jobs = replace_month(con, "stg_jobs", "staging/stg_jobs", params)
    exported = run(con, "staging/exported_job_gpus", params).fetchall()
    assigned = assign_gpu_indices(con, params, exported)
    rows = [
        {"billing_month": params["billing_month"], "cluster": c, "job_id": j, "node": n,
         "gpu_index": i, "gpu_share": share, "index_source": source}
        for (_, c, j, n, i, share, source) in exported
    ] + assigned  # fmt: skip
    schema = pa.schema([
        ("billing_month", pa.date32()), ("cluster", pa.string()), ("job_id", pa.string()),
        ("node", pa.string()), ("gpu_index", pa.int32()), ("gpu_share", pa.int32()),
        ("index_source", pa.string()),
    ])  # fmt: skip
    write_table(con, "month_job_gpus", rows, schema)
    gpus = replace_month(con, "job_gpus", "staging/job_gpus", params)
    return {"jobs": jobs, "job_gpus": gpus, "assigned_gpus": len(assigned)}


def gpu_shares(gpus: float, nodes: int) -> list[int]:
    """The shares (in 1/420 of a GPU) a job holds on each of its nodes: whole GPUs first, then
    the fractional rest on one more GPU. `gpu_shares(0.5, 1) == [210]`, `(2, 1) == [420, 420]`.
    """
    per_node = round(gpus * WHOLE_GPU / nodes)
    shares = [WHOLE_GPU] * (per_node // WHOLE_GPU)
    if per_node % WHOLE_GPU:
        shares.append(per_node % WHOLE_GPU)
    return shares


def assign_gpu_indices(
    con: duckdb.DuckDBPyConnection, params: dict[str, Any], exported: list[tuple]
) -> list[dict]:
    """GPU indices for started jobs whose export does not say which GPUs they held.

    Assigned as Slurm's default selection does: in start order, the lowest free indices of each
    node (the job's GPUs spread evenly over its nodes); a fractional share (MIG slice, half a
    GPU) goes to the lowest GPU with room for it. What exported allocations hold is never
    taken. Telemetry then matches per GPU like for any other job.
    """
    month = params["billing_month"]
    with_export = {(cluster, job_id) for (_, cluster, job_id, *_) in exported}
    node_gpus = dict(
        ((cluster, node), gpus)
        for cluster, node, gpus in con.execute(
            "select cluster, node, gpus from catalog_nodes"
        ).fetchall()
    )
    busy: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    held = con.execute(
        """
        select cluster, job_id, nodes, gpus, start_at, held_until
        from stg_jobs
        where billing_month = $m and start_at is not null and gpus > 0
        order by start_at, cluster, job_id
        """,
        {"m": month},
    ).fetchall()
    spans = {(c, j): (s, e) for c, j, _, _, s, e in held}
    for _, cluster, job_id, node, index, share, _ in exported:
        start, end = spans[(cluster, job_id)]
        busy[(cluster, node)].append((start, end, index, share))

    assigned = []
    for cluster, job_id, nodes, gpus, start, end in held:
        if (cluster, job_id) in with_export:
            continue
        names = hostlist.expand_hostlist(nodes)
        for node in names:
            shares = gpu_shares(gpus, len(names))
            size = node_gpus.get((cluster, node), max(8, len(shares)))
            load = defaultdict(int)  # share already held on each index during the job
            for s, e, index, share in busy[(cluster, node)]:
                if s < end and e > start:
                    load[index] += share
            chosen: list[int] = []
            for share in shares:
                fits = [i for i in range(size) if i not in chosen and load[i] + share <= WHOLE_GPU]
                # an over-subscribed node (a data error, reported as overlap) still gets one
                spare = [i for i in range(size) if i not in chosen]
                index = (fits or spare or [len(chosen)])[0]
                chosen.append(index)
                busy[(cluster, node)].append((start, end, index, share))
                assigned.append({
                    "billing_month": month, "cluster": cluster, "job_id": job_id,
                    "node": node, "gpu_index": index, "gpu_share": share,
                    "index_source": "assigned",
                })  # fmt: skip
    return assigned


def load_month_telemetry(
    con: duckdb.DuckDBPyConnection,
    landing_dir: Path,
    telemetry_dir: Path,
    params: dict[str, Any],
    catalog: Catalog,
) -> dict[str, int]:
    """Type, check and deduplicate the month's GPU samples and write them as daily Parquet.

    Output: `<telemetry_dir>/cluster=<c>/day=<YYYY-MM-DD>/*.parquet` (the month's days are
    replaced), plus the month's rows of sample_rejects and sample_file_counts.
    """
    sources = [
        {"path": str(path), "file": export.name, "cluster": export.cluster}
        for export in discover(landing_dir, "telemetry")
        for path in [_canonical_samples_file(export, telemetry_dir, catalog)]
    ]
    write_table(
        con,
        "sample_sources",
        sources,
        pa.schema([("path", pa.string()), ("file", pa.string()), ("cluster", pa.string())]),
    )
    schema_file = _empty_parquet(telemetry_dir / "schema", SAMPLE_SCHEMA)
    files = [source["path"] for source in sources] + [str(schema_file)]
    create_table(
        con, "month_samples", "staging/month_samples", {**params, "files": files}, temporary=True
    )
    create_table(con, "ordered_samples", "staging/ordered_samples", params, temporary=True)
    counts = {
        "rejected": replace_month(con, "sample_rejects", "staging/sample_rejects", params),
        "files": replace_month(con, "sample_file_counts", "staging/sample_file_counts", params),
    }
    for day_dir in month_day_dirs(telemetry_dir, params):
        shutil.rmtree(day_dir, ignore_errors=True)
    telemetry_dir.mkdir(parents=True, exist_ok=True)
    sql = sql_text("staging/gpu_sample_rollup")
    con.execute(
        f"copy ({sql}) to '{telemetry_dir.as_posix()}' "
        "(format parquet, partition_by (cluster, day), overwrite_or_ignore true, "
        "filename_pattern 'samples_{i}')",
        bind(sql, params),
    )
    counts["samples"] = con.execute(
        "select count(*) from ordered_samples where next_ts is null or next_ts > ts"
    ).fetchone()[0]
    con.execute("drop table ordered_samples")
    con.execute("drop table month_samples")
    return counts


def _canonical_samples_file(export: ExportFile, telemetry_dir: Path, catalog: Catalog) -> Path:
    """The export itself when DuckDB reads it in place, else its canonical Parquet conversion.

    Conversions are cached by content hash, so a month re-run converts nothing again.
    """
    if export.format.to_parquet is None:
        return export.path
    digest = hashlib.sha256(export.path.read_bytes()).hexdigest()[:20]
    converted = telemetry_dir / "converted" / export.cluster / f"{digest}.parquet"
    if not converted.exists():
        converted.parent.mkdir(parents=True, exist_ok=True)
        partial = converted.with_suffix(".partial")
        settings = catalog.settings.clusters.get(export.cluster, ClusterSettings())
        export.format.to_parquet(export.path, partial, settings)
        partial.replace(converted)
    return converted


# Every column a canonical samples file may carry: one empty file with all of them joins every
# read, so that optional columns exist (as NULL) even when no export has them.
SAMPLE_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us")), ("node", pa.string()), ("gpu_index", pa.int32()),
    ("util_pct", pa.float64()), ("mem_used_mib", pa.float64()), ("power_w", pa.float64()),
    ("source_line", pa.int64()), ("job_id", pa.string()), ("gpu_uuid", pa.string()),
    ("gpu_model", pa.string()), ("pod", pa.string()), ("namespace", pa.string()),
    # which metric util_pct came from (DCGM: GR_ENGINE_ACTIVE beats GPU_UTIL; 'none' for a
    # memory- or power-only series) and why a converted row cannot be read
    ("util_metric", pa.string()), ("parse_error", pa.string()),
])  # fmt: skip


def _empty_parquet(folder: Path, schema: pa.Schema) -> Path:
    """An empty Parquet file with `schema`, named after it (so a changed schema gets a new one)."""
    digest = hashlib.sha256(schema.to_string().encode()).hexdigest()[:12]
    path = folder / f"samples-{digest}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(schema.empty_table(), path)
    return path


def month_day_dirs(telemetry_dir: Path, params: dict[str, Any]) -> list[Path]:
    """The daily rollup folders of every cluster for the UTC days the month touches."""
    first = params["month_start"].date().isoformat()
    last = (params["month_end"] - dt.timedelta(microseconds=1)).date().isoformat()
    return [
        day_dir
        for day_dir in sorted(telemetry_dir.glob("cluster=*/day=*"))
        if first <= day_dir.name.removeprefix("day=") <= last
    ]


def month_sample_files(telemetry_dir: Path, params: dict[str, Any]) -> list[str]:
    """The rollup Parquet files of the month, or one empty file when it has no samples."""
    files = [
        str(path)
        for day_dir in month_day_dirs(telemetry_dir, params)
        for path in sorted(day_dir.glob("*.parquet"))
    ]
    return files or [str(_empty_parquet(telemetry_dir / "empty", ROLLUP_SCHEMA))]


# The columns of the daily rollup files (gpu_sample_rollup.sql), for a month without samples.
ROLLUP_SCHEMA = pa.schema([
    ("node", pa.string()), ("gpu_index", pa.int32()), ("ts", pa.timestamp("us")),
    ("util_pct", pa.float64()), ("mem_used_mib", pa.float64()), ("power_w", pa.float64()),
    ("cover_ms", pa.int64()), ("step_ms", pa.int64()), ("cluster", pa.string()),
])  # fmt: skip
