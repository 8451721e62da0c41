-- util_milli_pct(util_pct): a utilisation percentage as an integer in thousandths of a percent
-- (rounded to the nearest). Utilisation-weighted time is summed in these integers: a sum of
-- doubles depends on the order its rows arrive in (thread scheduling), a sum of integers is
-- exact in any order.
create or replace macro util_milli_pct(util_pct) as (util_pct * 1000)::bigint
