-- The charge lines of each closed month exactly as issued (the shape of computed_charge_lines).
create table if not exists issued_charge_lines as
-- limit 0: the columns only, so no row order to fix
select *, null::timestamp as issued_at from computed_charge_lines limit 0  -- noqa: AM09
