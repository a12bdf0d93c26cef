-- Checkout funnel: per web session, a product view followed by add-to-cart, checkout and purchase, in
-- that order, with any other clicks in between, all within 30 minutes of the view.
--   VIEW, CART, CHECKOUT, PAID = the funnel steps; OTHER*? = detours (reluctant: each step is taken at
--   its first occurrence after the step before).
-- One output row per completed funnel, with the time of each step and how many detour clicks.
-- Source of the idea: conversion funnels of web analytics (Google Analytics funnel reports), and the
-- clickstream/sessionisation examples of Oracle's and Trino's MATCH_RECOGNIZE documentation.
-- Run it: cep run patterns/checkout_funnel.sql --input patterns/data/clickstream.csv --engine python
SELECT * FROM clicks MATCH_RECOGNIZE (
  PARTITION BY session_id ORDER BY ts
  MEASURES VIEW.ts AS view_ts, CART.ts AS cart_ts, CHECKOUT.ts AS checkout_ts, PAID.ts AS paid_ts,
           COUNT(OTHER.*) AS detours
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (VIEW OTHER*? CART OTHER*? CHECKOUT OTHER*? PAID) WITHIN INTERVAL '30' MINUTE
  DEFINE VIEW AS page = 'view', CART AS page = 'add_to_cart', CHECKOUT AS page = 'checkout',
         PAID AS page = 'purchase')
