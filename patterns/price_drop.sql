-- Crash alert: per symbol, a price at least 10% below an earlier price less than an hour before it.
--   A  = the reference tick, B* = the ticks in between (still above 90% of A),
--   C  = the first tick at or below 90% of A's price, less than an hour after A (WITHIN).
-- One output row per alert; matching resumes after C, so one crash raises one alert.
-- Source of the idea: the "time constraint" example of Flink's MATCH_RECOGNIZE documentation (a price
-- drop within an interval), a common trading-desk alert.
-- Run it: cep run patterns/price_drop.sql --input patterns/data/crash_ticks.csv --engine python
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES A.ts AS from_ts, A.price AS from_price, C.ts AS to_ts, C.price AS to_price
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B* C) WITHIN INTERVAL '1' HOUR
  DEFINE B AS B.price > A.price * 0.9, C AS C.price <= A.price * 0.9)
