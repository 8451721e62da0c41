"""Which telemetry a month's figures rest on, per cluster (the mart telemetry_coverage): the
utilisation metric(s), the sampling interval observed and the measured share of the allocated
GPU time, worded once here for the finance workbook (Definitions and Data quality sheets) and
the department pages.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from itertools import groupby

import duckdb

from pipelines.reports import queries

NO_TELEMETRY = "no telemetry"


@dataclass(frozen=True)
class ClusterTelemetry:
    """A cluster's row: `metrics` names its utilisation metric, or each of several with its
    share of the cluster's sampled time (the larger first); `interval` the observed step, the
    lower median with the least and most when they differ (one per metric, in that order,
    unless they read the same); `measured_share` a fraction of the allocated GPU time (None
    without allocated time)."""

    cluster: str
    metrics: str
    interval: str
    allocated_gpu_hours: float
    measured_gpu_hours: float
    measured_share: float | None


def cluster_telemetry(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date, department: str | None = None
) -> list[ClusterTelemetry] | None:
    """The clusters of the month (of `department`'s jobs when given; '' for none), in cluster
    order; None when the warehouse has no telemetry_coverage (built before it)."""
    rows = queries.fetch_if_table(
        con, "telemetry_coverage", "telemetry_coverage",
        billing_month=billing_month, department=department,
    )  # fmt: skip
    if rows is None:
        return None
    clusters = []
    for cluster, group in groupby(rows, key=lambda row: row.cluster):
        members = list(group)
        metrics = [row for row in members if row.util_metric is not None]
        # the cluster's figures are the same on each of its rows
        share = members[0].measured_share_pct
        clusters.append(
            ClusterTelemetry(
                cluster=cluster,
                metrics=_metrics(metrics),
                interval=_intervals(metrics),
                allocated_gpu_hours=members[0].allocated_gpu_hours,
                measured_gpu_hours=members[0].measured_gpu_hours,
                measured_share=None if share is None else share / 100,
            )
        )
    return clusters


def _metrics(rows: list) -> str:
    if not rows:
        return NO_TELEMETRY
    if len(rows) == 1:
        return rows[0].util_metric
    return ", ".join(f"{row.util_metric} {row.sampled_share_pct:.1f} %" for row in rows)


def _intervals(rows: list) -> str:
    shown = [_interval(row) for row in rows]
    if not shown:
        return "—"
    return shown[0] if len(set(shown)) == 1 else ", ".join(shown)


def _interval(row) -> str:
    median = f"{_seconds(row.median_step_s)} s"
    if row.min_step_s == row.max_step_s:
        return median
    return f"{median} ({_seconds(row.min_step_s)}–{_seconds(row.max_step_s)} s)"


def _seconds(value: float) -> str:
    """Whole seconds without decimals, others to the millisecond (a step is whole ms)."""
    return f"{value:,.0f}" if value == int(value) else f"{value:,.3f}".rstrip("0")
