-- Abandoned cart: per session, an add-to-cart not followed by a purchase within 30 minutes.
--   CART = the add-to-cart click, !BUY = 30 minutes of clicks none of which is a purchase (absence).
-- The alert fires when event time reaches the cart's time + 30 minutes with no purchase before it
-- (MATCH_STATUS() = 'ABSENCE'); a cart bought in time raises nothing. Other clicks in those 30
-- minutes belong to the match, so a second add-to-cart inside the window does not alert again.
-- Source of the idea: the e-commerce "abandoned cart" reminder; absence patterns as in Flink CEP's
-- notFollowedBy() and Esper's "every a -> (timer:interval(30 min) and not b)". Absence (!B) is a cep
-- extension of SQL:2016 (docs/semantics.md, "Event time").
-- Run it: cep run patterns/cart_abandoned.sql --input patterns/data/clickstream.csv --engine python
SELECT * FROM clicks MATCH_RECOGNIZE (
  PARTITION BY session_id ORDER BY ts
  MEASURES CART.ts AS cart_ts, CART.user_id AS user_id, COUNT(*) AS clicks, MATCH_STATUS() AS status
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (CART !BUY) WITHIN INTERVAL '30' MINUTE
  DEFINE CART AS page = 'add_to_cart', BUY AS page = 'purchase')
