"""quota_drift: the GPU quotas configured in the schedulers against the catalog's.

Given (through the real ingest and SQL steps, tests/marts/conftest.py GivenMonth): cluster
`phillips` (Slurm) with the sacctmgr association and QOS dumps of tests/fixtures/sacctmgr, and
an older association dump that the latest by file name replaces; cluster `k8s` (Kueue) with the
objects of tests/fixtures/kueue. No jobs: drift reads the configuration and the catalog only.

Tenants: chaff (account and namespace chaff), wren (wren, wren-*), finch, lark; owl and
lark-α map to no tenant. Catalog quotas in force at the month's end:
  chaff A100  guaranteed 16, limit 32 (from Nov 15; limit 24 before: not the one compared)
  chaff H100  guaranteed 2, limit 8
  wren H100   guaranteed 8, limit 16
  finch debug guaranteed 0, limit 8 (a partition as pool)
  lark A100   guaranteed 0, limit 8
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.marts.conftest import pick

FIXTURES = Path(__file__).parents[1] / "fixtures"
SETTINGS = """
    clusters:
      phillips: {gpu_models: {a100: A100, h100: H100}}
      k8s: {gpu_models: {NVIDIA-A100-SXM4-80GB: A100, NVIDIA-H100-80GB-HBM3: H100}}
"""
TENANTS = """
    tenants:
      - {id: chaff, name: Chaffinch Lab, department: Biology, cost_center: CC-1, accounts: [chaff]}
      - {id: wren, name: Wren Lab, department: Biology, cost_center: CC-2,
         accounts: [wren, "wren-*"]}
      - {id: finch, name: Finch Lab, department: Physics, cost_center: CC-3, accounts: [finch]}
      - {id: lark, name: Lark Lab, department: Physics, cost_center: CC-4, accounts: [lark]}
"""
RATES = """
    rates:
      - {gpu_model: "*", price_per_gpu_hour: 1.00}
"""
QUOTAS = """
    quotas:
      - {tenant: chaff, pool: A100, guaranteed_gpus: 16, limit_gpus: 24, valid_to: 2026-11-15}
      - {tenant: chaff, pool: A100, guaranteed_gpus: 16, limit_gpus: 32, valid_from: 2026-11-15}
      - {tenant: chaff, pool: H100, guaranteed_gpus: 2, limit_gpus: 8}
      - {tenant: wren, pool: H100, guaranteed_gpus: 8, limit_gpus: 16}
      - {tenant: finch, pool: debug, guaranteed_gpus: 0, limit_gpus: 8}
      - {tenant: lark, pool: A100, guaranteed_gpus: 0, limit_gpus: 8}
"""
# an older association dump: chaff's limit was 99 then; the latest dump by name replaces it
OLD_ASSOC = """
    Cluster|Account|User|Partition|GrpTRES|QOS
    phillips|chaff|||gres/gpu:a100=99|normal
"""
COLUMNS = (
    "cluster", "tenant_id", "pool", "source", "kind", "configured_guaranteed_gpus",
    "configured_limit_gpus", "catalog_guaranteed_gpus", "catalog_limit_gpus", "config_objects",
)  # fmt: skip


@pytest.fixture(scope="module")
def month(module_month):
    module_month.catalog(settings=SETTINGS, tenants=TENANTS, rates=RATES, quotas=QUOTAS)
    landing = module_month.root / "landing" / "scheduler"
    for cluster, source in (("phillips", "sacctmgr"), ("k8s", "kueue")):
        shutil.copytree(FIXTURES / source, landing / cluster)
    module_month.file("landing/scheduler/phillips/assoc-2026-10-31.psv", OLD_ASSOC)
    return module_month


@pytest.fixture(scope="module")
def rows(month) -> list[dict]:
    return month.build("quota_drift")


def test_each_disagreement_is_one_row_with_both_values(rows):
    # k8s: cq-solo's 2 A100s serve chaff's and finch's namespaces (shared); chaff's H100 quota
    # has no ClusterQueue; cq-wren's H100 flavor (8 nominal, in a cohort, no borrowingLimit:
    # no limit) against wren's limit 16, and its `spot` flavor (no GPU product label: the
    # flavor's name is the pool) has no catalog quota. cq-chaff (16 + 16 borrowing = 32)
    # agrees. phillips: QOS gpu-chaff (24, listed by chaff's associations) against chaff's
    # limit 32 of the version in force at the month's end (association chaff's 32 agrees;
    # the old dump's 99 is history); chaff's H100 limit has no Slurm object; QOS gpu-shared
    # serves wren and finch; finch's partition debug limit 4 against 8; lark's typed H100
    # limit has no catalog quota (its A100 limit 8 agrees); owl's untyped limit names no pool.
    assert pick(rows, *COLUMNS) == [
        ("k8s", "chaff", "A100", "kueue", "shared_queue", 2.0, 2.0, 16.0, 32.0,
         "ClusterQueue cq-solo"),
        ("k8s", "chaff", "H100", "kueue", "not_configured", None, None, 2.0, 8.0, None),
        ("k8s", "finch", "A100", "kueue", "shared_queue", 2.0, 2.0, None, None,
         "ClusterQueue cq-solo"),
        ("k8s", "wren", "H100", "kueue", "limit_differs", 8.0, None, 8.0, 16.0,
         "ClusterQueue cq-wren"),
        ("k8s", "wren", "spot", "kueue", "not_in_catalog", 4.0, 4.0, None, None,
         "ClusterQueue cq-wren"),
        ("phillips", "chaff", "A100", "slurm_qos", "limit_differs", None, 24.0, 16.0, 32.0,
         "QOS gpu-chaff"),
        ("phillips", "chaff", "H100", "slurm", "not_configured", None, None, 2.0, 8.0, None),
        ("phillips", "finch", "H100", "slurm_qos", "shared_queue", None, 8.0, None, None,
         "QOS gpu-shared"),
        ("phillips", "finch", "debug", "slurm_assoc", "limit_differs", None, 4.0, 0.0, 8.0,
         "association finch@debug"),
        ("phillips", "lark", "H100", "slurm_assoc", "not_in_catalog", None, 4.0, None, None,
         "association lark"),
        ("phillips", "unmapped", None, "slurm_assoc", "pool_unknown", None, 16.0, None, None,
         "association owl"),
        ("phillips", "wren", "H100", "slurm_qos", "shared_queue", None, 8.0, 8.0, 16.0,
         "QOS gpu-shared"),
    ]  # fmt: skip


def test_details_name_the_objects_and_the_file(rows):
    by_kind = {(row["cluster"], row["tenant_id"], row["kind"]): row for row in rows}
    assert by_kind["k8s", "wren", "limit_differs"]["detail"] == (
        "ClusterQueue cq-wren limits to no limit, the catalog to 16 GPUs"
    )
    assert by_kind["k8s", "finch", "shared_queue"]["detail"] == (
        "ClusterQueue cq-solo is shared by tenants chaff, finch (guaranteed 2, limit 2): "
        "not comparable per tenant"
    )
    assert by_kind["phillips", "chaff", "not_configured"]["detail"] == (
        "the catalog quota (guaranteed 2, limit 8) is configured by no Slurm object on phillips"
    )
    assert by_kind["phillips", "chaff", "limit_differs"]["config_file"] == (
        "scheduler/phillips/qos-2026-11-30.psv"
    )


def test_every_configuration_line_is_loaded_or_rejected_with_file_line_and_field(month, rows):
    month.build("data_quality")
    rejects = month.con.execute(
        "select file, line, reason from rejects where file not like '%jobs%' order by all"
    ).fetchall()
    assert rejects == [
        ("scheduler/k8s/kueue-2026-11-30.json", 210,
         "field spec.resourceGroups[0].flavors[0].resources[2].nominalQuota: '500m' is not a "
         "whole number of GPUs"),
        ("scheduler/k8s/kueue-2026-11-30.json", 363, "field spec.clusterQueue: missing"),
        ("scheduler/k8s/kueue-2026-11-30.json", 506,
         "field kind: 'AdmissionCheck' is not a Kueue ClusterQueue, LocalQueue, "
         "ResourceFlavor, Workload"),
        ("scheduler/phillips/assoc-2026-11-30.psv", 10,
         "field grptres: 'gres/gpu:h100=x' is not a GPU count"),
        ("scheduler/phillips/assoc-2026-11-30.psv", 11, "expected 20 fields, found 5"),
        ("scheduler/phillips/assoc-2026-11-30.psv", 12, "field account: missing"),
        ("scheduler/phillips/qos-2026-11-30.psv", 5,
         "field grptres: 'gres/gpu:a100=-1' is not a GPU count"),
    ]  # fmt: skip
    quality = month.con.execute(
        """
        select subject, rows_read, rows_loaded, rows_rejected from data_quality
        where category = 'file' order by subject
        """
    ).fetchall()
    # lark's line of two typed limits is two rows; a Kueue ClusterQueue one per GPU flavor
    assert quality == [
        ("scheduler/k8s/kueue-2026-11-30.json", 18, 15, 3),
        ("scheduler/phillips/assoc-2026-10-31.psv", 1, 1, 0),
        ("scheduler/phillips/assoc-2026-11-30.psv", 13, 10, 3),
        ("scheduler/phillips/qos-2026-11-30.psv", 4, 3, 1),
    ]
    formats = month.con.execute(
        "select file, kind, format from stg_scheduler_files order by file"
    ).fetchall()
    assert formats == [
        ("scheduler/k8s/kueue-2026-11-30.json", "quotas", "kueue_objects"),
        ("scheduler/phillips/assoc-2026-10-31.psv", "quotas", "slurm_sacctmgr"),
        ("scheduler/phillips/assoc-2026-11-30.psv", "quotas", "slurm_sacctmgr"),
        ("scheduler/phillips/qos-2026-11-30.psv", "quotas", "slurm_sacctmgr"),
    ]


def test_kueue_workloads_are_typed_with_their_admission(month, rows):
    workloads = month.con.execute(
        """
        select account, object_name, target, created_at, quota_reserved_at, admitted_at,
            admitted_queue
        from stg_quota_configs where object_kind = 'Workload' order by object_name
        """
    ).fetchall()
    assert [tuple(str(v) if v is not None else None for v in w) for w in workloads] == [
        ("chaff", "pod-train-1-a1b2c", "lq-chaff", "2026-11-10 06:00:00", "2026-11-10 06:30:00",
         "2026-11-10 06:30:01", "cq-chaff"),
        ("wren-train", "pod-train-2-d3e4f", "lq-wren", "2026-11-30 22:00:00", None, None, None),
    ]  # fmt: skip


def test_kueue_workload_waits_from_creation_to_admission(month, rows):
    waits = month.build("kueue_workload_waits")
    assert pick(waits, "cluster", "tenant_id", "namespace", "workload", "queue",
                "cluster_queue", "is_admitted", "wait_s") == [
        # created 06:00:00, admitted 06:30:01
        ("k8s", "chaff", "chaff", "pod-train-1-a1b2c", "lq-chaff", "cq-chaff", True, 1801.0),
        # its QuotaReserved condition is False: still pending at the dump
        ("k8s", "wren", "wren-train", "pod-train-2-d3e4f", "lq-wren", None, False, None),
    ]  # fmt: skip
