"""Trends: the months in the warehouse side by side, and the demand forecast they support."""

from pipelines.defs.warehouse import Table, TableStep, sql_table

GROUP = "trends"

# every month's figures, rebuilt whole by each run (a restated month changes its trend)
month_trends = TableStep("month_trends", GROUP, [Table("month_trends", "marts", whole=True)])
demand_forecast = sql_table("demand_forecast", "marts", GROUP)

STEPS = [month_trends, demand_forecast]
