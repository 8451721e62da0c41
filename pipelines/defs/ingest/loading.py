"""Ingest: scheduler exports into `stg_jobs` / `job_gpus` (telemetry: telemetry.py).

Python reads the files and hands rows to DuckDB as text; typing, validation and rejects are
SQL (`sql/staging/`).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path

import duckdb
import hostlist
import pyarrow as pa

from pipelines.catalog import Catalog
from pipelines.defs.ingest.catalog_tables import ACCOUNT_TENANTS_SCHEMA, account_tenants
from pipelines.defs.ingest.tables import append_arrow, write_arrow, write_rows, write_table
from pipelines.formats import canonical
from pipelines.landing import decompression_errors, discover
from pipelines.months import MonthParams
from pipelines.sql import create_table

# The columns of the raw scheduler tables (raw_jobs, raw_allocations, raw_quotas), besides
# cluster, file, line, raw and parse_error. owner_uid: a pod's controlling owner
# (pipelines/formats/kubernetes.py); no other format has one.
RAW_COLUMNS = {
    "jobs": (*canonical.JOB_COLUMNS, "record_type", "owner_uid"),
    "allocations": canonical.ALLOCATION_COLUMNS,
    "quotas": canonical.QUOTA_COLUMNS,
}


def read_scheduler_exports(
    con: duckdb.DuckDBPyConnection, landing_dir: Path, catalog: Catalog
) -> None:
    """Read every scheduler export of the landing folder, as text, into the temporary tables
    the scheduler tables' SQL files read: raw_jobs, raw_allocations and raw_quotas (every
    row, its file, line and raw text; sql/staging/stg_job_records.sql,
    stg_allocation_records.sql and stg_quota_configs.sql type and check them), raw_node_lists,
    raw_node_names and stg_scheduler_files_rows (one row per export file)."""
    origin = [(name, pa.string()) for name in ("cluster", "file")]
    row_columns = [("line", pa.int64()), ("raw", pa.string()), ("parse_error", pa.string())]
    schemas = {
        kind: pa.schema(origin + row_columns + [(name, pa.string()) for name in names])
        for kind, names in RAW_COLUMNS.items()
    }
    for kind, schema in schemas.items():
        # temporary: stg_*_records keep every row (its raw text too), rejected or not
        write_arrow(con, f"raw_{kind}", schema.empty_table(), temporary=True)
    files: list[dict] = []
    for export in discover(landing_dir, "scheduler"):
        settings = catalog.cluster(export.cluster)
        schema = schemas[export.kind]
        read_table = export.format.read_table
        with decompression_errors(export.path):
            table = read_table(export.path, settings) if read_table else None
            if table is None:
                rows = export.format.read_rows(export.path, settings)
                # every column of the schema but cluster and file, which _conform adds
                columns = pa.schema(list(schema)[len(origin) :])
                table = pa.Table.from_pylist(list(rows), schema=columns)
        # each export into DuckDB as it is read: a month of daily exports is never all in
        # Arrow at once
        conformed = _conform(table, schema, export.cluster, export.name, settings.gpu_models)
        rows_read = append_arrow(con, f"raw_{export.kind}", conformed)
        del table, conformed
        files.append({"cluster": export.cluster, "file": export.name, "kind": export.kind,
                      "format": export.format.name, "rows_read": rows_read})  # fmt: skip
    # every file, so that data quality lists an empty or header-only one with its 0 rows
    write_rows(con, "stg_scheduler_files", files, SCHEDULER_FILES_SCHEMA)
    write_node_lists(con)
    write_node_names(con)


def write_account_tenants(con: duckdb.DuckDBPyConnection, catalog: Catalog) -> None:
    """The tenant mappings of every account of stg_job_records and of the configured quotas
    (stg_quota_configs: Slurm associations, the namespaces of Kueue LocalQueues), as the
    temporary table catalog_account_tenants_rows (sql/staging/catalog_account_tenants.sql)."""
    accounts = [a for (a,) in con.execute(
        """
        select account from stg_job_records where account is not null
        union
        select account from stg_quota_configs where account is not null
        order by account
        """
    ).fetchall()]  # fmt: skip
    write_rows(
        con, "catalog_account_tenants", account_tenants(catalog, accounts), ACCOUNT_TENANTS_SCHEMA
    )


SCHEDULER_FILES_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("file", pa.string()), ("kind", pa.string()),
    ("format", pa.string()), ("rows_read", pa.int64()),
])  # fmt: skip


def write_node_lists(con: duckdb.DuckDBPyConnection) -> None:
    """The temporary table raw_node_lists: each distinct hostlist of raw_jobs and how many
    nodes it names (stg_job_records rejects more GPUs than those nodes can hold: one absurd
    line must not make the month assign 100,000 GPUs). Few rows: hostlists repeat."""
    node_lists = [nodes for (nodes,) in con.execute(
        "select distinct nodes from raw_jobs where nodes is not null"
    ).fetchall()]  # fmt: skip
    write_table(
        con,
        "raw_node_lists",
        [{"nodes": nodes, "node_count": node_count(nodes)} for nodes in node_lists],
        pa.schema([("nodes", pa.string()), ("node_count", pa.int64())]),
        temporary=True,
    )


def write_node_names(con: duckdb.DuckDBPyConnection) -> None:
    """The temporary table raw_node_names: each node of each hostlist of the job records that
    raw_allocations names (stg_allocation_records rejects a record on a node its job did not
    run on). Only those jobs' hostlists are expanded: most exports have no allocations."""
    allocated = [nodes for (nodes,) in con.execute(
        """
        select distinct j.nodes
        from raw_jobs as j
        semi join raw_allocations as a on a.cluster = j.cluster and a.job_id = j.job_id
        where j.nodes is not null
        order by j.nodes
        """
    ).fetchall()]  # fmt: skip
    write_table(
        con,
        "raw_node_names",
        [{"nodes": nodes, "node": node} for nodes in allocated for node in node_names(nodes) or []],
        pa.schema([("nodes", pa.string()), ("node", pa.string())]),
        temporary=True,
    )


def node_count(nodes: str) -> int | None:
    """How many nodes a hostlist names (`gpu-[01-04,07]`: 5); None when it is not one (or
    names more than python-hostlist's 100,000), which rejects the record."""
    names = node_names(nodes)
    return None if names is None else len(names)


def node_names(nodes: str) -> list[str] | None:
    """The nodes a hostlist names, each once (`gpu-[01-02]`: gpu-01, gpu-02); None when it
    is not a hostlist (its record is rejected: stg_job_records.sql)."""
    try:
        return hostlist.expand_hostlist(nodes)
    except hostlist.BadHostlist:
        return None


def _conform(
    table: pa.Table, schema: pa.Schema, cluster: str, file: str, gpu_models: dict[str, str]
) -> pa.Table:
    """An export's rows with `schema`'s columns (absent ones NULL), its cluster and file name,
    and the cluster's own GPU model names (settings `gpu_models`, case-insensitive) mapped."""
    rows = table.num_rows
    given = {"cluster": pa.array([cluster] * rows, pa.string()),
             "file": pa.array([file] * rows, pa.string())}  # fmt: skip
    aliases = {name.lower(): model for name, model in gpu_models.items()}
    if aliases and "gpu_model" in table.column_names:
        given["gpu_model"] = pa.array(
            [aliases.get(m.lower(), m) if m else m for m in table["gpu_model"].to_pylist()],
            pa.string(),
        )
    columns = []
    for field in schema:
        if field.name in given:
            columns.append(given[field.name])
        elif field.name in table.column_names:
            columns.append(table[field.name].cast(field.type))
        else:
            columns.append(pa.nulls(rows, field.type))
    return pa.table(columns, schema=schema)


# A GPU's time is counted in 1/420ths: 420 = lcm(1..7), so MIG slices (1/7), halves, thirds,
# quarters... of a GPU are whole numbers and every sum stays exact.
WHOLE_GPU = 420


def write_month_job_gpus(con: duckdb.DuckDBPyConnection, params: MonthParams) -> None:
    """The GPUs the month's started jobs held, as the temporary tables job_gpus.sql reads:
    exported_job_gpus (what the exports say) and assigned_job_gpus (the rest, assigned).

    Both are worked out over placement_jobs, every job of every export loaded (stg_jobs.sql
    over all time), not over the month's jobs alone: a job's GPUs depend on the jobs that held
    the node before it, and some of those ended in an earlier month.
    """
    every_job = params.sql() | {"month_start": dt.datetime.min, "month_end": dt.datetime.max}
    create_table(con, "placement_jobs", "staging/stg_jobs", every_job, temporary=True)
    create_table(con, "exported_job_gpus", "staging/exported_job_gpus", params, temporary=True)
    assigned = assign_gpu_indices(con, params)
    schema = pa.schema([
        ("billing_month", pa.date32()), ("cluster", pa.string()), ("job_id", pa.string()),
        ("node", pa.string()), ("gpu_index", pa.int32()), ("gpu_share", pa.int32()),
        ("index_source", pa.string()),
    ])  # fmt: skip
    write_table(con, "assigned_job_gpus", assigned, schema, temporary=True)


def gpu_shares(gpus: float, nodes: int) -> list[int]:
    """The shares (in 1/420 of a GPU) a job holds on each of its nodes: whole GPUs first, then
    the fractional rest on one more GPU. `gpu_shares(0.5, 1) == [210]`, `(2, 1) == [420, 420]`.
    """
    per_node = round(gpus * WHOLE_GPU / nodes)
    shares = [WHOLE_GPU] * (per_node // WHOLE_GPU)
    if per_node % WHOLE_GPU:
        shares.append(per_node % WHOLE_GPU)
    return shares


def missing_shares(names: list[str], units: int, named: dict[str, int]) -> dict[str, list[int]]:
    """The shares (in 1/420 of a GPU) of the `units` a job holds beyond the GPUs its allocation
    rows name (`named`: how many on each node), by node: whole GPUs first, then the fractional
    rest, each on the node of its hostlist holding the fewest so far (ties: hostlist order).
    `missing_shares(["n1", "n2"], 1050, {"n1": 1}) == {"n2": [420, 210], "n1": [420]}`."""
    shares = [WHOLE_GPU] * (units // WHOLE_GPU) + ([units % WHOLE_GPU] if units % WHOLE_GPU else [])
    held = {node: named.get(node, 0) for node in names}
    placed: dict[str, list[int]] = defaultdict(list)
    for share in shares:
        node = min(names, key=lambda name: held[name])  # the first of the fewest
        held[node] += 1
        placed[node].append(share)
    return placed


def assign_gpu_indices(con: duckdb.DuckDBPyConnection, params: MonthParams) -> list[dict]:
    """GPU indices for the month's started jobs whose export does not say which GPUs they held,
    or names fewer than they hold (a 2-GPU job with one allocation row, or whose other row is
    a reject): such a job is billed for what its record says it held, so the GPUs its rows do
    not name are placed here too. Its named GPUs stay its own, so the telemetry of those is
    attributed right; only the rest is a guess, the same guess as for a job with no rows.
    (Setting its rows aside to place it whole would guess the GPUs the export did name too.)

    Assigned as Slurm's default selection does: in start order (ties by cluster and job id),
    the lowest free indices of each node (the job's GPUs spread evenly over its nodes; the GPUs
    a job's rows do not name, on the nodes its rows name the fewest of: missing_shares); a
    fractional share (MIG slice, half a GPU) goes to the lowest GPU with room for it. What
    exported allocations hold (the temporary table exported_job_gpus) is never taken.
    Telemetry then matches per GPU like for any other job.

    The placement is replayed over every job loaded that started before the month's last one
    to place (the temporary table placement_jobs), whichever month it belongs to: a job that
    runs across a month boundary keeps the GPUs it got when it started, in both months' views,
    and a month's result does not depend on which later months were loaded or built.
    """
    month = params.billing_month
    # each job's GPUs its rows name, by node (none for most jobs), and what every started job
    # holds beyond them: WHOLE_GPU × gpus units, less its rows' (a whole GPU each when they
    # name fewer than it holds); all of it for a job without rows
    con.execute(
        """
        create or replace temporary table named_job_gpus as
        select cluster, job_id, node, count(*) as gpus, sum(gpu_share) as units
        from exported_job_gpus
        group by cluster, job_id, node
        """
    )
    con.execute(
        """
        create or replace temporary table unplaced_job_units as
        select *
        from (
            select
                j.cluster,
                j.job_id,
                round($whole_gpu * any_value(j.gpus))::integer - coalesce(sum(g.units), 0)
                    as unplaced
            from placement_jobs as j
            left join named_job_gpus as g using (cluster, job_id)
            where j.start_at is not null and j.gpus > 0
            group by j.cluster, j.job_id
        )
        where unplaced > 0
        """,
        {"whole_gpu": WHOLE_GPU},
    )
    to_place = set(
        con.execute(
            """
            select cluster, job_id
            from stg_jobs
            join unplaced_job_units using (cluster, job_id)
            where billing_month = $billing_month and start_at is not null
            """,
            {"billing_month": month},
        ).fetchall()
    )
    if not to_place:  # every started job's export names its GPUs
        return []
    named: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for cluster, job_id, node, gpus in con.execute(
        "select cluster, job_id, node, gpus from named_job_gpus"
    ).fetchall():
        named[(cluster, job_id)][node] = gpus
    node_gpus = dict(
        ((cluster, node), gpus)
        for cluster, node, gpus in con.execute(
            "select cluster, node, gpus from catalog_nodes"
        ).fetchall()
    )
    exported: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    for cluster, node, start, end, index, share in con.execute(
        """
        select g.cluster, g.node, j.start_at, j.held_until, g.gpu_index, g.gpu_share
        from exported_job_gpus as g
        join placement_jobs as j using (cluster, job_id)
        """
    ).fetchall():
        exported[(cluster, node)].append((start, end, index, share))
    replayed = con.execute(
        """
        select cluster, job_id, nodes, gpus, start_at, held_until, unplaced
        from placement_jobs
        join unplaced_job_units using (cluster, job_id)
        where start_at <= (
            select max(start_at) from stg_jobs
            where billing_month = $billing_month and start_at is not null
        )
        order by start_at, cluster, job_id
        """,
        {"billing_month": month},
    ).fetchall()

    expanded = {}  # hostlist -> its nodes, expanded once
    holding: dict[tuple[str, str], list[tuple]] = defaultdict(list)  # assigned, still held
    assigned = []
    for cluster, job_id, nodes, gpus, start, end, unplaced in replayed:
        if nodes not in expanded:
            expanded[nodes] = hostlist.expand_hostlist(nodes)
        names = expanded[nodes]
        if (cluster, job_id) in named:
            by_node = missing_shares(names, unplaced, named[(cluster, job_id)])
        else:
            by_node = dict.fromkeys(names, gpu_shares(gpus, len(names)))
        for node in names:
            shares = by_node.get(node, [])
            key = (cluster, node)
            holding[key] = [held for held in holding[key] if held[1] > start]
            size = node_gpus.get(key, max(8, len(shares)))
            load = defaultdict(int)  # share already held on each index during the job
            for s, e, index, share in holding[key] + exported[key]:
                if s < end and e > start:
                    load[index] += share
            chosen: list[int] = []
            for share in shares:
                fits = [i for i in range(size) if i not in chosen and load[i] + share <= WHOLE_GPU]
                # an over-subscribed node (a data error, reported as overlap) still gets one
                spare = [i for i in range(size) if i not in chosen]
                index = (fits or spare or [len(chosen)])[0]
                chosen.append(index)
                holding[key].append((start, end, index, share))
                if (cluster, job_id) in to_place:
                    assigned.append({
                        "billing_month": month, "cluster": cluster, "job_id": job_id,
                        "node": node, "gpu_index": index, "gpu_share": share,
                        "index_source": "assigned",
                    })  # fmt: skip
    return assigned
