"""An independent, plain-Python evaluation of patterns/v_shape.sql, written from the definition only.

It shares no code with cep: no parser, no compiled program, no VM. It is the oracle that the engine's
pure-Python run and its Spark run are both compared against (tests/test_sample_data.py,
tests/test_vshape_parity.py).

The query, in words: per symbol, rows ordered by ts, find ``A B+ C+`` where A is any row, B a row whose
price is strictly below the previous row's, C a row whose price is strictly above the previous row's;
quantifiers greedy; after a match, resume at the row after its last row; a start row with no match
moves on by one. Output per match: symbol, FIRST(A.ts), LAST(B.price), LAST(C.ts), COUNT(*).

Why a simple scan is exact here: from a start row i, greedy B+ takes the maximal falling run
i+1..j-1. Giving a B row back cannot help C: the row after a shorter B run is itself falling, so it is
not rising. Hence a match exists at i exactly when the falling run is non-empty and the row right after
it (j) rises; C+ is then the maximal rising run j..k-1 (it is the last element, so greedy means longest).
A NULL price makes both conditions false (a DEFINE that is NULL is false).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any


def _falls(cur: Any, prev: Any) -> bool:
    return cur is not None and prev is not None and cur < prev


def _rises(cur: Any, prev: Any) -> bool:
    return cur is not None and prev is not None and cur > prev


def vshape_matches(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Matches of the V-shape query over ``rows`` (dicts with symbol, ts, price), sorted by (symbol, start_ts)."""
    by_symbol: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_symbol[row["symbol"]].append(row)

    out: list[dict[str, Any]] = []
    for symbol in sorted(by_symbol):
        series = sorted(by_symbol[symbol], key=lambda r: r["ts"])
        price = [r["price"] for r in series]
        n = len(series)
        i = 0
        while i < n:
            j = i + 1
            while j < n and _falls(price[j], price[j - 1]):
                j += 1
            if j == i + 1:  # no B row
                i += 1
                continue
            k = j
            while k < n and _rises(price[k], price[k - 1]):
                k += 1
            if k == j:  # no C row
                i += 1
                continue
            out.append(
                {
                    "symbol": symbol,
                    "start_ts": series[i]["ts"],
                    "bottom": price[j - 1],
                    "end_ts": series[k - 1]["ts"],
                    "n": k - i,
                }
            )
            i = k  # AFTER MATCH SKIP PAST LAST ROW
    return out


def normalize(rows: Iterable[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """V-shape output rows (from cep, Spark or the reference) as comparable tuples, sorted.

    Keys are compared case-insensitively; timestamps become ``datetime`` (pandas Timestamps and numpy
    datetime64 included), numbers become float/int, so equal matches compare equal whatever produced them.
    """
    out = []
    for row in rows:
        lowered = {str(k).lower(): v for k, v in dict(row).items()}
        out.append(
            (
                lowered["symbol"] if "symbol" in lowered else None,
                _as_datetime(lowered["start_ts"]),
                None if _missing(lowered["bottom"]) else float(lowered["bottom"]),
                _as_datetime(lowered["end_ts"]),
                int(lowered["n"]),
            )
        )
    return sorted(out, key=lambda t: (str(t[0]), t[1]))


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _as_datetime(value: Any) -> Any:
    if value is None:
        return None
    if hasattr(value, "to_pydatetime"):  # pandas Timestamp
        return value.to_pydatetime()
    if type(value).__name__ == "datetime64":  # numpy scalar
        import pandas as pd

        return pd.Timestamp(value).to_pydatetime()
    return value
