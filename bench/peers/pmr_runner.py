"""Runs query (a) on pandas-match-recognize, inside bench/.venv-peers (never imported by cep).

    bench/.venv-peers/bin/python bench/peers/pmr_runner.py DATA.parquet ROWS REPEATS OUT.json

Writes {"seconds": [...], "rows": [[symbol, start_ts, bottom, end_ts, n], ...]} to OUT.json.
"""

from __future__ import annotations

import json
import sys
import time

import pandas as pd
from pandas_match_recognize import match_recognize

SQL = """
SELECT symbol, start_ts, bottom, end_ts, n
FROM ticks
MATCH_RECOGNIZE (
    PARTITION BY symbol
    ORDER BY ts
    MEASURES A.ts AS start_ts, LAST(B.price) AS bottom, LAST(C.ts) AS end_ts, COUNT(*) AS n
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B+ C+)
    DEFINE B AS price < PREV(price), C AS price > PREV(price)
)
"""
# Query (a), written the way this peer evaluates it: with FIRST(A.ts) in MEASURES and qualified
# B.price/C.price in DEFINE (our text of (a)), version 0.2.5 returns NULL for every measure but COUNT(*).
# For a one-row A and ONE ROW PER MATCH, A.ts = FIRST(A.ts), and B.price = price when defining B.


def main() -> int:
    path, rows, repeats, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    frame = pd.read_parquet(path).iloc[:rows].reset_index(drop=True)
    seconds = []
    result = None
    for _ in range(repeats):
        began = time.process_time()
        result = match_recognize(SQL, frame)
        seconds.append(time.process_time() - began)

    def plain(value, kind):
        if value is None or (not isinstance(value, str) and pd.isna(value)):
            return None
        return kind(value)

    records = [
        [
            str(r.symbol),
            plain(r.start_ts, lambda v: pd.Timestamp(v).isoformat()),
            plain(r.bottom, float),
            plain(r.end_ts, lambda v: pd.Timestamp(v).isoformat()),
            plain(r.n, int),
        ]
        for r in result.itertuples(index=False)
    ]
    with open(out, "w") as handle:
        json.dump({"seconds": seconds, "rows": records}, handle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
