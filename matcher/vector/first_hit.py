"""The first (or last) row of a window where ``row value OP start value`` holds, for every start at once.

A run that takes every row (``B*?`` with no DEFINE) followed by the pattern's last item, a single row
``C`` whose condition compares something of the current row with something fixed for the start
(``C.price < A.price - 0.10``: ``A`` is an earlier item, finished when the run begins), ends at the
first row of its window where that comparison holds (reluctant; the last one if greedy). Scanning the
window row by row costs its length per start. Here: a sparse table of range minima (``<``, ``<=``) or
maxima (``>``, ``>=``) over the row side, and a binary descent per start over blocks of 2^k rows, all
starts at once with numpy: O(n log w) for windows of w rows, whatever the rows hold.

Exact because nothing is computed but comparisons: both sides are the kernels' values (``kernels.py``,
the same as the full condition's), compared as floats only when that is exact (no NULL or non-finite
value among the rows, integers within 2**53). A batch where it is not takes the lockstep scan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cep.grammar import ast
from cep.matcher.vector import kernels

# Beyond this many integers, a float64 no longer holds every integer exactly.
_EXACT_FLOAT_INT = 2**53
# The comparison turned around when the start side is written on the left (``A.x > C.x``: ``C.x < A.x``).
_MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_HOLDS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


class NoRoute(Exception):
    """This batch's values do not allow the search: the caller scans row by row."""


@dataclass(frozen=True)
class Comparison:
    """A condition ``row OP start``: ``row`` reads only the current row (and constant PREV/NEXT) and
    ``start`` only items finished before the run."""

    op: str
    row: ast.Expr
    start: ast.Expr


def split(
    condition: ast.Expr, is_current: Callable[[ast.Identifier], bool], is_finished: Callable[[ast.Identifier], bool]
) -> Comparison | None:
    """The condition as ``row OP start``, or None when it is not one."""
    if not (isinstance(condition, ast.Binary) and condition.op in _HOLDS):
        return None
    left, right = condition.left, condition.right
    if _reads_row(left, is_current) and _reads_start(right, is_finished):
        return Comparison(condition.op, left, right)
    if _reads_row(right, is_current) and _reads_start(left, is_finished):
        return Comparison(_MIRRORED[condition.op], right, left)
    return None


def _reads_row(expr, is_current) -> bool:
    refs = [node for node in ast.walk(expr) if isinstance(node, ast.ColumnRef)]
    return (
        bool(refs)
        and all(ref.qualifier is None or is_current(ref.qualifier) for ref in refs)
        and all(
            not isinstance(node, (ast.Aggregate, ast.Classifier, ast.MatchNumber))
            and not (isinstance(node, ast.Navigation) and node.kind not in ("PREV", "NEXT"))
            for node in ast.walk(expr)
        )
    )


def _reads_start(expr, is_finished) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.ColumnRef):
            if node.qualifier is None or not is_finished(node.qualifier):
                return False
        elif isinstance(node, ast.Navigation):
            if node.kind not in ("FIRST", "LAST", "PREV", "NEXT"):
                return False
        elif not isinstance(node, (ast.Literal, ast.IntervalLiteral, ast.Binary, ast.Unary, ast.Identifier)):
            return False
        elif isinstance(node, ast.Binary) and node.op not in ("+", "-", "*"):
            return False
    return True


def sentinel(op: str) -> float:
    """A value for which ``value OP x`` holds for no finite x."""
    return np.inf if op in ("<", "<=") else -np.inf


def as_floats(value: kernels.Value, n: int, null: float, compared_with: str | None = None) -> np.ndarray:
    """The values as float64 (``null`` for NULL) when comparing those is comparing the values; NoRoute
    otherwise. Times (int64 ticks, ``kernels.TIME_KINDS``) compare only with times of their own kind
    (``compared_with``: the other side's kind); microseconds since 1970 stay below 2**53 until 2255."""
    numeric = value.kind in ("int", "float")
    if not numeric and value.kind not in kernels.TIME_KINDS:
        raise NoRoute(f"a {value.kind} comparison")
    if (
        compared_with is not None
        and (not numeric or compared_with not in ("int", "float"))
        and compared_with != value.kind
    ):
        raise NoRoute(f"a comparison of a {value.kind} with a {compared_with}")
    data = np.broadcast_to(np.asarray(value.data), (n,))
    if value.kind != "float":
        if data.size and int(np.abs(data).max()) > _EXACT_FLOAT_INT:
            raise NoRoute("integers beyond 2**53")
        out = data.astype(np.float64)
    else:
        if not np.isfinite(data if value.nulls is None else data[~np.broadcast_to(value.nulls, (n,))]).all():
            raise NoRoute("NaN or infinite values")
        out = np.array(data, dtype=np.float64)
    if value.nulls is not None:
        out[np.broadcast_to(value.nulls, (n,))] = null
    return out


class RangeTable:
    """Minima (or maxima) of ``values`` over blocks of 2^k rows, k = 0 .. ``levels`` - 1: level k at row i
    covers rows i .. i + 2^k - 1. Each level has one entry per row and one past the end; rows past the
    end hold the sentinel (no comparison holds there), so the descents read every lane at once, without
    picking out the lanes whose block fits first."""

    def __init__(self, values: np.ndarray, op: str, widest: int) -> None:
        self.op = op
        self.holds = _HOLDS[op]
        reduce = np.minimum if op in ("<", "<=") else np.maximum
        edge = sentinel(op)
        self.levels = [np.append(values, edge)]
        width = 1
        while width * 2 <= widest:
            below = self.levels[-1]
            shifted = np.full(len(below), edge)
            shifted[: len(below) - width] = below[width:]
            self.levels.append(reduce(below, shifted))
            width *= 2

    def first(self, lo: np.ndarray, hi: np.ndarray, start: np.ndarray) -> np.ndarray:
        """The first row in [lo, hi) where ``value OP start`` holds, or -1."""
        at = lo.copy()
        end = len(self.levels[0]) - 1  # a lane's window may begin past the rows (then it is empty)
        for k in range(len(self.levels) - 1, -1, -1):
            width = 1 << k
            free = ~self.holds(self.levels[k][np.minimum(at, end)], start)  # no row of [at, at + width) holds
            free &= at + width <= hi
            at += free * width
        return self._hits(at, at < hi, start)

    def last(self, lo: np.ndarray, hi: np.ndarray, start: np.ndarray) -> np.ndarray:
        """The last row in [lo, hi) where ``value OP start`` holds, or -1."""
        at = hi.copy()
        end = len(self.levels[0]) - 1
        for k in range(len(self.levels) - 1, -1, -1):
            width = 1 << k
            free = ~self.holds(self.levels[k][np.clip(at - width, 0, end)], start)  # the block [at - width, at)
            free &= at - width >= lo
            at -= free * width
        return self._hits(at - 1, at > lo, start)

    def _hits(self, rows: np.ndarray, candidate: np.ndarray, start: np.ndarray) -> np.ndarray:
        """``rows`` where they are candidates and the comparison holds there, else -1."""
        found = np.full(len(rows), -1, dtype=np.int64)
        which = np.flatnonzero(candidate)
        holds = self.holds(self.levels[0][rows[which]], start[which])
        found[which[holds]] = rows[which[holds]]
        return found


def search(
    values: np.ndarray, op: str, lo: np.ndarray, hi: np.ndarray, start: np.ndarray, bounds: np.ndarray, *, last: bool
) -> np.ndarray:
    """The first (or ``last``) row in [lo, hi) of each lane where ``value OP start`` holds, or -1; every
    window lies inside one partition (``bounds``: their offsets). The table covers only the rows some
    window reaches, from each partition's lowest ``lo`` to its end: a stream's carried starts search only
    the rows new since their last search, so the rows before are not built into the table again."""
    if not len(lo):
        return np.zeros(0, dtype=np.int64)
    which = np.flatnonzero(hi > lo)  # an empty window reads no row (its lo may be its partition's end)
    part = np.searchsorted(bounds, lo[which], side="right") - 1
    from_row = bounds[1:].copy()  # per partition, the first row a window reaches (its end: none)
    np.minimum.at(from_row, part, lo[which])
    sizes = bounds[1:] - from_row
    table_at = np.cumsum(sizes) - sizes
    shift = from_row - table_at  # a row's index in the table: the row - its partition's shift
    table_values = values[np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(shift, sizes)]
    # A window holds a hit only if its partition's rows in the table hold one for its start: the best
    # value of each partition's rows rules out most of a stream's carried starts in one step.
    best = np.full(len(sizes), sentinel(op))
    filled = np.flatnonzero(sizes)
    if len(filled):
        best[filled] = (np.minimum if op in ("<", "<=") else np.maximum).reduceat(table_values, table_at[filled])
    maybe = _HOLDS[op](best[part], start[which])
    which, part = which[maybe], part[maybe]
    found = np.full(len(lo), -1, dtype=np.int64)
    if len(which):
        lane_shift = shift[part]
        table = RangeTable(table_values, op, max(int((hi[which] - lo[which]).max()), 1))
        at = (table.last if last else table.first)(lo[which] - lane_shift, hi[which] - lane_shift, start[which])
        found[which] = np.where(at >= 0, at + lane_shift, -1)
    return found
