"""Every start of every session piece decided column-wise (``decisions.decide``), and AFTER MATCH SKIP
walked over them: a match is emitted only while every start before it is final, which is when the per-key
VM emits it. A piece stops at its first start that is not final yet (its rows are carried from there), and
goes to the Pike VM when it is longer than ``max_match_rows``, when a start is ambiguous (the VM says why),
or when the kernels cannot take the call exactly (``kernels.Unsupported``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cep.matcher.program import skip
from cep.matcher.vector import decisions, kernels
from cep.spark_bridge.engine.column_table import KNOWN, SEARCHED, SPAN, Rows, StreamInput
from cep.spark_bridge.engine.columnar.pieces import Pieces
from cep.spark_bridge.engine.columnar.rules import ColumnarRules


@dataclass
class Walk:
    """The column-wise decisions of one call's pieces (``walk_starts``), rows in engine order."""

    piece_of: np.ndarray  # each row's piece
    us: np.ndarray  # each row's event time
    data: StreamInput
    context: np.ndarray  # rows at a piece's head that are no starts (PREV reads them)
    on_vm: set[int]  # pieces the Pike VM runs
    stop: np.ndarray  # per piece: its first undecided start (its end when none)
    values: dict = field(default_factory=dict)  # the columns the conditions read, loaded
    found: object = None  # ``decisions.decide``'s answer; None when the call runs on the VM
    outcome: np.ndarray | None = None  # each start's outcome (``decisions``' codes)
    spans: np.ndarray | None = None  # rows per item of each start's match
    undecided: np.ndarray | None = None  # starts not final yet
    chosen: list[int] = field(default_factory=list)  # the starts of the matches emitted now
    timeouts: np.ndarray | None = None  # which chosen starts are TIMEOUT rows
    unsupported: str | None = None  # why the kernels could not take the call (it runs on the VM)


def walk_starts(rules: ColumnarRules, rows: Rows, order: np.ndarray, pieces: Pieces) -> Walk:
    """Decide every start of every piece column-wise and walk AFTER MATCH SKIP over them: which matches
    are final (``chosen``), where each piece's undecided starts begin (``stop``), and which pieces go
    to the Pike VM (too long, or a call the kernels cannot take exactly)."""
    m = len(order)
    plan = rules.plan
    lengths = pieces.end - pieces.begin
    piece_of = np.repeat(np.arange(len(lengths)), lengths)
    us = rows.us[order]
    data = StreamInput(rows, rules.engine.time_column)
    local = np.arange(m) - pieces.begin[piece_of]
    walk = Walk(
        piece_of=piece_of,
        us=us,
        data=data,
        context=local < pieces.context[piece_of],
        on_vm=set(np.flatnonzero(lengths > rules.engine.max_match_rows).tolist()),
        stop=pieces.end.copy(),
    )
    context = walk.context
    try:
        walk.values = {name: data.load(name, order) for name in plan.columns}
        times = None
        if rules.within_us is not None:
            times = (us, np.repeat(pieces.clock, lengths), rules.within_us)
        known = known_outcomes(rows, order)  # final decisions kept with carried rows (-1: none)
        cached = (known >= 0) & ~context
        searched = rows.cols.get(SEARCHED)
        visible = None
        if rules.base.lookahead:  # NEXT in DEFINE: an open session's last rows wait for the rows after them
            visible = np.where(pieces.closed, pieces.end, np.maximum(pieces.end - rules.base.lookahead, pieces.begin))
        found = decisions.decide(
            plan,
            walk.values,
            times,
            np.append(pieces.begin, m),
            ~cached & ~context,
            None if searched is None else searched[order],
            visible,
        )
    except kernels.Unsupported as why:
        walk.unsupported = str(why)
        walk.on_vm = set(range(len(lengths)))
        return walk
    walk.found = found
    outcome = walk.outcome = found.outcome.copy()
    outcome[context] = decisions.FAIL
    spans = walk.spans = found.spans
    if cached.any():
        outcome[cached] = known[cached]
        spans[:, cached] = known_spans(rules, rows, order[cached])
    walk.undecided = found.open & ~pieces.closed[piece_of] & ~context
    undecided = walk.undecided
    targets, skip_fails = rules.base.skip.after_matches(outcome, spans, plan.item_labels)
    outcome[(outcome == decisions.MATCH) & skip_fails] = decisions.AMBIGUOUS  # the VM says why
    # the walk stops a piece at its first undecided start (its rows are carried from there) or at an
    # ambiguous one (the VM decides the piece); a piece already on the VM is not walked
    steps = np.where(undecided, decisions.AMBIGUOUS, outcome)
    steps[np.isin(piece_of, np.fromiter(walk.on_vm, dtype=np.int64))] = decisions.FAIL
    walked = skip.walk(steps, targets, np.append(pieces.begin, m))
    for row in walked.stopped.tolist():
        if undecided[row]:
            walk.stop[piece_of[row]] = row
        else:
            walk.on_vm.add(int(piece_of[row]))
    chosen = walked.chosen.tolist()
    if walk.on_vm:
        chosen = [c for c in chosen if int(piece_of[c]) not in walk.on_vm]
    walk.chosen = chosen
    walk.timeouts = outcome[np.asarray(chosen, dtype=np.int64)] == decisions.TIMEOUT if chosen else None
    return walk


def known_outcomes(rows: Rows, order: np.ndarray) -> np.ndarray:
    """Each row's final outcome kept with the carried rows by an earlier call (-1: none)."""
    values = rows.cols.get(KNOWN)
    if values is None:
        return np.full(len(order), -1, dtype=np.int64)
    return values[order]


def known_spans(rules: ColumnarRules, rows: Rows, members: np.ndarray) -> np.ndarray:
    """The kept spans (rows per item) of the final starts ``members``."""
    return np.stack([rows.cols[f"{SPAN}{item}"][members] for item in range(len(rules.plan.items))])
