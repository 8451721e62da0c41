"""The configured-quota readers: `sacctmgr show assoc|qos --parsable2` dumps and Kueue objects.

Fixtures: tests/fixtures/sacctmgr/ (an association dump with sacctmgr's default columns and
ugly lines; a QOS dump with CRLF line ends) and tests/fixtures/kueue/ (a `kubectl get
clusterqueues,localqueues,resourceflavors,workloads -A -o json` List, pretty-printed).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from pipelines.catalog import ClusterSettings
from pipelines.formats import kueue, sacctmgr
from pipelines.landing import LandingError, discover
from tests.conftest import write

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ASSOC = FIXTURES / "sacctmgr/assoc-2026-11-30.psv"
QOS = FIXTURES / "sacctmgr/qos-2026-11-30.psv"
KUEUE = FIXTURES / "kueue/kueue-2026-11-30.json"
COLUMNS = ("line", "object_name", "account", "user", "partition", "qos", "gpu_model",
           "limit_gpus", "parse_error")  # fmt: skip


def pick(rows: list[dict], columns: tuple[str, ...]) -> list[tuple]:
    return [tuple(row.get(column) for column in columns) for row in rows]


def test_association_dump_one_row_per_gpu_limit_or_line():
    rows = list(sacctmgr.read_rows(ASSOC, ClusterSettings()))
    assert {row["source"] for row in rows} == {"slurm_assoc"}
    assert pick(rows, COLUMNS) == [
        (2, "root", "root", None, None, "normal", None, None, None),
        (3, "root/root", "root", "root", None, "normal", None, None, None),
        # typed and untyped together: the typed entry is the pool's limit, counted once
        (4, "chaff", "chaff", None, None, "gpu-chaff,normal", "a100", "32", None),
        (5, "chaff/alice", "chaff", "alice", None, "gpu-chaff,normal", None, None, None),
        # GrpTRES with no GPU entry, or empty: a line without a GPU limit, still loaded
        (6, "wren", "wren", None, None, "normal,gpu-shared", None, None, None),
        (7, "finch", "finch", None, None, "gpu-shared,normal", None, None, None),
        # untyped on a partition's association: a limit on the partition
        (8, "finch@debug", "finch", None, "debug", "normal", None, "4", None),
        # two types: two rows of one line
        (9, "lark", "lark", None, None, "normal", "a100", "8", None),
        (9, "lark", "lark", None, None, "normal", "h100", "4", None),
        (10, "lark-α", "lark-α", None, None, "normal", None, None,
         "field grptres: 'gres/gpu:h100=x' is not a GPU count"),
        (11, None, None, None, None, None, None, None, "expected 20 fields, found 5"),
        (12, None, None, None, None, "normal", None, None, "field account: missing"),
        (13, "owl", "owl", None, None, "normal", None, "16", None),
    ]  # fmt: skip
    assert rows[-1]["raw"] == "phillips|owl|||1|||gres/gpu=16||||||||||normal||"


def test_qos_dump_with_crlf_line_ends():
    rows = list(sacctmgr.read_rows(QOS, ClusterSettings()))
    assert pick(rows, ("source", "line", "object_name", "gpu_model", "limit_gpus",
                       "parse_error")) == [
        ("slurm_qos", 2, "normal", None, None, None),
        ("slurm_qos", 3, "gpu-chaff", "a100", "24", None),
        # MaxTRES (per job) is no quota: GrpTRES alone counts
        ("slurm_qos", 4, "gpu-shared", "h100", "8", None),
        ("slurm_qos", 5, "gpu-bad", None, None,
         "field grptres: 'gres/gpu:a100=-1' is not a GPU count"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("tres", "limits"),
    [
        ("", []),
        ("cpu=64,mem=512G", []),
        ("gres/gpu=8", [(None, 8)]),
        ("cpu=64,gres/gpu:a100=16,gres/gpu=16", [("a100", 16)]),
        ("gres/gpu:h100=2,gres/gpu:a100=4,gres/gpu:a100=4", [("a100", 8), ("h100", 2)]),
        ("gres/gpumem=80G,gres/shard=4,GRES/GPU:a100=1", [("a100", 1)]),
    ],
)
def test_gpu_limits_of_a_grptres(tres, limits):
    assert sacctmgr.gpu_limits(tres) == limits


def test_a_repeated_header_and_parsable_trailing_bars(tmp_path):
    path = write(
        tmp_path / "assoc.psv",
        "Cluster|Account|User|Partition|GrpTRES|QOS|\n"
        "c1|chaff|||gres/gpu:a100=4|normal|\n"
        "Cluster|Account|User|Partition|GrpTRES|QOS|\n",
    )
    rows = list(sacctmgr.read_rows(path, ClusterSettings()))
    # a header line is no row, repeated or not (as in sacct exports)
    assert pick(rows, ("line", "account", "limit_gpus", "parse_error")) == [
        (2, "chaff", "4", None),
    ]


def test_each_header_names_the_fields_of_the_lines_below_it(tmp_path):
    """`cat` of two association dumps with their columns in another order, and a QOS dump."""
    path = write(
        tmp_path / "assoc.psv",
        "Cluster|Account|User|Partition|GrpTRES|QOS\n"
        "c1|chaff|||gres/gpu:a100=4|normal\n"
        "Cluster|User|Account|QOS|GrpTRES|Partition\n"
        "c1|alice|finch|normal|gres/gpu:h100=8|\n"
        "c1||lark|normal,gpu-x|gres/gpu=2|debug\n"
        "c1|bob|owl|normal\n"
        "\n"
        "Name|GrpTRES|Priority\n"
        "gpu-x|gres/gpu:a100=16|10\n",
    )
    rows = list(sacctmgr.read_rows(path, ClusterSettings()))
    assert pick(rows, ("source", *COLUMNS)) == [
        ("slurm_assoc", 2, "chaff", "chaff", None, None, "normal", "a100", "4", None),
        # line 3 is a header of another order: no row, and the fields below are read by it
        ("slurm_assoc", 4, "finch/alice", "finch", "alice", None, "normal", "h100", "8", None),
        ("slurm_assoc", 5, "lark@debug", "lark", None, "debug", "normal,gpu-x", None, "2",
         None),
        ("slurm_assoc", 6, None, None, None, None, None, None, None,
         "expected 6 fields, found 4"),
        # line 7 blank, line 8 a QOS header
        ("slurm_qos", 9, "gpu-x", None, None, None, None, "a100", "16", None),
    ]  # fmt: skip


def test_kueue_objects_one_row_per_gpu_flavor_or_object():
    rows = list(kueue.read_rows(KUEUE, ClusterSettings()))
    columns = ("line", "object_kind", "object_name", "account", "target", "cohort", "flavor",
               "gpu_model", "guaranteed_gpus", "limit_gpus", "parse_error")  # fmt: skip
    assert {row["source"] for row in rows} == {"kueue"}
    assert pick(rows, columns) == [
        (4, "ResourceFlavor", "a100", None, None, None, "a100", "NVIDIA-A100-SXM4-80GB",
         None, None, None),
        (20, "ResourceFlavor", "h100", None, None, None, "h100", "NVIDIA-H100-80GB-HBM3",
         None, None, None),
        (36, "ResourceFlavor", "spot", None, None, None, "spot", None, None, None, None),
        # nominal 16 + borrowingLimit 16
        (48, "ClusterQueue", "cq-chaff", None, None, "research", "a100", "a100", "16", "32",
         None),
        # in a cohort without borrowingLimit: no limit; a borrowingLimit of 0: the nominal
        (97, "ClusterQueue", "cq-wren", None, None, "research", "h100", "h100", "8", None,
         None),
        (97, "ClusterQueue", "cq-wren", None, None, "research", "spot", "spot", "4", "4",
         None),
        # no cohort: nothing to borrow, the limit is the nominal quota
        (163, "ClusterQueue", "cq-solo", None, None, None, "a100", "a100", "2", "2", None),
        (210, "ClusterQueue", "cq-bad", None, None, None, None, None, None, None,
         "field spec.resourceGroups[0].flavors[0].resources[2].nominalQuota: '500m' is not "
         "a whole number of GPUs"),
        # CPUs only: an object without a GPU quota, loaded
        (257, "ClusterQueue", "cq-cpu", None, None, None, None, None, None, None, None),
        (288, "LocalQueue", "lq-chaff", "chaff", "cq-chaff", None, None, None, None, None,
         None),
        (303, "LocalQueue", "lq-wren", "wren-train", "cq-wren", None, None, None, None, None,
         None),
        (318, "LocalQueue", "lq-wren2", "wren-dev", "cq-wren", None, None, None, None, None,
         None),
        (333, "LocalQueue", "lq-shared", "chaff", "cq-solo", None, None, None, None, None,
         None),
        (348, "LocalQueue", "lq-shared", "finch", "cq-solo", None, None, None, None, None,
         None),
        (363, "LocalQueue", "lq-nowhere", "finch", None, None, None, None, None, None,
         "field spec.clusterQueue: missing"),
        (376, "Workload", "pod-train-1-a1b2c", "chaff", "lq-chaff", None, None, None, None,
         None, None),
        (452, "Workload", "pod-train-2-d3e4f", "wren-train", "lq-wren", None, None, None,
         None, None, None),
        (506, "AdmissionCheck", "prov", None, None, None, None, None, None, None,
         "field kind: 'AdmissionCheck' is not a Kueue ClusterQueue, LocalQueue, "
         "ResourceFlavor, Workload"),
    ]  # fmt: skip
    admitted, pending = rows[15], rows[16]
    assert (admitted["created_time"], admitted["quota_reserved_time"],
            admitted["admitted_time"], admitted["admitted_queue"]) == (
        "2026-11-10T06:00:00Z", "2026-11-10T06:30:00Z", "2026-11-10T06:30:01Z", "cq-chaff",
    )  # fmt: skip
    # its QuotaReserved condition is False: pending, never admitted
    assert (pending["quota_reserved_time"], pending["admitted_time"]) == (None, None)
    # what Kueue made each workload of: its (first, here only) owner, a plain pod
    assert [(r["owner_kind"], r["owner_uid"]) for r in (admitted, pending)] == [
        ("Pod", "p1"), ("Pod", "p1"),
    ]  # fmt: skip
    assert {r.get("owner_uid") for r in rows if r["object_kind"] != "Workload"} == {None}
    assert rows[3]["raw"] == (
        "ClusterQueue /cq-chaff flavor=a100 nominalQuota=16 borrowingLimit=16 cohort=research"
    )


def test_kueue_list_of_one_kind_and_broken_json(tmp_path):
    items = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        }
    ]
    path = write(tmp_path / "lq.json", json.dumps({"kind": "LocalQueueList", "items": items}))
    assert [row["target"] for row in kueue.read_rows(path, ClusterSettings())] == ["cq"]
    path = write(tmp_path / "bad.json", json.dumps({"kind": "NodeList", "items": items}))
    with pytest.raises(LandingError, match="line 1: field kind: 'NodeList' is not a List or "):
        list(kueue.read_rows(path, ClusterSettings()))


def test_recognised_by_content_never_taken_for_jobs_or_pods(tmp_path):
    landing = tmp_path / "landing"
    folder = landing / "scheduler" / "c1"
    folder.mkdir(parents=True)
    shutil.copy(ASSOC, folder / "assoc.log")
    (folder / "qos.psv.gz").write_bytes(gzip.compress(QOS.read_bytes(), mtime=0))
    shutil.copy(KUEUE, folder / "queues.json")
    shutil.copy(FIXTURES / "kubernetes/pods-2026-11-10T06-00-00Z.json", folder / "pods.json")
    shutil.copy(FIXTURES / "xdmod-slurm/phillips.log", folder / "sacct.log")
    found = [(f.name, f.kind, f.format.name) for f in discover(landing, "scheduler")]
    assert found == [
        ("scheduler/c1/assoc.log", "quotas", "slurm_sacctmgr"),
        ("scheduler/c1/pods.json", "jobs", "kubernetes_podlist"),
        ("scheduler/c1/qos.psv.gz", "quotas", "slurm_sacctmgr"),
        ("scheduler/c1/queues.json", "quotas", "kueue_objects"),
        ("scheduler/c1/sacct.log", "jobs", "slurm_sacct"),
    ]


@pytest.mark.parametrize(
    ("head", "accepted"),
    [
        ("Cluster|Account|User|Partition|GrpTRES|QOS\nc|a|||gres/gpu=1|normal\n", True),
        ("Name|Priority|GrpTRES|MaxTRES\nnormal|0||\n", True),
        # a sacct header naming the same words is a job export
        ("JobID|Account|GrpTRES|State\n1|a||COMPLETED\n", False),
        ("Cluster|Account|User|Partition\nc|a||\n", False),  # no GrpTRES: no quota dump
        ("Cluster,Account,GrpTRES\nc,a,\n", False),
        # dumps concatenated: the lines below each header have its width
        (
            "Account|GrpTRES\na|\nCluster|Account|User|Partition|GrpTRES|QOS\nc|b|||gres/gpu=1|n\n"
            "c|d|||gres/gpu=1|n\n",
            True,
        ),
    ],
)
def test_sacctmgr_sniff(head, accepted):
    assert sacctmgr.sniff(Path("x"), head) is accepted


@pytest.mark.parametrize(
    ("head", "accepted"),
    [
        ('{"apiVersion": "v1", "items": [{"apiVersion": "kueue.x-k8s.io/v1beta1", '
         '"kind": "ClusterQueue"}], "kind": "List"}', True),
        # a pod owned by a Kueue object is still a pod
        ('{"apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": '
         '{"ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload"}]}}'
         '], "kind": "List"}', False),
        ('{"apiVersion": "v1", "items": [], "kind": "List"}', False),
    ],
)  # fmt: skip
def test_kueue_sniff(head, accepted):
    assert kueue.FORMAT.sniff(Path("x"), head) is accepted
