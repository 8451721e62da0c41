-- unix_ms(ts): the milliseconds from 1970 to ts, rounded half up as epoch_ms(ts) rounds them,
-- for any ts from 1970 on (every valid telemetry sample: day_samples.sql). The daily rollup
-- takes it 16 times a sample (covers, spacings, idle-run labels, silences), and epoch_ms costs
-- twice as much: 0.21 against 0.09 s for the covers of 20 M samples; a 10,000-GPU day went
-- 24.9-25.8 -> 23.8-23.9 s (benchmarks/rollup_day.py, two alternating pairs). The two are
-- equal on 40 M random timestamps of 1970-2099.
create or replace macro unix_ms(ts) as (epoch_us(ts) + 500) // 1000
