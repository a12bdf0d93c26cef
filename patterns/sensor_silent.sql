-- Sensor silent: per sensor, a reading followed by no reading at all for 10 minutes.
--   LAST_SEEN = any reading, !READING = no further reading (READING has no DEFINE: every row is one, so
--   the next reading ends the candidate, and only a reading followed by 10 quiet minutes completes).
-- The alert (MATCH_STATUS() = 'ABSENCE') fires as soon as event time reaches the last reading + 10
-- minutes, while the sensor is still silent, and also for a sensor that never comes back; compare
-- sensor_gap.sql, which reports a gap only once the next reading arrives.
-- Source of the idea: heartbeat / dead-man's-switch monitoring; "detect the absence of events" in Azure
-- Stream Analytics and Esper's "not" pattern with timer:interval.
-- Run it: cep run patterns/sensor_silent.sql --input patterns/data/sensor_readings.csv --engine python
SELECT * FROM readings MATCH_RECOGNIZE (
  PARTITION BY sensor ORDER BY ts
  MEASURES LAST_SEEN.ts AS last_seen_ts, LAST_SEEN.temp AS last_temp, MATCH_STATUS() AS status
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (LAST_SEEN !READING) WITHIN INTERVAL '10' MINUTE)
