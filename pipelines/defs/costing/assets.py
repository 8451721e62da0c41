"""Costing: priced job time, the charge lines and the per-tenant month."""

from pipelines.defs.attribution.assets import job_gpu_hours, job_time_buckets
from pipelines.defs.monthly import monthly_sql_asset

GROUP = "costing"

job_gpu_charges = monthly_sql_asset(
    "job_gpu_charges", "facts/job_gpu_charges", [job_gpu_hours], GROUP
)
charge_lines = monthly_sql_asset("charge_lines", "marts/charge_lines", [job_gpu_charges], GROUP)
job_usage = monthly_sql_asset(
    "job_usage", "marts/job_usage", [job_time_buckets, job_gpu_charges], GROUP
)
tenant_month = monthly_sql_asset(
    "tenant_month", "marts/tenant_month", [job_usage, charge_lines], GROUP
)
