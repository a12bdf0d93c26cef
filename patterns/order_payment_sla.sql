-- Payment SLA: per order, was it paid within an hour of being created?
--   CREATED = the order, OTHER*? = any events in between (reminders), PAID = the first payment.
-- ONE ROW PER MATCH SHOW TIMEOUT MATCHES reports both outcomes: MATCHED (paid in time, with paid_ts)
-- and TIMEOUT (the hour passed without payment: paid_ts is NULL). Orders whose hour has not passed by
-- the end of the data are still pending and produce no row yet.
-- Source of the idea: the order-payment timeout, the canonical example of timed-out partial matches in
-- Flink CEP (PatternTimeoutFunction / within()) and of Esper's timer:within.
-- Run it: cep run patterns/order_payment_sla.sql --input patterns/data/orders.csv --engine python
SELECT * FROM orders MATCH_RECOGNIZE (
  PARTITION BY order_id ORDER BY ts
  MEASURES CREATED.ts AS created_ts, PAID.ts AS paid_ts, MATCH_STATUS() AS status
  ONE ROW PER MATCH SHOW TIMEOUT MATCHES AFTER MATCH SKIP PAST LAST ROW
  PATTERN (CREATED OTHER*? PAID) WITHIN INTERVAL '1' HOUR
  DEFINE CREATED AS event = 'created', PAID AS event = 'paid')
