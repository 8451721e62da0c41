"""The catalog as DuckDB tables (`catalog_*`), for the SQL steps to join.

Dates of the catalog are midnights in the billing timezone, stored as naive UTC timestamps;
open-ended validity runs from 1900 to 9999 so that range checks need no NULL handling.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import hostlist
import pyarrow as pa

from pipelines.catalog import Catalog, CatalogError, check_account_globs
from pipelines.defs.ingest.tables import write_rows

BEGINNING = dt.datetime(1900, 1, 1)
END_OF_TIME = dt.datetime(9999, 12, 31)
MONEY = pa.decimal128(18, 2)
PRICE = pa.decimal128(18, 6)


def write_catalog_rows(con: duckdb.DuckDBPyConnection, catalog: Catalog) -> dict[str, int]:
    """The catalog's content as the temporary tables `catalog_*_rows` the catalog tables'
    SQL files select from (sql/staging/catalog_*.sql); returns rows per table."""
    midnight = _midnights(catalog.settings.billing_timezone)

    counts = {}
    counts["catalog_tenants"] = write_rows(
        con,
        "catalog_tenants",
        [
            {"tenant_id": t.id, "name": t.name, "department": t.department,
             "cost_center": t.cost_center, "owner": t.owner}
            for t in catalog.tenants
        ],
        pa.schema([(c, pa.string()) for c in
                   ("tenant_id", "name", "department", "cost_center", "owner")]),
    )  # fmt: skip
    counts["catalog_rates"] = write_rows(
        con,
        "catalog_rates",
        [
            {
                "gpu_model": r.gpu_model,
                "price_per_gpu_hour": r.price_per_gpu_hour,
                "price_micro": int(r.price_per_gpu_hour * 1_000_000),
                "valid_from": midnight(r.valid_from, BEGINNING),
                "valid_to": midnight(r.valid_to, END_OF_TIME),
                "priority": i,
                "cluster": r.cluster,
            }
            for i, r in enumerate(catalog.rates)
        ],
        pa.schema([
            ("gpu_model", pa.string()), ("price_per_gpu_hour", PRICE), ("price_micro", pa.int64()),
            ("valid_from", pa.timestamp("us")), ("valid_to", pa.timestamp("us")),
            ("priority", pa.int32()), ("cluster", pa.string()),
        ]),
    )  # fmt: skip
    counts["catalog_price_tiers"] = write_rows(
        con,
        "catalog_price_tiers",
        [
            {
                "queue": t.queue, "qos": t.qos, "multiplier": t.multiplier,
                "multiplier_e4": int(t.multiplier * 10_000),
                "valid_from": midnight(t.valid_from, BEGINNING),
                "valid_to": midnight(t.valid_to, END_OF_TIME),
            }
            for t in catalog.tiers
        ],
        pa.schema([
            ("queue", pa.string()), ("qos", pa.string()), ("multiplier", pa.decimal128(10, 4)),
            ("multiplier_e4", pa.int64()), ("valid_from", pa.timestamp("us")),
            ("valid_to", pa.timestamp("us")),
        ]),
    )  # fmt: skip
    counts["catalog_budgets"] = write_rows(
        con,
        "catalog_budgets",
        [{"tenant_id": b.tenant, "month": b.month, "amount": b.amount} for b in catalog.budgets],
        pa.schema([("tenant_id", pa.string()), ("month", pa.string()), ("amount", MONEY)]),
    )
    counts["catalog_quotas"] = write_rows(
        con,
        "catalog_quotas",
        [
            {
                "tenant_id": q.tenant, "pool": q.pool,
                "guaranteed_gpus": float(q.guaranteed_gpus),
                "limit_gpus": None if q.limit_gpus is None else float(q.limit_gpus),
                "reserved": q.reserved,
                "valid_from": midnight(q.valid_from, BEGINNING),
                "valid_to": midnight(q.valid_to, END_OF_TIME),
            }
            for q in catalog.quotas
        ],
        pa.schema([
            ("tenant_id", pa.string()), ("pool", pa.string()), ("guaranteed_gpus", pa.float64()),
            ("limit_gpus", pa.float64()), ("reserved", pa.bool_()),
            ("valid_from", pa.timestamp("us")), ("valid_to", pa.timestamp("us")),
        ]),
    )  # fmt: skip
    counts["catalog_clusters"] = write_rows(
        con,
        "catalog_clusters",
        [
            {"cluster": name, "scheduler_timezone": cluster.scheduler_timezone,
             "monthly_overhead": cluster.monthly_overhead}
            for name, cluster in sorted(catalog.settings.clusters.items())
        ],
        pa.schema([("cluster", pa.string()), ("scheduler_timezone", pa.string()),
                   ("monthly_overhead", MONEY)]),
    )  # fmt: skip
    counts["catalog_gpu_models"] = write_rows(
        con,
        "catalog_gpu_models",
        [
            {"gpu_model": model, "memory_mib": memory_mib}
            for model, memory_mib in sorted(catalog.settings.gpu_memory_mib.items())
        ],
        pa.schema([("gpu_model", pa.string()), ("memory_mib", pa.int64())]),
    )
    nodes = catalog.nodes or []
    counts["catalog_nodes"] = write_rows(
        con,
        "catalog_nodes",
        [
            {
                "cluster": n.cluster, "node": n.node, "gpu_model": n.gpu_model, "gpus": n.gpus,
                "rack": n.rack, "fault_domain": n.fault_domain,
                "driver_version": n.driver_version,
                "in_service_from": midnight(n.in_service_from, BEGINNING),
                "in_service_to": midnight(n.in_service_to, END_OF_TIME),
                "monthly_cost": n.monthly_cost,
            }
            for n in nodes
        ],
        pa.schema([
            ("cluster", pa.string()), ("node", pa.string()), ("gpu_model", pa.string()),
            ("gpus", pa.int32()), ("rack", pa.string()), ("fault_domain", pa.string()),
            ("driver_version", pa.string()), ("in_service_from", pa.timestamp("us")),
            ("in_service_to", pa.timestamp("us")), ("monthly_cost", MONEY),
        ]),
    )  # fmt: skip
    counts["catalog_outage_windows"] = write_rows(
        con,
        "catalog_outage_windows",
        outage_windows(catalog),
        pa.schema([
            ("cluster", pa.string()), ("node", pa.string()), ("outage_from", pa.timestamp("us")),
            ("outage_to", pa.timestamp("us")), ("reason", pa.string()),
        ]),
    )  # fmt: skip
    return counts


def _midnights(billing_timezone: str):
    """Catalog dates -> naive UTC timestamps of their midnight in the billing timezone."""
    zone = ZoneInfo(billing_timezone)

    def midnight(day: dt.date | None, default: dt.datetime) -> dt.datetime:
        if day is None:
            return default
        local = dt.datetime(day.year, day.month, day.day, tzinfo=zone)
        return local.astimezone(dt.UTC).replace(tzinfo=None)

    return midnight


def outage_windows(catalog: Catalog) -> list[dict]:
    """One row per node and outage, overlapping outages of a node merged into one window.

    An outage names its nodes by a Slurm hostlist (`gpu-a[07-08]`) or a glob (`gpu-a*`),
    matched against the inventory; without an inventory the hostlist itself is the node list.
    Its times are local to each node's cluster (its scheduler_timezone, as DESIGN has every
    time without a zone) unless they carry an offset.
    """
    by_node: dict[tuple[str, str], list[tuple[dt.datetime, dt.datetime, str]]] = {}
    for i, outage in enumerate(catalog.outages):
        for cluster, node in _outage_nodes(catalog, outage.nodes, outage.cluster, i):
            zone = ZoneInfo(catalog.cluster(cluster).scheduler_timezone)
            start, end = _naive_utc(outage.start, zone), _naive_utc(outage.end, zone)
            if end <= start:
                raise CatalogError(
                    f"{_outages_file(catalog)}: outages[{i}]: field 'end': {outage.end} is not "
                    f"after 'start' {outage.start}"
                )
            by_node.setdefault((cluster, node), []).append((start, end, outage.reason))
    rows = []
    for (cluster, node), windows in sorted(by_node.items()):
        merged: list[list] = []
        for start, end, reason in sorted(windows):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
                merged[-1][2] = f"{merged[-1][2]}; {reason}"
            else:
                merged.append([start, end, reason])
        rows += [
            {"cluster": cluster, "node": node, "outage_from": s, "outage_to": e, "reason": r}
            for s, e, r in merged
        ]
    return rows


def _outage_nodes(catalog: Catalog, pattern: str, cluster: str | None, index: int):
    if catalog.nodes is None:
        if cluster is None:
            raise CatalogError(
                f"{_outages_file(catalog)}: outages[{index}]: field 'cluster': required without "
                "nodes.csv"
            )
        return [(cluster, node) for node in hostlist.expand_hostlist(pattern)]
    if any(char in pattern for char in "*?"):
        matches = lambda name: fnmatch.fnmatchcase(name, pattern)  # noqa: E731
    else:
        names = set(hostlist.expand_hostlist(pattern))
        matches = names.__contains__
    found = [
        (n.cluster, n.node)
        for n in catalog.nodes
        if matches(n.node) and (cluster is None or n.cluster == cluster)
    ]
    if not found:
        raise CatalogError(
            f"{_outages_file(catalog)}: outages[{index}]: field 'nodes': '{pattern}' "
            "matches no node in nodes.csv"
        )
    return found


def _outages_file(catalog: Catalog) -> Path:
    return Path(catalog.source or ".") / "outages.yaml"


def _naive_utc(moment: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """An outage time as stored, naive UTC: one without a zone is local time in `zone` (in the
    hour repeated when clocks go back, its first pass)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment.astimezone(dt.UTC).replace(tzinfo=None)


def account_tenants(catalog: Catalog, accounts: list[str]) -> list[dict]:
    """For each scheduler account seen, every tenant mapping that matches it, in priority order.

    Exact names come before glob patterns. The SQL takes the first mapping valid at the moment
    it prices; no mapping means tenant 'unmapped'. Two tenants' mappings of one kind (exact or
    glob) in force at once are a catalog error (exact names on load, globs here, where the
    accounts are known), so the catalog's order never decides between tenants.
    """
    midnight = _midnights(catalog.settings.billing_timezone)

    mappings = [
        (tenant.id, mapping, order)
        for order, (tenant, mapping) in enumerate(
            (tenant, mapping) for tenant in catalog.tenants for mapping in tenant.mappings()
        )
    ]
    rows = []
    for account in sorted(set(accounts)):
        check_account_globs(catalog, account)
        exact = [m for m in mappings if m[1].account == account]
        globbed = [
            m for m in mappings
            if m[1].account != account and fnmatch.fnmatchcase(account, m[1].account)
        ]  # fmt: skip
        for priority, (tenant_id, mapping, _) in enumerate(exact + globbed):
            rows.append({
                "account": account,
                "tenant_id": tenant_id,
                "priority": priority,
                "valid_from": midnight(mapping.valid_from, BEGINNING),
                "valid_to": midnight(mapping.valid_to, END_OF_TIME),
            })  # fmt: skip
    return rows


ACCOUNT_TENANTS_SCHEMA = pa.schema([
    ("account", pa.string()), ("tenant_id", pa.string()), ("priority", pa.int32()),
    ("valid_from", pa.timestamp("us")), ("valid_to", pa.timestamp("us")),
])  # fmt: skip
