-- One row per tenant and month of the catalog's budgets (budgets.yaml; month YYYY-MM), in
-- the billing currency. Written as catalog_budgets_rows by catalog_tables.py.
select tenant_id, month, amount
from catalog_budgets_rows
