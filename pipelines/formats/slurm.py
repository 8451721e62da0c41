"""Slurm `sacct --parsable2` exports (DESIGN.md "Inputs" 1): one job or job step per line.

Fields are `|`-separated, named by a header line when the file has one (`JobID|JobIDRaw|...`,
any case), else in the cluster's `sacct_fields` order or Open XDMoD's documented order.
A header line anywhere in the file names the fields of the lines after it: dumps appended to
one file (`sacct -p --format=... >> jobs.log`) each bring their header, in their own order, and
a headerless file may go on with a dump that has one. Header lines are no rows (neither loaded
nor rejected, the first or a later one); a header without a field a job cannot be billed
without stops the load with one line naming the file, the line and the field.
Times, state and exit code pass through as text; SQL types them (`sql/staging/`). Eligible
(when the job could first start: its begin time, dependencies and holds met) is optional: a
file or field order without it, or `Unknown`/`None`, leaves it NULL and the job's wait runs
from Submit.

GPU-equivalents of a record (`gpus`), from the `gres/gpu` and `gres/shard` entries of a TRES
string: the untyped total (`gres/gpu=4`) whenever present, so a typed breakdown next to it
(`gres/gpu:a100=4`) is never added a second time; without it the typed entries are summed; no
GPU entry means 0. A MIG instance (`gres/gpu:1g.10gb=1`) counts its profile's fraction of a GPU
(and then the typed breakdown decides: the untyped total counts instances); a shard
(`gres/shard=2`) 1/replicas of a GPU by the sharing declared for the job's nodes
(`pipelines/formats/gpus.py`).
- A job that started: AllocTRES, the GPUs it held.
- A job that never started (Start `Unknown`/`None`/empty, e.g. PENDING): ReqTRES (AllocTRES
  when ReqTRES is empty). It allocates no GPU-hours; the count is the demand it stands for.
- A job cancelled while pending (NodeList `None assigned`) never started either, although
  Slurm sets its Start to its End (the cancel time): its start is dropped and its GPUs are the
  request, as above (never AllocTRES's copy of it in older Slurm as GPUs held). It waited from
  submit to End, and counts as a submission withdrawn before it started.
`gpu_model` is the type of the typed entries (several types joined with `+`), else None.

Job ids are kept as sacct shows them: an array's waiting tasks as one record (`123_[4-9%2]`,
PENDING), each task once it starts (`123_4`). SQL lets the collapsed record give way to its
tasks (`sql/staging/stg_job_records.sql`), so an array counts once as pending demand.
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import TypeVar

import hostlist

from pipelines.catalog import ClusterSettings
from pipelines.formats import ExportFormat, open_binary
from pipelines.formats.gpus import gpu_text, mig_equivalent, mig_profile
from pipelines.landing import LandingError

# Open XDMoD's documented `sacct --format` order, the default for files without a header.
DEFAULT_FIELDS = (
    "jobid", "jobidraw", "cluster", "partition", "qos", "account", "group", "gid", "user",
    "uid", "submit", "eligible", "start", "end", "elapsed", "exitcode", "state", "nnodes",
    "ncpus", "reqcpus", "reqmem", "reqtres", "alloctres", "timelimit", "nodelist", "jobname",
)  # fmt: skip

# canonical job column <- sacct field
_COLUMNS = {
    "job_id": "jobid",
    "cluster": "cluster",
    "account": "account",
    "user": "user",
    "queue": "partition",
    "qos": "qos",
    "nodes": "nodelist",
    "submit_time": "submit",
    "eligible_time": "eligible",
    "start_time": "start",
    "end_time": "end",
    "state": "state",
    "exit_code": "exitcode",
    "job_name": "jobname",
}
_NOT_ENDED = {"RUNNING", "R", "PENDING", "PD", "SUSPENDED", "S", "REQUEUED", "RQ", "RESIZING"}
# Without these a file cannot be billed: a header lacking one is not taken for this format.
REQUIRED_FIELDS = ("jobid", "account", "start", "end", "state", "alloctres", "nodelist")
# the fields the reader reads, in the default order; the others of a file are passed over
READ_FIELDS = tuple(
    name for name in DEFAULT_FIELDS if name in {*_COLUMNS.values(), "reqtres", "alloctres"}
)
# Every field `sacct --helpformat` lists (Slurm 20.11 to 24.11, with the older reqgres,
# allocgres and reserved), in lower case: what a headerless file's configured order
# (settings.yaml sacct_fields, checked on load) may name.
SACCT_FIELDS = frozenset((
    "account", "admincomment", "alloccpus", "allocgres", "allocnodes", "alloctres", "associd",
    "avecpu", "avecpufreq", "avediskread", "avediskwrite", "avepages", "averss", "avevmsize",
    "blockid", "cluster", "comment", "constraints", "consumedenergy", "consumedenergyraw",
    "container", "cputime", "cputimeraw", "dbindex", "derivedexitcode", "elapsed", "elapsedraw",
    "eligible", "end", "exitcode", "extra", "failednode", "flags", "gid", "group", "jobid",
    "jobidraw", "jobname", "layout", "licenses", "maxdiskread", "maxdiskreadnode",
    "maxdiskreadtask", "maxdiskwrite", "maxdiskwritenode", "maxdiskwritetask", "maxpages",
    "maxpagesnode", "maxpagestask", "maxrss", "maxrssnode", "maxrsstask", "maxvmsize",
    "maxvmsizenode", "maxvmsizetask", "mcslabel", "mincpu", "mincpunode", "mincputask", "ncpus",
    "nnodes", "nodelist", "ntasks", "partition", "planned", "plannedcpu", "plannedcpuraw",
    "priority", "qos", "qosraw", "qosreq", "reason", "reqcpufreq", "reqcpufreqgov",
    "reqcpufreqmax", "reqcpufreqmin", "reqcpus", "reqgres", "reqmem", "reqnodes", "reqtres",
    "reservation", "reservationid", "reserved", "restarts", "sluid", "start", "state", "stderr",
    "stdin", "stdout", "submit", "submitline", "suspended", "systemcomment", "systemcpu",
    "timelimit", "timelimitraw", "totalcpu", "tresusageinave", "tresusageinmax",
    "tresusageinmaxnode", "tresusageinmaxtask", "tresusageinmin", "tresusageinminnode",
    "tresusageinmintask", "tresusageintot", "tresusageoutave", "tresusageoutmax",
    "tresusageoutmaxnode", "tresusageoutmaxtask", "tresusageoutmin", "tresusageoutminnode",
    "tresusageoutmintask", "tresusageouttot", "uid", "user", "usercpu", "wckey", "wckeyid",
    "workdir"
))  # fmt: skip

# 123, 123_4, 123_[1-9], 123_[1,5-7%2], 123+0; a step adds .batch, .extern, .0 ...
JOB_ID = re.compile(r"[0-9]+(?:_(?:[0-9]+|\[[0-9,%-]+\]))?(?:\+[0-9]+)?(?:\.[A-Za-z0-9_]+)?")
_COUNT = re.compile(r"[0-9]+")
_NO_TIME = {"", "unknown", "none"}
_NO_NODES = {"", "none assigned"}
_SNIFF_LINES = 50
_DEFAULTS = ClusterSettings()


class _TresError(ValueError):
    """A gres/gpu or gres/shard entry that cannot be counted."""


_H = TypeVar("_H")  # what a header line gives: the layout of the lines below it


def read_rows(path: Path, settings: ClusterSettings) -> Iterator[dict[str, str | None]]:
    """Yield one row per non-blank line: the canonical job columns as text, plus `line`,
    `raw`, `parse_error` and `record_type` ('step' for `123.batch`, `123.0`, ...).

    A line with the wrong number of fields, a malformed job id or GPU count is still yielded,
    with `parse_error` naming the field, so that it reaches the rejects table. A header line is
    not yielded: it sets the fields of the lines after it (LandingError when it lacks one of
    REQUIRED_FIELDS).
    """

    def header(number: int, text: str) -> _Layout | None:
        fields = text.split("|")
        return _Layout(_header_names(fields, path, number)) if _is_header(fields) else None

    configured: _Layout | None = None
    for number, text, layout in headed_lines(path, header):
        if layout is None:
            configured = configured or _Layout(_names(settings.sacct_fields or DEFAULT_FIELDS))
            layout = configured
        yield _row(number, text, text.split("|"), layout, settings)


def headed_lines(
    path: Path, header: Callable[[int, str], _H | None]
) -> Iterator[tuple[int, str, _H | None]]:
    """(line number, text, header above it) of each non-blank line that is not a header line:
    `header(number, text)` is what a header line gives (its layout), None for any other line.
    Every header line sets the layout of the lines after it, not the first alone: dumps
    appended to one file (`sacct ... >> jobs.log`, `cat a.psv b.psv`) each bring their own
    header, in their own order. Header lines are no rows. Lines above the first header have
    None (a headerless file: the reader's default order)."""
    current: _H | None = None
    for number, text in numbered_lines(path):
        found = header(number, text)
        if found is not None:
            current = found
            continue
        yield number, text, current


def _header_names(fields: list[str], path: Path, number: int) -> list[str]:
    """The field names of the header line `number`; LandingError when it lacks one that a job
    is not billed without (the first line of a file is not even taken for sacct then)."""
    names = _names(fields)
    missing = [name for name in REQUIRED_FIELDS if name not in names]
    if missing:
        raise LandingError(
            f"{path}: line {number}: field {missing[0]}: missing from the sacct header "
            f"(a job is not billed without {', '.join(REQUIRED_FIELDS)})"
        )
    return names


class _Layout:
    """The field names of the lines below a header, or of a headerless file's configured
    order."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.position = {name: i for i, name in reversed(list(enumerate(names)))}
        self.missing = [name for name in REQUIRED_FIELDS if name not in self.position]
        # gpu_count of each TRES text met in the file (or the _TresError it raised): a file
        # repeats a few hundred TRES texts over its lines, and counting one takes Fractions
        self.counted: dict[str, tuple[Fraction, str | None, int] | _TresError] = {}

    def gpu_count(self, tres: str, settings: ClusterSettings) -> tuple[Fraction, str | None, int]:
        counted = self.counted.get(tres)
        if counted is None:
            try:
                counted = gpu_count(tres, settings)
            except _TresError as error:
                counted = error
            self.counted[tres] = counted
        if isinstance(counted, _TresError):
            raise counted
        return counted


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of each non-blank line; bytes that are not UTF-8 replaced.

    Lines end at LF only (like `wc -l`), so a stray CR inside a job name cannot split a record.
    The file may be gzipped; a UTF-8 byte order mark before the first line is dropped, so that
    a header behind one still reads as a header.
    """
    with open_binary(path) as handle:
        for number, data in enumerate(handle, start=1):
            if number == 1:
                data = data.removeprefix(codecs.BOM_UTF8)
            text = data.decode("utf-8", errors="replace").rstrip("\r\n")
            if text.strip():
                yield number, text


def _row(
    number: int, text: str, fields: list[str], layout: _Layout, settings: ClusterSettings
) -> dict[str, str | None]:
    row: dict[str, str | None] = dict.fromkeys(_COLUMNS)
    row.update(gpus=None, gpu_model=None, line=number, raw=text, parse_error=None)
    position = layout.position
    if "jobid" in position and position["jobid"] < len(fields):
        row["job_id"] = fields[position["jobid"]].strip() or None
    row["record_type"] = "step" if row["job_id"] and "." in row["job_id"] else "job"
    if len(fields) == len(layout.names) + 1 and fields[-1] == "":
        fields = fields[:-1]  # `sacct --parsable` (not 2) ends every line with a '|'
    if layout.missing:
        row["parse_error"] = (
            f"field {layout.missing[0]}: not in the sacct field order (settings sacct_fields)"
        )
    elif len(fields) != len(layout.names):
        row["parse_error"] = f"expected {len(layout.names)} fields, found {len(fields)}"
    elif row["job_id"] is None or not JOB_ID.fullmatch(row["job_id"]):
        row["parse_error"] = f"field jobid: '{row['job_id'] or ''}' is not a Slurm job id"
    if row["parse_error"] is not None:
        return row

    def value(name: str) -> str | None:
        found = fields[position[name]].strip() if name in position else ""
        return found or None

    for column, name in _COLUMNS.items():
        row[column] = value(name)
    if (row["state"] or "").upper().split(" ")[0] in _NOT_ENDED:
        # sacct shows an End for jobs that have not ended (Start again, or the -E window's
        # end): it is not when the job ended, so the pipeline ends it at the export time
        row["end_time"] = None
    node_list = (row["nodes"] or "").lower()
    if node_list in _NO_NODES:
        row["nodes"] = None
    if node_list == "none assigned":
        # cancelled while pending: Slurm sets Start = End (the cancel time), but the job never
        # ran; AllocTRES may repeat the request (older Slurm), it held nothing
        row["start_time"] = None
    if (row["start_time"] or "").lower() in _NO_TIME:
        # never started: the GPUs it asked for are its pending demand
        source = "reqtres" if value("reqtres") is not None else "alloctres"
    else:
        source = "alloctres"
    try:
        gpus, model, shards = layout.gpu_count(value(source) or "", settings)
        if shards:
            gpus += _shard_gpus(shards, row["nodes"], settings)
    except _TresError as error:
        row["parse_error"] = f"field {source}: {error}"
        return row
    except hostlist.BadHostlist:  # shards are priced by the nodes' pools: it must expand
        row["parse_error"] = f"field nodes: '{row['nodes']}' is not a hostlist"
        return row
    row["gpus"] = gpu_text(gpus)
    row["gpu_model"] = model
    return row


def gpu_count(tres: str, settings: ClusterSettings = _DEFAULTS) -> tuple[Fraction, str | None, int]:
    """(GPU-equivalents, GPU model, shards) of a TRES string such as
    `billing=4,cpu=4,gres/gpu:a100=4,gres/gpu=4`.

    The untyped `gres/gpu` total wins over the typed breakdown (never both added); typed
    entries alone are summed. A MIG instance (`gres/gpu:1g.10gb=1`, `gres/gpu:a100_3g.40gb=2`)
    counts its profile's GPU-equivalents (`mig_profiles`, else N/7): there the untyped total
    counts instances, not GPUs, so the typed breakdown decides. The model is the type (types
    joined by `+`; a MIG type's parent GPU, `a100` of `a100_3g.40gb`), None if untyped.
    Shards (`gres/shard=2`, typed or not, counted the same way) are returned apart: what they
    are worth depends on the node's declared sharing.
    """
    totals: dict[str, int] = {}
    typed: dict[str, dict[str, int]] = {"gres/gpu": {}, "gres/shard": {}}
    for item in tres.split(","):
        key, _, count = item.strip().partition("=")
        kind, _, model = key.partition(":")
        kind = kind.lower()
        if kind not in typed:  # also skips gres/gpumem, gres/gpuutil, gres/mps
            continue
        if not _COUNT.fullmatch(count.strip()):
            what = "GPU" if kind == "gres/gpu" else "shard"
            raise _TresError(f"'{item.strip()}' is not a {what} count")
        if model:
            typed[kind][model] = typed[kind].get(model, 0) + int(count)
        else:
            totals[kind] = int(count)
    gpus, models = Fraction(0), set()
    for model, count in typed["gres/gpu"].items():
        mig = mig_profile(model)
        try:
            gpus += count * (mig_equivalent(mig[0], settings) if mig and count else 1)
        except ValueError as error:  # a profile no GPU has (9g.99gb)
            raise _TresError(f"gres/gpu:{model}: {error}") from None
        parent = mig[1] if mig else model
        if count and parent:
            models.add(parent)
    has_mig = any(mig_profile(model) for model in typed["gres/gpu"])
    if "gres/gpu" in totals and not has_mig:
        gpus = Fraction(totals["gres/gpu"])
    shards = totals.get("gres/shard", sum(typed["gres/shard"].values()))
    return gpus, ("+".join(sorted(models)) if gpus and models else None), shards


def _shard_gpus(shards: int, nodes: str | None, settings: ClusterSettings) -> Fraction:
    """GPU-equivalents of `shards` Slurm shards: 1/replicas of a GPU each, by the sharing
    declared for the job's nodes (a pending job: for the cluster's shard pools)."""
    if nodes:
        pools = {name: settings.sharing_of(name) for name in hostlist.expand_hostlist(nodes)}
        undeclared = sorted(name for name, pool in pools.items() if pool is None)
        if undeclared:
            raise _TresError(
                f"gres/shard={shards} on node {undeclared[0]}, which no sharing pool of the "
                "cluster holds (settings.yaml clusters: <cluster>: sharing)"
            )
        replicas = {pool.replicas for pool in pools.values()}
    else:
        replicas = {pool.replicas for pool in settings.sharing if pool.mode == "shard"}
        if not replicas:
            raise _TresError(
                f"gres/shard={shards} but the cluster declares no shard pool "
                "(settings.yaml clusters: <cluster>: sharing)"
            )
    if len(replicas) > 1:
        raise _TresError(
            f"gres/shard={shards} over pools of {sorted(replicas)} replicas: a job's shards "
            "must be of one size"
        )
    return Fraction(shards, replicas.pop())


def _names(fields: Iterable[str]) -> list[str]:
    return [name.strip().lower() for name in fields]


def _is_header(fields: list[str]) -> bool:
    return "jobid" in _names(fields) and not JOB_ID.fullmatch(fields[0].strip())


def sniff(path: Path, head: str) -> bool:
    """A `|`-separated file whose lines are Slurm job records: with a header naming the
    required fields and lines of its width, or headerless with lines of one width (at least as
    many fields as are required) starting with a Slurm job id. The extension does not matter.

    A headerless file's width is checked against the configured order line by line when it is
    read (a wrong width is a parse error per row), since the sniffer does not know the cluster.
    A later header line (dumps appended to one file) sets the width and job id field of the
    lines below it; what it lacks is for the reader to name, with its line.
    """
    sample = [line.split("|") for line in sniffed_lines(head)]
    if not sample:
        return False
    if _is_header(sample[0]):
        if not set(REQUIRED_FIELDS) <= set(_names(sample[0])):
            return False
        width, jobid = 0, 0  # set by the header, first of the sample
    else:
        headerless = itertools.takewhile(lambda fields: not _is_header(fields), sample)
        widths = Counter(
            len(fields) for fields in headerless if JOB_ID.fullmatch(fields[0].strip())
        )
        if not widths:
            return False
        width, jobid = widths.most_common(1)[0][0], 0
        if width < len(REQUIRED_FIELDS):
            return False
    records = good = 0
    for fields in sample:
        if _is_header(fields):
            width, jobid = len(fields), _names(fields).index("jobid")
            continue
        records += 1
        good += len(fields) == width and bool(JOB_ID.fullmatch(fields[jobid].strip()))
    return mostly_fit(good, records)


def sniffed_lines(head: str) -> list[str]:
    """The first _SNIFF_LINES non-blank lines of a sniffed head, without their carriage returns."""
    lines = head.split("\n")
    if len(lines) > 1 and not head.endswith("\n"):
        lines = lines[:-1]  # cut off at 64 KiB: the last line is partial
    return [line.rstrip("\r") for line in lines if line.strip()][:_SNIFF_LINES]


def mostly_fit(fitting: int, records: int) -> bool:
    """Whether more than half of a sniffed head's records fit the format (a header alone does):
    a malformed line or two among them is a parse error of its own, not a reason to refuse."""
    return fitting * 2 > records if records else True


FORMAT = ExportFormat(
    name="slurm_sacct",
    kind="jobs",
    expected=(
        "Slurm `sacct --parsable2` ('|'-separated, a header naming "
        + ", ".join(REQUIRED_FIELDS)
        + ", or headerless in the sacct_fields / Open XDMoD order)"
    ),
    sniff=sniff,
    read_rows=read_rows,
)
