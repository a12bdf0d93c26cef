-- Card testing: per card, three or more tiny charges (under 5.00, fraudsters checking that a stolen
-- card works) followed at once by a large one (200.00 or more), all within 10 minutes.
--   SMALL{3,} = the test charges, BIG = the charge that cashes in; any other charge in between breaks it.
-- One output row per attack: when it began, how many test charges and their total, the big charge.
-- Source of the idea: card-testing fraud as payment processors describe it (e.g. Stripe's and Visa's
-- merchant guidance on "card testing" attacks), a staple of CEP fraud demos (Esper, Flink CEP).
-- Run it: cep run patterns/card_testing.sql --input patterns/data/card_charges.csv --engine python
SELECT * FROM charges MATCH_RECOGNIZE (
  PARTITION BY card_id ORDER BY ts
  MEASURES FIRST(SMALL.ts) AS first_test_ts, COUNT(SMALL.*) AS tests, ROUND(SUM(SMALL.amount), 2) AS tested_total,
           BIG.ts AS big_ts, BIG.amount AS big_amount, BIG.merchant AS big_merchant
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (SMALL{3,} BIG) WITHIN INTERVAL '10' MINUTE
  DEFINE SMALL AS amount < 5, BIG AS amount >= 200)
