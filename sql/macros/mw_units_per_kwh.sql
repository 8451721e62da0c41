-- mw_units_per_kwh(): GPU units (1/420 GPU-ms) × milliwatts in one kilowatt-hour,
-- 1,512,000,000,000,000 = 420 units a GPU-ms × 3,600,000 ms an hour × 1,000,000 mW a kW:
-- energy summed as units × mW (job_sample_time.energy_mw_units) becomes kWh once, at the end.
-- Written out: the product of the INTEGER constants would overflow.
create or replace macro mw_units_per_kwh() as 1512000000000000
