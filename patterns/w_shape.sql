-- W-shape (double bottom): per symbol, a price that falls, rises, falls again and rises again.
--   A      = the tick the first fall starts from (any row),
--   DOWN1+ = the first fall, UP1+ = the rise to the middle peak,
--   DOWN2+ = the second fall, UP2+ = the final rise (each tick strictly below/above the one before).
-- One output row per W: where it started, both bottoms, the middle peak, where it ended, how many ticks.
-- Source of the idea: the W-shape example of Oracle's "SQL for Pattern Matching" guide (Data Warehousing
-- Guide, chapter 20), a "double bottom" in technical analysis.
-- Run it: cep run patterns/w_shape.sql --input patterns/data/ticks.csv --engine python
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, LAST(DOWN1.price) AS first_bottom, LAST(UP1.price) AS middle_peak,
           LAST(DOWN2.price) AS second_bottom, LAST(UP2.ts) AS end_ts, COUNT(*) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A DOWN1+ UP1+ DOWN2+ UP2+)
  DEFINE DOWN1 AS DOWN1.price < PREV(DOWN1.price), UP1 AS UP1.price > PREV(UP1.price),
         DOWN2 AS DOWN2.price < PREV(DOWN2.price), UP2 AS UP2.price > PREV(UP2.price))
