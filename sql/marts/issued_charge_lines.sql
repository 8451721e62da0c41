-- The charge lines of each closed month exactly as issued (the columns of
-- computed_charge_lines, which `chargeback close` copies, and the time of the close). Written
-- out, not taken from computed_charge_lines: a month's run reads it (job_line_cents) before
-- computed_charge_lines exists on a new warehouse.
create table if not exists issued_charge_lines (
    billing_month date,
    tenant_id varchar,
    tenant_name varchar,
    department varchar,
    cost_center varchar,
    cluster varchar,
    gpu_model varchar,
    charge_category varchar,
    charge_class varchar,
    charge_type varchar,
    capacity_reservation_id varchar,
    charge_description varchar,
    gpu_hours double,
    gpu_units bigint,
    unit_price decimal(18, 6),
    charge_numerator hugeint,
    amount decimal(18, 2),
    currency varchar,
    issued_at timestamp
)
