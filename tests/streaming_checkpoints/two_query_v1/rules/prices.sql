-- name: high
-- suppress: 1m
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES X.price AS p PATTERN (X) DEFINE X AS price > 100)