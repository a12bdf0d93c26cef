"""A run whose condition is a running SUM or COUNT threshold, ended with cumulative sums.

``A+ B`` with ``DEFINE A AS SUM(A.volume) < 10000``: the run from a start goes on while the sum of its
rows so far (the row under test included) stays under the threshold. With addends that are integers
and never negative, that sum only grows along the run, so the rows where the condition holds are a
prefix, whose length is one ``searchsorted`` in the cumulative sums: no scan row by row. Integer
additions are exact in any order, so a difference of cumulative sums is the VM's left-to-right sum
(floats are not: a float SUM keeps the scan). ``COUNT(*)``, ``COUNT(A.*)`` and ``COUNT(A.x)`` thresholds
are the same with 0/1 addends.

The last item (a single row after the run) is then tested only at the run's candidate ends, from the
preferred one (the longest for a greedy run, the shortest for a reluctant one) until it holds: in the
usual case, once. Its condition reads the running aggregates as the scan would leave them at that end
(``Accumulator`` state, set from the cumulative sums).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cep.grammar import ast
from cep.matcher.vector import first_hit, kernels
from cep.matcher.vector.lane_frame import Slot

# The threshold must fit comfortably in 64 bits next to the sums (whose size Accumulator bounds).
_BOUND = 2**62
_MIRRORED = {">": "<", ">=": "<="}


@dataclass(frozen=True)
class Threshold:
    """The run's condition: running aggregate ``slot`` ``op`` (< or <=) ``limit``."""

    op: str
    slot: int
    limit: int


def threshold(condition: ast.Expr, run_label: int, label_of, column_of, slots: list[Slot]) -> Threshold | None:
    """The run's DEFINE as a threshold on a running SUM/COUNT of its own rows (or of all rows), or None."""
    if not isinstance(condition, ast.Binary):
        return None
    left, right, op = condition.left, condition.right, condition.op
    if isinstance(left, ast.Literal) and op in _MIRRORED:
        left, right, op = right, left, _MIRRORED[op]
    if op not in ("<", "<=") or not (
        isinstance(right, ast.Literal) and type(right.value) is int and abs(right.value) < _BOUND
    ):
        return None
    if not (
        isinstance(left, ast.Aggregate) and left.name in ("SUM", "COUNT") and not left.distinct and len(left.args) == 1
    ):
        return None
    arg = left.args[0]
    if not (isinstance(arg, ast.ColumnRef) or (isinstance(arg, ast.Star) and left.name == "COUNT")):
        return None
    try:
        label = None if arg.qualifier is None else label_of(arg.qualifier)
    except kernels.NotVectorizable:
        return None
    slot = Slot(left.name, label, column_of(arg) if isinstance(arg, ast.ColumnRef) else None)
    if label not in (None, run_label) or slot not in slots:
        return None
    return Threshold(op, slots.index(slot), right.value)


def end_runs(
    lanes_state, index: int, item, following, route: Threshold, lanes: np.ndarray, pos: np.ndarray, state, outcomes
) -> None:
    """Match the run item ``index`` and the single last item after it for ``lanes`` starting at ``pos``
    (``lanes_state``: the sequence engine's ``Lanes``); ``outcomes``: (MATCH, TIMEOUT) codes."""
    match_code, timeout_code = outcomes
    accs = lanes_state.acc
    for acc in accs:
        if acc.slot.name not in ("SUM", "COUNT") or (
            acc.column is not None and acc.column.kind not in ("int", "null") and acc.slot.name == "SUM"
        ):
            raise first_hit.NoRoute(f"a running {acc.slot.name} over a {acc.column.kind if acc.column else ''} column")
    begin, end = lanes_state.begin, lanes_state.end
    sums = [_cumulative(acc, begin, end) for acc in accs]
    running, present, has_nulls = sums[route.slot]
    if accs[route.slot].slot.name == "SUM" and (running is None or has_nulls or (np.diff(running) < 0).any()):
        raise first_hit.NoRoute("a running SUM with NULL or negative addends")
    label = item.label
    priors = [(acc.total[lanes] * (acc.count[lanes] > 0), acc.count[lanes].copy()) for acc in accs]
    threshold_acc = accs[route.slot]
    base = priors[route.slot][0] if threshold_acc.slot.name == "SUM" else priors[route.slot][1]
    if threshold_acc.slot.label is not None:  # the run's own rows only: nothing before it
        base = np.zeros(len(lanes), dtype=np.int64)
    cumulative = running if threshold_acc.slot.name == "SUM" else present
    target = route.limit - base + cumulative[pos]
    first_failing = np.searchsorted(cumulative, target, side="left" if route.op == "<" else "right")
    holding = np.maximum(first_failing - 1 - pos, 0)  # rows from pos on where the condition holds
    limit = lanes_state.limit[lanes]
    high = np.iinfo(np.int64).max if item.high is None else item.high
    reach = np.minimum(holding, high)
    at_limit = limit - pos <= reach
    last_end = np.minimum(reach, limit - pos - 1)
    step = -1 if item.greedy else 1
    at = last_end.copy() if item.greedy else np.full(len(lanes), item.low, dtype=np.int64)
    found = np.full(len(lanes), -1, dtype=np.int64)
    active = np.flatnonzero(last_end >= item.low)
    while len(active):
        lanes_state.budget -= len(active)
        if lanes_state.budget < 0:
            raise kernels.Unsupported("runs that stay open too long for a scan from every start (quadratic)")
        lane, start, taken = lanes[active], pos[active], at[active]
        lanes_state.item_count[index, lane] = taken
        for acc, (total, count), (sums_, present_, _) in zip(accs, priors, sums):
            if acc.slot.label not in (None, label):
                continue
            rows = present_[start + taken] - present_[start]
            acc.count[lane] = count[active] + rows
            if sums_ is not None:
                acc.total[lane] = total[active] + sums_[start + taken] - sums_[start]
        holds = lanes_state.holds(following.label, lane, start + taken)
        found[active[holds]] = taken[holds]
        going = active[~holds]
        at[going] += step
        active = going[(at[going] >= item.low) & (at[going] <= last_end[going])]
    done = found >= 0
    finished = lanes[done]
    lanes_state.item_count[index, finished] = found[done]
    lanes_state.item_begin[index + 1, finished] = pos[done] + found[done]
    lanes_state.item_count[index + 1, finished] = 1
    state[finished] = match_code
    lanes_state.reached[lanes[at_limit & (~done | item.greedy)]] = True
    timed = ~done & at_limit & lanes_state.expired[lanes]
    lanes_state.item_count[index, lanes[timed]] = np.maximum(limit - pos, 0)[timed]
    state[lanes[timed]] = timeout_code


def _cumulative(acc, begin: int, end: int):
    """(cumulative sums of the values with NULLs as 0, or None for a COUNT; cumulative counts of the
    non-NULL rows; whether there is a NULL) over the chunk's rows, each with a leading 0."""
    size = end - begin
    present = np.zeros(size + 1, dtype=np.int64)
    column = acc.column
    if column is None:
        present[1:] = np.arange(1, size + 1)
        return None, present, False
    if column.kind == "null":
        return None, present, True
    nulls = None if column.nulls is None else column.nulls[begin:end]
    np.cumsum(np.ones(size, dtype=np.int64) if nulls is None else ~nulls, out=present[1:])
    has_nulls = nulls is not None and bool(nulls.any())
    if acc.slot.name != "SUM":
        return None, present, has_nulls
    data = column.data[begin:end].astype(np.int64)
    sums = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.where(nulls, 0, data) if has_nulls else data, out=sums[1:])
    return sums, present, has_nulls
