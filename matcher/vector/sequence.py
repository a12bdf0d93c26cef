"""A second column-wise engine: a pattern that is a sequence of variables, matched at every start row at
once, for the conditions and time limits the regex path (``fastpath.py``) cannot take.

What it takes (``sequence_plan.analyze`` says why not): ONE ROW PER MATCH over a pattern ``V1 V2{2,} V3*? ...``, each
variable once, each a single row or a quantified run (bounded or not, greedy or reluctant), with

- ``WITHIN`` (and ``SHOW TIMEOUT MATCHES``): a row at or past a start's first row + the interval is out
  of its reach, so each start is matched on the rows before that limit: the preferred match under the
  limit, as the Pike VM and the reference matcher find it, not the regex's match cut afterwards;
- DEFINE conditions that read the current row and constant PREV/NEXT (``kernels.py``), and also the
  match so far (``History``): another variable's row (``B.price < A.price``, ``C.ts - A.ts <= INTERVAL
  '30' SECOND``: times are int64 ticks in the kernels), ``FIRST``/``LAST`` with constant offsets, and running ``SUM``,
  ``COUNT``, ``AVG``, ``MIN``, ``MAX`` thresholds, carried per start as the Pike VM carries them
  (``running.py``): the same additions in the same order, so the same bits;
- absence ``!B`` (our extension), compiled as the VM's program has it: ``A !B C`` is a reluctant run of
  rows where B's condition does not hold (tested as if the row were B) before C; a trailing ``A !B``
  takes every row before WITHIN's deadline and matches only when time reaches it (the lane's limit is
  a row at or past the deadline, or the clock is) with no B row before: MATCH_STATUS() 'ABSENCE'. When
  B's condition reads only its row, the first B row after every row is one reversed running minimum,
  so no start is scanned. A variable that is both a term and an absence goes to the VM.

How. Every row of a batch is a *lane*: the start of a candidate match. The items are matched in order for
all lanes at once. An item is scanned in lockstep, one row per step for every lane still on it: the step
tests the next item's first row (where the run could end) and the item's own condition (whether it goes
on), both evaluated column-wise over the lanes (``LaneFrame``: the kernels' frame, one current row per
lane). A run ends where its condition fails, at its bound, or at the lane's limit (its partition's end, or
WITHIN). The preferred end is then the last (greedy) or first (reluctant) place where the next item
holds. When the next item is the last and takes one row or more, that end always completes the match
(``Lanes._settles``: the V shape ``A B+ C+``). When two items or more follow and several ends are possible,
which one wins depends on the rest of the pattern (backtracking): the start tries its ends in the order the
pattern prefers, matching the rest again from each (``Lanes._backtrack``, at most ``MAX_RUN_ENDS``); past
that bound, or where a partial match that times out is a row, the start is *ambiguous*, and its partition
goes to the Pike VM.
The work is the sum over starts of the rows each looks at: bounded by the run lengths, the time limit and
the thresholds, not by the partition.

Two runs are ended without that scan, when the batch allows it (else the scan, with a note):
a run that takes every row before the last item, a single row comparing its row with an item before the
run (``A B*? C``, ``C.price < A.price - 0.10``), ends at the first (reluctant) or last (greedy) row of
its window where the comparison holds (``first_hit.py``: range minima and a binary descent); a run under
a running SUM/COUNT threshold (``A+ B``, ``SUM(A.volume) < 10000``) of integers that are never negative
ends where the cumulative sums cross it (``cumulative.py``). Both give the scan's answer by construction
(comparisons of the same values; integer sums, exact in any order), and the property tests check it.

Then AFTER MATCH SKIP picks the starts that count (``sequence_output.walk``: one Python step per emitted
match): a start whose match is found is emitted, one whose partial matches ran out of time is a TIMEOUT
row (no skip), any other moves on by one row. ONE ROW PER MATCH measures are computed for all matches
and TIMEOUT rows at once (``sequence_output``: column programs, or the VM's measure code once per
match); a measure that reads rows outside its match (PREV/NEXT) or a failing skip goes through
``PartitionOutput``, as the VM. A batch the kernels cannot evaluate exactly (``Unsupported``) goes to the
VM whole; a partition with an ambiguous start, alone.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cep.grammar import ast
from cep.matcher.program.output import PartitionOutput
from cep.matcher.program.skip import FAIL, MATCH, TIMEOUT, UNDECIDED, walk
from cep.matcher.rows.partitioning import partition_indices
from cep.matcher.vector import cumulative, first_hit, kernels, sequence_output
from cep.matcher.vector.lane_frame import Accumulator, LaneFrame, Slot
from cep.matcher.vector.layout import ArrayInput, ListInput

# Rows per chunk of partitions matched at once: the lane arrays (a dozen per item) stay bounded.
CHUNK_ROWS = 1 << 20
# The rows the starts of a chunk may look at, per row plus a slack: a start looks at its whole run or
# window, so runs that stay open for long (``A+ B`` with no B: quadratic) would cost more; past this the
# batch goes to the VM, which bounds such open tails itself (E0431).
SCAN_BUDGET_PER_ROW = 256
SCAN_SLACK = 1 << 16

# The ends of one run a start tries in turn, in the order the pattern prefers them, when the run has several
# and two items or more follow it (backtracking: ``Lanes._backtrack``): each try matches the items after it
# again for that start, so a start costs at most this many scans of its rest; past it the start is AMBIGUOUS
# and the Pike VM, which weighs every end at once as threads, decides it.
MAX_RUN_ENDS = 8

# A start's outcome, in the codes the AFTER MATCH SKIP walk reads (``program/skip.py``); a start whose
# preferred match depends on backtracking is AMBIGUOUS: the walk stops there and the VM decides.
AMBIGUOUS = UNDECIDED

Fallback = Callable[[tuple, dict], list]


@dataclass(frozen=True)
class Item:
    """One item of the sequence: variable ``label`` taken ``low`` to ``high`` times (None: no bound)."""

    label: int
    low: int
    high: int | None
    greedy: bool


# ---------------------------------------------------------------------------------------- the plan


@dataclass
class SequencePlan:
    machine: Any
    statement: ast.Statement
    items: tuple[Item, ...]
    conditions: list  # per label: kernel condition over a LaneFrame, or None (every row)
    slots: list[Slot]
    columns: tuple[str, ...]  # the columns the conditions read
    within: _dt.timedelta | None
    show_timeout: bool
    measures: list | None  # the measures as column programs (``sequence_output``), or None
    # item index -> (op, row kernel, start kernel): the run ends where the next (last, single-row) item's
    # comparison first (or last) holds, found by ``first_hit`` instead of a scan
    hits: dict = field(default_factory=dict)
    # item index -> ``cumulative.Threshold``: the run ends where its running SUM/COUNT crosses a constant
    cumulative: dict = field(default_factory=dict)
    # the pattern ends with an absence `!B`: a match completes only when time reaches its deadline
    deadline: bool = False
    # that B's condition when it reads only its row (and constant PREV/NEXT): the first B row after each
    # start is then found for all starts at once, without a scan
    quiet: Callable | None = None
    # ALL ROWS PER MATCH (the column-wise stream's plan alone): the measures as ``all_rows.measures`` gives them
    all_rows: list | None = None
    notes: list[str] = field(default_factory=list)
    # partitions per engine, and batches per route (``explain`` names them; tests check a route is taken)
    stats: dict[str, int] = field(
        default_factory=lambda: {
            "sequence_partitions": 0,
            "vm_partitions": 0,
            "columnar_measures": 0,
            "first_hit": 0,
            "cumulative": 0,
            "quiet": 0,
            "resumed": 0,
        }
    )

    def run(self, source, *, fallback: Fallback, typed: bool = False, clock=None) -> list[tuple]:
        """Every output row of the input (columns of Python values, or a ``layout.ArrayInput``), in the
        VM's order; ``fallback(key, columns)`` matches a partition on the VM; ``clock`` is the event time
        at the end of the input (WITHIN), as for ``match_partition``."""
        data = source if isinstance(source, ArrayInput) else ListInput(source)
        machine = self.machine
        if data.n == 0:
            columns = data.python()
            return _elsewhere(fallback, machine, partition_indices(self.statement, machine, columns), columns)
        if self.within is not None:
            try:
                data.event_times(machine.within.column)  # converted once: the layout sorts by them too
            except kernels.Unsupported:
                pass  # the batch goes to the VM below, saying why
        layout = data.layout(self.statement, machine)
        order, counts = layout.order, layout.counts
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        try:
            values = {name: data.load(name, order) for name in self.columns}
            times = _times(data, machine.within.column, order, clock, self.within) if self.within is not None else None
        except kernels.Unsupported as why:
            self.notes.append(f"ran on the VM: {why}")
            return self._all_on_vm(fallback, layout, offsets, data.python())
        outcome = np.zeros(len(order), dtype=np.int8)
        spans = np.zeros((len(self.items), len(order)), dtype=np.int64)  # rows of each item, per start
        try:
            for begin, end in chunks(offsets):
                lanes = Lanes(self, values, times, offsets, begin, end)
                lanes.match(outcome, spans)
        except kernels.Unsupported as why:
            self.notes.append(f"ran on the VM: {why}")
            return self._all_on_vm(fallback, layout, offsets, data.python())
        return self._output(fallback, data, layout, offsets, outcome, spans, values)

    def _all_on_vm(self, fallback, layout, offsets, columns) -> list[tuple]:
        groups = [(key, layout.order[offsets[i] : offsets[i + 1]].tolist()) for i, key in enumerate(layout.keys)]
        self.stats["vm_partitions"] += len(groups)
        return _elsewhere(fallback, self.machine, groups, columns)

    def _output(self, fallback, data, layout, offsets, outcome, spans, values) -> list[tuple]:
        """The rows of the starts AFTER MATCH SKIP picks (``skip.walk``), TIMEOUT rows included: measures
        column-wise where they can be (``sequence_output``), else, and for partitions with an ambiguous
        start or a failing skip, through ``PartitionOutput`` as the VM does (only these need the input as
        Python values: ``data.python()``, built once, when first asked)."""
        parts = len(layout.keys)
        targets, failed = self.machine.skip.after_matches(outcome, spans, self.item_labels)
        steps = np.where(failed, UNDECIDED, outcome)  # a match whose skip fails: PartitionOutput says why
        chain = walk(steps, targets, offsets)
        part_of = np.repeat(np.arange(parts, dtype=np.int64), layout.counts)
        elsewhere = part_of[chain.stopped]
        starts = chain.chosen
        if len(elsewhere):
            starts = starts[~np.isin(part_of[starts], elsewhere)]
        measured = None
        if self.measures is not None:
            matches = self._matches(starts, spans, outcome, part_of, data, layout, values)
            measured = sequence_output.columns(self.measures, matches)
        if measured is None:
            self.notes.append("measures through PartitionOutput (a shape or a value the column programs do not take)")
            rows: list[tuple] = []
            for index in range(parts):
                rows.extend(
                    self._partition_output(fallback, layout, offsets, data.python(), outcome, spans, chain, index)
                )
            return rows
        self.stats["columnar_measures"] += 1
        match_parts = part_of[starts]
        key_columns = [
            np.array([key[i] for key in layout.keys] + [None], dtype=object)[:-1][match_parts].tolist()
            for i in range(len(self.machine.partition_names))
        ]
        found = list(zip(*key_columns, *measured)) if key_columns or measured else [()] * len(starts)
        self.stats["sequence_partitions"] += parts - len(elsewhere)
        if not len(elsewhere):
            return found
        rows, taken = [], 0
        for index in elsewhere.tolist():  # in partition order, as the walk stops at them
            upto = int(np.searchsorted(match_parts, index))
            rows.extend(found[taken:upto])
            taken = upto
            rows.extend(self._partition_output(fallback, layout, offsets, data.python(), outcome, spans, chain, index))
        rows.extend(found[taken:])
        return rows

    @property
    def item_labels(self) -> tuple[int, ...]:
        """The label of each item's rows, in pattern order."""
        return tuple(item.label for item in self.items)

    def _matches(self, starts, spans, outcome, part_of, data, layout, values) -> sequence_output.Matches:
        counts = spans[:, starts]
        begins = starts + np.cumsum(counts, axis=0) - counts
        parts = part_of[starts]
        first = np.searchsorted(parts, parts, side="left")  # each match's partition's first output row
        timeout = outcome[starts] == TIMEOUT
        matched = np.cumsum(~timeout)  # MATCH_NUMBER(): the matches so far in the partition
        number = matched - (matched[first] - (~timeout[first]))
        loaded = dict(values)

        def load(name: str) -> kernels.Value:
            if name not in loaded:
                loaded[name] = data.load(name, layout.order)
            return loaded[name]

        return sequence_output.Matches(
            starts,
            begins,
            counts,
            number,
            layout.order,
            data,
            load,
            values,
            timeout,
            np.searchsorted(part_of, parts, side="left"),
        )

    def _partition_output(self, fallback, layout, offsets, columns, outcome, spans, chain, index: int) -> list[tuple]:
        """One partition's rows through ``PartitionOutput``, at the starts the walk (``chain``) chose there;
        where the walk stopped, an ambiguous start sends the partition to the VM, and a failing skip makes
        ``PartitionOutput`` raise the VM's error."""
        machine = self.machine
        key = layout.keys[index]
        begin, end = int(offsets[index]), int(offsets[index + 1])
        if not (outcome[begin:end] != FAIL).any():
            return []  # no start here matches or times out: no output
        members = layout.order[begin:end].tolist()
        part = {name: [columns[name][i] for i in members] for name in machine.columns}
        stopped = chain.stopped[(chain.stopped >= begin) & (chain.stopped < end)].tolist()
        if stopped and outcome[stopped[0]] == AMBIGUOUS:
            self.stats["vm_partitions"] += 1
            return fallback(key, part)
        output = PartitionOutput(machine, key, part)
        output.env.total = end - begin
        labels_of = self.item_labels
        chosen = chain.chosen[(chain.chosen >= begin) & (chain.chosen < end)].tolist()
        for start in chosen + stopped:  # a stop here is a match whose skip fails: emit_match raises
            counts = spans[:, start].tolist()
            labels = [label for label, count in zip(labels_of, counts) for _ in range(count)]
            local = start - begin
            if outcome[start] == MATCH:
                output.emit_match(local, local + len(labels) - 1, labels, [])
            else:  # TIMEOUT: not a match, no skip
                output.out.extend(machine.output.timeout(output, local, local + len(labels) - 1, labels))
        self.stats["sequence_partitions"] += 1
        return output.out


def _sliced(value: kernels.Value, begin: int, end: int) -> kernels.Value:
    if value.kind == "null":
        return value
    return kernels.Value(value.kind, value.data[begin:end], None if value.nulls is None else value.nulls[begin:end])


def chunks(offsets: np.ndarray):
    """(first row, end row) of runs of whole partitions of about CHUNK_ROWS rows."""
    parts = len(offsets) - 1
    index = 0
    while index < parts:
        begin = int(offsets[index])
        stop = int(np.searchsorted(offsets, begin + CHUNK_ROWS, side="right")) - 1
        stop = max(stop, index + 1)
        yield index, min(stop, parts)
        index = min(stop, parts)


def _elsewhere(fallback: Fallback, machine, groups, columns) -> list[tuple]:
    rows: list[tuple] = []
    for key, indices in groups:
        rows.extend(fallback(key, {name: [columns[name][i] for i in indices] for name in machine.columns}))
    return rows


def _times(data, name: str, order: np.ndarray, clock, within: _dt.timedelta):
    """(event times in ORDER BY order as int64, the clock in the same unit or None, WITHIN in that unit):
    naive datetimes as µs, or integer epoch milliseconds, compared exactly as the VM compares them
    (``machine.Within``); anything else is Unsupported."""
    ticks, unit = data.event_times(name)
    ticks = ticks[order]
    if clock is None:
        end = None
    elif unit == "ms" and isinstance(clock, int) and not isinstance(clock, bool):
        end = clock
    elif unit == "us" and isinstance(clock, _dt.datetime) and clock.tzinfo is None:
        end = int(np.datetime64(clock, "us").astype(np.int64))
    else:
        raise kernels.Unsupported("a clock of another kind than the event times")
    if unit == "us":
        width = within // _dt.timedelta(microseconds=1)
    else:
        width = within / _dt.timedelta(milliseconds=1)
        if width != int(width):
            raise kernels.Unsupported("a WITHIN of a fraction of a millisecond over numeric times")
        width = int(width)
    return ticks, end, width


# --------------------------------------------------------------------------------------- the lanes


class Lanes:
    """The starts of one chunk of partitions, matched item by item."""

    def __init__(
        self,
        plan: SequencePlan,
        values: dict,
        times,
        offsets: np.ndarray,
        first_part: int,
        end_part: int,
        starts: np.ndarray | None = None,
        resume: np.ndarray | None = None,
        visible: np.ndarray | None = None,
    ):
        self.plan = plan
        self.values = values
        self.begin = int(offsets[first_part])
        self.end = int(offsets[end_part])
        n = self.end - self.begin
        self.n = n
        bounds = offsets[first_part : end_part + 1] - self.begin
        sizes = np.diff(bounds)
        self.bounds = bounds  # partition offsets within the chunk
        self.part_start = np.repeat(bounds[:-1], sizes)
        self.part_end = np.repeat(bounds[1:], sizes)
        # per row, the end of the rows its partition's conditions may be tested on: a stream's open session
        # piece stops NEXT's reach before its last rows (their conditions wait for the rows after them)
        self.visible_end = self.part_end if visible is None else np.repeat(visible - self.begin, sizes)
        self.limit = self.visible_end.copy()
        self.expired = np.zeros(n, dtype=bool)
        # a start whose decision wanted a row at its limit (``decisions.py``: not final on a stream)
        self.reached = np.zeros(n, dtype=bool)
        # the start rows to match, a mask over the chunk's rows (``decisions.py``); None: every row
        self.starts = starts
        # per start: rows from it on where a search already found no hit (``decisions.py``: a stream's carried
        # starts), and what this search adds to that (0: nothing known)
        self.resume = resume
        self.searched = np.zeros(n, dtype=np.int64)
        if times is not None:
            ticks, clock, width = times
            self._within_limits(ticks[self.begin : self.end], clock, width, bounds)
        self.item_begin = np.full((len(plan.items), n), -1, dtype=np.int64)
        self.item_count = np.zeros((len(plan.items), n), dtype=np.int64)
        self.item_of = {item.label: index for index, item in enumerate(plan.items)}
        self.acc = [Accumulator(slot, self) for slot in plan.slots]
        self.budget = SCAN_BUDGET_PER_ROW * n + SCAN_SLACK

    def _within_limits(self, ticks: np.ndarray, clock, width: int, bounds: np.ndarray) -> None:
        """Per start: the first row at or past its time + WITHIN (or its partition's end), and whether
        reaching that row means time ran out (a row there, or the clock past the deadline)."""
        low = int(ticks.min()) if self.n else 0
        span = (int(ticks.max()) - low if self.n else 0) + width + 1
        parts = len(bounds) - 1
        if span * parts < 2**62:  # one search over all partitions: each shifted past the one before
            shifted = ticks - low + np.repeat(np.arange(parts, dtype=np.int64) * span, np.diff(bounds))
            if self.starts is None:
                limit = np.searchsorted(shifted, shifted + width, side="left").astype(np.int64)
            else:  # only the starts matched need theirs (a stream's carried rows are mostly decided)
                limit = self.part_end.copy()
                at = np.flatnonzero(self.starts)
                limit[at] = np.searchsorted(shifted, shifted[at] + width, side="left")
        else:
            limit = np.empty(self.n, dtype=np.int64)
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # ticks are sorted within each
                part = ticks[a:b]
                limit[a:b] = a + np.searchsorted(part, part + width, side="left")
        self.limit = np.minimum(limit, self.visible_end)
        # Time ran out when a row the conditions may be tested on is at or past the deadline, or the clock
        # passed it with every row tested: while some rows wait for NEXT's rows, the Pike VM does not apply
        # the clock either (``PartitionMatcher._loop``), so a start waits with them.
        deadline_passed = limit < self.visible_end
        if isinstance(clock, np.ndarray):  # a clock per row (a stream's keys each have their own)
            clock = clock[self.begin : self.end]
        if clock is not None:
            deadline_passed |= (clock - ticks >= width) & (self.visible_end == self.part_end)
        self.expired = deadline_passed

    # ------------------------------------------------------------------------------------ matching

    def match(self, outcome: np.ndarray, spans: np.ndarray) -> None:
        lanes = np.arange(self.n, dtype=np.int64)
        if self.starts is not None:
            lanes = lanes[self.starts]
        pos = lanes.copy()
        state = np.full(self.n, FAIL, dtype=np.int8)
        self._rest(0, lanes, pos, state)
        if not self.plan.show_timeout:
            state[state == TIMEOUT] = FAIL
        outcome[self.begin : self.end] = state
        spans[:, self.begin : self.end] = self.item_count

    def _rest(self, first: int, lanes, pos, state) -> None:
        """Match items ``first`` on for ``lanes`` at rows ``pos``: the lanes that take them all MATCH."""
        items = self.plan.items
        for index in range(first, len(items)):
            if not len(lanes):
                return
            following = items[index + 1] if index + 1 < len(items) else None
            last_next = following is not None and index + 2 == len(items) and following.low == following.high == 1
            lanes, pos = self._item(index, items[index], following, last_next, lanes, pos, state)
        state[lanes] = MATCH

    def _item(self, index: int, item: Item, following: Item | None, next_is_last: bool, lanes, pos, state):
        """Scan item ``index`` for ``lanes`` at rows ``pos``; returns the lanes that go on, and where.

        Lanes that end here get their outcome in ``state`` (MATCH when the item, or the single-row item
        after it, ends the pattern)."""
        low, high, greedy = item.low, item.high, item.greedy
        self.item_begin[index, lanes] = pos
        route = self.plan.hits.get(index)
        if route is not None and next_is_last:
            try:
                return self._first_hit(index, item, following, route, lanes, pos, state)
            except first_hit.NoRoute as why:
                self.plan.notes.append(f"{self.plan.machine.label_names[item.label]}'s run scanned row by row: {why}")
        if following is None and self.plan.deadline and self.plan.quiet is not None:
            self._quiet_until_deadline(index, lanes, pos, state)
            return lanes[:0], pos[:0]
        route = self.plan.cumulative.get(index)
        if route is not None and next_is_last:
            try:
                cumulative.end_runs(self, index, item, following, route, lanes, pos, state, (MATCH, TIMEOUT))
                self.plan.stats["cumulative"] += 1
                return lanes[:0], pos[:0]
            except first_hit.NoRoute as why:
                self.plan.notes.append(f"{self.plan.machine.label_names[item.label]}'s run scanned row by row: {why}")
        m = len(lanes)
        chosen = np.full(m, -1, dtype=np.int64)  # the preferred run length so far
        found = np.zeros(m, dtype=np.int64)  # how many run lengths the next item accepts
        at_limit = np.zeros(m, dtype=bool)  # a partial match still wanted a row at the lane's limit
        snapshots = [acc.snapshot(m) for acc in self.acc]
        scanning = np.arange(m)  # indexes into lanes
        last = following is None
        # A fixed count hands its lanes to the next item, which tests its own rows; only a single-row
        # last item is tested here, to finish the match at once.
        fixed = low == high and not next_is_last
        settles = self._settles(index, following)
        stop_first = (last or next_is_last or settles) and not greedy
        ends_seen = None  # (lanes, run length) of every end, for ``_backtrack``; the aggregates at the run's start
        if not (last or fixed or next_is_last or settles):
            ends_seen = ([], [acc.snapshot(m) for acc in self.acc])
            for acc, snap in zip(self.acc, ends_seen[1]):
                acc.save(snap, np.arange(m), lanes)
        step = 0
        while len(scanning):
            self.budget -= len(scanning)
            if self.budget < 0:
                raise kernels.Unsupported("runs that stay open too long for a scan from every start (quadratic)")
            lane = lanes[scanning]
            row = pos[scanning] + step
            inside = row < self.limit[lane]
            # 1. May the run end here? (the next item's first row holds; or nothing follows)
            if step >= low:
                if last or fixed:
                    ends = np.ones(len(scanning), dtype=bool)
                else:
                    ends = inside.copy()
                    test = np.flatnonzero(inside)
                    if len(test):
                        ends[test] = self.holds(following.label, lane[test], row[test])
                hit = scanning[ends]
                if len(hit):
                    take = hit if greedy else hit[chosen[hit] < 0]
                    chosen[take] = step
                    found[hit] += 1
                    if ends_seen is not None:
                        ends_seen[0].append((hit, step))
                    for acc, snap in zip(self.acc, snapshots):
                        acc.save(snap, take, lanes[take])
                if stop_first:
                    keep = ~ends
                    scanning, lane, row, inside = scanning[keep], lane[keep], row[keep], inside[keep]
            # 2. Does the run go on? (its own condition holds on this row, within its bound)
            if high is not None and step >= high:
                if not (last or fixed):  # only the next item still wants a row: at the limit, it cannot have it
                    at_limit[scanning[~inside]] = True
                break
            outside = ~inside
            if outside.any():  # at the lane's limit with the run (or the next item) still wanting a row
                wanting = scanning[outside]
                at_limit[wanting] = True
            scanning, lane, row = scanning[inside], lane[inside], row[inside]
            if not len(scanning):
                break
            ok = self.holds(item.label, lane, row)
            scanning, lane, row = scanning[ok], lane[ok], row[ok]
            self.item_count[index, lane] = step + 1
            for acc in self.acc:
                acc.add(item.label, lane, row)
            step += 1
        self.reached[lanes[at_limit]] = True
        going, going_pos = self._resolve(
            index, item, following, next_is_last, lanes, pos, chosen, found, at_limit, snapshots, state
        )
        if ends_seen is not None and ends_seen[0]:
            several = (found + at_limit >= 2) & (found <= MAX_RUN_ENDS)
            self._backtrack(index, item, lanes, pos, several, ends_seen, state)
        return going, going_pos

    def _first_hit(self, index: int, item: Item, following: Item, route, lanes, pos, state):
        """A run that takes every row, then the last item: it ends at the first (reluctant) or last
        (greedy) row of its window where the last item's comparison holds (``first_hit``)."""
        op, row_kernel, start_kernel = route
        limit = self.limit[lanes]
        lo = pos + item.low
        if self.resume is not None:  # rows a search of an earlier call found no hit in
            resumed = lanes + self.resume[lanes]
            self.plan.stats["resumed"] += int((resumed > lo).sum())
            lo = np.maximum(lo, resumed)
        hi = limit if item.high is None else np.minimum(limit, pos + item.high + 1)
        hi = np.maximum(hi, lo)
        start_value = start_kernel(LaneFrame(self, lanes, pos, following.label))
        start = first_hit.as_floats(start_value, len(lanes), np.nan)
        loaders = {
            name: (lambda value=value: _sliced(value, self.begin, self.end)) for name, value in self.values.items()
        }
        frame = kernels.Frame(self.n, loaders, self.bounds)
        rows = first_hit.as_floats(row_kernel(frame), self.n, first_hit.sentinel(op), start_value.kind)
        found = first_hit.search(rows, op, lo, hi, start, self.bounds, last=item.greedy)
        self.plan.stats["first_hit"] += 1
        done = found >= 0
        if not self.plan.machine.lookahead:  # no row's value changes when rows come after it (no NEXT)
            self.searched[lanes[~done]] = (hi - lanes)[~done]
        finished = lanes[done]
        self.item_count[index, finished] = found[done] - pos[done]
        self.item_begin[index + 1, finished] = found[done]
        self.item_count[index + 1, finished] = 1
        state[finished] = MATCH
        at_limit = np.ones(len(lanes), dtype=bool) if item.high is None else pos + item.high >= limit
        self.reached[lanes[at_limit & (~done | item.greedy)]] = True
        timed = ~done & at_limit & self.expired[lanes]
        taken = limit - pos if item.high is None else np.minimum(limit - pos, item.high)
        self.item_count[index, lanes[timed]] = np.maximum(taken[timed], 0)
        state[lanes[timed]] = TIMEOUT
        return lanes[:0], pos[:0]

    def _quiet_until_deadline(self, index: int, lanes, pos, state) -> None:
        """A trailing ``!B`` whose B reads only its row: the lane matches when its first B row at or
        after ``pos`` (a reversed running minimum over the rows) is at or past its limit, and time
        reached the deadline; the absence then takes every row before the limit."""
        loaders = {
            name: (lambda value=value: _sliced(value, self.begin, self.end)) for name, value in self.values.items()
        }
        frame = kernels.Frame(self.n, loaders, self.bounds)
        rows = np.arange(self.n + 1, dtype=np.int64)
        b_rows = np.where(np.append(self.plan.quiet(frame), True), rows, self.n)
        next_b = np.minimum.accumulate(b_rows[::-1])[::-1]
        limit = self.limit[lanes]
        quiet = next_b[pos] >= limit
        self.reached[lanes[quiet]] = True  # no B row yet: a later row or the clock decides (``decisions.py``)
        done = quiet & self.expired[lanes]
        self.item_count[index, lanes[done]] = (limit - pos)[done]
        state[lanes[done]] = MATCH
        self.plan.stats["quiet"] += 1

    def _resolve(self, index, item, following, next_is_last, lanes, pos, chosen, found, at_limit, snapshots, state):
        if following is None or next_is_last:
            done = chosen >= 0
            if following is None and self.plan.deadline:  # `A !B`: no B row until time reached the deadline
                done &= at_limit & self.expired[lanes]
            # a preferred partial match that ran out of time never beats a found match (it dies)
            self._restore(index, lanes, chosen, done, snapshots)
            finished = lanes[done]
            if following is not None:  # the single-row item after this one takes its row
                row = pos[done] + chosen[done]
                self.item_begin[index + 1, finished] = row
                self.item_count[index + 1, finished] = 1
                for acc in self.acc:
                    acc.add(following.label, finished, row)
            state[finished] = MATCH
            timed = ~done & at_limit & self.expired[lanes]
            state[lanes[timed]] = TIMEOUT
            return lanes[:0], pos[:0]
        if self._settles(index, following):  # the preferred end always completes: no other end is weighed
            found = np.minimum(found, 1)
            at_limit = at_limit & (found == 0)
        ways = found + at_limit
        state[lanes[ways >= 2]] = AMBIGUOUS
        timed = (ways == 1) & at_limit & self.expired[lanes]
        state[lanes[timed]] = TIMEOUT
        going = (ways == 1) & (chosen >= 0)
        self._restore(index, lanes, chosen, going, snapshots)
        return lanes[going], pos[going] + chosen[going]

    def _backtrack(self, index: int, item: Item, lanes, pos, several, ends_seen, state) -> None:
        """The starts (``several``) whose run ``index`` has several ends, followed by two items or more:
        each tries its ends in the order the pattern prefers them (greedy: the longest first), matching
        the items after the run again from each, until one matches (MATCH) or its rest is AMBIGUOUS. A
        rest that fails (or runs out of time: no TIMEOUT row is asked for) moves on to the next end, as
        the VM's less preferred thread goes on when a preferred one dies. A rest that wanted a row past the
        rows given marks the start ``reached``: on a stream it is carried, as its preferred match may
        still come. SHOW TIMEOUT MATCHES and a trailing absence, whose partial matches that time out are
        rows, stay AMBIGUOUS."""
        if self.plan.show_timeout or self.plan.deadline:
            return
        hits, opening = ends_seen
        at = np.concatenate([h for h, _ in hits])
        lengths = np.concatenate([np.full(len(h), step, dtype=np.int64) for h, step in hits])
        keep = several[at]
        at, lengths = at[keep], lengths[keep]
        if not len(at):
            return
        order = np.lexsort((-lengths if item.greedy else lengths, at))
        at, lengths = at[order], lengths[order]
        rank = np.arange(len(at)) - np.searchsorted(at, at)  # each end's place in its start's preference
        if self.resume is not None:  # an earlier call's search followed another end: search again
            self.resume = self.resume.copy()
            self.resume[lanes[several]] = 0
        state[lanes[several]] = FAIL
        undecided = several.copy()
        for turn in range(MAX_RUN_ENDS):
            pick = (rank == turn) & undecided[at]
            if not pick.any():
                break
            which, count = at[pick], lengths[pick]
            lane, start = lanes[which], pos[which]
            self.item_count[index, lane] = count
            self.item_count[index + 1 :, lane] = 0  # the items after: none of their rows yet (``LaneFrame``)
            self.item_begin[index + 1 :, lane] = -1
            for acc, snap in zip(self.acc, opening):
                acc.restore(snap, which, lane)
                for step in range(int(count.max())):
                    longer = count > step
                    acc.add(item.label, lane[longer], start[longer] + step)
            self._rest(index + 1, lane, start + count, state)
            outcome = state[lane]
            done = (outcome == MATCH) | (outcome == AMBIGUOUS)
            state[lane[~done]] = FAIL
            undecided[which[done]] = False
        self.searched[lanes[several]] = 0

    def _settles(self, index: int, following: Item | None) -> bool:
        """Whether a run's preferred end (its last end where the next item holds, greedy; its first,
        reluctant) is its match's end whatever the other ends: the next item is the pattern's last and
        takes one row or more, so its first row, tested there, completes the match (the V shape ``A B+
        C+``, whose B and C may both hold on a row). Any other run followed by two items or more, with
        two ends possible, needs backtracking (``_backtrack``)."""
        items = self.plan.items
        return following is not None and index + 2 == len(items) and following.low == 1 and not self.plan.deadline

    def _restore(self, index, lanes, chosen, which, snapshots) -> None:
        """The chosen run length's count and aggregates for the lanes ``which``."""
        picked = lanes[which]
        self.item_count[index, picked] = chosen[which]
        for acc, snap in zip(self.acc, snapshots):
            acc.restore(snap, np.flatnonzero(which), picked)

    def holds(self, label: int, lane: np.ndarray, row: np.ndarray) -> np.ndarray:
        condition = self.plan.conditions[label]
        if condition is None:
            return np.ones(len(lane), dtype=bool)
        return condition(LaneFrame(self, lane, row, label))

    # ------------------------------------------------------------------------------- frame reads

    def column(self, name: str, rows: np.ndarray, lanes: np.ndarray, offset: int = 0) -> kernels.Value:
        """``name`` at ``rows`` + ``offset`` for ``lanes``: NULL where that leaves the lane's partition (rows
        of a partial match, and the row under test, are inside it: only an offset can leave it)."""
        value = self.values[name]
        if value.kind == "null":
            return value
        if offset == 0:
            at = rows + self.begin
            return kernels.Value(value.kind, value.data[at], None if value.nulls is None else value.nulls[at])
        rows = rows + offset
        inside = (rows >= self.part_start[lanes]) & (rows < self.part_end[lanes])
        at = np.where(inside, rows, 0) + self.begin
        nulls = ~inside
        if value.nulls is not None:
            nulls = nulls | value.nulls[at]
        return kernels.Value(value.kind, value.data[at], nulls if nulls.any() else None)
