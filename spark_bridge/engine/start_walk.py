"""AFTER MATCH SKIP over a streaming call's starts (``columnar.ColumnarStep``): which matches and TIMEOUT
rows are emitted, where each session piece's first undecided start is (its rows are carried from there),
and which pieces the Pike VM must decide."""

from __future__ import annotations

import numpy as np

from cep.matcher.vector import decisions


def walk_starts(outcome: np.ndarray, undecided: np.ndarray, targets: np.ndarray, piece_of: np.ndarray,
                piece_end: np.ndarray, on_vm: set, stop: np.ndarray) -> list[int]:
    """AFTER MATCH SKIP over the starts that count (a match, a TIMEOUT row, an undecided or ambiguous start),
    piece by piece: the matches and TIMEOUT rows chosen; a piece's first undecided start goes to ``stop``, a piece the VM must decide to
    ``on_vm``. One Python step per start visited (most are skipped): the next start that counts at or after
    a row is a running count of them (O(rows), where a binary search per start cost more than the matching)."""
    counts = (outcome != decisions.FAIL) | undecided
    below = np.zeros(len(counts) + 1, dtype=np.int64)  # starts that count before each row
    np.cumsum(counts, out=below[1:])
    # memoryviews: a Python int per step, without converting whole arrays
    cand, before = memoryview(np.flatnonzero(counts).astype(np.int64)), memoryview(below)
    part, end = memoryview(np.ascontiguousarray(piece_of, dtype=np.int64)), memoryview(np.ascontiguousarray(piece_end, dtype=np.int64))
    target, kind = memoryview(np.ascontiguousarray(targets, dtype=np.int64)), memoryview(np.ascontiguousarray(outcome))
    waits = memoryview(np.ascontiguousarray(undecided, dtype=bool))
    chosen: list[int] = []
    index, count = 0, len(cand)
    while index < count:
        row = cand[index]
        piece = part[row]
        if piece in on_vm:
            index = before[end[piece]]
        elif waits[row]:
            stop[piece] = row
            index = before[end[piece]]
        elif kind[row] == decisions.MATCH:
            chosen.append(row)
            index = before[target[row]]
        elif kind[row] == decisions.TIMEOUT:  # no match: no skip, the next start goes on
            chosen.append(row)
            index += 1
        else:  # AMBIGUOUS: the VM decides this piece
            on_vm.add(piece)
            index = before[end[piece]]
    return chosen
