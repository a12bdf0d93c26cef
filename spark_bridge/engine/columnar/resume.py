"""A session piece on the Pike VM, resumed from the carried rows exactly where the column-wise run stopped
(``PartitionMatcher.resume``: every start before it decided, the rows PREV reads before it kept;
``keyed.SessionRun`` runs it), so the output never depends on which engine ran a call."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cep.matcher.pike.vm import PartitionMatcher
from cep.spark_bridge.engine.column_table import ColumnarTable, Rows, datetimes
from cep.spark_bridge.engine.columnar.call import CallResult
from cep.spark_bridge.engine.columnar.pieces import Pieces, end_piece
from cep.spark_bridge.engine.columnar.rules import ColumnarRules
from cep.spark_bridge.engine.keyed import SessionRun


class Resumed(NamedTuple):
    """Where the Pike VM stopped in a session piece that goes on."""

    carry_from: int  # the first row (engine order) the next call needs
    first_open: int  # the first start the VM still weighs, counted from ``carry_from``
    match_number: int  # matches emitted in the session so far
    total: int  # the session's rows so far
    deadline_us: int | None  # the oldest live partial match's WITHIN deadline


def vm_piece(
    rules: ColumnarRules,
    table: ColumnarTable,
    rows: Rows,
    order: np.ndarray,
    pieces: Pieces,
    piece: int,
    us: np.ndarray,
    result: CallResult,
) -> tuple[list, list, Resumed | None]:
    """One session piece on the Pike VM, resumed at its first start not yet decided (every start before
    it decided, as the carried state says). Returns (rows, ids, None when the session ended, else where
    the VM stopped)."""
    engine = rules.engine
    stats = result.stats
    key = table.keys[int(pieces.kid[piece])]
    begin, end = int(pieces.begin[piece]), int(pieces.end[piece])
    context, position = int(pieces.context[piece]), int(pieces.position[piece])
    members = order[begin:end]
    times = us[begin:end].tolist()
    cols = {name: rows.cols[name][members].tolist() for name in engine.feed_columns if name != engine.time_column}
    cols[engine.time_column] = datetimes(us[begin:end])
    matcher = PartitionMatcher.resume(
        engine.machine,
        key,
        {n: v[:context] for n, v in cols.items()},
        position=position,
        match_number=int(pieces.number[piece]),
    )
    run = SessionRun(engine, matcher, key, int(pieces.start[piece]), times[-1])
    # the per-key path checks the cap after feeding released rows: not in a call that released none
    run.feed({n: v[context:] for n, v in cols.items()}, capped=bool((members >= pieces.released_from).any()))
    stats["match_cap_hits"] += run.result.stats["match_cap_hits"]
    if pieces.closed[piece]:
        run.close()
        end_piece(table, pieces, piece, stats)
        return run.result.rows, run.result.match_ids, None
    run.advance(int(pieces.clock[piece]))
    matcher.compact()
    result.live_matches += matcher.live_threads()
    stopped = Resumed(
        carry_from=begin + matcher.base - position,
        first_open=matcher.first_undecided() - matcher.base,
        match_number=matcher.match_number,
        total=matcher.total,
        deadline_us=run.deadline_us(),
    )
    return run.result.rows, run.result.match_ids, stopped
