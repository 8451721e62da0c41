-- cents_half_up(numerator): a charge numerator (GPU units × price in millionths) as whole cents,
-- rounded half up: numerator_per_cent() is 1,512,000,000 units per GPU-hour × 10,000 millionths
-- per cent.
create or replace macro cents_half_up(numerator) as
(numerator + numerator_per_cent() // 2) // numerator_per_cent()
