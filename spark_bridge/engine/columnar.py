"""The streaming rules of ``keyed.py`` for every key of a call at once, column-wise.

``KeyedStream.process`` runs one key at a time and feeds its released rows, one by one, to the Pike VM.
For a query the sequence engine takes (``matcher/vector/sequence.py``), ``ColumnarStep`` runs a whole call
(a ``LocalStream`` micro-batch, or one bucket of keys) in a handful of numpy passes, with the same rules
and the same output, match ids and stats:

1. Bad rows (NULL event time), late rows (at or below the watermark or the key's forced release) and
   accepted rows are told apart for all rows at once; accepted rows join one pending table of all keys.
2. The keys called are those with rows and those whose timer the watermark reached (Spark's rule). The
   pending cap (``max_pending_rows``) moves a key's clock as in ``keyed.py``; every pending row of a
   called key at or below its clock is released.
3. Released rows are sorted once by (key, event time, tie-break columns) and put after each key's carried
   rows (below). Sessions split them: every session piece is one partition of one engine run over all
   keys (``decisions.decide``), which also says which starts are not final yet.
4. AFTER MATCH SKIP is walked over the starts; a match is emitted only while every start before it is
   final, which is when the per-key VM emits it. From the first start that is not final, the rows (and
   the ``lookback`` rows PREV reads before it) are *carried*: the next call matches them again, with
   what the watermark releases after them. A session that ended (gap, or the clock past its end) has
   all its starts final. A TIMEOUT row and a trailing ``!B``'s match are final once a later row or the
   clock passes the start's WITHIN deadline (``decisions.py``), as the VM's ``advance`` has them.

A call the engine cannot take exactly (``kernels.Unsupported``: values the kernels do not compute
exactly, a run open too long for a scan from every start; a measure the column programs refuse) and a
session piece longer than ``max_match_rows`` run on the Pike VM, piece by piece, resumed from the carried
rows exactly where the column-wise run stopped (``PartitionMatcher.resume``: every start before s decided,
the rows PREV reads before s kept; ``keyed.SessionRun`` runs it). So the output never depends on which
engine ran a call.

State: one ``ColumnarTable`` per call's keys (``column_table.py``), not one blob per key. The path a
query takes is fixed by its text; a per-key checkpoint is read (an upgraded stream keeps it), and a
``KeyTable`` refuses a column-wise one (E0482).
"""

from __future__ import annotations

import datetime as _dt
import gc
from dataclasses import dataclass, field, replace
from itertools import compress
from typing import NamedTuple

import numpy as np

from cep.matcher.pike.vm import PartitionMatcher
from cep.matcher.plan import COLUMN_WISE
from cep.matcher.program import skip
from cep.matcher.vector import decisions, kernels, sequence_output
from cep.spark_bridge.engine.column_table import (
    DATETIME_US,
    KNOWN,
    NO_TIME,
    SEARCHED,
    SPAN,
    ColumnarTable,
    Rows,
    StreamInput,
    as_column,
    datetimes,
)
from cep.spark_bridge.engine.keyed import (
    BAD_NULL_TIME,
    LATE_BEHIND_FORCED,
    LATE_BEHIND_WATERMARK,
    STAT_NAMES,
    KeyedStream,
    SessionRun,
    StepResult,
)
from cep.spark_bridge.engine.match_ids import SessionIds
from cep.spark_bridge.engine.ordering import order_ranks, total_order_ranks

# -------------------------------------------------------------------------------------- one call


@dataclass
class CallResult:
    """What one call produced, per key (the caller orders keys as Spark calls them)."""

    rows: dict[int, list[tuple]] = field(default_factory=dict)  # key id -> output rows, in order
    match_ids: dict[int, list[str]] = field(default_factory=dict)
    late: list[tuple[int, str]] = field(default_factory=list)  # (input row, reason), in input order
    due: list[int] = field(default_factory=list)  # key ids called by their timer, in Spark's order
    stats: dict[str, int] = field(default_factory=dict)
    given: list[int] = field(default_factory=list)  # the key id of each key given with rows, in the order given
    live_matches: int = 0  # the called keys' undecided starts after the call (the VM's live partial matches)
    deadlines: dict[int, int] = field(default_factory=dict)  # key id -> its oldest open start's WITHIN deadline (µs)

    def add(self, kid: int, rows: list[tuple], ids: list[str]) -> None:
        if rows:
            self.rows.setdefault(kid, []).extend(rows)
            self.match_ids.setdefault(kid, []).extend(ids)

    def given_with_output(self) -> tuple[list[int], list[int]]:
        """The keys given that have output, in the order given: (their positions among the keys given,
        their key ids). Only keys with output are visited: most keys of a small micro-batch have none."""
        if not self.rows:
            return [], []
        kids = np.fromiter(self.rows, dtype=np.int64, count=len(self.rows))
        given = np.asarray(self.given, dtype=np.int64)
        position = np.full(max(int(kids.max()), int(given.max()) if len(given) else 0) + 1, -1, dtype=np.int64)
        position[given] = np.arange(len(given))
        found = position[kids]
        found, kids = found[found >= 0], kids[found >= 0]  # (the others were called by their timer)
        order = np.argsort(found)
        return found[order].tolist(), kids[order].tolist()

    def due_with_output(self) -> list[int]:
        """The keys called by their timer alone that have output, in Spark's order."""
        rows = self.rows
        return [kid for kid in self.due if kid in rows] if rows else []

    def in_call_order(self) -> tuple[list[tuple], list[str]]:
        """(output rows, match ids) in the order the per-key path gives them: the keys given in their
        order, then the keys called by their timer."""
        out: list[tuple] = []
        ids: list[str] = []
        for kid in self.given_with_output()[1] + self.due_with_output():
            out.extend(self.rows[kid])
            ids.extend(self.match_ids[kid])
        return out, ids


@dataclass
class _Pieces:
    """Session pieces of one call, as partitions of the engine's run (rows in engine order)."""

    begin: np.ndarray  # first row of each piece
    end: np.ndarray
    kid: np.ndarray
    closed: np.ndarray  # the session ends with this piece (a gap after it, or the clock past its end)
    clock: np.ndarray  # the time the engine is told (µs): the key's clock, or the session's end
    context: np.ndarray  # carried rows at the piece's head that are no starts (PREV reads them)
    position: np.ndarray  # the session position of the piece's first row
    number: np.ndarray  # matches emitted in the session before the piece
    start: np.ndarray  # the session's first event time
    released_from: int  # the call's rows from this one on (in ``rows``' order) were released in this call


@dataclass
class _Walk:
    """The column-wise decisions of one call's pieces (``ColumnarStep._walk``), rows in engine order."""

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


class _Resumed(NamedTuple):
    """Where the Pike VM stopped in a session piece that goes on."""

    carry_from: int  # the first row (engine order) the next call needs
    first_open: int  # the first start the VM still weighs, counted from ``carry_from``
    match_number: int  # matches emitted in the session so far
    total: int  # the session's rows so far
    deadline_us: int | None  # the oldest live partial match's WITHIN deadline


class ColumnarStep:
    """``KeyedStream``'s rules for all keys of a call at once, for a query whose route is column-wise."""

    def __init__(self, engine: KeyedStream) -> None:
        route = engine.route()
        if route.stream != COLUMN_WISE:
            raise ValueError("the column-wise step runs only a column-wise route: " + "; ".join(route.stream_reasons))
        self.engine = engine
        self.base = engine.plan.machine(engine.input_columns)
        self.plan = route.sequence
        self.columns = tuple(c for c in engine.pending_columns)
        self.lookback = self.base.lookback
        self.measures = self.plan.measures  # PREV in a measure: ``sequence_output.reading_before``'s programs
        self.within_us = None if self.plan.within is None else int(self.plan.within // _ONE_US)
        self.session_ids = SessionIds(engine.query_fp)
        self.where = engine.outer.where
        # the select list alone: ``_measure`` applies WHERE itself, to keep each kept row's match id with it
        self.select = replace(engine.outer, where=None)
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
        first appearance; ``columns`` holds at least ``engine.pending_columns``; ``event_us`` with
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
        engine = self.engine
        result = CallResult(stats=dict.fromkeys(STAT_NAMES, 0))
        stats = result.stats
        n = len(codes)
        stats["events_in"] = n
        busy = result.given = table.ids(keys).tolist()
        kids = np.asarray(busy, dtype=np.int64)[codes] if n else np.zeros(0, dtype=np.int64)
        f = table.fields
        W = watermark_us

        # 1. Bad, late or accepted.
        floor = np.maximum(f["forced"], W)
        bad = null_time
        if rejected is not None:
            bad = bad | np.fromiter((r is not None for r in rejected), dtype=bool, count=n)
        late = ~bad & (event_us <= floor[kids])
        out_rows = np.flatnonzero(bad | late)
        if len(out_rows):
            behind_w = event_us[out_rows] <= W
            reasons = [None] * len(out_rows) if rejected is None else [rejected[i] for i in out_rows.tolist()]
            result.late = [
                (int(i), (r or BAD_NULL_TIME) if b else (LATE_BEHIND_WATERMARK if w else LATE_BEHIND_FORCED))
                for i, r, b, w in zip(out_rows.tolist(), reasons, bad[out_rows].tolist(), behind_w.tolist())
            ]
            for _, reason in result.late:
                if reason in stats and reason not in (LATE_BEHIND_WATERMARK, LATE_BEHIND_FORCED):
                    stats[reason] += 1
        stats["bad_rows"] = int(bad.sum())
        stats["late_rows"] = int(late.sum())
        accepted = np.flatnonzero(~bad & ~late)
        if len(accepted):
            table.pending = table.pending + Rows(
                kids[accepted], event_us[accepted], {name: as_column(columns[name])[accepted] for name in self.columns}
            )

        # 2. The keys called, and their clocks.
        called = np.zeros(len(table.keys), dtype=bool)
        called[busy] = True
        held, at = table.timer_arrays()
        result.due = held[(at <= W) & ~called[held]].tolist()  # in the order the timers were set
        called[result.due] = True
        stats["key_calls"] = len(busy) + len(result.due)
        stats["timers_fired"] = len(result.due)
        clock = floor.copy()
        pending = table.pending
        waiting = np.bincount(pending.kid, minlength=len(table.keys))
        cap = engine.max_pending_rows
        for kid in np.flatnonzero(called & (waiting > cap)).tolist():
            times = pending.us[pending.kid == kid]
            cut = int(np.sort(times)[len(times) - cap - 1])
            if cut > clock[kid]:
                stats["cap_hits"] += int(((times > clock[kid]) & (times <= cut)).sum())
                clock[kid] = f["forced"][kid] = cut

        # 3. Release, in order.
        ready = called[pending.kid] & (pending.us <= clock[pending.kid])
        released = pending.take(np.flatnonzero(ready))
        table.pending = pending.take(np.flatnonzero(~ready))
        stats["released_rows"] = len(released)
        released = released.take(self._release_order(released))

        # 4. Carried rows of the called keys, then their released rows: session pieces.
        carried = table.carried
        mine = called[carried.kid]
        kept = carried.take(np.flatnonzero(~mine))
        rows = carried.take(np.flatnonzero(mine)) + released
        order = np.argsort(rows.kid, kind="stable")  # per key: carried rows, then released ones
        carried_count = np.bincount(carried.kid, minlength=len(table.keys))
        pieces = self._pieces(
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
        carry = self._match(table, rows, order, pieces, result)
        table.carried = _by_key(kept, carry)

        # 6. Timers and the per-call numbers of the called keys.
        self._timers(table, busy + result.due, clock, result)
        stats["matches_out"] = sum(len(r) for r in result.rows.values())
        return result

    # ------------------------------------------------------------------------------------ the steps

    def _release_order(self, rows: Rows) -> np.ndarray:
        """(key, event time, the other ORDER BY keys, tie-break columns) order of released rows, stable:
        ``release_order``'s (its sorts are stable, so it orders by all of them in that order too)."""
        order = np.lexsort((rows.us, rows.kid))
        kid, us = rows.kid[order], rows.us[order]
        tied = (kid[1:] == kid[:-1]) & (us[1:] == us[:-1])
        if not tied.any():
            return order
        ranks = [order_ranks(rows.cols[key.column], key.descending, key.nulls_first) for key in self.engine.order[1:]]
        ranks += [total_order_ranks(rows.cols[name]) for name in self.engine.tiebreak_columns]
        return np.lexsort(tuple(reversed(ranks)) + (rows.us, rows.kid)) if ranks else order

    def _pieces(
        self,
        table: ColumnarTable,
        kid: np.ndarray,
        us: np.ndarray,
        called: np.ndarray,
        clock: np.ndarray,
        carried_count: np.ndarray,
        stats: dict,
        *,
        released_from: int,
    ) -> _Pieces:
        f = table.fields
        gap = self.engine.session_timeout_us
        m = len(kid)
        first_of_key = np.ones(m, dtype=bool)
        first_of_key[1:] = kid[1:] != kid[:-1]
        live = f["live"][kid].astype(bool)
        previous = np.empty(m, dtype=np.int64)
        previous[1:] = us[:-1]
        previous[first_of_key] = f["last"][kid[first_of_key]]
        if gap is None:
            gap_before = np.zeros(m, dtype=bool)
        else:
            gap_before = (us - previous > gap) & (previous != NO_TIME)
        continues = first_of_key & live & ~gap_before  # the key's open session goes on
        begins = first_of_key | gap_before
        # A key's open session that ends before its first row here (no carried rows: nothing undecided).
        ended = np.flatnonzero(first_of_key & live & gap_before)
        self._close_keys(table, kid[ended], stats)
        # Called keys with an open session and no rows at all: it may end by the clock.
        idle = called & f["live"].astype(bool)
        idle[kid] = False
        if gap is not None:
            over = np.flatnonzero(idle & (clock >= f["last"] + gap) & (f["last"] != NO_TIME))
            self._close_keys(table, over, stats)
        begin = np.flatnonzero(begins)
        end = np.append(begin[1:], m)
        pkid = kid[begin]
        last_of_key = np.ones(len(begin), dtype=bool)
        last_of_key[:-1] = pkid[1:] != pkid[:-1]
        last_us = us[end - 1] if m else np.zeros(0, dtype=np.int64)
        if gap is None:
            closed = ~last_of_key
            end_clock = clock[pkid]
        else:
            closed = ~last_of_key | (clock[pkid] >= last_us + gap)
            end_clock = np.where(closed, last_us + gap, clock[pkid])
        cont = continues[begin]
        return _Pieces(
            begin=begin,
            end=end,
            kid=pkid,
            closed=closed,
            clock=end_clock,
            context=np.where(cont, f["context"][pkid], 0),
            position=np.where(cont, f["total"][pkid] - carried_count[pkid], 0),
            number=np.where(cont, f["number"][pkid], 0),
            start=np.where(cont, f["start"][pkid], us[begin]),
            released_from=released_from,
        )

    def _close_keys(self, table: ColumnarTable, kids: np.ndarray, stats: dict) -> None:
        if len(kids):
            f = table.fields
            f["live"][kids] = 0
            f["sessions"][kids] += 1
            for name in ("start", "last"):
                f[name][kids] = NO_TIME
            for name in ("total", "number", "context"):
                f[name][kids] = 0
            stats["sessions_closed"] += len(kids)

    def _match(self, table: ColumnarTable, rows: Rows, order: np.ndarray, pieces: _Pieces, result: CallResult) -> Rows:
        """Emit the final matches of every piece; return the rows to carry (engine order, per key)."""
        if not len(order):
            return Rows.empty(self.columns)
        walk = self._walk(rows, order, pieces)
        chosen = walk.chosen
        emitted = self._measure(
            table,
            rows,
            order,
            pieces,
            walk.piece_of,
            walk.us,
            chosen,
            walk.spans if chosen else None,
            walk.data,
            walk.values if chosen else None,
            walk.on_vm,
            walk.timeouts,
        )
        resumed = self._emit(table, rows, order, pieces, walk, emitted, result)
        return self._carry(table, rows, order, pieces, walk, resumed, result)

    def _walk(self, rows: Rows, order: np.ndarray, pieces: _Pieces) -> _Walk:
        """Decide every start of every piece column-wise and walk AFTER MATCH SKIP over them: which matches
        are final (``chosen``), where each piece's undecided starts begin (``stop``), and which pieces go
        to the Pike VM (too long, or a call the kernels cannot take exactly)."""
        m = len(order)
        plan = self.plan
        lengths = pieces.end - pieces.begin
        piece_of = np.repeat(np.arange(len(lengths)), lengths)
        us = rows.us[order]
        data = StreamInput(rows, self.engine.time_column)
        local = np.arange(m) - pieces.begin[piece_of]
        walk = _Walk(
            piece_of=piece_of,
            us=us,
            data=data,
            context=local < pieces.context[piece_of],
            on_vm=set(np.flatnonzero(lengths > self.engine.max_match_rows).tolist()),
            stop=pieces.end.copy(),
        )
        context = walk.context
        try:
            walk.values = {name: data.load(name, order) for name in plan.columns}
            times = None
            if self.within_us is not None:
                times = (us, np.repeat(pieces.clock, lengths), self.within_us)
            known = self._known(rows, order)  # final decisions kept with carried rows (-1: none)
            cached = (known >= 0) & ~context
            searched = rows.cols.get(SEARCHED)
            visible = None
            if self.base.lookahead:  # NEXT in DEFINE: an open session's last rows wait for the rows after them
                visible = np.where(
                    pieces.closed, pieces.end, np.maximum(pieces.end - self.base.lookahead, pieces.begin)
                )
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
            self._note(f"a call ran on the Pike VM: {why}")
            walk.on_vm = set(range(len(lengths)))
            return walk
        walk.found = found
        outcome = walk.outcome = found.outcome.copy()
        outcome[context] = decisions.FAIL
        spans = walk.spans = found.spans
        if cached.any():
            outcome[cached] = known[cached]
            spans[:, cached] = self._known_spans(rows, order[cached])
        walk.undecided = found.open & ~pieces.closed[piece_of] & ~context
        undecided = walk.undecided
        targets, skip_fails = self.base.skip.after_matches(outcome, spans, plan.item_labels)
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

    def _emit(
        self,
        table: ColumnarTable,
        rows: Rows,
        order: np.ndarray,
        pieces: _Pieces,
        walk: _Walk,
        emitted: dict,
        result: CallResult,
    ) -> dict[int, _Resumed]:
        """Rows out, piece by piece (a key's pieces are in session order); the VM's pieces run here. Returns
        where each VM piece whose session goes on stopped."""
        resumed: dict[int, _Resumed] = {}
        for piece in sorted(set(emitted) | walk.on_vm):
            kid = int(pieces.kid[piece])
            if piece in walk.on_vm:
                out, ids, stopped = self._vm_piece(table, rows, order, pieces, piece, walk.us, result)
                if stopped is not None:
                    resumed[piece] = stopped
            else:
                out, ids = emitted[piece]
            result.add(kid, out, ids)
        return resumed

    def _carry(
        self,
        table: ColumnarTable,
        rows: Rows,
        order: np.ndarray,
        pieces: _Pieces,
        walk: _Walk,
        resumed: dict[int, _Resumed],
        result: CallResult,
    ) -> Rows:
        """The sessions after the call: closed ones counted, open ones keep their rows from the first
        undecided start (and the ``lookback`` rows before it); returns those rows."""
        m = len(order)
        us, piece_of, on_vm, found = walk.us, walk.piece_of, walk.on_vm, walk.found
        stats = result.stats
        f = table.fields
        count = len(pieces.begin)
        columnwise = np.ones(count, dtype=bool)
        columnwise[list(on_vm)] = False
        last_of_key = np.ones(count, dtype=bool)
        last_of_key[:-1] = pieces.kid[1:] != pieces.kid[:-1]
        ended = columnwise & pieces.closed
        np.add.at(f["sessions"], pieces.kid[ended & ~last_of_key], 1)
        stats["sessions_closed"] += int((ended & ~last_of_key).sum())
        self._close_keys(table, pieces.kid[ended & last_of_key], stats)
        going = np.flatnonzero(columnwise & ~pieces.closed)
        first_open = walk.stop[going]
        begin, end = pieces.begin[going], pieces.end[going]
        carry_from = np.maximum(begin, first_open - self.lookback)
        matched = np.asarray(walk.chosen, dtype=np.int64)
        if walk.timeouts is not None:  # TIMEOUT rows use up no match number
            matched = matched[~walk.timeouts]
        emitted_count = np.bincount(piece_of[matched], minlength=count)[going]
        numbers, totals = pieces.number[going] + emitted_count, pieces.position[going] + end - begin
        waiting = first_open < end
        result.live_matches += int(waiting.sum())
        deadlines = None
        if self.within_us is not None:
            deadlines = np.where(waiting, us[np.minimum(first_open, m - 1)] + self.within_us, NO_TIME)
        kids = pieces.kid[going]
        if resumed:
            vm = np.asarray(sorted(resumed), dtype=np.int64)
            stopped = [resumed[p] for p in vm.tolist()]
            kids = np.concatenate([kids, pieces.kid[vm]])
            going = np.concatenate([going, vm])
            carry_from = np.concatenate([carry_from, [s.carry_from for s in stopped]]).astype(np.int64)
            first_open = (
                np.concatenate([first_open - carry_from[: len(first_open)], [s.first_open for s in stopped]]).astype(
                    np.int64
                )
                + carry_from
            )
            numbers = np.concatenate([numbers, [s.match_number for s in stopped]]).astype(np.int64)
            totals = np.concatenate([totals, [s.total for s in stopped]]).astype(np.int64)
            end = pieces.end[going]
            if deadlines is not None:
                deadlines = np.concatenate(
                    [deadlines, [NO_TIME if s.deadline_us is None else s.deadline_us for s in stopped]]
                ).astype(np.int64)
        f["live"][kids] = 1
        f["start"][kids] = pieces.start[going]
        f["last"][kids] = us[end - 1]
        f["total"][kids] = totals
        f["number"][kids] = numbers
        f["context"][kids] = first_open - carry_from
        if deadlines is not None:
            result.deadlines = {k: d for k, d in zip(kids.tolist(), deadlines.tolist()) if d != NO_TIME}
        sizes = end - carry_from
        if not sizes.sum():
            return Rows.empty(self.columns)
        within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        kept = np.repeat(carry_from, sizes) + within  # engine positions of the carried rows
        carry = rows.take(order[kept])
        # Keep each carried start's decision when it is final (column-wise pieces only; the next call then
        # matches only the starts still undecided, and the new rows').
        final = np.zeros(m, dtype=bool)
        vm_pieces = np.fromiter(on_vm, dtype=np.int64, count=len(on_vm))
        if found is not None:
            final = (
                ~walk.undecided
                & ~walk.context
                & np.isin(walk.outcome, (decisions.FAIL, decisions.MATCH, decisions.TIMEOUT))
            )
            final[np.isin(piece_of, vm_pieces)] = False
        final = final[kept]
        carry.cols[KNOWN] = np.where(final, walk.outcome[kept] if found is not None else -1, -1).astype(np.int64)
        for item in range(len(self.plan.items)):
            carry.cols[f"{SPAN}{item}"] = np.where(final, walk.spans[item, kept] if found is not None else 0, 0).astype(
                np.int64
            )
        if found is not None and found.searched.any():  # where undecided starts' searches stopped (column-wise pieces)
            on_engine = ~np.isin(piece_of, vm_pieces)
            carry.cols[SEARCHED] = np.where(walk.undecided & on_engine, found.searched, 0)[kept]
        else:
            carry.cols.pop(SEARCHED, None)
        return carry

    def _known(self, rows: Rows, order: np.ndarray) -> np.ndarray:
        values = rows.cols.get(KNOWN)
        if values is None:
            return np.full(len(order), -1, dtype=np.int64)
        return values[order]

    def _known_spans(self, rows: Rows, members: np.ndarray) -> np.ndarray:
        return np.stack([rows.cols[f"{SPAN}{item}"][members] for item in range(len(self.plan.items))])

    def _end_piece(self, table: ColumnarTable, pieces: _Pieces, piece: int, stats: dict) -> None:
        """The session of ``piece`` ended: the key's session closes (its last piece) or is counted (a later
        piece of the key starts the next session)."""
        kid = int(pieces.kid[piece])
        if piece + 1 == len(pieces.kid) or pieces.kid[piece + 1] != kid:
            self._close_keys(table, np.array([kid]), stats)
        else:
            table.fields["sessions"][kid] += 1
            stats["sessions_closed"] += 1

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _measure(self, table, rows, order, pieces, piece_of, us, chosen, spans, data, values, on_vm, timeouts) -> dict:
        """piece -> (output rows, match ids) of the chosen starts (``timeouts``: which are TIMEOUT rows)."""
        if not chosen:
            return {}
        starts = np.asarray(chosen, dtype=np.int64)
        counts = spans[:, starts]
        begins = starts + np.cumsum(counts, axis=0) - counts
        parts = piece_of[starts]
        first = np.searchsorted(parts, parts, side="left")
        if timeouts is None or not timeouts.any():
            timeouts = None
            numbers = np.arange(len(starts), dtype=np.int64) - first + 1 + pieces.number[parts]
        else:  # MATCH_NUMBER(): the matches so far in the session; a TIMEOUT row's id hashes -1 (TaggingOutput)
            matched = np.cumsum(~timeouts)
            numbers = matched - (matched[first] - (~timeouts[first]).astype(np.int64)) + pieces.number[parts]
        loaded = dict(values)

        def load(name: str) -> kernels.Value:
            if name not in loaded:
                loaded[name] = data.load(name, order)
            return loaded[name]

        matches = sequence_output.Matches(
            starts, begins, counts, numbers, order, data, load, values, timeouts, pieces.begin[parts]
        )
        measured = sequence_output.columns(self.measures, matches)
        if measured is None:  # a measure the column programs refuse here: these pieces on the VM
            self._note("measures of a call computed on the Pike VM")
            on_vm.update(int(p) for p in np.unique(parts))
            return {}
        positions = starts - pieces.begin[parts] + pieces.position[parts]
        first_us = us[starts]
        clamped = (first_us < DATETIME_US[0]) | (first_us > DATETIME_US[1])
        if clamped.any():  # the id hashes the datetime the VM sees: clamped to the years 1 to 9999
            first_us = np.where(first_us < DATETIME_US[0], DATETIME_US[0], np.minimum(first_us, DATETIME_US[1]))
        # One pass over the matches of all pieces (the rows, their ids, the outer query), cut by piece after.
        group = np.append(0, np.flatnonzero(np.diff(parts)) + 1)  # each piece's first match
        group_parts = parts[group]
        keys = [table.keys[k] for k in pieces.kid[group_parts].tolist()]
        per_piece = np.diff(np.append(group, len(starts)))
        tagged = numbers if timeouts is None else np.where(timeouts, -1, numbers)
        ids = self.session_ids.ids(
            list(zip(keys, pieces.start[group_parts].tolist())),
            per_piece.tolist(),
            tagged.tolist(),
            positions.tolist(),
            first_us.tolist(),
        )
        of_match = np.repeat(np.arange(len(keys)), per_piece)
        key_columns = [np.fromiter(column, dtype=object, count=len(keys))[of_match].tolist() for column in zip(*keys)]
        found = list(zip(*key_columns, *measured))  # MATCH_RECOGNIZE's rows: the key, then the measures
        ends = np.cumsum(per_piece)
        if self.where is not None:  # WHERE may drop rows: each kept row keeps its match's id
            where = self.where
            kept = [where(row) is True for row in found]
            found, ids = list(compress(found, kept)), list(compress(ids, kept))
            ends = np.cumsum(kept)[ends - 1]
        found = self.select.apply(found, order_and_limit=False)
        out: dict[int, tuple[list, list]] = {}
        lo = 0
        for part, hi in zip(group_parts.tolist(), ends.tolist()):
            out[part] = (found[lo:hi], ids[lo:hi])
            lo = hi
        return out

    def _vm_piece(self, table, rows, order, pieces, piece: int, us: np.ndarray, result: CallResult):
        """One session piece on the Pike VM, resumed at its first start not yet decided (every start before
        it decided, as the carried state says). Returns (rows, ids, None when the session ended, else where
        the VM stopped)."""
        engine = self.engine
        stats = result.stats
        self.vm_pieces += 1
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
            self._end_piece(table, pieces, piece, stats)
            return run.result.rows, run.result.match_ids, None
        run.advance(int(pieces.clock[piece]))
        matcher.compact()
        result.live_matches += matcher.live_threads()
        stopped = _Resumed(
            carry_from=begin + matcher.base - position,
            first_open=matcher.first_undecided() - matcher.base,
            match_number=matcher.match_number,
            total=matcher.total,
            deadline_us=run.deadline_us(),
        )
        return run.result.rows, run.result.match_ids, stopped

    def _timers(self, table: ColumnarTable, call_order: list[int], clock: np.ndarray, result: CallResult) -> None:
        """Each called key's next timer (``keyed.py`` step 5), set in call order as Spark sets them."""
        stats = result.stats
        f = table.fields
        gap = self.engine.session_timeout_us
        pending = table.pending
        size = len(table.keys)
        waiting = np.bincount(pending.kid, minlength=size)
        oldest = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(oldest, pending.kid, pending.us)
        carried = np.bincount(table.carried.kid, minlength=size)
        live = f["live"]
        called = np.asarray(call_order, dtype=np.int64)
        stats["pending_rows"] = int(waiting[called].sum()) if len(called) else 0
        stats["matcher_rows"] = int((carried[called] * live[called]).sum()) if len(called) else 0
        stats["live_matches"] = result.live_matches
        timers, deadlines = table.timers, result.deadlines
        if not len(called):
            return
        table.drop_timers(called)  # a called key's timer is set anew, after the others' (Spark's order)
        never = np.iinfo(np.int64).max
        has_rows, is_live = waiting[called] > 0, live[called].astype(bool)
        due = np.where(has_rows, oldest[called], never)
        if gap is not None:
            due = np.where(is_live, np.minimum(due, f["last"][called] + gap), due)
        if deadlines:
            deadline = np.full(size, NO_TIME, dtype=np.int64)
            deadline[np.fromiter(deadlines, dtype=np.int64, count=len(deadlines))] = list(deadlines.values())
            found = deadline[called]
            due = np.where(is_live & (found != NO_TIME), np.minimum(due, np.maximum(found, clock[called] + 1)), due)
        setting = (has_rows | is_live) & (due != never)
        timers.update(zip(called[setting].tolist(), due[setting].tolist()))


def _by_key(kept: Rows, carry: Rows) -> Rows:
    """The carried rows of the keys not called and of the called ones in one table in key order (stable: a
    key's rows keep their order); no sort when they already are (no key left out, say)."""
    merged = kept + carry
    kid = merged.kid
    if len(kid) < 2 or bool((kid[1:] >= kid[:-1]).all()):
        return merged
    return merged.take(np.argsort(kid, kind="stable"))


_ONE_US = _dt.timedelta(microseconds=1)


# ------------------------------------------------------------------------------------ Spark's call


def step_bucket(spark_step, cstep: ColumnarStep, pdf, state, watermark_us: int):
    """``key_table.step_bucket`` on the column-wise path: one Spark call for a bucket of keys, every key
    at once. Returns (the call's ``StepResult``, rows and late rows in the per-key path's order; the table)."""
    engine = cstep.engine
    table = ColumnarTable.decode(state.get[0] if state.exists else None, cstep.columns, spark_step.key_buckets, engine)
    keys: list[tuple] = []
    codes = np.zeros(0, dtype=np.int64)
    columns: dict = {name: [] for name in cstep.columns}
    event_us, null_time, rejected = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), None
    if pdf is not None:
        keys, codes, columns, event_us, null_time, rejected = spark_step.bucket_inputs(pdf)
    found = cstep.step(table, keys, codes, columns, event_us, null_time, watermark_us, rejected)
    merged = StepResult(state=None, timer_us=None, stats=found.stats)
    merged.rows, merged.match_ids = found.in_call_order()
    merged.late = sorted(found.late, key=lambda item: (codes[item[0]], item[0]))
    return merged, table
