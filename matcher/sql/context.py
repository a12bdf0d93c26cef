"""The evaluation context of compiled expressions (``Env``) and the views of a match they navigate.

A view answers the questions navigation asks about a (partial) match: which label a row has, the
n-th last/first row labelled with one of a set of variables, and all such rows. ``ThreadView``
answers them for a Pike VM thread (a chain of labels), ``MatchView`` for a finished match (a list).
Label sets are frozensets of label ids; ``None`` means every variable (the universal row variable).
"""

from __future__ import annotations

from itertools import compress
from typing import Any


class Env:
    """The mutable evaluation context, reused for every evaluation of one matcher (no per-row objects)."""

    __slots__ = ("cols", "base", "total", "row", "view", "match_number", "match_status", "label_names")

    def __init__(self, cols: dict[str, list], label_names: tuple[str, ...]) -> None:
        self.cols = cols  # column name -> buffered values; position p is at index p - base
        self.base = 0
        self.total = 0  # number of rows of the partition known so far
        self.row: int | None = None
        self.view: Any = None
        self.match_number: int | None = None
        self.match_status: str | None = None
        self.label_names = label_names

    def value(self, column: str, position: int | None):
        if position is None or position < 0 or position >= self.total:
            return None
        return self.cols[column][position - self.base]


class ThreadView:
    """A Pike VM thread's partial match: rows ``start..row``; ``chain`` labels rows row-1 down to start."""

    __slots__ = ("start", "row", "current", "chain", "labels_cache")

    def __init__(self) -> None:
        self.start = 0
        self.row = 0
        self.current = 0
        self.chain: tuple | None = None
        self.labels_cache: list[int] | None = None

    def reset(self, start: int, row: int, current: int, chain) -> None:
        self.start, self.row, self.current, self.chain, self.labels_cache = start, row, current, chain, None

    def relabel(self, label: int) -> None:
        """Change the tentative label of the current row (absence conditions test B's condition)."""
        self.current = label
        self.labels_cache = None

    def labels(self) -> list[int]:
        """Labels of rows start..row, oldest first (built once per evaluation, only when asked)."""
        if self.labels_cache is None:
            out = []
            node = self.chain
            while node is not None:
                out.append(node[0])
                node = node[1]
            out.reverse()
            out.append(self.current)
            self.labels_cache = out
        return self.labels_cache

    def label_at(self, position, final: bool = False):
        if position is None:
            return None
        if position == self.row:
            return self.current
        if not self.start <= position < self.row:
            return None
        node = self.chain
        for _ in range(self.row - 1 - position):
            node = node[1]
        return node[0]

    def last_in(self, labels, n: int, final: bool):
        if labels is None or self.current in labels:
            if n == 0:
                return self.row
            n -= 1
        position = self.row - 1
        node = self.chain
        while node is not None:
            if labels is None or node[0] in labels:
                if n == 0:
                    return position
                n -= 1
            node = node[1]
            position -= 1
        return None

    def first_in(self, labels, n: int, final: bool):
        for offset, label in enumerate(self.labels()):
            if labels is None or label in labels:
                if n == 0:
                    return self.start + offset
                n -= 1
        return None

    def positions_in(self, labels, final: bool) -> list[int]:
        start = self.start
        return [start + i for i, label in enumerate(self.labels()) if labels is None or label in labels]

    def values_in(self, values: list, base: int, labels, final: bool) -> list:
        """``values`` (a buffered column, row p at index p - base) at ``positions_in``."""
        return [values[p - base] for p in self.positions_in(labels, final)]


class MatchView:
    """A finished match: ``labels[i]`` is the label of row ``start + i``; ``row`` is the current output row.

    ``final_states``: the running DEFINE aggregates after the match's last row (running.py), given
    when ``row`` is that row; None otherwise.
    """

    __slots__ = ("start", "labels", "row", "final_states")

    def __init__(self, start: int, labels: list[int], row: int | None, final_states: tuple | None = None) -> None:
        self.start = start
        self.labels = labels
        self.row = row
        self.final_states = final_states

    def _upto(self, final: bool) -> int:
        if final or self.row is None:
            return len(self.labels)
        return self.row - self.start + 1

    def label_at(self, position, final: bool = False):
        """The label of a row of the match; RUNNING (not ``final``): None after the current row, which the
        match as seen from the current row does not hold yet (as DEFINE's ``NEXT(CLASSIFIER())``)."""
        if position is None:
            return None
        index = position - self.start
        return self.labels[index] if 0 <= index < self._upto(final) else None

    def last_in(self, labels, n: int, final: bool):
        upto = len(self.labels) if final or self.row is None else self.row - self.start + 1  # _upto, inlined
        for index in range(upto - 1, -1, -1):
            if labels is None or self.labels[index] in labels:
                if n == 0:
                    return self.start + index
                n -= 1
        return None

    def first_in(self, labels, n: int, final: bool):
        # RUNNING (SQL:2016): only the match's rows up to the current row exist, for FIRST as for LAST.
        # Trino's FIRST searches forward through the whole match; the standard does not (docs/semantics.md).
        for index in range(self._upto(final)):
            if labels is None or self.labels[index] in labels:
                if n == 0:
                    return self.start + index
                n -= 1
        return None

    def positions_in(self, labels, final: bool) -> list[int]:
        return [self.start + i for i in range(self._upto(final)) if labels is None or self.labels[i] in labels]

    def values_in(self, values: list, base: int, labels, final: bool) -> list:
        """``values`` (a buffered column, row p at index p - base) at ``positions_in``: a slice of the
        match's rows filtered by label, without a Python-level loop (an aggregate in MEASURES)."""
        upto = self._upto(final)
        begin = self.start - base
        rows = values[begin : begin + upto]
        if labels is None:
            return rows
        return list(compress(rows, map(labels.__contains__, self.labels[:upto])))
