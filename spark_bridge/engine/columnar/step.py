"""``ColumnarStep``: one call of many keys through the stages of this package, in order (``call``,
``pieces``, ``walk``, ``output``, ``resume``, ``carry``), with the call's table updated in place."""

from __future__ import annotations

import gc

import numpy as np

from cep.spark_bridge.engine.column_table import ColumnarTable, Rows
from cep.spark_bridge.engine.columnar import call, carry, output, resume
from cep.spark_bridge.engine.columnar.call import CallResult
from cep.spark_bridge.engine.columnar.pieces import Pieces, session_pieces
from cep.spark_bridge.engine.columnar.rules import ColumnarRules
from cep.spark_bridge.engine.columnar.walk import Walk, walk_starts
from cep.spark_bridge.engine.keyed import STAT_NAMES, KeyedStream


class ColumnarStep:
    """``KeyedStream``'s rules for all keys of a call at once, for a query whose route is column-wise."""

    def __init__(self, engine: KeyedStream) -> None:
        self.rules = ColumnarRules.of(engine)
        self.engine = engine
        self.plan = self.rules.plan
        self.columns = self.rules.columns
        self.read_columns = engine.read_columns  # ``columns`` and the ``dedup_key`` columns: what a call reads
        self.vm_pieces = 0  # session pieces run on the Pike VM (a call or a piece the engine cannot take)
        self.notes: list[str] = []

    def new_table(self, buckets: int = 0) -> ColumnarTable:
        return ColumnarTable(columns=self.columns, buckets=buckets)

    def step(
        self,
        table: ColumnarTable,
        keys: list[tuple],
        codes: np.ndarray,
        columns: dict[str, list],
        event_us: np.ndarray,
        null_time: np.ndarray,
        watermark_us: int,
        rejected=None,
    ) -> CallResult:
        """One call: rows of many keys (row i's partition key is ``keys[codes[i]]``, ``keys`` in order of
        first appearance; ``columns`` holds at least ``read_columns``; ``event_us`` with
        ``null_time`` marking NULLs; ``rejected``: a bad-row reason per row, None where not rejected
        upstream), then the keys whose timer is due. ``table`` is updated in place."""
        # The call builds lists of Python values and drops them; nothing it makes is cyclic, so the cyclic
        # collector (which would rescan every buffered value of every key at each pass) is off meanwhile.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._step(table, keys, codes, columns, event_us, null_time, watermark_us, rejected)
        finally:
            if collecting:
                gc.enable()

    def _step(self, table, keys, codes, columns, event_us, null_time, watermark_us, rejected) -> CallResult:
        rules = self.rules
        result = CallResult(stats=dict.fromkeys(STAT_NAMES, 0))
        stats = result.stats
        n = len(codes)
        stats["events_in"] = n
        busy = result.given = table.ids(keys).tolist()
        kids = np.asarray(busy, dtype=np.int64)[codes] if n else np.zeros(0, dtype=np.int64)

        # 1. Bad, late or accepted; 2. the keys called, and their clocks; 3. release, in order.
        floor = call.triage(rules, table, kids, columns, event_us, null_time, watermark_us, rejected, result)
        called, clock = call.called_keys(rules, table, floor, watermark_us, result)
        released = call.release(rules, table, called, clock, stats)

        # 4. Carried rows of the called keys, then their released rows: session pieces.
        carried = table.carried
        mine = called[carried.kid]
        kept = carried.take(np.flatnonzero(~mine))
        rows = carried.take(np.flatnonzero(mine)) + released
        order = np.argsort(rows.kid, kind="stable")  # per key: carried rows, then released ones
        carried_count = np.bincount(carried.kid, minlength=len(table.keys))
        pieces = session_pieces(
            rules,
            table,
            rows.kid[order],
            rows.us[order],
            called,
            clock,
            carried_count,
            stats,
            released_from=len(rows) - len(released),
        )

        # 5. Match every piece; emit what is final; carry the rest.
        table.carried = call.by_key(kept, self._match(table, rows, order, pieces, result))

        # 6. Timers and the per-call numbers of the called keys.
        carry.set_timers(rules, table, busy + result.due, clock, result)
        stats["matches_out"] = sum(len(r) for r in result.rows.values())
        return result

    def _match(self, table: ColumnarTable, rows: Rows, order: np.ndarray, pieces: Pieces, result: CallResult) -> Rows:
        """Emit the final matches of every piece; return the rows to carry (engine order, per key)."""
        if not len(order):
            return Rows.empty(self.columns)
        walk = walk_starts(self.rules, rows, order, pieces)
        if walk.unsupported is not None:
            self._note(f"a call ran on the Pike VM: {walk.unsupported}")
        emitted = output.measure(self.rules, table, order, pieces, walk)
        if emitted is None:  # a measure the column programs refuse here: these pieces on the VM
            self._note("measures of a call computed on the Pike VM")
            walk.on_vm.update(int(p) for p in np.unique(walk.piece_of[np.asarray(walk.chosen, dtype=np.int64)]))
            emitted = {}
        resumed = self._emit(table, rows, order, pieces, walk, emitted, result)
        return carry.carry(self.rules, table, rows, order, pieces, walk, resumed, result)

    def _emit(
        self,
        table: ColumnarTable,
        rows: Rows,
        order: np.ndarray,
        pieces: Pieces,
        walk: Walk,
        emitted: dict,
        result: CallResult,
    ) -> dict[int, resume.Resumed]:
        """Rows out, piece by piece (a key's pieces are in session order); the VM's pieces run here. Returns
        where each VM piece whose session goes on stopped."""
        resumed: dict[int, resume.Resumed] = {}
        for piece in sorted(set(emitted) | walk.on_vm):
            kid = int(pieces.kid[piece])
            if piece in walk.on_vm:
                self.vm_pieces += 1
                out, ids, stopped = resume.vm_piece(self.rules, table, rows, order, pieces, piece, walk.us, result)
                if stopped is not None:
                    resumed[piece] = stopped
            else:
                out, ids = emitted[piece]
            result.add(kid, out, ids)
        return resumed

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
