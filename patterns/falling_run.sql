-- Falling runs that may share their turning points: per symbol, a top, at least two falling ticks, and
-- the first tick that rises again (TURN).
--   TOP = the tick the run falls from, DOWN{2,} = the falling ticks, TURN = the first tick up again.
-- AFTER MATCH SKIP TO LAST TURN resumes at the TURN row, so a TURN that is itself the top of the next
-- run (up one tick, then down again) starts the next match; SKIP PAST LAST ROW would lose that run.
-- Source of the idea: Oracle's first pattern-matching example ("AFTER MATCH SKIP TO LAST UP", Data
-- Warehousing Guide, chapter 20) and the SKIP TO rules of ISO/IEC TR 19075-5.
-- Run it: cep run patterns/falling_run.sql --input patterns/data/ticks.csv --engine python
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES TOP.ts AS top_ts, TOP.price AS top_price, LAST(DOWN.price) AS bottom_price,
           COUNT(DOWN.*) AS falls, TURN.ts AS turn_ts
  ONE ROW PER MATCH AFTER MATCH SKIP TO LAST TURN
  PATTERN (TOP DOWN{2,} TURN)
  DEFINE DOWN AS DOWN.price < PREV(DOWN.price), TURN AS TURN.price > PREV(TURN.price))
