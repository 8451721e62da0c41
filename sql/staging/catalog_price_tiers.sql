-- One row per price tier of the catalog (rates.yaml tiers): the queue or the QoS (the other
-- NULL) whose GPU time is priced at the rate in force × multiplier (multiplier_e4: the
-- multiplier in ten-thousandths, exact), validity as naive UTC midnights of the billing
-- timezone (open ends 1900 and 9999). Written as catalog_price_tiers_rows by
-- catalog_tables.py.
select queue, qos, multiplier, multiplier_e4, valid_from, valid_to
from catalog_price_tiers_rows
