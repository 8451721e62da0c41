"""Catalog ambiguity is an error: whatever the order of entries would decide stops the load with
one line naming the file, both entries and the field; misspelt keys, unknown currencies and
timezones too. Precedence that is meant (exact account over glob, a model's rate over '*', a
cluster's rate over the all-clusters one) still loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.catalog import CatalogError, load_catalog
from pipelines.defs.ingest.catalog_tables import account_tenants
from tests.conftest import write

TENANTS = """
tenants:
  - {id: a, name: A, department: D, cost_center: C1, accounts: [alpha, "ml-*"]}
  - {id: b, name: B, department: D, cost_center: C2, accounts: [beta]}
"""
RATES = """
rates:
  - {gpu_model: A100, price_per_gpu_hour: 2.0, valid_to: 2026-11-15}
  - {gpu_model: A100, price_per_gpu_hour: 2.5, valid_from: 2026-11-15}
  - {gpu_model: A100, price_per_gpu_hour: 3.0, cluster: atlas}
  - {gpu_model: "*", price_per_gpu_hour: 1.5}
  - {gpu_model: "*", price_per_gpu_hour: 1.0, cluster: atlas}
"""


def catalog_dir(tmp_path: Path, **files: str) -> Path:
    files = {"tenants.yaml": TENANTS, "rates.yaml": RATES, **files}
    for name, text in files.items():
        write(tmp_path / "catalog" / name, text)
    return tmp_path / "catalog"


def tenants(*lines: str) -> str:
    return "tenants:\n" + "".join(
        f"  - {{id: {tenant_id}, name: N, department: D, cost_center: C, accounts: {accounts}}}\n"
        for tenant_id, accounts in lines
    )


def test_meant_precedence_loads(tmp_path):
    # consecutive A100 rates, an A100 rate of one cluster, '*' of all clusters and of one
    # cluster: nothing overlaps within one model and cluster
    catalog = load_catalog(catalog_dir(tmp_path))
    assert [(r.gpu_model, r.cluster) for r in catalog.rates][2:] == [
        ("A100", "atlas"),
        ("*", None),
        ("*", "atlas"),
    ]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        pytest.param(
            {"tenants.yaml": tenants(("a", "[alpha]"), ("a", "[beta]"))},
            "tenants.yaml: tenants[1] (a): field 'id': 'a' is already the id of tenants[0]",
            id="duplicate-tenant-id",
        ),
        pytest.param(
            {
                "tenants.yaml": tenants(
                    ("a", "[shared]"), ("b", "[{account: shared, valid_from: 2026-11-15}]")
                )
            },
            "tenants.yaml: tenants[1] (b): field 'accounts': 'shared' is mapped to tenants[0] "
            "(a) too, both in force from 2026-11-15 on",
            id="account-of-two-tenants",
        ),
        pytest.param(
            {
                "tenants.yaml": tenants(
                    ("a", '[{account: "ml-*", valid_from: 2026-10-01, valid_to: 2026-12-01}]'),
                    ("b", '[{account: "ml-*", valid_from: 2026-11-01}]'),
                )
            },
            "tenants.yaml: tenants[1] (b): field 'accounts': 'ml-*' is mapped to tenants[0] "
            "(a) too, both in force from 2026-11-01 to 2026-12-01",
            id="glob-of-two-tenants",
        ),
        pytest.param(
            {
                "rates.yaml": "rates:\n"
                "  - {gpu_model: A100, price_per_gpu_hour: 2.0, valid_from: 2026-01-01}\n"
                "  - {gpu_model: A100, price_per_gpu_hour: 2.5, valid_from: 2026-11-01}\n"
            },
            "rates.yaml: rates[1] (A100): field 'valid_from': rates[0] prices A100 too, both in "
            "force from 2026-11-01 on (end one with valid_to where the other begins)",
            id="rates-of-one-model",
        ),
        pytest.param(
            {
                "rates.yaml": "rates:\n"
                "  - {gpu_model: A100, price_per_gpu_hour: 2.0}\n"
                "  - {gpu_model: A100, price_per_gpu_hour: 3.0, cluster: atlas}\n"
                "  - {gpu_model: A100, price_per_gpu_hour: 3.5, cluster: atlas,"
                " valid_to: 2026-12-01}\n"
            },
            "rates.yaml: rates[2] (A100 on atlas): field 'valid_from': rates[1] prices A100 on "
            "atlas too, both in force before 2026-12-01 (end one with valid_to where the other "
            "begins)",
            id="rates-of-one-model-and-cluster",
        ),
        pytest.param(
            {
                "rates.yaml": "rates:\n"
                '  - {gpu_model: "*", price_per_gpu_hour: 1.0}\n'
                '  - {gpu_model: "*", price_per_gpu_hour: 1.5}\n'
            },
            "rates.yaml: rates[1] (*): field 'valid_from': rates[0] prices * too, both in force "
            "at all times (end one with valid_to where the other begins)",
            id="two-fallbacks",
        ),
        pytest.param(
            {
                "rates.yaml": "rates:\n"
                "  - {gpu_model: A100, price_per_gpu_hour: 2.0}\n"
                "tiers:\n"
                "  - {queue: spot, multiplier: 0.5, valid_to: 2026-12-01}\n"
                "  - {qos: spot, multiplier: 0.7}\n"
                "  - {queue: spot, multiplier: 0.4, valid_from: 2026-11-20}\n"
            },
            "rates.yaml: tiers[2] (queue spot): field 'valid_from': tiers[0] prices queue spot "
            "too, both in force from 2026-11-20 to 2026-12-01 (end one with valid_to where the "
            "other begins)",
            id="tiers-of-one-queue",
        ),
        pytest.param(
            {
                "rates.yaml": "rates:\n"
                "  - {gpu_model: A100, price_per_gpu_hour: 2.0}\n"
                "tiers:\n"
                "  - {queue: spot, qos: low, multiplier: 0.5}\n"
            },
            "rates.yaml: tiers[0]: field '(entry)': Value error, a tier names either a queue "
            "or a qos",
            id="tier-of-queue-and-qos",
        ),
        pytest.param(
            {
                "rates.yaml": "rates:\n"
                "  - {gpu_model: A100, price_per_gpu_hour: 2.0}\n"
                "tiers:\n"
                "  - {queue: spot, multiplier: 0.12345}\n"
            },
            "rates.yaml: tiers[0]: field 'multiplier': Decimal input should have no more than "
            "4 decimal places",
            id="tier-multiplier-precision",
        ),
        pytest.param(
            {
                "quotas.yaml": "quotas:\n"
                "  - {tenant: a, pool: A100, guaranteed_gpus: 4, valid_to: 2026-12-01}\n"
                "  - {tenant: b, pool: A100, guaranteed_gpus: 4}\n"
                "  - {tenant: a, pool: A100, guaranteed_gpus: 2, valid_from: 2026-11-11}\n"
            },
            "quotas.yaml: quotas[2] (a): field 'valid_from': quotas[0] sets pool 'A100' of a "
            "too, both in force from 2026-11-11 to 2026-12-01 (end one with valid_to where the "
            "other begins)",
            id="quotas-of-one-tenant-and-pool",
        ),
        pytest.param(
            {
                "budgets.yaml": "budgets:\n"
                "  - {tenant: a, month: 2026-11, amount: 100}\n"
                "  - {tenant: a, month: 2026-12, amount: 100}\n"
                "  - {tenant: a, month: 2026-11, amount: 200}\n"
            },
            "budgets.yaml: budgets[2] (a): field 'month': budgets[0] is a's budget for 2026-11 too",
            id="budgets-of-one-tenant-and-month",
        ),
        pytest.param(
            {"quotas.yaml": "quotas:\n  - {tenant: nobody, pool: A100, guaranteed_gpus: 1}\n"},
            "quotas.yaml: quotas[0]: field 'tenant': unknown tenant 'nobody'",
            id="quota-of-an-unknown-tenant",
        ),
        pytest.param(
            {"budgets.yaml": "budgets:\n  - {tenant: nobody, month: 2026-11, amount: 5}\n"},
            "budgets.yaml: budgets[0]: field 'tenant': unknown tenant 'nobody'",
            id="budget-of-an-unknown-tenant",
        ),
        pytest.param(
            {"settings.yaml": "currency: US$\n"},
            "settings.yaml: settings: field 'currency': 'US$' is not an ISO 4217 currency code "
            "(e.g. USD, EUR, GBP)",
            id="currency",
        ),
        pytest.param(
            {"settings.yaml": "currency: eur\n"},
            "settings.yaml: settings: field 'currency': 'eur' is not an ISO 4217 currency code "
            "(did you mean 'EUR'?)",
            id="currency-in-lower-case",
        ),
        pytest.param(
            {"settings.yaml": "billing_timezone: Europe/Berln\n"},
            "settings.yaml: settings: field 'billing_timezone': unknown timezone 'Europe/Berln' "
            "(did you mean 'Europe/Berlin'?)",
            id="billing-timezone",
        ),
        pytest.param(
            {"settings.yaml": "clusters:\n  atlas: {scheduler_timezone: Mars/Olympus}\n"},
            "settings.yaml: settings: field 'clusters.atlas.scheduler_timezone': unknown "
            "timezone 'Mars/Olympus' (an IANA name such as Europe/Berlin, UTC)",
            id="cluster-timezone",
        ),
        pytest.param(
            {"settings.yaml": "billing_timezone: utc\n"},
            "settings.yaml: settings: field 'billing_timezone': unknown timezone 'utc' "
            "(did you mean 'UTC'?)",
            id="timezone-in-lower-case",
        ),
        pytest.param(
            {"tenants.yaml": TENANTS.replace("tenants:", "tenant:")},
            "tenants.yaml: unknown key 'tenant' (did you mean 'tenants'?)",
            id="key-tenant",
        ),
        pytest.param(
            {"rates.yaml": RATES.replace("rates:", "rate:")},
            "rates.yaml: unknown key 'rate' (did you mean 'rates'?)",
            id="key-rate",
        ),
        pytest.param(
            {"rates.yaml": RATES + "mig_profile: {1g.6gb: 1/4}\n"},
            "rates.yaml: unknown key 'mig_profile' (did you mean 'mig_profiles'?)",
            id="key-mig-profile",
        ),
        pytest.param(
            {
                "outages.yaml": "outage:\n  - {nodes: n1, cluster: c, start: 2026-11-10T00:00:00,"
                " end: 2026-11-10T02:00:00}\n"
            },
            "outages.yaml: unknown key 'outage' (did you mean 'outages'?)",
            id="key-outage",
        ),
        pytest.param(
            {"quotas.yaml": "quota:\n  - {tenant: a, pool: A100, guaranteed_gpus: 1}\n"},
            "quotas.yaml: unknown key 'quota' (did you mean 'quotas'?)",
            id="key-quota",
        ),
        pytest.param(
            {"budgets.yaml": "budgets: []\nnotes: [checked by finance]\n"},
            "budgets.yaml: unknown key 'notes' (expected 'budgets')",
            id="key-unknown",
        ),
    ],
)
def test_ambiguity_and_misspelling_stop_the_load_naming_file_entries_and_field(
    tmp_path, files, message
):
    folder = catalog_dir(tmp_path, **files)
    with pytest.raises(CatalogError) as error:
        load_catalog(folder)
    assert str(error.value) == f"{folder}/{message}"


def test_an_exact_name_overrides_globs_and_settles_them_where_it_is_in_force(tmp_path):
    # 'ml-vision' matches a's 'ml-*' and b's '*-vision'; c maps it exactly from 2026-11-01
    folder = catalog_dir(
        tmp_path,
        **{
            "tenants.yaml": tenants(
                ("a", '["ml-*"]'),
                ("b", '["*-vision"]'),
                ("c", "[{account: ml-vision, valid_from: 2026-11-01}]"),
            )
        },
    )
    catalog = load_catalog(folder)
    # an exact name and a glob of another tenant: the exact name wins, not an error
    rows = account_tenants(catalog, ["ml-nlp"])
    assert [(r["account"], r["tenant_id"], r["priority"]) for r in rows] == [("ml-nlp", "a", 0)]
    with pytest.raises(CatalogError) as error:
        account_tenants(catalog, ["ml-nlp", "ml-vision"])
    assert str(error.value) == (
        f"{folder}/tenants.yaml: tenants[1] (b): field 'accounts': '*-vision' matches account "
        "'ml-vision' like 'ml-*' of tenants[0] (a), both in force before 2026-11-01 "
        "(map 'ml-vision' exactly to settle it)"
    )

    # mapped exactly at all times: the exact name settles the two globs
    write(
        folder / "tenants.yaml",
        tenants(("a", '["ml-*"]'), ("b", '["*-vision"]'), ("c", "[ml-vision]")),
    )
    rows = account_tenants(load_catalog(folder), ["ml-vision"])
    assert [(r["tenant_id"], r["priority"]) for r in rows] == [("c", 0), ("a", 1), ("b", 2)]


def test_globs_of_one_tenant_or_of_tenants_at_different_times_are_not_ambiguous(tmp_path):
    folder = catalog_dir(
        tmp_path,
        **{
            "tenants.yaml": tenants(
                ("a", '["ml-*", "ml-v*"]'),
                ("b", '[{account: "*-nlp", valid_to: 2026-11-01}]'),
                ("c", '[{account: "x-*", valid_from: 2026-11-01}]'),
            )
        },
    )
    catalog = load_catalog(folder)
    rows = account_tenants(catalog, ["ml-vision", "x-nlp"])
    assert [(r["account"], r["tenant_id"]) for r in rows] == [
        ("ml-vision", "a"),  # two globs of one tenant
        ("ml-vision", "a"),
        ("x-nlp", "b"),  # b's glob until November, c's from then on
        ("x-nlp", "c"),
    ]
    with pytest.raises(CatalogError) as error:
        account_tenants(catalog, ["ml-nlp"])
    assert str(error.value) == (
        f"{folder}/tenants.yaml: tenants[1] (b): field 'accounts': '*-nlp' matches account "
        "'ml-nlp' like 'ml-*' of tenants[0] (a), both in force before 2026-11-01 "
        "(map 'ml-nlp' exactly to settle it)"
    )
