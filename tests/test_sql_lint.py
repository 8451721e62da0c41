"""Every SQL file in sql/ follows the house rules of .sqlfluff (DuckDB dialect).

`make lint` runs the same check; CI runs the suite, so a file that breaks the rules fails there.
"""

import os
from pathlib import Path

import pytest
from sqlfluff.core import FluffConfig, Linter

ROOT = Path(__file__).resolve().parent.parent
SQL = ROOT / "sql"


@pytest.mark.slow
def test_sql_files_follow_the_house_rules(monkeypatch):
    # sqlfluff reads the config files from the working folder down to each file
    monkeypatch.chdir(ROOT)
    linter = Linter(config=FluffConfig.from_path(str(ROOT)))
    records = linter.lint_paths((str(SQL),), processes=os.cpu_count()).as_records()
    linted = sorted(Path(record["filepath"]).resolve() for record in records)
    assert linted == sorted(SQL.rglob("*.sql")), "sqlfluff skipped a file"
    found = [
        f"{Path(record['filepath']).resolve().relative_to(ROOT)}:{v['start_line_no']}:"
        f"{v['code']} {v['description']}"
        for record in records
        for v in record["violations"]
    ]
    assert not found, "sqlfluff lint sql/ (file:line:rule):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("sql", "rule"),
    [
        ("SELECT 1 AS one\n", "CP01"),  # upper-case keywords
        ("select\n  1 as one\n", "LT02"),  # a 2-space indent
        (f"select 1 as one from t where {'x' * 55} = $billing_month\n", "LT05"),  # 101 chars
    ],
)
def test_the_rules_catch_what_they_are_for(sql, rule):
    # the check above cannot pass with the rules switched off or the config not found
    linter = Linter(config=FluffConfig.from_path(str(ROOT)))
    found = [v.rule_code() for v in linter.lint_string(sql).get_violations()]
    assert rule in found, found
