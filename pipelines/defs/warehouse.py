"""Warehouse tables as Dagster assets: one table, one asset, one SQL file.

Every warehouse table `<name>` is the select in `sql/<layer>/<name>.sql` (layers: staging,
facts, marts), built by the asset `<name>` for each billing month of the run: its rows of the
month are replaced (`replace_month`), or, for a `whole` table that holds every month (the
catalog, the export records), the table is replaced once per run. Its upstream tables are those
its SQL file and its checks' files read (`tables_read`): the dependency list is written once, in
the SQL; only what a step reads in Python (or from files an upstream asset wrote) is declared
by hand, as `also_reads`.

A `TableStep` is one Dagster step: usually one table; several when they come from one read of
the same input (the catalog's seven tables, the scheduler exports' three), which `prepare`
does once, into temporary tables the SQL files select from. `prepare` also stops a run with
a clear message before a wrong figure is written, and gives parameters a file needs beyond
the month's (`MonthParams`). Each table's checks (`sql/checks/<name>.sql`, one row per
violation) run in the same step right after the table is built; a failed blocking check
fails the step, so nothing downstream runs and the run commits nothing.
"""

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import dagster as dg

from pipelines.defs.monthly import MonthRun, run_months
from pipelines.defs.partitions import monthly_partition, single_run
from pipelines.defs.resources import ChargebackResource
from pipelines.sql import SQL_DIR, create_table, replace_month, run, sql_text, tables_read

# The folders of sql/ whose files build warehouse tables (the others: checks, reports, the
# daily Parquet rollup, macros)
TABLE_LAYERS = ("staging", "facts", "marts")
# The one select there that a step runs into a temporary table of its own, not a warehouse
# table (job_gpus reads it: the GPUs the exports name, pipelines/defs/ingest/loading.py)
TEMPORARY_SELECTS = frozenset({"exported_job_gpus"})

# Work before a step's SQL: stop on a problem, write temporary inputs; returns parameters the
# SQL files need beyond the month's (or None).
Prepare = Callable[[MonthRun], Mapping[str, Any] | None]  # noqa: UP040 - plain alias reads best


@dataclass(frozen=True)
class Check:
    """A check of a table: `sql/checks/<name>.sql` returns one row per violation.

    `warn`: a listed finding (severity WARN) that never blocks. Otherwise severity ERROR,
    blocking unless `blocking=False` (a failure is shown, the run goes on). `summary` adds
    metadata computed from the violations (e.g. the unmapped accounts).
    """

    name: str
    warn: bool = False
    blocking: bool = True
    summary: Callable[[list[dict]], Mapping[str, Any]] | None = None

    @property
    def severity(self) -> dg.AssetCheckSeverity:
        return dg.AssetCheckSeverity.WARN if self.warn else dg.AssetCheckSeverity.ERROR

    def spec(self, table: str) -> dg.AssetCheckSpec:
        return dg.AssetCheckSpec(
            self.name,
            asset=table,
            blocking=self.blocking and not self.warn,
            description=sql_description(f"checks/{self.name}"),
        )

    def violations(self, month: MonthRun) -> list[dict]:
        cursor = run(month.con, f"checks/{self.name}", month.params)
        columns = [c[0] for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def result(self, table: str, months: list[str], found: list[dict]) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(
            asset_key=table,
            check_name=self.name,
            passed=not found,
            severity=self.severity,
            metadata={
                "months": ", ".join(months),
                "violations": len(found),
                "first_violations": dg.MetadataValue.json(
                    [{k: str(v) for k, v in row.items()} for row in found[:20]]
                ),
                **(self.summary(found) if self.summary else {}),
            },
        )


@dataclass(frozen=True)
class Table:
    """A warehouse table: the select in `sql/<layer>/<name>.sql` and its checks. `whole`: the
    table holds every month and is replaced once per run. `also_reads`: upstream assets the
    step reads besides what its SQL files do (in Python, or files an upstream asset wrote), or
    a dependency that needs a `dg.AssetDep` (a partition mapping)."""

    name: str
    layer: str
    checks: Sequence[Check] = ()
    whole: bool = False
    also_reads: Sequence[str | dg.AssetDep] = ()

    @property
    def sql_name(self) -> str:
        return f"{self.layer}/{self.name}"

    @property
    def deps(self) -> list[str | dg.AssetDep]:
        """The upstream assets: the warehouse tables its SQL file and its checks' files read
        (not itself, which its checks read), then `also_reads` (which wins for a table named in
        both)."""
        files = [self.sql_name, *(f"checks/{check.name}" for check in self.checks)]
        read = {table for file in files for table in tables_read(file)} & warehouse_tables()
        declared = {_key(dep) for dep in self.also_reads}
        return [*sorted(read - declared - {self.name}), *self.also_reads]

    def build(self, month: MonthRun, params: Mapping[str, Any]) -> int:
        """Build the table (its month, or all of it); returns the rows written."""
        if self.whole:
            return create_table(month.con, self.name, self.sql_name, params)
        return replace_month(month.con, self.name, self.sql_name, params)

    def spec(self, group: str) -> dg.AssetSpec:
        return dg.AssetSpec(
            self.name,
            deps=self.deps,
            group_name=group,
            description=sql_description(self.sql_name),
            kinds={"duckdb", "sql"},
        )


@dataclass(frozen=True)
class TableStep:
    """One asset step building `tables` for each month of a run, after `prepare`."""

    name: str
    group: str
    tables: Sequence[Table]
    prepare: Prepare | None = field(default=None, compare=False)

    def build(
        self, month: MonthRun, first: bool = True, only: Collection[str] | None = None
    ) -> dict[str, int]:
        """The step's tables (`only` those named) for one month (`first`: the run's first
        month, which alone builds the whole tables); returns the rows written per table."""
        tables = [
            table
            for table in self.tables
            if (first or not table.whole) and (only is None or table.name in only)
        ]
        if not tables:
            return {}
        extra = self.prepare(month) if self.prepare else None
        params = {**month.params.sql(), **(extra or {})}
        return {table.name: table.build(month, params) for table in tables}

    def asset(self) -> dg.AssetsDefinition:
        """The Dagster definition: one asset per table (partitioned by month; a backfill runs
        its months in one run), with the tables' checks. A run may select some of the step's
        tables only (`can_subset`: Dagster's backfills plan each asset on its own)."""

        @dg.multi_asset(
            name=self.name,
            specs=[table.spec(self.group) for table in self.tables],
            check_specs=[check.spec(t.name) for t in self.tables for check in t.checks],
            partitions_def=monthly_partition,
            backfill_policy=single_run,
            can_subset=True,
        )
        def _step(
            context: dg.AssetExecutionContext, chargeback: ChargebackResource
        ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
            selected = {key.to_user_string() for key in context.selected_asset_keys}
            tables = [table for table in self.tables if table.name in selected]
            found: dict[tuple[str, str], list[dict]] = {
                (t.name, c.name): [] for t in tables for c in t.checks
            }
            months: list[str] = []

            def step(month: MonthRun) -> dict[str, int]:
                counts = self.build(month, first=not months, only=selected)
                months.append(month.month.label)
                for table in tables:
                    for check in table.checks:
                        found[(table.name, check.name)] += check.violations(month)
                return counts

            per_month = run_months(context, chargeback, step)
            for table in tables:
                rows = {label: counts[table.name] for label, counts in per_month.items()
                        if table.name in counts}  # fmt: skip
                yield dg.MaterializeResult(
                    asset_key=table.name,
                    metadata={
                        # a whole table: all its rows; else the rows of the run's months
                        "rows": sum(rows.values()),
                        "months": list(per_month),
                        **({"all_months": True} if table.whole else {"rows_by_month": rows}),
                    },
                )
            for table in tables:
                for check in table.checks:
                    yield check.result(table.name, months, found[(table.name, check.name)])

        return _step


def sql_table(
    name: str,
    layer: str,
    group: str,
    *,
    checks: Sequence[Check] = (),
    prepare: Prepare | None = None,
    also_reads: Sequence[str | dg.AssetDep] = (),
) -> TableStep:
    """The step of one monthly table, `sql/<layer>/<name>.sql`."""
    return TableStep(name, group, [Table(name, layer, checks, also_reads=also_reads)], prepare)


@cache
def warehouse_tables() -> frozenset[str]:
    """Every warehouse table: the files of the table layers (`sql/<layer>/<table>.sql`)."""
    files = {path.stem for layer in TABLE_LAYERS for path in (SQL_DIR / layer).glob("*.sql")}
    return frozenset(files - TEMPORARY_SELECTS)


def sql_description(sql_name: str) -> str:
    """The header comment of a SQL file: what one row is, and the parameters."""
    lines = []
    for line in sql_text(sql_name).splitlines():
        if not line.startswith("--"):
            break
        lines.append(line.removeprefix("--").strip())
    return " ".join(lines)


def in_flow_order(steps: Sequence[TableStep]) -> list[TableStep]:
    """`steps` as given, after checking that each step comes after the tables it reads (the
    order a month is built in outside Dagster, e.g. by the tests)."""
    built: set[str] = set()
    names = {table.name for step in steps for table in step.tables}
    for step in steps:
        for table in step.tables:
            for key in map(_key, table.deps):
                if key in names and key not in built and key not in _names(step):
                    raise ValueError(f"{table.name} reads {key}, which is built after it")
        built |= _names(step)
    return list(steps)


def _names(step: TableStep) -> set[str]:
    return {table.name for table in step.tables}


def _key(dep: str | dg.AssetDep) -> str:
    return dep if isinstance(dep, str) else dep.asset_key.to_user_string()
