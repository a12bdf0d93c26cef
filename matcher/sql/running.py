"""Running aggregates in DEFINE, carried with each thread's history instead of recomputed.

``SUM(A.volume) < 10000`` in DEFINE means: the sum over the rows labelled A so far, the row under test
included when it is tested as A. Folding that over the whole partial match at every evaluation costs
the match's length per row, so long matches cost quadratic time. Instead, each node of a thread's
label chain (``(label, older, states)``, see vm.py) carries the state of every running aggregate
after its row: evaluating the aggregate is one fold step over the row under test.

The state after a row is a pure function of the labels and column values of the rows before it, so it
adds nothing to the thread-equivalence key (the ``("all", labels)`` read already compares those rows)
and nothing to the serialized state: ``from_state`` replays it over the buffered rows.

The position of the last row labelled in a set (``LAST_ROW``) is carried the same way, for
``B.price`` in another variable's DEFINE, the positions of the last few (``LAST_ROWS``), for
``LAST(B.price, 1)``, and the position of the first (``FIRST_ROW``), for ``FIRST(A.price)``. Only plain
folds qualify (``incremental``): SUM, COUNT, AVG, MIN, MAX without
DISTINCT or a count argument, over an argument that reads only columns of the row (no CLASSIFIER,
MATCH_NUMBER). Each fold below makes exactly the operations of ``values.aggregate`` in the same order,
so results are equal bit for bit. A fold step that raises (say SUM over strings) leaves the state
``BROKEN``; evaluations that read it fall back to the full fold, which raises the same error at the
same moment as without this.

The states after a match's last row are also what a ONE ROW PER MATCH measure reads for an aggregate
that DEFINE carries (``ExpressionCompiler._final_state``), instead of folding the match again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from cep.grammar import ast
from cep.matcher.sql import values

# From Python 3.12, sum() over floats compensates rounding, so a left-to-right fold no longer equals
# values.aggregate's SUM and AVG there: those stay full folds on 3.12+.
FOLDS = ("SUM", "COUNT", "AVG", "MIN", "MAX") if sys.version_info < (3, 12) else ("COUNT", "MIN", "MAX")
_ROW_DEPENDENT = (ast.Classifier, ast.MatchNumber, ast.MatchStatus, ast.Navigation, ast.Aggregate)


class _Broken:
    """A fold step raised; the full fold must run (and raise) when the value is needed."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "BROKEN"


BROKEN = _Broken()


def incremental(name: str, args: list, distinct: bool, extra: tuple) -> bool:
    """Can this DEFINE aggregate be carried as a running state? (See the module docstring.)"""
    if name not in FOLDS or distinct or extra or len(args) != 1:
        return False
    return not any(isinstance(node, _ROW_DEPENDENT) for node in ast.walk(args[0]))


def _sum_step(state, value):
    if value is None:
        return state
    if state is None:
        return value
    if type(state) in _PLAIN and type(value) in _PLAIN:
        return state + value  # what sum() does in C for plain numbers, left to right
    return values.add(state, value)


def _count_step(state, value):
    return state if value is None else state + 1


def _avg_step(state, value):
    """(float sum, count, exact DECIMAL sum or None, largest scale): AVG of DECIMALs (and ints) is a
    DECIMAL, of anything else a float, as ``values.aggregate`` computes it."""
    if value is None:
        return state
    exact = type(value) in (Decimal, int)
    if state is None:  # sum() starts from 0; 0 + x == 0.0 + x for every float x
        return (0.0 + float(value), 1, value if exact else None, values.decimal_scale(value), type(value) is Decimal)
    total, count, decimal_total, scale, any_decimal = state
    decimal_total = values.DECIMAL_CONTEXT.add(decimal_total, value) if exact and decimal_total is not None else None
    return (
        total + float(value),
        count + 1,
        decimal_total,
        max(scale, values.decimal_scale(value)),
        any_decimal or type(value) is Decimal,
    )


def _avg_result(state):
    if state is None:
        return None
    total, count, decimal_total, scale, any_decimal = state
    if any_decimal and decimal_total is not None:
        return values.decimal_average(decimal_total, count, scale)
    return float(total) / count


def _min_step(state, value):
    if value is None:
        return state
    return value if state is None or values.less(value, state) else state  # min() keeps the first of equals


def _max_step(state, value):
    if value is None:
        return state
    return value if state is None or values.less(state, value) else state


def _row_position(env, position: int) -> int:
    return position


def _first_step(state, position):
    return position if state is None else state


_PLAIN = (int, float)
# LAST_ROW is not SQL: it carries the position of the last row labelled in a set, which `B.price` in
# the DEFINE of another variable reads (the walk back to the last B costs the match's length).
LAST_ROW = "LAST_ROW"
# LAST_ROWS carries the positions of the last ``keep`` such rows, newest first (a tuple), for
# `LAST(B.price, n)` with n < keep: the walk back over the history was most of such a condition's cost.
LAST_ROWS = "LAST_ROWS"
# FIRST_ROW carries the position of the first row labelled in a set, for `FIRST(A.price)` in DEFINE: a fold
# that keeps its first value (the walk to the history's oldest row cost the match's length each time).
FIRST_ROW = "FIRST_ROW"
_POSITIONS = (LAST_ROW, LAST_ROWS)  # carried positions: ``advance`` steps them itself
_STEPS = {
    "SUM": _sum_step,
    "COUNT": _count_step,
    "AVG": _avg_step,
    "MIN": _min_step,
    "MAX": _max_step,
    FIRST_ROW: _first_step,
}
_INITIAL = {
    "SUM": None,
    "COUNT": 0,
    "AVG": None,
    "MIN": None,
    "MAX": None,
    LAST_ROW: None,
    LAST_ROWS: (),
    FIRST_ROW: None,
}
_RESULTS = {"AVG": _avg_result}


@dataclass(frozen=True)
class RunningAggregate:
    """One aggregate of a DEFINE condition: ``name`` over ``argument`` of the rows labelled in ``labels``.

    ``argument(env, position)`` reads the row; None for COUNT(*) (every row counts); ``labels`` None
    means every row of the match. ``column`` names the buffered column when the argument is a plain
    column reference: the fold then indexes the row itself instead of calling ``argument``.
    """

    name: str
    labels: frozenset | None
    argument: Callable | None
    column: str | None = None
    keep: int = 0  # LAST_ROWS only: how many positions (LAST_ROW's state is one position, not a tuple)

    @property
    def initial(self) -> Any:
        return _INITIAL[self.name]

    @property
    def step(self) -> Callable:
        return _STEPS[self.name]

    @property
    def result(self) -> Callable | None:
        """state -> the aggregate's value; None when the state is the value."""
        return result_of(self.name)


def result_of(name: str) -> Callable | None:
    """The function from a fold's state to the aggregate's value; None when the state is the value."""
    return _RESULTS.get(name)


def last_row(labels: frozenset) -> RunningAggregate:
    """The running position of the last row labelled in ``labels`` (None before the first)."""
    return RunningAggregate(LAST_ROW, labels, _row_position)


def first_row(labels: frozenset) -> RunningAggregate:
    """The position of the first row labelled in ``labels`` (None before it)."""
    return RunningAggregate(FIRST_ROW, labels, _row_position)


def last_rows(labels: frozenset, keep: int) -> RunningAggregate:
    """The positions of the last ``keep`` rows labelled in ``labels``, newest first (fewer before that)."""
    return RunningAggregate(LAST_ROWS, labels, _row_position, keep=keep)


class RunningAggregates:
    """The running aggregates of a query's DEFINE conditions, each with its slot in a chain node's states."""

    def __init__(self) -> None:
        self.items: list[RunningAggregate] = []
        self._slots: dict[tuple, int] = {}

    def slot(self, aggregate: RunningAggregate, same_as: tuple | None) -> int:
        """The slot of ``aggregate``; ``same_as`` (a hashable description) shares one slot between equal ones."""
        if same_as is not None and same_as in self._slots:
            return self._slots[same_as]
        self.items.append(aggregate)
        index = len(self.items) - 1
        if same_as is not None:
            self._slots[same_as] = index
        return index

    def find(self, same_as: tuple) -> int | None:
        """The slot of an aggregate already carried (``slot``'s ``same_as``), or None."""
        return self._slots.get(same_as)

    def initial(self) -> tuple:
        return tuple(a.initial for a in self.items)

    def advancer(self, label_count: int) -> Callable | None:
        """A function (states, env, position, label) -> the states after that row; None if no aggregate.

        Labels are 0..label_count-1. A row whose label no aggregate ranges over keeps the same states
        object: most rows of most patterns update one aggregate or none.
        """
        if not self.items:
            return None
        initial = self.initial()
        updates = []
        for label in range(label_count):
            ranging = [(index, a) for index, a in enumerate(self.items) if a.labels is None or label in a.labels]
            marks = tuple((index, a.keep) for index, a in ranging if a.name in _POSITIONS)
            folds = tuple((index, a.step, a.column, a.argument) for index, a in ranging if a.name not in _POSITIONS)
            updates.append((marks, folds) if marks or folds else None)
        updates = tuple(updates)

        def advance(states, env, position: int, label: int) -> tuple:
            if states is None:
                states = initial
            changes = updates[label]
            if changes is None:
                return states
            marks, folds = changes
            out = list(states)
            for index, keep in marks:  # LAST_ROW (keep 0): the position; LAST_ROWS: the newest `keep`
                out[index] = (position,) + out[index][: keep - 1] if keep else position
            for index, step, column, argument in folds:
                state = out[index]
                if state is not BROKEN:
                    try:
                        if column is not None:  # a row of the match is buffered: index it
                            value = env.cols[column][position - env.base]
                        else:
                            value = 1 if argument is None else argument(env, position)
                        out[index] = step(state, value)
                    except Exception:  # noqa: BLE001 - the full fold re-raises it when the value is read
                        out[index] = BROKEN
            return tuple(out)

        return advance
