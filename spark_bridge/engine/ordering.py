"""The order a stream releases rows in when they tie on ORDER BY: a total order on any column's values.

``KeyedStream.release_order`` breaks ties by the values of the columns the matcher reads, compared with
``total_order_key``; ``canonical_order`` sorts a batch input the same way, so that ``q.run`` on it gives
the stream's output.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np

from cep.matcher.rows.outer import sort_key
from cep.spark_bridge.engine import state_codec as codec


def total_order_key(value: Any):
    """A sort key that orders any column's values (NULL first, NaN after numbers, arrays element-wise)."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, (int, float, Decimal)):
        if value != value:  # NaN
            return (3,)
        return (2, value)
    if isinstance(value, str):
        return (4, value)
    if isinstance(value, _dt.datetime):
        return (5, codec.datetime_to_micros(value))
    if isinstance(value, _dt.date):
        return (6, value.toordinal())
    if isinstance(value, bytes):
        return (7, value)
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        if isinstance(items, list):
            return (8, tuple(total_order_key(v) for v in items))
        return total_order_key(items)
    return (9, repr(value))


def canonical_order(rows: list[dict], plan, input_columns: Sequence[str] | None = None) -> list[dict]:
    """``rows`` sorted by the tie-break the streaming engine uses (stable otherwise).

    ``q.run(canonical_order(rows, q.plan))`` then orders ties exactly as streaming does, so both give
    the same output (``plan.partitions`` sorts stably by ORDER BY only, keeping input order for ties).
    """
    names = tuple(input_columns) if input_columns is not None else tuple(dict.fromkeys(n for r in rows for n in r))
    tiebreak = tuple(sorted(plan.machine(names).columns))
    return sorted(rows, key=lambda row: tuple(total_order_key(row.get(c)) for c in tiebreak))


def order_ranks(values: np.ndarray, descending: bool, nulls_first: bool | None) -> np.ndarray:
    """Ranks that order a column as an ORDER BY key orders it (``outer.sort_key``, NULLs and NaN placed as
    there; DESC: the ranks negated, ties keep their order as a stable reversed sort keeps them)."""
    keys = [sort_key(v, descending, nulls_first) for v in values.tolist()]
    ranks = np.zeros(len(keys), dtype=np.int64)
    rank, previous = -1, None
    for row in sorted(range(len(keys)), key=keys.__getitem__):  # values need not hash (arrays), only compare
        if rank < 0 or keys[row] != previous:
            rank, previous = rank + 1, keys[row]
        ranks[row] = rank
    return -ranks if descending else ranks


def total_order_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks that order a ``typed`` column as ``total_order_key`` orders its values."""
    if values.dtype.kind in "ib" or (values.dtype.kind == "f" and not np.isnan(values).any()):
        return values.astype(np.float64) if values.dtype.kind == "b" else values
    items = values.tolist()
    distinct = sorted(set(map(total_order_key, items)))
    rank = {k: i for i, k in enumerate(distinct)}
    return np.fromiter((rank[total_order_key(v)] for v in items), dtype=np.int64, count=len(items))
