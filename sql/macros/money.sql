-- money(cents): whole cents as an exact DECIMAL(18, 2) amount.
create or replace macro money(cents) as
(cents::decimal(18, 0) * 0.01::decimal(18, 2))::decimal(18, 2)
