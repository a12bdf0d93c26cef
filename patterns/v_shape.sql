-- V-shape: per symbol, a price that falls for one or more ticks and then rises for one or more ticks.
--   A  = the tick the fall starts from (any row),
--   B+ = the falling ticks (each strictly below the tick before it),
--   C+ = the rising ticks (each strictly above the tick before it).
-- One output row per match: where it started, the bottom price, where it ended, and how many ticks.
-- Source of the idea: the classic "V shape" stock-ticker example of SQL:2016 row pattern recognition
-- (ISO/IEC TR 19075-5; also the first example in Oracle's, Flink's and Trino's MATCH_RECOGNIZE docs).
-- Run it: cep run patterns/v_shape.sql --input patterns/data/ticks.csv
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, LAST(B.price) AS bottom, LAST(C.ts) AS end_ts, COUNT(*) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))
