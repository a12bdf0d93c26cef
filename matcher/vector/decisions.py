"""The sequence engine's decisions per start row, and which of them are final: what a stream needs.

A stream matches the rows a watermark has released so far; more rows of the same partition may come.
A start whose decision (match, no match, which run length) looked for a row at the end of the rows it
was given is not final: a later row could extend a greedy run, complete a partial match, or end a
reluctant one. A start whose decision was cut by WITHIN (its limit fell inside the rows) or whose
deadline the clock has passed is final: no later row can join it. So a trailing ``!B`` that has seen no
B row, and a partial match that SHOW TIMEOUT MATCHES would report, stay open until a later row or the
clock passes their deadline; a B row before it is final at once. ``decide`` runs the engine exactly as
``SequencePlan.run`` does and returns that flag beside the outcome and the rows of each item, per start.
Batch runs never call it (``Query.run`` gives the whole input: the end of the rows is the true end).

Runs before the last item (the V shape ``A B+ C+``) follow the same rule, because each run is one forward
scan: a start is final once every run of its match was closed by a row (its condition failing, its bound,
WITHIN's deadline), none by the end of the rows. B's run is weighed only against C's first row: C is last
and takes one row or more, so the last end of B's run where C holds (the first, reluctant) completes the
match, whatever the other ends (``Lanes._settles``). A run followed by two items or more with two ends
possible (the W shape with flat ticks) tries them in the order the pattern prefers (``Lanes._backtrack``):
every rest tried until one matched must be closed too, so a start is final only when no more preferred
end could still match. Past ``MAX_RUN_ENDS`` ends it is AMBIGUOUS: final, but decided by the Pike VM (a
stream resumes it there).

A start that is not final is matched again by the stream's next call, over the same rows and the new ones.
Where its run's end is searched for (``first_hit``: ``A B*? C``, ``C.price < A.price - 0.10``) and the
search found no hit before the end of the rows, ``searched`` says how far it went, and the next call's
``resume`` starts there: the rows before hold the same values (no NEXT reads past them), so they hold no
hit again, and a call searches only the rows new since the start's last search, not its whole WITHIN window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cep.matcher.vector.sequence import AMBIGUOUS, FAIL, MATCH, TIMEOUT, Lanes, SequencePlan, chunks

__all__ = ["AMBIGUOUS", "FAIL", "MATCH", "TIMEOUT", "Decisions", "decide"]


@dataclass(frozen=True)
class Decisions:
    outcome: np.ndarray  # per start row: FAIL, MATCH, TIMEOUT (SHOW TIMEOUT MATCHES) or AMBIGUOUS
    spans: np.ndarray  # (items, rows): the rows each item takes in the start's match
    open: np.ndarray  # per start row: the decision reached the end of the rows given, the clock before its deadline
    # per start row: how many rows from it on a search found no hit in (0: nothing known), for ``resume``
    searched: np.ndarray


def decide(
    plan: SequencePlan,
    values: dict,
    times,
    offsets: np.ndarray,
    starts: np.ndarray | None = None,
    resume: np.ndarray | None = None,
    visible: np.ndarray | None = None,
) -> Decisions:
    """Every start of the partitions ``offsets`` delimits (rows already in partition and ORDER BY order).

    ``values``: the columns the conditions read (``plan.columns``), as ``kernels.Value`` in that order;
    ``times``: None, or (event times as int64 in that order, the clock: a scalar or one per row, the
    WITHIN interval in the same unit), as ``sequence._times`` gives them; ``starts``: the rows to decide
    (a stream knows the final decisions of rows it carries), None: every row (the others are FAIL with no
    rows); ``resume``: per row, the ``searched`` of an earlier call over the same rows of the same
    partition (a stream's carried starts), so that search goes on where it stopped; ``visible``: per
    partition, the end of the rows whose conditions may be tested (NEXT in DEFINE: an open session's last
    rows wait for the rows after them; a start that reaches them is not final). Raises
    ``kernels.Unsupported`` where the batch path would run the VM."""
    n = int(offsets[-1]) if len(offsets) else 0
    outcome = np.zeros(n, dtype=np.int8)
    spans = np.zeros((len(plan.items), n), dtype=np.int64)
    undecided = np.zeros(n, dtype=bool)
    searched = np.zeros(n, dtype=np.int64)
    for begin, end in chunks(offsets):
        first, stop = int(offsets[begin]), int(offsets[end])
        lanes = Lanes(
            plan,
            values,
            times,
            offsets,
            begin,
            end,
            None if starts is None else starts[first:stop],
            None if resume is None else resume[first:stop],
            None if visible is None else visible[begin:end],
        )
        lanes.match(outcome, spans)
        undecided[lanes.begin : lanes.end] = lanes.reached & ~lanes.expired
        searched[lanes.begin : lanes.end] = lanes.searched
    return Decisions(outcome, spans, undecided, searched)
