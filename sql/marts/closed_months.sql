-- One row per closed billing month: its charges were issued and never change again.
create table if not exists closed_months (
    billing_month date primary key,
    closed_at timestamp not null,
    closed_by varchar not null,
    issued_lines bigint not null,
    issued_amount decimal(18, 2) not null
)
