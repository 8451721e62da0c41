-- expand_allocation_pct(): the allocation rate (% of capacity GPU-hours) from which a GPU
-- model is short of capacity: one condition of capacity_evidence's "expansion justified", and
-- the threshold demand_forecast says its trend crosses.
create or replace macro expand_allocation_pct() as 80.0
