-- Average-speed check on a toll road: per plate, booths 1, 2 and 3 passed in that order (no other
-- passage in between) in under 12 minutes. The booths are 10 km apart, so 20 km in under 12 minutes is
-- an average above 100 km/h.
--   B1, B2, B3 = the passages at booth 1, 2 and 3.
-- One output row per speeding trip: when the car passed booth 1 and booth 3 and how long it took.
-- Source of the idea: the TollApp sample of Azure Stream Analytics (toll-booth entry/exit streams) and
-- the Linear Road stream benchmark; section (average speed) control as in several European countries.
-- Run it: cep run patterns/toll_speeding.sql --input patterns/data/tolls.csv --engine python
SELECT * FROM passages MATCH_RECOGNIZE (
  PARTITION BY plate ORDER BY ts
  MEASURES B1.ts AS booth1_ts, B3.ts AS booth3_ts, B3.ts - B1.ts AS took
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (B1 B2 B3) WITHIN INTERVAL '12' MINUTE
  DEFINE B1 AS booth = 1, B2 AS booth = 2, B3 AS booth = 3)
