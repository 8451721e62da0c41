"""Catalog validation and export recognition: one clear line naming file, entry and field."""

from __future__ import annotations

import codecs
import datetime as dt
import gzip
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.catalog import CatalogError, ClusterSettings, load_catalog
from pipelines.defs.ingest.catalog_tables import account_tenants, outage_windows
from pipelines.landing import LandingError, discover
from tests.conftest import write

TENANTS = """
tenants:
  - {id: nlp, name: NLP, department: Research, cost_center: CC-1, accounts: ["nlp-*", nlp]}
  - id: vision
    name: Vision
    department: Research
    cost_center: CC-2
    accounts:
      - {account: cv, valid_to: 2026-11-15}
  - id: robotics
    name: Robotics
    department: Research
    cost_center: CC-3
    accounts:
      - {account: cv, valid_from: 2026-11-15}
"""
RATES = "rates:\n  - {gpu_model: '*', price_per_gpu_hour: 1.5}\n"


def catalog_dir(tmp_path: Path, **files: str) -> Path:
    files = {"tenants.yaml": TENANTS, "rates.yaml": RATES, **files}
    for name, text in files.items():
        write(tmp_path / "catalog" / name, text)
    return tmp_path / "catalog"


def test_a_valid_catalog_loads_with_defaults(tmp_path):
    catalog = load_catalog(catalog_dir(tmp_path))
    assert catalog.settings.cost_mode == "rate_card"
    assert str(catalog.settings.idle_threshold_pct) == "5"
    assert catalog.nodes is None  # no inventory: capacity unknown


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"tenants.yaml": "tenants:\n  - {id: x, name: X, cost_center: C, accounts: [x]}\n"},
            "tenants.yaml: tenants[0] (x): field 'department': Field required",
        ),
        (
            {"rates.yaml": "rates:\n  - {gpu_model: A100, price_per_gpu_hour: cheap}\n"},
            "rates.yaml: rates[0]: field 'price_per_gpu_hour': Input should be a valid decimal",
        ),
        (
            {"budgets.yaml": "budgets:\n  - {tenant: nobody, month: 2026-11, amount: 5}\n"},
            "budgets.yaml: budgets[0]: field 'tenant': unknown tenant 'nobody'",
        ),
        (
            {"settings.yaml": "cost_mode: free_lunch\n"},
            "settings.yaml: settings: field 'cost_mode': Input should be 'rate_card' or "
            "'full_recovery'",
        ),
        (
            {"nodes.csv": "node,cluster,gpu_model,gpus\nn1,c,A100,8\nn2,c,A100,eight\n"},
            "nodes.csv: line 3: field 'gpus': Input should be a valid integer",
        ),
        (
            {"nodes.csv": "node,cluster,gpu_model,gpus\nn1,c,A100,8\nn1,d,A100,8\nn1,c,H100,4\n"},
            "nodes.csv: line 4: field 'node': n1 of cluster c is already on line 2",
        ),
        ({"tenants.yaml": "tenants: [\n"}, "tenants.yaml: line 2 is not valid YAML"),
        (
            {"settings.yaml": "telemetry: {step_s: 0}\n"},
            "settings.yaml: settings: field 'telemetry.step_s': Input should be greater than 0",
        ),
        (
            # the daily rollup marks the silences of a minute or more only
            {"settings.yaml": "silence_min_minutes: 0.5\n"},
            "settings.yaml: settings: field 'silence_min_minutes': Input should be greater than "
            "or equal to 1",
        ),
        (
            {"settings.yaml": "clusters:\n  atlas: {telemetry: {step_s: -15}}\n"},
            "settings.yaml: settings: field 'clusters.atlas.telemetry.step_s': Input should be "
            "greater than 0",
        ),
    ],
)
def test_catalog_mistakes_name_file_entry_and_field(tmp_path, files, message):
    with pytest.raises(CatalogError) as error:
        load_catalog(catalog_dir(tmp_path, **files))
    assert message in str(error.value)
    assert "\n" not in str(error.value).split(" is not valid YAML")[0]


# Open XDMoD's order (DESIGN.md), the partition misspelt
XDMOD_WITH_A_TYPO = (
    "jobid, jobidraw, cluster, partiton, qos, account, group, gid, user, uid, submit, eligible, "
    "start, end, elapsed, exitcode, state, nnodes, ncpus, reqcpus, reqmem, reqtres, alloctres, "
    "timelimit, nodelist, jobname"
)


def with_gpu_models(mapping: str) -> dict[str, str]:
    """Cluster c1's gpu_models `mapping` in a catalog whose GPU models are A100-80GB (rates.yaml),
    T4 (nodes.csv) and H100-80GB (gpu_memory_mib), each named in one file only."""
    return {
        "rates.yaml": RATES + "  - {gpu_model: A100-80GB, price_per_gpu_hour: 2.5}\n",
        "nodes.csv": "node,cluster,gpu_model,gpus\nt01,c1,T4,4\n",
        "settings.yaml": "gpu_memory_mib: {H100-80GB: 81559}\n"
        f"clusters:\n  c1: {{gpu_models: {mapping}}}\n",
    }


@pytest.mark.parametrize(
    ("files", "message"),
    [
        pytest.param(
            {"budgets.yaml": "budgets:\n  - {tenant: nlp, month: 2026-13, amount: 10}\n"},
            "budgets.yaml: budgets[0] (nlp): field 'month': '2026-13' is not a month (YYYY-MM, "
            "MM from 01 to 12)",
            id="budget-month-13",
        ),
        pytest.param(
            {"budgets.yaml": "budgets:\n  - {tenant: nlp, month: '2026-00', amount: 10}\n"},
            "budgets.yaml: budgets[0] (nlp): field 'month': '2026-00' is not a month (YYYY-MM, "
            "MM from 01 to 12)",
            id="budget-month-00",
        ),
        pytest.param(
            {
                "rates.yaml": "rates:\n  - {gpu_model: '*', price_per_gpu_hour: 1.5, "
                "valid_from: 2026-12-01, valid_to: 2026-11-01}\n"
            },
            "rates.yaml: rates[0]: field 'valid_to': 2026-11-01 is not after valid_from "
            "2026-12-01: the entry would never be in force (valid_to is the first day it no "
            "longer is)",
            id="rate-valid-to-before-valid-from",
        ),
        pytest.param(
            {
                "rates.yaml": RATES + "tiers:\n  - {queue: spot, multiplier: 0.5, "
                "valid_from: 2026-11-01, valid_to: 2026-11-01}\n"
            },
            "rates.yaml: tiers[0]: field 'valid_to': 2026-11-01 is not after valid_from "
            "2026-11-01: the entry would never be in force (valid_to is the first day it no "
            "longer is)",
            id="tier-valid-to-on-valid-from",
        ),
        pytest.param(
            {
                "tenants.yaml": "tenants:\n  - {id: a, name: A, department: D, cost_center: C, "
                "accounts: [{account: a, valid_from: 2026-11-15, valid_to: 2026-11-15}]}\n"
            },
            "tenants.yaml: tenants[0] (a): field 'accounts.0.valid_to': 2026-11-15 is not after "
            "valid_from 2026-11-15: the entry would never be in force (valid_to is the first "
            "day it no longer is)",
            id="mapping-valid-to-on-valid-from",
        ),
        pytest.param(
            {
                "tenants.yaml": "tenants:\n  - {id: a, name: A, department: D, cost_center: C, "
                "accounts: [a], valid_from: 2026-12-01, valid_to: 2026-11-01}\n"
            },
            "tenants.yaml: tenants[0] (a): field 'valid_to': 2026-11-01 is not after valid_from "
            "2026-12-01: the entry would never be in force (valid_to is the first day it no "
            "longer is)",
            id="tenant-valid-to-before-valid-from",
        ),
        pytest.param(
            {
                "quotas.yaml": "quotas:\n  - {tenant: nlp, pool: A100, guaranteed_gpus: 16, "
                "valid_from: 2026-12-01, valid_to: 2026-11-01}\n"
            },
            "quotas.yaml: quotas[0] (nlp): field 'valid_to': 2026-11-01 is not after valid_from "
            "2026-12-01: the entry would never be in force (valid_to is the first day it no "
            "longer is)",
            id="quota-valid-to-before-valid-from",
        ),
        pytest.param(
            {
                "quotas.yaml": "quotas:\n  - {tenant: nlp, pool: A100, guaranteed_gpus: 16, "
                "limit_gpus: 4}\n"
            },
            "quotas.yaml: quotas[0] (nlp): field 'limit_gpus': 4 is below guaranteed_gpus 16 "
            "(the limit is the guarantee plus what may be borrowed)",
            id="quota-limit-below-guarantee",
        ),
        pytest.param(
            {
                "nodes.csv": "node,cluster,gpu_model,gpus,in_service_from,in_service_to\n"
                "n1,c,A100,8,2026-11-01,2026-10-01\n"
            },
            "nodes.csv: line 2: field 'in_service_to': 2026-10-01 is not after in_service_from "
            "2026-11-01: the node would never be in service (in_service_to is the first day it "
            "no longer is)",
            id="node-in-service-to-before-from",
        ),
        pytest.param(
            {
                "tenants.yaml": "tenants:\n  - {id: a, name: A, department: D, cost_center: C, "
                "accounts: [{account: a, valid_form: 2026-01-01}]}\n"
            },
            "tenants.yaml: tenants[0] (a): field 'accounts.0.valid_form': unknown key "
            "'valid_form' (did you mean 'valid_from'?)",
            id="mapping-unknown-key",
        ),
        pytest.param(
            {
                "tenants.yaml": "tenants:\n  - {id: a, name: A, department: D, cost_center: C, "
                "accounts: [{account: a, until: 2026-01-01}]}\n"
            },
            "tenants.yaml: tenants[0] (a): field 'accounts.0.until': unknown key 'until' "
            "(expected 'account', 'valid_from' or 'valid_to')",
            id="mapping-unknown-key-no-close-match",
        ),
        pytest.param(
            {
                "tenants.yaml": "tenants:\n  - {id: a, name: A, department: D, cost_center: C, "
                "accounts: [7]}\n"
            },
            "tenants.yaml: tenants[0] (a): field 'accounts.0': Input should be a valid string",
            id="account-neither-name-nor-mapping",
        ),
        pytest.param(
            {
                "budgets.yaml": "budgets:\n  - {tenant: nlp, month: 2026-11, amount: 10, "
                "currency: EUR}\n"
            },
            "budgets.yaml: budgets[0] (nlp): field 'currency': unknown key 'currency' "
            "(expected 'tenant', 'month' or 'amount')",
            id="budget-unknown-key",
        ),
        pytest.param(
            {
                "settings.yaml": "clusters:\n  atlas: {sharing: {nodes: 'g*', mode: mps, "
                "replica: 2}}\n"
            },
            "settings.yaml: settings: field 'clusters.atlas.sharing.0.replica': unknown key "
            "'replica' (did you mean 'replicas'?)",
            id="settings-unknown-nested-key",
        ),
        pytest.param(
            {
                "tenants.yaml": "tenants:\n  - id: a\n    name: A\n    department: D\n"
                "    cost_center: C\n    cost_center: C2\n    accounts: [a]\n"
            },
            "tenants.yaml: line 6: field 'cost_center': duplicate key, already on line 5 (YAML "
            "would keep the last and drop the other silently)",
            id="duplicate-key-in-an-entry",
        ),
        pytest.param(
            {
                "settings.yaml": "clusters:\n  atlas: {scheduler_timezone: UTC, "
                "scheduler_timezone: Europe/Berlin}\n"
            },
            "settings.yaml: line 2: field 'scheduler_timezone': duplicate key, already on line 2 "
            "(YAML would keep the last and drop the other silently)",
            id="duplicate-key-on-one-line",
        ),
        pytest.param(
            {
                "rates.yaml": RATES + "tiers: []\nrates:\n  - {gpu_model: A100, "
                "price_per_gpu_hour: 2}\n"
            },
            "rates.yaml: line 4: field 'rates': duplicate key, already on line 1 (YAML would "
            "keep the last and drop the other silently)",
            id="duplicate-top-level-key",
        ),
        pytest.param(
            {"nodes.csv": "node,cluster,gpu_model,gpus,in_service_until\nn1,c,A100,8,2027-01-01\n"},
            "nodes.csv: line 1: column 5 'in_service_until' is not a nodes.csv column (did you "
            "mean 'in_service_to'? known: node, cluster, gpu_model, gpus, rack, fault_domain, "
            "driver_version, in_service_from, in_service_to, monthly_cost)",
            id="nodes-misspelt-column",
        ),
        pytest.param(
            {"nodes.csv": "node,cluster,gpu_model,gpus,owner\nn1,c,A100,8,ml\n"},
            "nodes.csv: line 1: column 5 'owner' is not a nodes.csv column (known: node, "
            "cluster, gpu_model, gpus, rack, fault_domain, driver_version, in_service_from, "
            "in_service_to, monthly_cost)",
            id="nodes-unknown-column",
        ),
        pytest.param(
            {"nodes.csv": "node,cluster,gpu_model,gpus,rack,rack\nn1,c,A100,8,r1,r2\n"},
            "nodes.csv: line 1: column 6 'rack' repeats column 5",
            id="nodes-column-twice",
        ),
        pytest.param(
            {"nodes.csv": "node,cluster,gpu_model,gpus\nn1,c,A100,8\n\nn2,c,A100,8,4\n"},
            "nodes.csv: line 4: 5 values, the header has 4 columns",
            id="nodes-values-past-the-header",
        ),
        pytest.param(
            {"settings.yaml": f"clusters:\n  atlas: {{sacct_fields: [{XDMOD_WITH_A_TYPO}]}}\n"},
            "settings.yaml: settings: field 'clusters.atlas.sacct_fields.3': 'partiton' is not "
            "a sacct field (did you mean 'partition'? the fields read: jobid, cluster, "
            "partition, qos, account, user, submit, eligible, start, end, exitcode, state, "
            "reqtres, alloctres, nodelist, jobname; any other of sacct --helpformat may stand "
            "in the order)",
            id="sacct-field-misspelt",
        ),
        pytest.param(
            {
                "settings.yaml": "clusters:\n  atlas: {sacct_fields: [JobID, Account, Start, "
                "End, State, AllocTRES, NodeList, Partition, Start]}\n"
            },
            "settings.yaml: settings: field 'clusters.atlas.sacct_fields.8': 'Start' repeats "
            "sacct_fields.2",
            id="sacct-field-twice",
        ),
        pytest.param(
            {"settings.yaml": "clusters:\n  atlas: {sacct_fields: [jobid, start]}\n"},
            "settings.yaml: settings: field 'clusters.atlas.sacct_fields': account, end, state, "
            "alloctres, nodelist missing (a job is not billed without jobid, account, start, "
            "end, state, alloctres, nodelist)",
            id="sacct-fields-without-required",
        ),
        pytest.param(
            with_gpu_models("{a100: A100-80G}"),
            "settings.yaml: settings: field 'clusters.c1.gpu_models.a100': 'A100-80G' is not a "
            "GPU model of the catalog (did you mean 'A100-80GB'? the models of rates.yaml, "
            "nodes.csv and gpu_memory_mib: A100-80GB, H100-80GB, T4)",
            id="gpu-models-target-misspelt",
        ),
        pytest.param(
            # rates, nodes and gpu_memory_mib join on the model exactly: h100-80gb matches none
            with_gpu_models("{a100: A100-80GB, NVIDIA-H100-80GB-HBM3: h100-80gb}"),
            "settings.yaml: settings: field 'clusters.c1.gpu_models.NVIDIA-H100-80GB-HBM3': "
            "'h100-80gb' is not a GPU model of the catalog (did you mean 'H100-80GB'? the models "
            "of rates.yaml, nodes.csv and gpu_memory_mib: A100-80GB, H100-80GB, T4)",
            id="gpu-models-target-in-another-case",
        ),
    ],
)
def test_catalog_mistakes_stop_the_load_with_one_exact_line(tmp_path, files, message):
    folder = catalog_dir(tmp_path, **files)
    with pytest.raises(CatalogError) as error:
        load_catalog(folder)
    assert str(error.value) == f"{folder}/{message}"


def test_a_limit_equal_to_the_guarantee_and_back_to_back_validities_load(tmp_path):
    quotas = (
        "quotas:\n"
        "  - {tenant: nlp, pool: A100, guaranteed_gpus: 8, limit_gpus: 8, valid_to: 2026-11-15}\n"
        "  - {tenant: nlp, pool: A100, guaranteed_gpus: 4, valid_from: 2026-11-15}\n"
    )
    catalog = load_catalog(catalog_dir(tmp_path, **{"quotas.yaml": quotas}))
    assert [(q.limit_gpus, q.valid_from) for q in catalog.quotas] == [
        (8, None),
        (None, dt.date(2026, 11, 15)),
    ]


def test_sacct_fields_may_name_any_sacct_field_in_any_case(tmp_path):
    # WorkDir: a field the reader does not read; HetJobOffset: none sacct lists here, nor like
    # any the reader reads (a newer Slurm's), passed over too
    order = (
        "[JobID, Partition, Account, Start, End, State, AllocTRES, NodeList, WorkDir, HetJobOffset]"
    )
    settings = f"clusters:\n  atlas: {{sacct_fields: {order}}}\n"
    catalog = load_catalog(catalog_dir(tmp_path, **{"settings.yaml": settings}))
    assert catalog.cluster("atlas").sacct_fields[-2:] == ["WorkDir", "HetJobOffset"]


def test_gpu_models_may_map_to_any_model_of_the_catalog(tmp_path):
    # A100-40GB is like A100-80GB, but a model of nodes.csv: not taken for a misspelling
    files = with_gpu_models("{a100: A100-80GB, a100-40g: A100-40GB, t4: T4, h100: H100-80GB}")
    files["nodes.csv"] += "a01,c1,A100-40GB,8\n"
    catalog = load_catalog(catalog_dir(tmp_path, **files))
    assert catalog.cluster("c1").gpu_models == {
        "a100": "A100-80GB", "a100-40g": "A100-40GB", "t4": "T4", "h100": "H100-80GB"
    }  # fmt: skip


def test_gpu_models_may_map_to_a_model_like_none_of_the_catalog(tmp_path):
    # B200: priced by the '*' rate alone, and named on the bill as the mapping writes it
    files = with_gpu_models("{b200: B200}")
    catalog = load_catalog(catalog_dir(tmp_path, **files))
    assert catalog.cluster("c1").gpu_models == {"b200": "B200"}


def test_yaml_merge_keys_may_be_overridden_next_to_them(tmp_path):
    settings = (
        "clusters:\n"
        "  atlas: &site {scheduler_timezone: Europe/Berlin, gpu_models: {a100: A100}}\n"
        "  titan:\n"
        "    <<: *site\n"
        "    scheduler_timezone: UTC\n"
    )
    catalog = load_catalog(catalog_dir(tmp_path, **{"settings.yaml": settings}))
    assert catalog.cluster("titan").scheduler_timezone == "UTC"
    assert catalog.cluster("titan").gpu_models == {"a100": "A100"}


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        (
            "tenants.yaml",
            "tenants:\n  - {id: a, name: M\u00fcller, department: D, cost_center: C, "
            "accounts: [a]}\n".encode("latin-1"),
            "tenants.yaml: line 2, column 20: byte 0xfc is not UTF-8 (save the file as UTF-8)",
        ),
        (
            "nodes.csv",
            "node,cluster,gpu_model,gpus,rack\nn1,c,A100,8,R\u00e4ck 1\n".encode("cp1252"),
            "nodes.csv: line 2, column 14: byte 0xe4 is not UTF-8 (save the file as UTF-8)",
        ),
    ],
    ids=["latin-1-yaml", "windows-1252-csv"],
)
def test_a_catalog_file_not_in_utf8_names_file_line_and_byte(tmp_path, name, data, message):
    folder = catalog_dir(tmp_path)
    (folder / name).write_bytes(data)
    with pytest.raises(CatalogError) as error:
        load_catalog(folder)
    assert str(error.value) == f"{folder}/{message}"


def test_catalog_files_saved_with_a_utf8_byte_order_mark_load(tmp_path):
    # Excel's "CSV UTF-8" and some Windows editors begin the file with one
    folder = catalog_dir(tmp_path)
    (folder / "nodes.csv").write_bytes(
        codecs.BOM_UTF8 + "node,cluster,gpu_model,gpus,rack\nn1,c,A100,8,Räck 1\n".encode()
    )
    (folder / "tenants.yaml").write_bytes(codecs.BOM_UTF8 + TENANTS.encode())
    catalog = load_catalog(folder)
    assert [(n.node, n.gpus, n.rack) for n in catalog.nodes] == [("n1", 8, "Räck 1")]
    assert [t.id for t in catalog.tenants] == ["nlp", "vision", "robotics"]


def test_a_declared_telemetry_step_is_the_clusters_own_else_the_catalogs(tmp_path):
    from pipelines.defs.ingest.telemetry import declared_steps
    from pipelines.reports.exports import _declared_telemetry_steps

    settings = "telemetry: {step_s: 30}\nclusters:\n  atlas: {telemetry: {step_s: 15.5}}\n"
    catalog = load_catalog(catalog_dir(tmp_path, **{"settings.yaml": settings}))
    sources = [{"cluster": cluster} for cluster in ("titan", "atlas", "titan")]
    assert declared_steps(sources, catalog) == [
        {"cluster": "atlas", "step_ms": 15500},
        {"cluster": "titan", "step_ms": 30000},
    ]
    # the reports' parameter telemetry_step_s
    assert _declared_telemetry_steps(catalog.settings) == "30 (atlas: 15.5)"
    # none declared: every step is estimated from the samples
    estimated = load_catalog(catalog_dir(tmp_path / "none"))
    assert declared_steps(sources, estimated) == []
    assert _declared_telemetry_steps(estimated.settings) == "estimated"


def test_accounts_map_exact_before_glob_with_validity(tmp_path):
    catalog = load_catalog(catalog_dir(tmp_path))
    rows = account_tenants(catalog, ["nlp", "nlp-eval", "cv", "ghost"])
    assert [(r["account"], r["tenant_id"], r["priority"], r["valid_from"].date().isoformat(),
             r["valid_to"].date().isoformat()) for r in rows] == [
        ("cv", "vision", 0, "1900-01-01", "2026-11-15"),
        ("cv", "robotics", 1, "2026-11-15", "9999-12-31"),
        ("nlp", "nlp", 0, "1900-01-01", "9999-12-31"),  # 'nlp-*' does not match 'nlp'
        ("nlp-eval", "nlp", 0, "1900-01-01", "9999-12-31"),
    ]  # fmt: skip


def test_outages_expand_hostlists_against_the_inventory_and_merge(tmp_path):
    nodes = "node,cluster,gpu_model,gpus\ngpu-01,c,A100,8\ngpu-02,c,A100,8\ngpu-03,c,A100,8\n"
    outages = """
    outages:
      - {nodes: "gpu-[01-02]", start: 2026-11-18T02:00:00, end: 2026-11-18T04:00:00, reason: a}
      - {nodes: "gpu-0*", start: 2026-11-18T03:00:00, end: 2026-11-18T05:00:00, reason: b}
    """
    catalog = load_catalog(catalog_dir(tmp_path, **{"nodes.csv": nodes, "outages.yaml": outages}))
    windows = [(w["node"], w["outage_from"].hour, w["outage_to"].hour, w["reason"])
               for w in outage_windows(catalog)]  # fmt: skip
    assert windows == [("gpu-01", 2, 5, "a; b"), ("gpu-02", 2, 5, "a; b"), ("gpu-03", 3, 5, "b")]


def test_outage_times_without_a_zone_are_the_clusters_local_time(tmp_path):
    # DESIGN: a time without a zone is in the cluster's scheduler_timezone; one with an offset
    # is that instant. Berlin is UTC+1 in November.
    settings = "clusters:\n  berlin: {scheduler_timezone: Europe/Berlin}\n"
    nodes = "node,cluster,gpu_model,gpus\nb1,berlin,A100,8\nu1,utc,A100,8\n"
    outages = """
    outages:
      - {nodes: b1, start: 2026-11-18T03:00:00, end: 2026-11-18T05:00:00}
      - {nodes: u1, start: 2026-11-18T03:00:00, end: 2026-11-18T05:00:00}
      - {nodes: b1, start: "2026-11-19T03:00:00+00:00", end: "2026-11-19T05:00:00+00:00"}
    """
    folder = catalog_dir(
        tmp_path, **{"settings.yaml": settings, "nodes.csv": nodes, "outages.yaml": outages}
    )
    windows = [(w["node"], w["outage_from"], w["outage_to"])
               for w in outage_windows(load_catalog(folder))]  # fmt: skip
    assert windows == [
        ("b1", dt.datetime(2026, 11, 18, 2), dt.datetime(2026, 11, 18, 4)),
        ("b1", dt.datetime(2026, 11, 19, 3), dt.datetime(2026, 11, 19, 5)),
        ("u1", dt.datetime(2026, 11, 18, 3), dt.datetime(2026, 11, 18, 5)),
    ]
    backwards = outages.replace("end: 2026-11-18T05:00:00}", "end: 2026-11-18T01:00:00}", 1)
    write(folder / "outages.yaml", backwards)
    with pytest.raises(CatalogError) as error:
        outage_windows(load_catalog(folder))
    assert str(error.value) == (
        f"{folder}/outages.yaml: outages[0]: field 'end': 2026-11-18 01:00:00 is not after "
        "'start' 2026-11-18 03:00:00"
    )


def test_exports_are_recognised_by_content(tmp_path):
    landing = tmp_path / "landing"
    write(landing / "scheduler/c1/dump.txt.csv",
          "job_id,cluster,account,user,queue,qos,gpu_model,gpus,nodes,submit_time,start_time,"
          "end_time,state,exit_code\n")  # fmt: skip
    write(landing / "scheduler/c1/gpus.csv", "job_id,node,gpu_index\n")
    write(landing / "scheduler/c1/README.md", "notes\n")
    found = [(f.name, f.cluster, f.kind) for f in discover(landing, "scheduler")]
    assert found == [
        ("scheduler/c1/dump.txt.csv", "c1", "jobs"),
        ("scheduler/c1/gpus.csv", "c1", "allocations"),
    ]


@pytest.mark.parametrize("name", ["mystery.csv", "notes.txt"])
def test_an_unknown_file_stops_with_one_line_naming_it(tmp_path, name):
    # a .txt file is read by its content like any other (a sacct dump is often saved so): one
    # that is no export stops the run as well, and the message says how to keep a note
    landing = tmp_path / "landing"
    write(landing / "scheduler/c1" / name, "a,b,c\n1,2,3\n")
    with pytest.raises(LandingError) as error:
        discover(landing, "scheduler")
    message = str(error.value)
    assert message.startswith(f"{landing}/scheduler/c1/{name}: line 1: unrecognised export")
    assert message.endswith("(a note kept here is named README*, *.md or *.ignore)")
    assert "\n" not in message


@pytest.mark.parametrize("area", ["scheduler", "telemetry"])
def test_a_file_of_no_bytes_or_blank_lines_is_an_export_without_rows(tmp_path, area):
    # an exporter with nothing to export writes that; it once stopped the run as unrecognised
    folder = tmp_path / "landing" / area / "c1"
    folder.mkdir(parents=True)
    (folder / "a.csv").write_bytes(b"")
    (folder / "b.log").write_bytes(codecs.BOM_UTF8 + b" \r\n\n\t\n")
    (folder / "c.json.gz").write_bytes(gzip.compress(b"", mtime=0))
    (folder / "d.parquet").write_bytes(b"")
    # blank for its first 64 KiB (all a format sees), but not blank: still unrecognised
    (folder / "e.csv").write_bytes(b"\n" * 70_000 + b"a,b,c\n")
    with pytest.raises(LandingError) as error:
        discover(tmp_path / "landing", area)
    assert str(error.value).startswith(f"{folder}/e.csv: line 1: unrecognised export, expected ")
    (folder / "e.csv").unlink()
    found = discover(tmp_path / "landing", area)
    assert [(f.name, f.format.name) for f in found] == [
        (f"{area}/c1/{name}", "empty") for name in ("a.csv", "b.log", "c.json.gz", "d.parquet")
    ]
    for export in found:
        if area == "scheduler":
            assert list(export.format.read_rows(export.path, ClusterSettings())) == []
        else:
            out = tmp_path / f"{export.path.name}.parquet"
            assert export.format.to_parquet(export.path, out, ClusterSettings()) == 0
            assert pq.read_table(out).num_rows == 0


def test_telemetry_conversions_are_cached_by_content_converter_and_settings(tmp_path):
    import shutil

    from pipelines.defs.ingest.telemetry import sample_sources

    fixture = Path(__file__).parents[1] / "fixtures/nvidia-smi/d04-samples_2026-11.csv"
    landing = tmp_path / "landing"
    (landing / "telemetry/lab").mkdir(parents=True)
    shutil.copy(fixture, landing / "telemetry/lab" / fixture.name)
    telemetry = tmp_path / "telemetry"

    def converted(settings: str = "") -> str:
        folder = catalog_dir(tmp_path / settings.replace(" ", "_"), **{"settings.yaml": settings})
        [source] = sample_sources(landing, telemetry, load_catalog(folder))
        assert Path(source["path"]).parent == telemetry / "converted/lab"
        return source["path"]

    first = converted()
    assert converted() == first  # converted once, then reused
    # the declared telemetry step is the rollup's, not the converter's: nothing converted anew
    assert converted("clusters:\n  lab: {telemetry: {step_s: 30}}\n") == first
    renamed = converted("clusters:\n  lab: {gpu_models: {a100: A100-80GB}}\n")
    assert renamed != first  # another setting of the cluster: converted anew
    assert sorted(p.name for p in (telemetry / "converted/lab").glob("*.parquet")) == sorted(
        [Path(first).name, Path(renamed).name]
    )


def test_an_export_seen_before_as_it_is_is_not_hashed_again(tmp_path, monkeypatch):
    from pipelines.defs.ingest.telemetry import sample_sources
    from pipelines.landing import ExportFile

    fixture = Path(__file__).parents[1] / "fixtures/nvidia-smi/d04-samples_2026-11.csv"
    export = tmp_path / "landing/telemetry/lab" / fixture.name
    export.parent.mkdir(parents=True)
    export.write_bytes(fixture.read_bytes())
    catalog = load_catalog(catalog_dir(tmp_path))

    def converted() -> str:
        [source] = sample_sources(tmp_path / "landing", tmp_path / "telemetry", catalog)
        return source["path"]

    hashed = []
    sha256 = ExportFile.sha256

    def hashing(self) -> str:
        hashed.append(self.name)
        return sha256(self)

    monkeypatch.setattr(ExportFile, "sha256", hashing)
    name = "telemetry/lab/" + fixture.name
    first = converted()
    assert hashed == [name]
    assert converted() == first
    assert hashed == [name]  # known by its path, size, modification time and inode
    # written again, the same bytes a second later: hashed again, its conversion reused
    stat = export.stat()
    export.write_bytes(fixture.read_bytes())
    os.utime(export, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert converted() == first
    assert hashed == [name, name]
    # other bytes: hashed, and converted anew
    export.write_bytes(fixture.read_bytes() + fixture.read_bytes().splitlines(keepends=True)[-1])
    assert converted() != first
    assert hashed == [name, name, name]


def test_mig_profiles_of_rates_yaml_under_a_clusters_own(tmp_path):
    from fractions import Fraction

    from pipelines.formats.gpus import mig_equivalent

    catalog = load_catalog(
        catalog_dir(
            tmp_path,
            **{
                "rates.yaml": RATES + "mig_profiles: {1G.6GB: 1/4, 2g: 0.5, 4g.24gb: 1}\n",
                "settings.yaml": "clusters: {a30s: {mig_profiles: {2g.12gb: '2/4'}}}\n",
            },
        )
    )
    assert catalog.mig_profiles == {
        "1g.6gb": Fraction(1, 4), "2g": Fraction(1, 2), "4g.24gb": Fraction(1)
    }  # fmt: skip
    a30s, other = catalog.cluster("a30s"), catalog.cluster("other")
    assert mig_equivalent("1g.6gb", a30s) == Fraction(1, 4)
    assert mig_equivalent("2g.12gb", a30s) == Fraction(1, 2)
    assert mig_equivalent("2g.20gb", other) == Fraction(1, 2)  # the `2g` entry: any size
    assert mig_equivalent("3g.40gb", other) == Fraction(3, 7)  # NVIDIA's default
    assert mig_equivalent("7g.80gb", other) == Fraction(1)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("{1g.5gb: 1/8}", "field 'mig_profiles.1g.5gb': Value error, '1/8' is not a whole "
         "number of 1/420 GPU"),
        ("{1g.5gb: 2}", "field 'mig_profiles.1g.5gb': Value error, '2' is not between 0 "
         "(excluded) and 1 GPU"),
        ("{1g.5gb: a seventh}", "field 'mig_profiles.1g.5gb': Value error, 'a seventh' is not "
         "a fraction of a GPU (e.g. 1/7, 0.25)"),
        ("[1g.5gb]", "field 'mig_profiles': Input should be a valid dictionary"),
    ],
)  # fmt: skip
def test_a_mig_profile_mistake_names_the_profile(tmp_path, table, message):
    path = catalog_dir(tmp_path, **{"rates.yaml": RATES + f"mig_profiles: {table}\n"})
    with pytest.raises(CatalogError) as error:
        load_catalog(path)
    assert str(error.value) == f"{path / 'rates.yaml'}: {message}"


def test_the_exports_are_hashed_a_file_per_core_in_their_order(tmp_path):
    import hashlib

    from pipelines.landing import discover, sha256_each

    fixtures = Path(__file__).parents[1] / "fixtures/nvidia-smi"
    folder = tmp_path / "landing/telemetry/lab"
    folder.mkdir(parents=True)
    for source in sorted(fixtures.glob("*.csv"))[:3]:
        (folder / source.name).write_bytes(source.read_bytes())
    exports = discover(tmp_path / "landing", "telemetry")
    assert len(exports) == 3
    assert sha256_each(exports) == [
        hashlib.sha256(export.path.read_bytes()).hexdigest() for export in exports
    ]
