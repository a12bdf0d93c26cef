"""AFTER MATCH SKIP, once for every engine: where the search goes on after a match, and which matches a
partition's starts give.

The rule (``SkipRule``) says where the next search starts after a match: past its last row, at the row
after its first, or at the first or last row of a variable. The Pike VM finds one match at a time and
asks ``SkipRule.after`` for each; the column-wise engines know, for every start row at once, whether a
match starts there and how many rows each item of the pattern takes, and ask ``SkipRule.after_each``
for all of them in one numpy pass.

The walk (``walk``) then picks the starts that count, as the VM's search does: from the first start, a
match is output and the search goes on where the rule says; a TIMEOUT row (SHOW TIMEOUT MATCHES) is
output, and the search goes on at the next row (it is no match, so nothing is skipped); a start with no
match moves the search on by one row; a start the engine cannot decide (``UNDECIDED``: an ambiguous
start, a skip that fails there, a start waiting for rows a stream has not seen yet) stops the walk of
its segment (a partition, or a stream's session piece), which its caller then hands to the VM or
carries to the next call. The next start that counts at or after a row is one reversed running minimum
over the rows, so the walk takes one Python step per start it outputs or stops at, not one per row.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from cep.grammar import ast

# What an engine knows of the match at a start row: the walk's input, one code per row.
FAIL = 0  # no match starts here: the search moves on by one row
MATCH = 1  # a match starts here: it is output, and the search goes on where the skip rule says
TIMEOUT = 2  # a partial match that WITHIN expired (SHOW TIMEOUT MATCHES): output, and no skip
UNDECIDED = 3  # the engine cannot say here: the walk of this start's segment stops at it

PAST_LAST_ROW = "PAST_LAST_ROW"
TO_NEXT_ROW = "TO_NEXT_ROW"
TO_FIRST = "TO_FIRST"
TO_LAST = "TO_LAST"


class SkipFailed(Exception):
    """SKIP TO a variable that has no row in the match, or whose row is the match's first (the standard
    makes both an error: the search would not move on)."""


@dataclass(frozen=True)
class SkipRule:
    """AFTER MATCH SKIP of one query: ``mode``, and for TO FIRST/LAST the labels of the target variable
    (a subset: the labels of its variables) and its name for the error message."""

    mode: str = PAST_LAST_ROW
    target_labels: frozenset[int] = frozenset()
    target_name: str = ""

    @staticmethod
    def of(after_match: ast.SkipTo | None, label_sets: dict[str, frozenset[int]]) -> SkipRule:
        """The rule of a query's AFTER MATCH SKIP clause (None: the default, PAST LAST ROW);
        ``label_sets`` maps a variable or subset name (``Identifier.key``) to its label ids."""
        if after_match is None:
            return SkipRule()
        if after_match.mode in (PAST_LAST_ROW, TO_NEXT_ROW):
            return SkipRule(after_match.mode)
        target = after_match.variable
        return SkipRule(after_match.mode, label_sets.get(target.key, frozenset()), target.name)

    def after(self, start: int, end: int, labels) -> int:
        """The row the search goes on at after the match of rows ``start..end`` (``end < start``: an empty
        match) whose rows are labelled ``labels``; raises ``SkipFailed`` where the standard says so."""
        if end < start:
            return start + 1  # an empty match moves on by one row whatever the skip mode
        if self.mode == PAST_LAST_ROW:
            return end + 1
        if self.mode == TO_NEXT_ROW:
            return start + 1
        offsets = [i for i, label in enumerate(labels) if label in self.target_labels]
        if not offsets:
            raise SkipFailed(f"pattern variable '{self.target_name}' is not present in the match")
        position = start + (offsets[0] if self.mode == TO_FIRST else offsets[-1])
        if position == start:
            raise SkipFailed(f"cannot skip to the first row of the match ('{self.target_name}' is its first row)")
        return position

    def after_each(
        self, starts: np.ndarray, item_rows: np.ndarray, item_labels: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``after`` for a match at each of ``starts`` at once, for a pattern that is a sequence of items
        (item i labels all its rows ``item_labels[i]``, and takes ``item_rows[i, j]`` rows in match j):
        (the row the search goes on at, whether the skip fails there; where it fails, the row is not one
        to go on at: the engine hands such a match to ``PartitionOutput``, which raises the error)."""
        count = len(starts)
        if self.mode == PAST_LAST_ROW:
            size = item_rows.sum(axis=0) if len(item_rows) else 0
            return starts + np.maximum(size, 1), np.zeros(count, dtype=bool)
        if self.mode == TO_NEXT_ROW:
            return starts + 1, np.zeros(count, dtype=bool)
        targets = [index for index, label in enumerate(item_labels) if label in self.target_labels]
        if not targets:  # the variable is in no item: every match fails but an empty one
            position, missing = starts + 1, np.ones(count, dtype=bool)
        else:
            first = targets[0]
            begin = starts + item_rows[:first].sum(axis=0) if first else starts
            position, missing = None, None
            for index in range(first, targets[-1] + 1):  # one pass for the usual single target
                rows = item_rows[index]
                if index in targets:
                    row = begin if self.mode == TO_FIRST else begin + rows - 1
                    if position is None:
                        position, missing = row, rows == 0
                    else:  # a subset over several items: TO FIRST keeps the first row found, TO LAST the last
                        replace = (rows > 0) & missing if self.mode == TO_FIRST else rows > 0
                        position, missing = np.where(replace, row, position), missing & (rows == 0)
                if index < targets[-1]:
                    begin = begin + rows
        failed = missing | (position == starts)
        if missing.any():
            empty = missing & ~item_rows.any(axis=0) if len(item_rows) else missing
            if empty.any():  # an empty match moves on by one row whatever the mode
                position = np.where(empty, starts + 1, position)
                failed &= ~empty
        return position, failed

    def after_matches(
        self, outcome: np.ndarray, item_rows: np.ndarray, item_labels: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``after_each`` for the rows whose ``outcome`` is MATCH (``item_rows`` for every row), as two arrays
        over all rows for ``walk`` (read at MATCH rows only): SKIP TO a variable is computed for the matches
        alone, which are fewer than the rows."""
        if self.mode in (PAST_LAST_ROW, TO_NEXT_ROW):  # a sum or an increment: cheaper over all rows than gathered
            return self.after_each(np.arange(len(outcome), dtype=np.int64), item_rows, item_labels)
        matched = np.flatnonzero(outcome == MATCH)
        next_start = np.zeros(len(outcome), dtype=np.int64)
        failed = np.zeros(len(outcome), dtype=bool)
        next_start[matched], failed[matched] = self.after_each(matched, item_rows[:, matched], item_labels)
        return next_start, failed


@dataclass(frozen=True)
class SkipWalk:
    """The walk's answer: the starts output (global rows, in order: matches and TIMEOUT rows), and the
    rows where the walk of a segment stopped (an ``UNDECIDED`` start: at most one per segment)."""

    chosen: np.ndarray
    stopped: np.ndarray


def walk(outcome: np.ndarray, next_start: np.ndarray, offsets: np.ndarray) -> SkipWalk:
    """AFTER MATCH SKIP through segments of starts (segment i: rows ``offsets[i]`` to ``offsets[i+1]``):
    ``outcome`` per start row (FAIL, MATCH, TIMEOUT, UNDECIDED), ``next_start`` per start row, where the
    search goes on after a match there (``SkipRule.after_each``; read only at MATCH rows). Each segment
    is walked from its first row; one Python step per start output or stopped at."""
    n = len(outcome)
    counting = np.where(outcome != FAIL, np.arange(n, dtype=np.int64), n)
    # the first start at or after each row that does not simply fail (n: none), a reversed running minimum
    upcoming = np.ascontiguousarray(np.minimum.accumulate(np.append(counting, n)[::-1])[::-1])
    # memoryviews: a Python int per step without converting the whole arrays (most starts are skipped)
    following, kind = memoryview(upcoming), memoryview(np.ascontiguousarray(outcome, dtype=np.int8))
    target = memoryview(np.ascontiguousarray(next_start, dtype=np.int64))
    bounds = memoryview(np.ascontiguousarray(offsets, dtype=np.int64))
    chosen: list[int] = []
    stopped: list[int] = []
    row = following[0] if n else 0
    while row < n:
        code = kind[row]
        if code == MATCH:
            chosen.append(row)
            row = following[target[row]]
        elif code == TIMEOUT:
            chosen.append(row)
            row = following[row + 1]
        else:  # UNDECIDED: the rest of this segment is its caller's
            stopped.append(row)
            row = following[bounds[bisect.bisect_right(bounds, row)]]
    return SkipWalk(np.asarray(chosen, dtype=np.int64), np.asarray(stopped, dtype=np.int64))
