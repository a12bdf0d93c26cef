-- Gaps in a sensor's readings: per sensor, a reading that comes 10 minutes or more after the one before.
--   GAP = a reading whose time minus the previous reading's time is at least 10 minutes (interval
--   arithmetic on timestamps: ts - PREV(ts) is an interval).
-- One output row per gap: when the sensor went quiet, when it came back, and for how long. Unlike
-- sensor_silent.sql this needs the next reading, so it suits reports on history rather than alerts.
-- Source of the idea: data-quality checks on time series (gap detection in historians and in
-- Timescale/KDB "gaps" queries), the batch counterpart of heartbeat monitoring.
-- Run it: cep run patterns/sensor_gap.sql --input patterns/data/sensor_readings.csv --engine python
SELECT * FROM readings MATCH_RECOGNIZE (
  PARTITION BY sensor ORDER BY ts
  MEASURES PREV(GAP.ts) AS quiet_from_ts, GAP.ts AS back_ts, GAP.ts - PREV(GAP.ts) AS silence
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (GAP)
  DEFINE GAP AS ts - PREV(ts) >= INTERVAL '10' MINUTE)
