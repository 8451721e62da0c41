"""The departments of a billing month, for the department page and workbook.

Membership: a charge line belongs to the department it carries (issued lines keep the
department they were issued under); a tenant and its jobs belong to the department of the
tenant in `tenant_month`. A tenant's amount is the sum of the department's charge lines of that
tenant, so the page and the workbook tie out to the department's charge lines to the cent.
Without `quota_compliance` for the month, a tenant's quota flags are those of `tenant_month`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from pipelines.reports import queries

NO_DEPARTMENT = "(no department)"
QUOTA_FLAGS = ("breach", "idle_quota", "chronic_borrowing")


@dataclass(frozen=True)
class Department:
    """A department of the month: `name` as in the marts ('' when none), its file slug; or,
    with `name` None, every department at once (ORGANISATION, the organisation page)."""

    name: str | None
    slug: str

    @property
    def label(self) -> str:
        return ORGANISATION_LABEL if self.name is None else self.name or NO_DEPARTMENT


ORGANISATION_LABEL = "All departments"
ORGANISATION = Department(None, "")


def departments(con: duckdb.DuckDBPyConnection, billing_month: dt.date) -> list[Department]:
    """The departments of the month's tenants and charge lines, each with a unique slug."""
    names = [
        row.department for row in queries.fetch(con, "departments", billing_month=billing_month)
    ]
    slugs = department_slugs(names)
    return [Department(name, slugs[name]) for name in names]


def slugify(name: str) -> str:
    """A file name stem: ASCII letters and digits joined by '-', at most 60 characters."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")[:60].strip("-")
    return slug or "department"


def department_slugs(names: Sequence[str]) -> dict[str, str]:
    """Slug of each department name; names whose slugs collide get a hash of the name."""
    base = {name: slugify(name or "no-department") for name in names}
    taken: dict[str, int] = {}
    for slug in base.values():
        taken[slug] = taken.get(slug, 0) + 1
    return {
        name: slug
        if taken[slug] == 1
        else f"{slug}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"
        for name, slug in base.items()
    }


def department_tenants(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date, department: Department
) -> list[Any]:
    """The department's tenants (sql/reports/department_tenants.sql), largest amount first."""
    return queries.fetch(
        con, "department_tenants", billing_month=billing_month, department=department.name
    )


def department_quota(
    con: duckdb.DuckDBPyConnection, billing_month: dt.date, department: Department
) -> list[Any] | None:
    """The quota_compliance rows of the department's tenants; None when the warehouse has no
    quota_compliance for the month."""
    if not queries.has_month(con, "quota_compliance", billing_month):
        return None
    return queries.fetch(
        con, "department_quota", billing_month=billing_month, department=department.name
    )


def quota_flags(tenants: Sequence[Any], quota: Sequence[Any] | None) -> dict[str, list[str]]:
    """Each tenant's quota flags: `flag (pool)` from quota_compliance, in flag order then
    pool order; without it (`quota` None), the flags recorded in tenant_month."""
    if quota is None:
        return {
            t.tenant_id: [f.strip() for f in t.quota_flags.split(",") if f.strip()] for t in tenants
        }
    flags: dict[str, list[str]] = {}
    for flag in QUOTA_FLAGS:
        for q in quota:
            if getattr(q, flag):
                flags.setdefault(q.tenant_id, []).append(f"{flag} ({q.pool})")
    return flags
