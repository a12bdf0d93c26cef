-- Brute force that worked: per user, five or more failed sign-ins in a row and then a successful one,
-- all within five minutes.
--   FAIL{5,} = the failures, OK = the success that ends the burst.
-- One output row per incident: the first failure, how many, from how many addresses, and the success.
-- Source of the idea: the "multiple failed logins followed by a success" detection of SIEM rule sets
-- (Sigma, Splunk security content) and OWASP's guidance on credential stuffing and brute force.
-- Run it: cep run patterns/login_burst.sql --input patterns/data/logins.csv --engine python
SELECT * FROM logins MATCH_RECOGNIZE (
  PARTITION BY user ORDER BY ts
  MEASURES FIRST(FAIL.ts) AS first_failure_ts, COUNT(FAIL.*) AS failures,
           COUNT(DISTINCT FAIL.ip) AS addresses, OK.ts AS success_ts, OK.ip AS success_ip
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (FAIL{5,} OK) WITHIN INTERVAL '5' MINUTE
  DEFINE FAIL AS status = 'fail', OK AS status = 'ok')
