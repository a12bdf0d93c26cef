"""Sequences of runs matched with numpy alone: the fast path's scan for the commonest pattern shape.

A pattern that is a sequence of single-row classes and loops over classes (``A B+ C+``, ``A B* C{2}``,
``X{3,5} Y``) has, at a given start row, at most one way to match once every loop's class is disjoint
from the next item's class on the rows at hand: the loop must take the whole run of its class (a
shorter loop leaves the next item on a row of the loop's class, where it cannot hold), greedy or
reluctant alike; only the last item may stop short (a reluctant loop takes its minimum, a greedy one
up to its maximum). So every start row's match end can be computed for all rows at once from the
lengths of the class runs, with no backtracking to imitate. SKIP PAST LAST ROW then chains the
matches (``program/skip.py``'s walk, shared by every engine): one cheap Python step per match.

``re`` gives the same matches (and ``tests/test_fastpath.py`` checks both against the Pike VM); this
scan only avoids the regex engine's per-row and per-match costs. A batch whose rows break the
disjointness (a row in both classes) goes to the regex scan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cep.matcher.program.skip import FAIL, MATCH, walk


@dataclass(frozen=True)
class RunItem:
    """One item of the sequence: a class (the bytes with any of ``bits`` set) taken ``low`` to
    ``high`` times (``high`` None: no bound); a single-row class is (bits, 1, 1)."""

    bits: int
    low: int
    high: int | None
    greedy: bool


def run_items(ir: tuple) -> tuple[RunItem, ...] | None:
    """The pattern (``fastpath`` IR) as a sequence of run items, or None when it is not one."""
    items = ir[1] if ir[0] == "seq" else (ir,)
    out = []
    for item in items:
        if item[0] not in ("class", "loop"):
            return None
        bits = 0
        for label in item[1]:
            bits |= 1 << label
        out.append(RunItem(bits, 1, 1, True) if item[0] == "class" else RunItem(bits, item[2], item[3], item[4]))
    return tuple(out)


def deterministic(items: tuple[RunItem, ...], occurring: list[int]) -> bool:
    """Does every start row have at most one way to match, given the bytes that occur? Each loop but
    the last must be followed by an item that takes at least one row and whose class shares no
    occurring byte with the loop's."""
    for item, follower in zip(items, items[1:]):
        if item.low == item.high:
            continue
        if follower.low < 1 or any(m & item.bits and m & follower.bits for m in occurring):
            return False
    return True


def scan(items: tuple[RunItem, ...], buffer: np.ndarray, members: int) -> np.ndarray:
    """Every match under SKIP PAST LAST ROW in ``buffer`` (one byte per row; bytes ``>= members``
    separate partitions and belong to no class), as an (m, len(items) + 1, 2) array of spans: the
    match, then each item's rows, in buffer positions."""
    size = len(buffer)
    runs = {bits: _run_lengths(buffer, bits, members) for bits in {item.bits for item in items}}
    starts = np.arange(size, dtype=np.int64)
    ends = _match_ends(items, runs, starts)
    matched = ends >= 0
    if not matched.any():
        return np.zeros((0, len(items) + 1, 2), dtype=np.int64)
    # SKIP PAST LAST ROW (``skip.walk``): each match's search goes on at the row after it
    chosen = walk(np.where(matched, MATCH, FAIL), ends, np.array([0, size], dtype=np.int64)).chosen
    return _spans(items, runs, chosen)


def _run_lengths(buffer: np.ndarray, bits: int, members: int) -> np.ndarray:
    """For each position (and one past the end): how many rows from it on are in the class."""
    table = np.zeros(256, dtype=bool)
    table[[m for m in range(members) if m & bits]] = True
    inside = table[buffer]
    size = len(buffer)
    positions = np.arange(size + 1, dtype=np.int64)
    stop = np.where(np.append(inside, False), size + 1, positions)  # a row outside the class stops a run
    next_stop = np.minimum.accumulate(stop[::-1])[::-1]
    return next_stop - positions


def _step(item: RunItem, run: np.ndarray, last: bool) -> tuple[np.ndarray, np.ndarray]:
    """(which starts this item admits, how many rows it takes), given the run of its class at each."""
    if not last and item.low != item.high:  # a loop before another item takes its class's whole run
        keep = (run >= item.low) if item.high is None else (run >= item.low) & (run <= item.high)
        return keep, run
    keep = run >= item.low
    if not item.greedy:
        return keep, np.full(len(run), item.low, dtype=np.int64)
    return keep, (run if item.high is None else np.minimum(run, item.high))


def _match_ends(items: tuple[RunItem, ...], runs: dict, starts: np.ndarray) -> np.ndarray:
    """One past the last row of the match starting at each of ``starts``, or -1 where none does."""
    ends = np.full(len(starts), -1, dtype=np.int64)
    alive = np.arange(len(starts))
    position = starts
    for number, item in enumerate(items):
        keep, taken = _step(item, runs[item.bits][position], number == len(items) - 1)
        alive, position = alive[keep], position[keep] + taken[keep]
    ends[alive] = position
    return ends


def _spans(items: tuple[RunItem, ...], runs: dict, starts: np.ndarray) -> np.ndarray:
    """The spans of the matches starting at ``starts`` (each known to match)."""
    out = np.empty((len(starts), len(items) + 1, 2), dtype=np.int64)
    position = starts
    for number, item in enumerate(items):
        _, taken = _step(item, runs[item.bits][position], number == len(items) - 1)
        out[:, number + 1, 0] = position
        position = position + taken
        out[:, number + 1, 1] = position
    out[:, 0, 0] = starts
    out[:, 0, 1] = position
    return out
