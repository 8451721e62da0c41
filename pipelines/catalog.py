"""The catalog: tenants, rates, quotas, budgets, outages, settings (YAML) and nodes (CSV).

Owned by the platform team and kept in git. Every file is validated on load; a mistake stops
the run with one line naming the file, the entry and the field.
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import fnmatch
import functools
import io
import types
import typing
import zoneinfo
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal

import hostlist
import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from pipelines.iso4217 import CURRENCY_CODES

UNMAPPED_TENANT = "unmapped"


class CatalogError(ValueError):
    """A catalog file is missing or malformed; the message names file, entry and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# A GPU's time is counted in 1/420ths (420 = lcm(1..7)): a share of a GPU must be a whole
# number of them for every sum to stay exact (MIG slices of 1/7, halves, quarters, tenths...).
GPU_UNITS = 420


def _gpu_equivalent(value: object) -> Fraction:
    """`1/7`, `0.25` or `1` as an exact fraction of a GPU, a whole number of 1/420ths."""
    try:
        fraction = Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"'{value}' is not a fraction of a GPU (e.g. 1/7, 0.25)") from None
    if not 0 < fraction <= 1:
        raise ValueError(f"'{value}' is not between 0 (excluded) and 1 GPU")
    if (fraction * GPU_UNITS).denominator != 1:
        raise ValueError(f"'{value}' is not a whole number of 1/{GPU_UNITS} GPU")
    return fraction


GpuEquivalent = Annotated[Fraction, BeforeValidator(_gpu_equivalent)]


def _profile_names(value: object) -> object:
    """Profile names as MIG writes them, lower case (`1g.10gb`, or `3g` for every size)."""
    if isinstance(value, dict):
        return {str(name).strip().lower(): equivalent for name, equivalent in value.items()}
    return value


MigProfiles = Annotated[dict[str, GpuEquivalent], BeforeValidator(_profile_names)]


class GpuSharing(_Strict):
    """GPUs of a node pool shared by several jobs at once: each replica the scheduler hands
    out (a time-slicing or MPS replica of `nvidia.com/gpu`, a Slurm `gres/shard`) is
    1/replicas of a GPU."""

    nodes: str = "*"  # the pool: a glob (`kube-ts-*`) or a Slurm hostlist (`gpu-[01-04]`)
    mode: Literal["time-slicing", "mps", "shard"]
    replicas: int = Field(ge=1, le=GPU_UNITS)

    @field_validator("replicas")
    @classmethod
    def _exact_share(cls, replicas: int) -> int:
        if GPU_UNITS % replicas:
            divisors = [n for n in range(2, 31) if GPU_UNITS % n == 0]
            raise ValueError(
                f"{replicas} replicas: a replica must be a whole number of 1/{GPU_UNITS} GPU "
                f"(replicas dividing {GPU_UNITS}: {', '.join(map(str, divisors))}, ...)"
            )
        return replicas

    @field_validator("nodes")
    @classmethod
    def _pattern(cls, nodes: str) -> str:
        if not _is_glob(nodes):
            try:
                _hostlist(nodes)
            except hostlist.BadHostlist as error:
                raise ValueError(f"'{nodes}' is neither a glob nor a hostlist ({error})") from None
        return nodes

    def covers(self, node: str) -> bool:
        if _is_glob(self.nodes):
            return fnmatch.fnmatchcase(node, self.nodes)
        return node in _hostlist(self.nodes)


def _is_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


@functools.cache
def _hostlist(pattern: str) -> frozenset[str]:
    return frozenset(hostlist.expand_hostlist(pattern))


class TelemetrySettings(_Strict):
    # the seconds a telemetry sample stands for (the exporter's scrape interval), declared
    # instead of estimated from the samples' spacing (sql/rollup/gpu_sample_rollup.sql);
    # None: estimated. Whole milliseconds: the rollup counts time in ms.
    step_s: Decimal | None = Field(default=None, gt=0, decimal_places=3)


class ClusterSettings(_Strict):
    scheduler_timezone: str = "UTC"
    sacct_fields: list[str] | None = None
    # the scheduler's GPU type names -> the catalog's models, e.g. {a100: A100-80GB}
    gpu_models: dict[str, str] = {}
    # full_recovery: the cluster's monthly cost beyond its nodes' monthly_cost (power, space,
    # staff), spread over its GPU models in proportion to their capacity GPU-hours
    monthly_overhead: Decimal | None = Field(default=None, ge=0, decimal_places=2)
    # the cluster's own declared telemetry step, over the catalog-wide one
    telemetry: TelemetrySettings = TelemetrySettings()
    # node pools whose GPUs are shared (time-slicing, MPS, Slurm shards); one mapping = the
    # whole cluster. A node in no pool holds each GPU whole: an overlap there is an error.
    sharing: list[GpuSharing] = []
    # MIG profile -> GPU-equivalents, over rates.yaml's mig_profiles (a cluster of A30s: 1/4)
    mig_profiles: MigProfiles = {}

    @field_validator("sharing", mode="before")
    @classmethod
    def _one_pool_is_a_list(cls, value: object) -> object:
        return [value] if isinstance(value, dict) else value

    def sharing_of(self, node: str) -> GpuSharing | None:
        """The first declared pool that holds `node`, None when its GPUs are not shared."""
        return next((pool for pool in self.sharing if pool.covers(node)), None)


class Settings(_Strict):
    currency: str = "USD"
    billing_timezone: str = "UTC"
    cost_mode: Literal["rate_card", "full_recovery"] = "rate_card"
    # full_recovery: who pays for the capacity cost that usage and reservations leave over
    idle_sharing: Literal["weighted", "even", "reserved_quota_first", "platform"] = "weighted"
    idle_threshold_pct: Decimal = Field(default=Decimal(5), ge=0, le=100)
    # the paper the report pages (and their PDFs) print on
    page_size: Literal["A4", "Letter"] = "A4"
    # each report page also printed to PDF where the machine has Chromium; false: the pages
    # alone (a site that mails the HTML, or a backfill that need not print every month)
    page_pdfs: bool = True
    zombie_min_hours: Decimal = Field(default=Decimal(2), gt=0)
    # a node whose every GPU stops reporting this long while in service is an incident
    # (inferred, never counted as down: sql/marts/incidents.sql); at least the minute the
    # daily rollup marks silences from (sql/macros/silence_floor_ms.sql)
    silence_min_minutes: Decimal = Field(default=Decimal(30), ge=1)
    telemetry: TelemetrySettings = TelemetrySettings()
    clusters: dict[str, ClusterSettings] = {}
    # Each catalog GPU model's memory in MiB, as nvidia-smi's memory.total reads it (A100 80GB:
    # 81920): no export the readers parse carries it (DCGM's FB_USED and nvidia-smi's
    # memory.used are the used memory only). user_efficiency's memory ratios need it; a model
    # without one leaves them empty, never guessed.
    gpu_memory_mib: dict[str, Annotated[int, Field(gt=0)]] = {}
    # a user whose idle + zombie GPU-hours in a month exceed this gets a row in
    # notices-YYYY-MM.csv (24: a GPU held idle for a whole day)
    notice_idle_gpu_hours: Decimal = Field(default=Decimal(24), ge=0, decimal_places=3)

    def telemetry_step_ms(self, cluster: str) -> int | None:
        """The declared telemetry step of `cluster` in milliseconds: the cluster's own, else
        the catalog-wide one; None when neither is declared (the rollup estimates it)."""
        own = self.clusters.get(cluster, ClusterSettings()).telemetry.step_s
        step = own if own is not None else self.telemetry.step_s
        return None if step is None else int(step * 1000)


def _after(start: str, end: str, never: str):
    """A validator of field `end` (an exclusive date) after field `start`: a window from a day
    to the same day or an earlier one is empty (`never`: what it would never be), and would
    drop out of every month without a word."""

    def check(value: dt.date | None, info: ValidationInfo) -> dt.date | None:
        begin = info.data.get(start)
        if value is not None and begin is not None and value <= begin:
            raise PydanticCustomError(
                "empty_window",
                "{value} is not after {start} {begin}: {never} ({end} is the first day it no "
                "longer is)",
                {"value": str(value), "start": start, "begin": str(begin), "never": never,
                 "end": end},
            )  # fmt: skip
        return value

    return field_validator(end)(check)


# valid_from / valid_to of rates, tiers, tenants, account mappings and quotas
_after_valid_from = _after("valid_from", "valid_to", "the entry would never be in force")


class AccountMapping(_Strict):
    account: str
    valid_from: dt.date | None = None
    valid_to: dt.date | None = None

    _valid_to = _after_valid_from


def _account_entry_kind(entry: object) -> str:
    return "account-mapping" if isinstance(entry, dict | AccountMapping) else "account-name"


# An account is a name or a mapping with dates. Told apart by its shape, so that a mistake in a
# mapping is reported as the mapping's (an unknown key), not as "not a valid string".
AccountEntry = Annotated[
    Annotated[str, Tag("account-name")] | Annotated[AccountMapping, Tag("account-mapping")],
    Discriminator(_account_entry_kind),
]
# the tags name no key of an entry: dropped from the field a message names
_UNION_TAGS = {"account-name", "account-mapping"}


class Tenant(_Strict):
    id: str = Field(min_length=1)
    name: str
    department: str
    cost_center: str
    owner: str | None = None
    accounts: list[AccountEntry] = Field(min_length=1)
    valid_from: dt.date | None = None
    valid_to: dt.date | None = None

    _valid_to = _after_valid_from

    def mappings(self) -> list[AccountMapping]:
        """Account patterns with their validity; the tenant's dates apply where none is set."""
        return [
            AccountMapping(account=a, valid_from=self.valid_from, valid_to=self.valid_to)
            if isinstance(a, str)
            else a
            for a in self.accounts
        ]


class Rate(_Strict):
    gpu_model: str
    price_per_gpu_hour: Decimal = Field(ge=0, decimal_places=6)
    valid_from: dt.date | None = None
    valid_to: dt.date | None = None
    # one cluster's price (its folder name): over the model's all-clusters rate, as an exact
    # account mapping is over a glob; None: every cluster
    cluster: str | None = Field(default=None, min_length=1)

    _valid_to = _after_valid_from


class PriceTier(_Strict):
    """rates.yaml `tiers:`: the price of a queue's or a QoS's GPU time, as a multiplier of the
    rate in force (a preemptible queue at 0.5, a premium QoS at 1.25)."""

    queue: str | None = Field(default=None, min_length=1)
    qos: str | None = Field(default=None, min_length=1)
    # ten-thousandths at most: the tiered price in millionths is rounded half up once
    multiplier: Decimal = Field(ge=0, decimal_places=4)
    valid_from: dt.date | None = None
    valid_to: dt.date | None = None

    _valid_to = _after_valid_from

    @model_validator(mode="after")
    def _one_scope(self) -> PriceTier:
        if (self.queue is None) == (self.qos is None):
            raise ValueError("a tier names either a queue or a qos")
        if self.multiplier == 1:
            raise ValueError("a multiplier of 1 is the rate itself: remove the tier")
        return self

    @property
    def label(self) -> str:
        return f"queue {self.queue}" if self.queue is not None else f"QoS {self.qos}"


class Quota(_Strict):
    tenant: str
    pool: str
    guaranteed_gpus: Decimal = Field(ge=0)
    limit_gpus: Decimal | None = Field(default=None, ge=0)
    reserved: bool = False
    valid_from: dt.date | None = None
    valid_to: dt.date | None = None

    _valid_to = _after_valid_from

    @field_validator("limit_gpus")
    @classmethod
    def _not_below_guarantee(cls, limit: Decimal | None, info: ValidationInfo) -> Decimal | None:
        # the limit caps the guarantee plus what may be borrowed (Kueue: nominalQuota +
        # borrowingLimit): below the guarantee, using what is guaranteed would be a breach
        guaranteed = info.data.get("guaranteed_gpus")
        if limit is not None and guaranteed is not None and limit < guaranteed:
            raise PydanticCustomError(
                "limit_below_guarantee",
                "{limit} is below guaranteed_gpus {guaranteed} (the limit is the guarantee "
                "plus what may be borrowed)",
                {"limit": str(limit), "guaranteed": str(guaranteed)},
            )
        return limit


class Budget(_Strict):
    tenant: str
    month: str = Field(pattern=r"^\d{4}-\d{2}$")
    amount: Decimal = Field(ge=0, decimal_places=2)

    @field_validator("month", mode="before")
    @classmethod
    def _month_as_text(cls, value: object) -> object:
        # YAML reads an unquoted 2026-11 as text, but 2026-11-01 as a date.
        return value.strftime("%Y-%m") if isinstance(value, dt.date) else value

    @field_validator("month")
    @classmethod
    def _a_month(cls, month: str) -> str:
        if not 1 <= int(month[5:]) <= 12:
            raise PydanticCustomError(
                "month", "'{month}' is not a month (YYYY-MM, MM from 01 to 12)", {"month": month}
            )
        return month


class Outage(_Strict):
    nodes: str
    start: dt.datetime
    end: dt.datetime
    cluster: str | None = None
    reason: str = "unspecified"


class Node(_Strict):
    node: str = Field(min_length=1)
    cluster: str = Field(min_length=1)
    gpu_model: str = Field(min_length=1)
    gpus: int = Field(gt=0)
    rack: str | None = None
    fault_domain: str | None = None
    driver_version: str | None = None
    in_service_from: dt.date | None = None
    in_service_to: dt.date | None = None
    monthly_cost: Decimal | None = Field(default=None, ge=0, decimal_places=2)

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    _in_service_to = _after(
        "in_service_from", "in_service_to", "the node would never be in service"
    )


class Catalog(_Strict):
    settings: Settings
    tenants: list[Tenant]
    rates: list[Rate]
    tiers: list[PriceTier] = []
    quotas: list[Quota] = []
    budgets: list[Budget] = []
    outages: list[Outage] = []
    nodes: list[Node] | None = None  # None: no inventory, capacity is unknown
    # MIG profile -> GPU-equivalents (rates.yaml mig_profiles) where NVIDIA's A100/H100
    # default (`Ng` = N/7) does not hold
    mig_profiles: MigProfiles = {}
    # the catalog folder, for the messages of checks that need the exports (account globs)
    source: Path | None = None

    def cluster(self, name: str) -> ClusterSettings:
        """The settings of cluster `name` (defaults when settings.yaml has none), with the MIG
        profile table: rates.yaml's, under the cluster's own entries."""
        settings = self.settings.clusters.get(name, ClusterSettings())
        profiles = {**self.mig_profiles, **settings.mig_profiles}
        return settings.model_copy(update={"mig_profiles": profiles})


_YAML_FILES = {
    # file stem: (top-level key, model, required)
    "tenants": ("tenants", Tenant, True),
    "rates": ("rates", Rate, True),
    "quotas": ("quotas", Quota, False),
    "budgets": ("budgets", Budget, False),
    "outages": ("outages", Outage, False),
}
# top-level keys a file holds besides its list
_OTHER_KEYS = {"rates": ("mig_profiles", "tiers")}


def load_catalog(catalog_dir: Path) -> Catalog:
    """Read and validate every catalog file in `catalog_dir`."""
    catalog_dir = Path(catalog_dir)
    settings_path = catalog_dir / "settings.yaml"
    raw_settings = _read_yaml(settings_path) if settings_path.exists() else {}
    settings = _validate(Settings, raw_settings or {}, settings_path, "settings")
    _check_settings(settings, settings_path)

    parts: dict[str, list] = {}
    for stem, (key, model, required) in _YAML_FILES.items():
        path = catalog_dir / f"{stem}.yaml"
        if not path.exists():
            if required:
                raise CatalogError(f"{path}: missing (the catalog needs {stem}.yaml)")
            parts[key] = []
            continue
        document = _read_yaml(path) or {}
        if not isinstance(document, dict) or not isinstance(document.get(key, []), list):
            raise CatalogError(f"{path}: expected a top-level '{key}:' list")
        _check_top_level_keys(document, (key, *_OTHER_KEYS.get(stem, ())), path)
        parts[key] = [
            _validate(model, entry, path, f"{key}[{i}]", entry)
            for i, entry in enumerate(document.get(key) or [])
        ]
        if stem == "rates":
            parts["mig_profiles"] = _mig_profiles(document.get("mig_profiles"), path)
            tiers = document.get("tiers") or []
            if not isinstance(tiers, list):
                raise CatalogError(f"{path}: expected 'tiers:' to be a list")
            parts["tiers"] = [
                _validate(PriceTier, entry, path, f"tiers[{i}]", entry)
                for i, entry in enumerate(tiers)
            ]

    nodes_path = catalog_dir / "nodes.csv"
    full_recovery = settings.cost_mode == "full_recovery"
    if full_recovery and not nodes_path.exists():
        raise CatalogError(
            f"{nodes_path}: missing (cost_mode full_recovery in settings.yaml needs the node "
            "inventory with a monthly_cost per node)"
        )
    nodes = _read_nodes(nodes_path, require_cost=full_recovery) if nodes_path.exists() else None
    catalog = Catalog(settings=settings, nodes=nodes, source=catalog_dir, **parts)
    _check_references(catalog, catalog_dir)
    _check_unambiguous(catalog, catalog_dir)
    return catalog


class _MigProfiles(_Strict):
    profiles: MigProfiles


def _mig_profiles(table: object, path: Path) -> dict[str, Fraction]:
    """rates.yaml `mig_profiles:` (profile: GPU-equivalents), validated with its file."""
    if table is None:
        return {}
    try:
        return _MigProfiles(profiles=table).profiles
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:])
        field = f"mig_profiles.{where}" if where else "mig_profiles"
        raise CatalogError(f"{path}: field '{field}': {first['msg']}") from None


class _DuplicateKeyError(Exception):
    def __init__(self, key: object, line: int, first_line: int) -> None:
        super().__init__(key, line, first_line)
        self.key, self.line, self.first_line = key, line, first_line


class _UniqueKeyLoader(yaml.CSafeLoader):
    """The safe loader, refusing a key written twice in one mapping: YAML would keep the last
    value and drop the other without a word (a tenant's second `cost_center:`). libyaml's
    parser (CSafeLoader): each monthly step reads the catalog, 8 ms on the demo's against 34
    ms with the pure-Python one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first_lines: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults`: keys written next to it override the merged ones
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in first_lines:
                    raise _DuplicateKeyError(key, line, first_lines[key])
                first_lines[key] = line
            except TypeError:
                continue  # an unhashable key: the constructor below reports it
        return super().construct_mapping(node, deep)


def _read_text(path: Path) -> str:
    """A catalog file's text: UTF-8, with or without the byte order mark that Excel and some
    Windows editors write ("CSV UTF-8"), which would otherwise stick to the first key/column."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        line_start = data.rfind(b"\n", 0, error.start) + 1
        column = len(data[line_start : error.start].decode("utf-8-sig")) + 1
        raise CatalogError(
            f"{path}: line {line}, column {column}: byte {data[error.start]:#04x} is not UTF-8 "
            "(save the file as UTF-8)"
        ) from None


def _read_yaml(path: Path) -> object:
    try:
        return yaml.load(_read_text(path), Loader=_UniqueKeyLoader)  # a (C) SafeLoader
    except _DuplicateKeyError as error:
        raise CatalogError(
            f"{path}: line {error.line}: field '{error.key}': duplicate key, already on line "
            f"{error.first_line} (YAML would keep the last and drop the other silently)"
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise CatalogError(f"{path}:{where} is not valid YAML: {error}") from None


def _validate(model: type[BaseModel], data: object, path: Path, entry: str, raw: object = None):
    try:
        return model.model_validate(data)
    except ValidationError as error:
        errors = error.errors()
        # a misspelt key is also a required one missing: the unknown key says what to fix
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple(part for part in first["loc"] if part not in _UNION_TAGS)
        field = ".".join(str(part) for part in loc) or "(entry)"
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            key = str(loc[-1])
            message = f"unknown key '{key}' ({_key_hint(key, _keys_at(model, loc[:-1]))})"
        label = entry
        if isinstance(raw, dict) and ("id" in raw or "tenant" in raw):
            label += f" ({raw.get('id') or raw.get('tenant')})"
        raise CatalogError(f"{path}: {label}: field '{field}': {message}") from None


def _keys_at(model: type[BaseModel], loc: tuple) -> tuple[str, ...]:
    """The keys the entry at `loc` inside `model` may hold (`accounts.0` of a Tenant: those of
    an AccountMapping), for the hint on an unknown key."""
    annotation = _container(model)
    for part in loc:
        if _is_model(annotation):
            field = annotation.model_fields.get(str(part))
            annotation = _container(field.annotation) if field else None
        elif typing.get_origin(annotation) in (list, dict):
            annotation = _container(typing.get_args(annotation)[-1])  # an item, a value
        else:
            return ()
    return tuple(annotation.model_fields) if _is_model(annotation) else ()


def _container(annotation: Any) -> Any:
    """Through Annotated and unions (`X | None`, an account's name or mapping) to the one model,
    list or dict a key can lead into; None when there is none."""
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        branches = [b for b in map(_container, typing.get_args(annotation)) if b is not None]
        return branches[0] if len(branches) == 1 else None
    if _is_model(annotation) or typing.get_origin(annotation) in (list, dict):
        return annotation
    return None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _read_nodes(path: Path, require_cost: bool = False) -> list[Node]:
    """The inventory; `require_cost` (full_recovery) makes monthly_cost mandatory."""
    with io.StringIO(_read_text(path), newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        known = tuple(Node.model_fields)
        # a misspelt column (`in_service_until`) would be read as absent, its values lost
        for number, column in enumerate(columns, start=1):
            if column not in known:
                close = difflib.get_close_matches(column, known, n=1, cutoff=0.6)
                hint = f"did you mean '{close[0]}'? " if close else ""
                raise CatalogError(
                    f"{path}: line 1: column {number} '{column}' is not a nodes.csv column "
                    f"({hint}known: {', '.join(known)})"
                )
            if columns.index(column) + 1 != number:
                raise CatalogError(
                    f"{path}: line 1: column {number} '{column}' repeats column "
                    f"{columns.index(column) + 1}"
                )
        required = {"node", "cluster", "gpu_model", "gpus"} | (
            {"monthly_cost"} if require_cost else set()
        )
        missing = required - set(columns)
        if missing:
            why = " (cost_mode full_recovery needs monthly_cost)" if require_cost else ""
            raise CatalogError(f"{path}: line 1: missing columns {sorted(missing)}{why}")
        nodes = []
        first_line: dict[tuple[str, str], int] = {}
        for row in reader:
            line = reader.line_num  # blank lines are skipped, not counted out
            if None in row:  # csv's key for the values past the header's columns
                raise CatalogError(
                    f"{path}: line {line}: {len(columns) + len(row[None])} values, the header "
                    f"has {len(columns)} columns"
                )
            node = _validate(Node, row, path, f"line {line}")
            if require_cost and node.monthly_cost is None:
                raise CatalogError(
                    f"{path}: line {line} ({node.node}): field 'monthly_cost': required when "
                    "cost_mode is full_recovery (settings.yaml)"
                )
            # a node listed twice would count its GPUs (capacity, cost, held time) twice
            seen = first_line.setdefault((node.cluster, node.node), line)
            if seen != line:
                raise CatalogError(
                    f"{path}: line {line}: field 'node': {node.node} of cluster {node.cluster} "
                    f"is already on line {seen}"
                )
            nodes.append(node)
    return nodes


def _check_references(catalog: Catalog, catalog_dir: Path) -> None:
    tenant_ids = [tenant.id for tenant in catalog.tenants]
    for i, tenant_id in enumerate(tenant_ids):
        first = tenant_ids.index(tenant_id)
        if first != i:
            raise CatalogError(
                f"{catalog_dir / 'tenants.yaml'}: tenants[{i}] ({tenant_id}): field 'id': "
                f"'{tenant_id}' is already the id of tenants[{first}]"
            )
    if UNMAPPED_TENANT in tenant_ids:
        raise CatalogError(
            f"{catalog_dir / 'tenants.yaml'}: tenant id '{UNMAPPED_TENANT}' is reserved"
        )
    _check_sharing_pools(catalog, catalog_dir / "settings.yaml")
    _check_gpu_models(catalog, catalog_dir / "settings.yaml")
    for stem, entries in (("quotas", catalog.quotas), ("budgets", catalog.budgets)):
        for i, entry in enumerate(entries):
            if entry.tenant not in tenant_ids:
                raise CatalogError(
                    f"{catalog_dir / (stem + '.yaml')}: {stem}[{i}]: field 'tenant': "
                    f"unknown tenant '{entry.tenant}'"
                )


def _check_sharing_pools(catalog: Catalog, path: Path) -> None:
    """With an inventory, each sharing pool holds some of its cluster's nodes and no node is in
    two pools (which replica size would hold there is not for the order of entries to decide)."""
    if catalog.nodes is None:
        return
    for cluster, settings in catalog.settings.clusters.items():
        nodes = [node.node for node in catalog.nodes if node.cluster == cluster]
        first_pool: dict[str, int] = {}
        for i, pool in enumerate(settings.sharing):
            entry = f"{path}: settings: field 'clusters.{cluster}.sharing.{i}.nodes'"
            held = [node for node in nodes if pool.covers(node)]
            if not held:
                raise CatalogError(f"{entry}: '{pool.nodes}' matches no node of {cluster} in "
                                   "nodes.csv")  # fmt: skip
            for node in held:
                other = first_pool.setdefault(node, i)
                if other != i:
                    raise CatalogError(
                        f"{entry}: node {node} is in sharing pool {other} as well "
                        f"('{settings.sharing[other].nodes}')"
                    )


def _check_gpu_models(catalog: Catalog, path: Path) -> None:
    """No misspelt target in a cluster's `gpu_models`: `a100: A100-80G` would price the jobs at
    the '*' rate, or stop a month with a rate error naming no file. A target that is no model
    of rates.yaml, nodes.csv or gpu_memory_mib is taken for a misspelling when it is like one
    of them in any case (rates join models exactly); unlike all of them, for a model that only
    the '*' rate prices and the bill names as written, it is accepted. A model of its own this
    like a known one (A100-40GB next to A100-80GB, L40 next to L40S) is made known by naming
    it in gpu_memory_mib, rates.yaml or nodes.csv."""
    known = {rate.gpu_model for rate in catalog.rates if rate.gpu_model != "*"}
    known |= {node.gpu_model for node in catalog.nodes or []}
    known |= set(catalog.settings.gpu_memory_mib)
    by_case = {model.lower(): model for model in sorted(known)}
    models = ", ".join(sorted(known))
    for cluster, settings in catalog.settings.clusters.items():
        for name, model in settings.gpu_models.items():
            # 0.8: one slip in a name like A100-80GB is like it (A100-80G 0.94, A100_80GB 0.89);
            # another number (H100 / H200, V100 / A100: 0.75) or a short name of a long one
            # (H100 / H100-80GB: 0.62) is not
            close = difflib.get_close_matches(model.lower(), list(by_case), n=1, cutoff=0.8)
            if model not in known and close:
                raise CatalogError(
                    f"{path}: settings: field 'clusters.{cluster}.gpu_models.{name}': '{model}' "
                    f"is not a GPU model of the catalog (did you mean '{by_case[close[0]]}'? the "
                    f"models of rates.yaml, nodes.csv and gpu_memory_mib: {models})"
                )


def _check_top_level_keys(document: dict, known: tuple[str, ...], path: Path) -> None:
    """A misspelt key (`tenant:`, `outage:`) would leave its entries silently unread."""
    for key in document:
        if key not in known:
            raise CatalogError(f"{path}: unknown key '{key}' ({_key_hint(str(key), known)})")


def _key_hint(key: str, known: tuple[str, ...]) -> str:
    """`did you mean 'tenants'?`, else the keys expected."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    if not known:
        return "not a key of this entry"
    names = [f"'{name}'" for name in known]
    return "expected " + (f"{', '.join(names[:-1])} or {names[-1]}" if names[1:] else names[0])


def _check_settings(settings: Settings, path: Path) -> None:
    """An ISO 4217 currency and timezones that exist: checked on load rather than where a
    month first converts a time (a ZoneInfoNotFoundError naming no file)."""
    if settings.currency not in CURRENCY_CODES:
        upper = settings.currency.strip().upper()
        hint = f"did you mean '{upper}'?" if upper in CURRENCY_CODES else "e.g. USD, EUR, GBP"
        raise CatalogError(
            f"{path}: settings: field 'currency': '{settings.currency}' is not an ISO 4217 "
            f"currency code ({hint})"
        )
    for name, cluster in settings.clusters.items():
        if cluster.sacct_fields is not None:
            _check_sacct_fields(cluster.sacct_fields, f"{path}: settings: field 'clusters.{name}")
    zones = [("billing_timezone", settings.billing_timezone)] + [
        (f"clusters.{name}.scheduler_timezone", cluster.scheduler_timezone)
        for name, cluster in settings.clusters.items()
    ]
    for field, zone in zones:
        try:
            zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: `Europe`
            raise CatalogError(
                f"{path}: settings: field '{field}': unknown timezone '{zone}' "
                f"({_timezone_hint(zone)})"
            ) from None


def _check_sacct_fields(fields: list[str], where: str) -> None:
    """A headerless sacct file's field order: each name once, with those a job cannot be
    billed without, and no misspelt field: a misspelt `partiton` would read every job's queue
    as empty. A name sacct does not list (SACCT_FIELDS) is taken for a misspelling when it is
    like a field the reader reads; unlike all of them, for a field of a Slurm release newer
    than the list, passed over as the reader passes over every field it does not read."""
    # imported here: the Slurm reader imports this module for ClusterSettings
    from pipelines.formats.slurm import READ_FIELDS, REQUIRED_FIELDS, SACCT_FIELDS

    names = [name.strip().lower() for name in fields]
    for i, name in enumerate(names):
        if name not in SACCT_FIELDS and difflib.get_close_matches(name, READ_FIELDS, cutoff=0.75):
            close = difflib.get_close_matches(name, sorted(SACCT_FIELDS), n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise CatalogError(
                f"{where}.sacct_fields.{i}': '{fields[i]}' is not a sacct field ({hint}the "
                f"fields read: {', '.join(READ_FIELDS)}; any other of sacct --helpformat may "
                "stand in the order)"
            )
        if names.index(name) != i:
            raise CatalogError(
                f"{where}.sacct_fields.{i}': '{fields[i]}' repeats sacct_fields.{names.index(name)}"
            )
    missing = [name for name in REQUIRED_FIELDS if name not in names]
    if missing:
        raise CatalogError(
            f"{where}.sacct_fields': {', '.join(missing)} missing (a job is not billed without "
            f"{', '.join(REQUIRED_FIELDS)})"
        )


def _timezone_hint(zone: str) -> str:
    names = zoneinfo.available_timezones()
    by_case = {name.lower(): name for name in names}
    close = difflib.get_close_matches(zone, sorted(names), n=1, cutoff=0.8)
    if zone.strip().lower() in by_case:
        close = [by_case[zone.strip().lower()]]
    return f"did you mean '{close[0]}'?" if close else "an IANA name such as Europe/Berlin, UTC"


Validity = tuple[dt.date | None, dt.date | None]  # [valid_from, valid_to), None: open


def _overlap(first: Validity, second: Validity) -> Validity | None:
    """The period two validities share, None when they share none."""
    start = max(first[0] or dt.date.min, second[0] or dt.date.min)
    end = min(first[1] or dt.date.max, second[1] or dt.date.max)
    if start >= end:
        return None
    return (None if start == dt.date.min else start, None if end == dt.date.max else end)


def _uncovered(period: Validity, covers: list[Validity]) -> list[Validity]:
    """The parts of `period` outside every one of `covers`."""
    pieces = [(period[0] or dt.date.min, period[1] or dt.date.max)]
    for cover_from, cover_to in covers:
        low, high = cover_from or dt.date.min, cover_to or dt.date.max
        pieces = [
            piece
            for start, end in pieces
            for piece in ((start, min(end, low)), (max(start, high), end))
            if piece[0] < piece[1]
        ]
    return [
        (None if start == dt.date.min else start, None if end == dt.date.max else end)
        for start, end in pieces
    ]


def describe_period(period: Validity) -> str:
    """`from 2026-11-01 to 2026-11-15` (the end excluded), `from ... on`, `at all times`."""
    start, end = period
    if start is None and end is None:
        return "at all times"
    if end is None:
        return f"from {start} on"
    if start is None:
        return f"before {end}"
    return f"from {start} to {end}"


def _check_unambiguous(catalog: Catalog, catalog_dir: Path) -> None:
    """Nothing may be settled by the order of entries: an account name or pattern mapped to two
    tenants, two rates of one GPU model and cluster, two tiers of one queue or QoS, or two
    quotas of one tenant and pool, in force at the same time; two budgets of one tenant and
    month. (A model's own rate over the '*' fallback, a cluster's over the all-clusters one, a
    queue's tier over a QoS's, and an exact account name over a glob are precedence, not
    ambiguity.)"""
    tenants_path = catalog_dir / "tenants.yaml"
    claims: dict[str, list[tuple[int, AccountMapping]]] = {}
    for i, tenant in enumerate(catalog.tenants):
        for mapping in tenant.mappings():
            validity = (mapping.valid_from, mapping.valid_to)
            for j, other in claims.get(mapping.account, []):
                period = _overlap(validity, (other.valid_from, other.valid_to))
                if j != i and period:
                    raise CatalogError(
                        f"{tenants_path}: tenants[{i}] ({tenant.id}): field 'accounts': "
                        f"'{mapping.account}' is mapped to tenants[{j}] "
                        f"({catalog.tenants[j].id}) too, both in force {describe_period(period)}"
                    )
            claims.setdefault(mapping.account, []).append((i, mapping))

    rates_path, quotas_path = catalog_dir / "rates.yaml", catalog_dir / "quotas.yaml"

    def rate_label(rate: Rate) -> str:
        return rate.gpu_model + (f" on {rate.cluster}" if rate.cluster else "")

    # (entries, file, list name, what may be set once at a time, entry label, the clash)
    for entries, path, name, key, label, clash in (
        (catalog.rates, rates_path, "rates", lambda r: (r.gpu_model, r.cluster), rate_label,
         lambda r: f"prices {rate_label(r)} too"),
        (catalog.tiers, rates_path, "tiers", lambda t: (t.queue, t.qos), lambda t: t.label,
         lambda t: f"prices {t.label} too"),
        (catalog.quotas, quotas_path, "quotas", lambda q: (q.tenant, q.pool),
         lambda q: q.tenant, lambda q: f"sets pool '{q.pool}' of {q.tenant} too"),
    ):  # fmt: skip
        _check_one_in_force(entries, path, name, key, label, clash)

    budgets_path = catalog_dir / "budgets.yaml"
    for i, budget in enumerate(catalog.budgets):
        for j, other in enumerate(catalog.budgets[:i]):
            if (other.tenant, other.month) == (budget.tenant, budget.month):
                raise CatalogError(
                    f"{budgets_path}: budgets[{i}] ({budget.tenant}): field 'month': "
                    f"budgets[{j}] is {budget.tenant}'s budget for {budget.month} too"
                )


def _check_one_in_force(
    entries: list,
    path: Path,
    key_name: str,
    key: Callable[[Any], tuple],
    label: Callable[[Any], str],
    clash: Callable[[Any], str],
) -> None:
    """Two entries of one `key` (a rate's model and cluster, a tier's queue or QoS, a quota's
    tenant and pool) in force at the same time: which applies would be the order's choice."""
    for i, entry in enumerate(entries):
        for j, other in enumerate(entries[:i]):
            period = _overlap(
                (entry.valid_from, entry.valid_to), (other.valid_from, other.valid_to)
            )
            if key(other) == key(entry) and period:
                raise CatalogError(
                    f"{path}: {key_name}[{i}] ({label(entry)}): field 'valid_from': "
                    f"{key_name}[{j}] {clash(entry)}, both in force {describe_period(period)} "
                    "(end one with valid_to where the other begins)"
                )


def check_account_globs(catalog: Catalog, account: str) -> None:
    """Raise when glob patterns of two tenants match `account` at the same time, outside the
    periods an exact mapping of the account settles (an exact name overrides any glob)."""
    exact: list[Validity] = []
    globs: list[tuple[int, AccountMapping]] = []
    for i, tenant in enumerate(catalog.tenants):
        for mapping in tenant.mappings():
            if mapping.account == account:
                exact.append((mapping.valid_from, mapping.valid_to))
            elif fnmatch.fnmatchcase(account, mapping.account):
                globs.append((i, mapping))
    path = Path(catalog.source or ".") / "tenants.yaml"
    for n, (i, first) in enumerate(globs):
        for j, second in globs[n + 1 :]:
            if catalog.tenants[i].id == catalog.tenants[j].id:
                continue
            period = _overlap(
                (first.valid_from, first.valid_to), (second.valid_from, second.valid_to)
            )
            for uncovered in _uncovered(period, exact) if period else []:
                raise CatalogError(
                    f"{path}: tenants[{j}] ({catalog.tenants[j].id}): field 'accounts': "
                    f"'{second.account}' matches account '{account}' like '{first.account}' of "
                    f"tenants[{i}] ({catalog.tenants[i].id}), both in force "
                    f"{describe_period(uncovered)} (map '{account}' exactly to settle it)"
                )
