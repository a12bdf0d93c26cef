-- Overheating: per sensor, five or more readings in a row each warmer than the one before.
--   UP{5,} = the rising readings (the first is compared with the reading before the match).
-- One output row per run: when it began and ended, how many readings, and the total rise measured from
-- the reading before the run.
-- Source of the idea: the rack-temperature monitoring example that introduced Flink CEP ("Introducing
-- Complex Event Processing with Apache Flink", 2016), and trend alarms of industrial SCADA systems.
-- Run it: cep run patterns/temperature_rising.sql --input patterns/data/sensor_readings.csv --engine python
SELECT * FROM readings MATCH_RECOGNIZE (
  PARTITION BY sensor ORDER BY ts
  MEASURES FIRST(UP.ts) AS from_ts, LAST(UP.ts) AS to_ts, COUNT(UP.*) AS readings,
           ROUND(LAST(UP.temp) - PREV(FIRST(UP.temp)), 1) AS rise
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (UP{5,})
  DEFINE UP AS temp > PREV(temp))
