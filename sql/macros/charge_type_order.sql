-- charge_type_order(charge_type): where a line of that charge type sorts among a tenant's
-- lines of one pool: usage, reserved_unused, idle_share, platform, credit.
create or replace macro charge_type_order(charge_type) as
list_position(['usage', 'reserved_unused', 'idle_share', 'platform', 'credit'], charge_type)
