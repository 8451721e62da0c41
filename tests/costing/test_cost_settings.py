"""The cost settings: full_recovery needs the node inventory with a monthly_cost per node, and
says so in one line naming the file and the field."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from pipelines.catalog import CatalogError, load_catalog
from tests.conftest import materialize_month, write
from tests.e2e.test_full_recovery import build_recovery_month

TENANTS = "tenants:\n  - {id: a, name: A, department: D, cost_center: C, accounts: [a]}\n"
RATES = "rates:\n  - {gpu_model: '*', price_per_gpu_hour: 1.00}\n"


def catalog(tmp_path: Path, settings: str, nodes: str | None) -> Path:
    write(tmp_path / "settings.yaml", settings)
    write(tmp_path / "tenants.yaml", TENANTS)
    write(tmp_path / "rates.yaml", RATES)
    if nodes is not None:
        write(tmp_path / "nodes.csv", nodes)
    return tmp_path


def test_defaults_and_overheads(tmp_path):
    settings = load_catalog(
        catalog(
            tmp_path,
            "cost_mode: full_recovery\nclusters:\n  c1: {monthly_overhead: 1200.50}\n",
            "node,cluster,gpu_model,gpus,monthly_cost\nn1,c1,A100,8,100.00\n",
        )
    ).settings
    assert settings.idle_sharing == "weighted"
    assert settings.clusters["c1"].monthly_overhead == Decimal("1200.50")


@pytest.mark.parametrize(
    ("settings", "nodes", "message"),
    [
        (
            "cost_mode: full_recovery\n",
            None,
            "nodes.csv: missing (cost_mode full_recovery in settings.yaml needs the node "
            "inventory with a monthly_cost per node)",
        ),
        (
            "cost_mode: full_recovery\n",
            "node,cluster,gpu_model,gpus\nn1,c1,A100,8\n",
            "nodes.csv: line 1: missing columns ['monthly_cost'] (cost_mode full_recovery "
            "needs monthly_cost)",
        ),
        (
            "cost_mode: full_recovery\n",
            "node,cluster,gpu_model,gpus,monthly_cost\nn1,c1,A100,8,100.00\nn2,c1,A100,8,\n",
            "nodes.csv: line 3 (n2): field 'monthly_cost': required when cost_mode is "
            "full_recovery (settings.yaml)",
        ),
        (
            "cost_mode: full_recovery\nidle_sharing: fair\n",
            "node,cluster,gpu_model,gpus,monthly_cost\nn1,c1,A100,8,100.00\n",
            "settings.yaml: settings: field 'idle_sharing': Input should be 'weighted', 'even', "
            "'reserved_quota_first' or 'platform'",
        ),
        (
            "clusters:\n  c1: {monthly_overhead: -5}\n",
            None,
            "settings.yaml: settings: field 'clusters.c1.monthly_overhead': Input should be "
            "greater than or equal to 0",
        ),
        (
            "cost_mode: full_recovery\n",
            "node,cluster,gpu_model,gpus,monthly_cost\nn1,c1,A100,8,100.001\n",
            "nodes.csv: line 2: field 'monthly_cost': Decimal input should have no more than 2 "
            "decimal places",
        ),
    ],
)
def test_mistakes_are_named_in_one_line(tmp_path, settings, nodes, message):
    with pytest.raises(CatalogError) as error:
        load_catalog(catalog(tmp_path, settings, nodes))
    assert str(error.value) == f"{tmp_path}/{message}"


def test_rate_card_needs_no_cost(tmp_path):
    loaded = load_catalog(
        catalog(tmp_path, "cost_mode: rate_card\n", "node,cluster,gpu_model,gpus\nn1,c1,A,8\n")
    )
    assert loaded.nodes[0].monthly_cost is None


def test_a_full_recovery_run_without_costs_stops_with_that_message(tmp_path):
    build_recovery_month(tmp_path, "full_recovery")
    write(tmp_path / "catalog/nodes.csv", "node,cluster,gpu_model,gpus\nh1,lab,H100,8\n")
    result = materialize_month(tmp_path, "2026-11-01", raise_on_error=False)
    assert not result.success
    failures = [e for e in result.all_events if e.is_step_failure]
    assert [e.step_key for e in failures] == ["catalog"]
    error = failures[0].step_failure_data.error
    assert error.cause is not None and error.cause.cls_name == "CatalogError"
    assert error.cause.message.strip() == (
        f"pipelines.catalog.CatalogError: {tmp_path}/catalog/nodes.csv: line 1: missing columns "
        "['monthly_cost'] (cost_mode full_recovery needs monthly_cost)"
    )
