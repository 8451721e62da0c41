"""The figure definitions are worded once (reports/definitions.yaml): the workbooks, the
department page and README.md show that wording."""

from pipelines.reports import definitions
from pipelines.reports.definitions import (
    governance_definitions,
    note,
    page_definitions,
    workbook_definitions,
)

PAGE_VALUES = {
    "zombie_min_hours": "3",
    "idle_threshold_pct": "7",
    "top_jobs": "10",
    "daily_source": note("daily_fallback"),
    "quota_flags_source": note("quota_from_tenant_month"),
}


def test_readme_shows_the_definitions_of_the_file():
    # out of date: `python -m pipelines.reports.definitions` rewrites the section
    readme = definitions.README.read_text(encoding="utf-8")
    assert definitions.readme_with_section(readme) == readme
    for term, _ in workbook_definitions() + governance_definitions():
        assert f"- **{term}**: " in readme


def test_every_placeholder_is_filled():
    shown = workbook_definitions() + governance_definitions() + page_definitions(PAGE_VALUES)
    assert not [term for term, meaning in shown if "{" in meaning or "}" in meaning]


def test_the_page_shows_the_workbook_wording_of_its_figures():
    workbook = dict(workbook_definitions("page"))
    page = dict(page_definitions(PAGE_VALUES))
    assert page["Billing period"] == workbook["Billing period"]
    assert page["Billing period"].endswith("Timestamps in this page are UTC.")
    assert dict(workbook_definitions())["Billing period"].endswith("in this workbook are UTC.")
    assert page["Productive share"] == workbook["Productive share of allocated"]
    assert page["Waste buckets"] == workbook["Waste taxonomy (buckets)"]
    assert page["zombie"] == workbook["zombie"] + " This month's minimum: 3 hours."
    assert page["idle"] == workbook["idle"] + " This month's threshold: 7 %."
    assert page["Daily allocated GPU-hours"] == note("daily_fallback")
    assert page["Quota flags"].endswith(
        "half of the month's days. quota_compliance was not available: flags as recorded in "
        "tenant_month."
    )
    with_quota = dict(page_definitions({**PAGE_VALUES, "quota_flags_source": ""}))
    assert with_quota["Quota flags"].endswith("half of the month's days.")
