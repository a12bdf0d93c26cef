"""The fast path: DEFINE conditions column-wise with numpy, the pattern on Python's C regex engine.

When every DEFINE condition reads only the current row and rows at fixed PREV/NEXT offsets, whether a
row satisfies a variable does not depend on the partial match. Then a whole batch can be matched
without per-row Python work:

1. Partition and sort the batch column-wise (the same order ``CompiledQuery.partitions`` gives).
2. Evaluate each condition over all rows at once (``kernels.py``) into one byte per row: bit v is set
   when variable v's condition holds (a variable with no DEFINE: always set).
3. Translate the pattern into a regular expression over those bytes, each variable a character class
   of the bytes with its bit set (``pattern_regex.py``), and let ``re`` find the matches.
4. Read each row's variable off the match's capture groups, and emit output, unmatched rows and
   AFTER MATCH SKIP through ``PartitionOutput``, the bookkeeping the Pike VM shares.

For ONE ROW PER MATCH with measures that read only a match's first/last rows per variable and counts
(the vector path), no Python object per row or per match is needed: under SKIP PAST LAST ROW, all
partitions go into one buffer (a separator byte after each) and one ``re.split`` returns the bytes
before each match and each group's bytes, whose lengths give every group's position
(``_scan_separated``); the measures are then computed for all matches at once. A pattern that is a
sequence of runs (``A B+ C*``) can also be scanned by numpy alone in linear time (``runs.py``), which
takes the batches whose long runs would make ``re`` restart quadratically.
ALL ROWS PER MATCH under SKIP PAST LAST ROW with such measures (RUNNING or FINAL, plus CLASSIFIER())
uses the same scan and expands each match to its rows column-wise (``all_rows.py``).

Why ``re`` gives SQL's answer. ``re`` is a backtracking engine: it tries start positions in order and,
at each, alternatives in order (left branch first, greedy loops longest-first, reluctant shortest-first),
returning the first success. That is the standard's preference order, which the Pike VM implements by
keeping its threads in priority order. ``^``/``$`` become ``\\A``/``\\Z`` on a string holding exactly
one partition; empty loop iterations end the loop in both. This is checked, not assumed:
``tests/test_fastpath.py`` runs random eligible queries on both paths and compares the output.

Why it stays fast. A backtracking engine can take exponential time (``(A|A)*B``) or polynomial time
(``A*A*A*B``) where the VM is linear, so only *regex-safe* patterns take this path:

- a group of several rows may not be repeated without bound (``(A B)+`` goes to the VM); alternations
  of single variables (``(A|B)*``) become one character class, so they cannot backtrack among
  themselves;
- bounded quantifiers over groups are unrolled, as the VM's compiler does;
- two unbounded loops on one path through the pattern must have disjoint classes over the bytes that
  actually occur (``A* A*`` goes to the VM; ``A B+ C+`` with falling/rising conditions does not);
- a failed search restarts at every row, so a partition where loops could run long before failing
  (sum over runs of loop-class rows of length squared above ``RESTART_BUDGET`` times the rows) is
  matched by the run scan when the pattern is a sequence of runs, else by the VM.

Everything else, and any batch whose data the kernels cannot evaluate exactly, runs on the Pike VM. This
module never runs the VM itself: ``FastPlan.run`` hands those partitions to the ``fallback`` its caller
(``plan.CompiledQuery``) gives it.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.matcher.program.instructions import AT_END, AT_START, DONE, EXCL_BEGIN, EXCL_END, JUMP, LABEL, SPLIT
from cep.matcher.program.output import PartitionOutput
from cep.matcher.program.skip import PAST_LAST_ROW, TO_NEXT_ROW
from cep.matcher.rows.partitioning import partition_indices
from cep.matcher.sql.expressions import Scope
from cep.matcher.vector import all_rows, kernels, runs
from cep.matcher.vector.layout import ArrayInput, ListInput
from cep.matcher.vector.pattern_regex import MAX_NESTING, NotEligible, emit, exclusive, lower, min_rows, nesting

# One byte per row holds the set of variables whose condition holds, so at most 8 variables.
MAX_LABELS = 8
# Bounded quantifiers over groups are unrolled; a pattern larger than this (in classes) goes to the VM.
MAX_UNROLLED_CLASSES = 512
# A partition may cost the regex engine at most this many steps per row (plus a fixed slack) by the
# restart estimate (sum of squared run lengths of the loops' classes); beyond it, the VM (linear) runs.
RESTART_BUDGET = 64
RESTART_SLACK = 4096
# Ends each partition in the one buffer the vector scan searches. With fewer than 8 variables no class
# holds this byte, so no match can span two partitions.
SEPARATOR = 0xFF

_KNOWN_OPS = frozenset({LABEL, SPLIT, JUMP, EXCL_BEGIN, EXCL_END, AT_START, AT_END, DONE})

# Matches one partition elsewhere (the Pike VM): (key, its columns in ORDER BY order) -> output rows.
Fallback = Callable[[tuple, dict], list]


# ----------------------------------------------------------------------------------------- the plan


@dataclass
class FastPlan:
    """Everything the fast path needs for one machine (one query on one input schema)."""

    machine: Any
    statement: ast.Statement
    conditions: list  # per label id: kernel condition (frame -> bool array) or None (always true)
    condition_columns: tuple[str, ...]
    regex: re.Pattern
    label_groups: list[tuple[int, Any]]  # (group number, label id or translate table)
    excl_groups: list[int]
    overlapping_loops: list[tuple[int, int]]  # class bits of loop pairs that share a path
    loop_bits: list[int]
    vector: list | None = None  # ONE ROW PER MATCH measures computed from the groups, or None
    # ALL ROWS PER MATCH measures computed column-wise from the groups (``all_rows.py``), or None.
    all_rows: list | None = None
    # For the vector path with SKIP PAST LAST ROW: the pattern for one search over all partitions at once
    # (``_scan_separated``), or None where that does not apply.
    separated_regex: re.Pattern | None = None
    separated_uncaptured: tuple[int, ...] = ()  # its one-row groups left uncaptured (``Regex.uncaptured``)
    # The pattern as a sequence of runs (``runs.py``), for batches where that scan is exact; else None.
    run_items: tuple | None = None
    skip_mode: str = PAST_LAST_ROW  # ``Machine.skip.mode``: how ``_scan`` resumes the regex's search
    notes: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(
        default_factory=lambda: {"regex_partitions": 0, "vm_partitions": 0, "run_partitions": 0}
    )

    # ----------------------------------------------------------------------------------- running

    def run(self, source, *, fallback: Fallback, typed: bool = False, clock=None):
        """Match a whole input: columns of Python values, or a ``layout.ArrayInput`` (numpy columns).

        Returns the output rows as the VM gives them; or, with ``typed`` for an ``ArrayInput`` whose
        matches the regex found with measures computed column-wise, ``MatchColumns``: the output columns
        typed for the input's library (``tables.from_columns`` gives the same frame as from the rows).
        ``fallback(key, columns)`` matches one partition (its rows in ORDER BY order) on the Pike VM:
        the partitions this path declines go there. ``clock`` is unused: this path takes no query with WITHIN.
        """
        data = source if isinstance(source, ArrayInput) else ListInput(source)
        machine = self.machine
        if data.n == 0:
            columns = data.python()
            return _run_elsewhere(fallback, machine, partition_indices(self.statement, machine, columns), columns)
        layout = data.layout(self.statement, machine)
        keys, order, counts = layout.keys, layout.order, layout.counts
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])

        def all_on_vm(why: str) -> list[tuple]:
            self.notes.append(f"ran on the VM: {why}")
            groups = [(key, order[offsets[i] : offsets[i + 1]].tolist()) for i, key in enumerate(keys)]
            self.stats["vm_partitions"] += len(groups)
            return _run_elsewhere(fallback, machine, groups, data.python())

        try:
            masks = self._masks(data, order, offsets, counts)
        except kernels.Unsupported as why:
            return all_on_vm(str(why))
        occurring = np.flatnonzero(np.bincount(masks, minlength=256)).tolist()
        for bits_a, bits_b in self.overlapping_loops:
            if any((m & bits_a) and (m & bits_b) for m in occurring):
                return all_on_vm("two loops on one path can take the same rows")
        buffer = _separated(masks, offsets)  # every partition's bytes, a separator after each
        budget_ok = self._restart_budget(buffer, offsets)
        if not budget_ok.all() and self.run_items is not None and runs.deterministic(self.run_items, occurring):
            # Runs too long for the regex engine's restarts: the run scan is linear whatever the data
            # (and slower than ``re`` on ordinary data, so only here), and no partition needs the VM.
            self.stats["run_partitions"] += len(counts)
            spans = runs.scan(self.run_items, buffer, 1 << len(self.conditions))
            return self._vector_output(data, layout, offsets, *_localize(spans, offsets), {}, typed)
        if self.vector is not None or self.all_rows is not None:  # measures computed column-wise
            return self._run_vector(data, layout, offsets, masks, buffer, budget_ok, typed, fallback)
        encoded = masks.tobytes()

        columns = data.python()
        order_list = order.tolist()
        if len(order_list) == 1:
            sorted_cols = {name: (columns[name][order_list[0]],) for name in machine.columns}
        else:
            getter = operator.itemgetter(*order_list)
            sorted_cols = {name: getter(columns[name]) for name in machine.columns}
        rows: list[tuple] = []
        for index, key in enumerate(keys):
            begin, end = int(offsets[index]), int(offsets[index + 1])
            part = {name: values[begin:end] for name, values in sorted_cols.items()}
            if budget_ok[index]:
                self.stats["regex_partitions"] += 1
                rows.extend(self._match_partition(key, part, encoded[begin:end]))
            else:
                self.stats["vm_partitions"] += 1
                rows.extend(fallback(key, {name: list(values) for name, values in part.items()}))
        return rows

    def _masks(self, data, order, offsets, counts) -> np.ndarray:
        n = len(order)
        loaders = {name: (lambda name=name: data.load(name, order)) for name in self.condition_columns}
        frame = kernels.Frame(n, loaders, offsets)
        masks = np.zeros(n, dtype=np.uint8)
        for label, condition in enumerate(self.conditions):
            if condition is None:
                masks |= np.uint8(1 << label)
            else:
                masks |= condition(frame).astype(np.uint8) << np.uint8(label)
        return masks

    def _restart_budget(self, buffer: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Per partition: may the regex engine run it (its restart cost estimate is within budget)?
        ``buffer``: the rows' bytes with a separator after each partition (``_separated``)."""
        parts = len(offsets) - 1
        cost = np.zeros(parts, dtype=np.float64)
        if len(buffer) > parts and self.loop_bits:
            separators = offsets[1:] + np.arange(parts)
            for bits in set(self.loop_bits):
                in_class = np.zeros(256, dtype=np.int8)
                in_class[[m for m in range(256) if m & bits]] = 1
                member = in_class[buffer]
                member[separators] = 0  # runs stop at a partition's end (with 8 variables 0xFF is a row too)
                edges = np.diff(member, prepend=np.int8(0), append=np.int8(0))
                starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
                length = (ends - starts).astype(np.float64)
                part = np.searchsorted(separators, starts, side="right")
                cost += np.bincount(part, weights=length * length, minlength=parts)
        return cost <= RESTART_BUDGET * np.diff(offsets) + RESTART_SLACK

    def _match_partition(self, key: tuple, part: dict, encoded: bytes) -> list[tuple]:
        n = len(encoded)
        output = PartitionOutput(self.machine, key, part)
        output.env.total = n
        search = self.regex.search
        label_groups, excl_groups = self.label_groups, self.excl_groups
        position = 0
        while position < n:
            found = search(encoded, position)
            if found is None:
                break
            regs = found.regs
            start, stop = regs[0]
            if start >= n:
                break  # the VM starts no match after the last row
            labels: list[int] = []
            for group, lookup in label_groups:
                begin, end = regs[group]
                if begin < end:
                    if lookup.__class__ is int:
                        labels += [lookup] * (end - begin)
                    else:
                        labels += encoded[begin:end].translate(lookup)
            if len(labels) != stop - start:  # pragma: no cover - a bug in the translation, not user error
                raise AssertionError(f"fast path: {len(labels)} labels for a match of {stop - start} rows")
            excluded = [regs[group] for group in excl_groups if regs[group][0] >= 0]
            position = output.emit_match(start, stop - 1, labels, excluded)
        output.emit_unmatched(output.search_start, n)
        return output.out

    def _scan(self, encoded: bytes) -> list[tuple]:
        """The capture groups (``Match.regs``) of every match in one partition, in the VM's order:
        each search starts past the last row of the previous match (SKIP PAST LAST ROW) or at the row
        after its first (SKIP TO NEXT ROW); after an empty match, at the next row."""
        n = len(encoded)
        found_regs: list[tuple] = []
        position = 0
        if self.skip_mode == PAST_LAST_ROW:
            # finditer resumes where the last match stopped, as SKIP PAST LAST ROW does, except after an
            # empty match (it would retry the same row for a non-empty one): there, restart a row later
            append = found_regs.append
            while position < n:
                for found in self.regex.finditer(encoded, position):
                    regs = found.regs
                    start, stop = regs[0]
                    if stop == start:
                        if start >= n:
                            return found_regs  # the VM starts no match after the last row
                        append(regs)
                        position = start + 1
                        break
                    append(regs)
                else:
                    break
            return found_regs
        search = self.regex.search
        while position < n:
            found = search(encoded, position)
            if found is None:
                break
            start = found.start()
            if start >= n:
                break
            found_regs.append(found.regs)
            position = start + 1
        return found_regs

    def _run_vector(
        self, data, layout, offsets, masks: np.ndarray, buffer: np.ndarray, budget_ok, typed: bool, fallback: Fallback
    ):
        """ONE ROW PER MATCH with SKIP PAST LAST ROW / TO NEXT ROW and measures that only need a match's
        first/last row per variable and row counts: collect every match's group spans, then compute each
        measure for all matches at once. Same rows as ``output.match`` gives (tests compare)."""
        vm_rows: dict[int, list[tuple]] = {}
        for index in np.flatnonzero(~budget_ok).tolist():
            self.stats["vm_partitions"] += 1
            begin, end = int(offsets[index]), int(offsets[index + 1])
            groups = [(layout.keys[index], layout.order[begin:end].tolist())]
            vm_rows[index] = _run_elsewhere(fallback, self.machine, groups, data.python())
        self.stats["regex_partitions"] += len(budget_ok) - len(vm_rows)
        if self.separated_regex is not None:
            regs, per_partition = self._scan_separated(buffer, offsets, budget_ok)
        else:
            encoded = masks.tobytes()
            found_regs: list[tuple] = []
            counts: list[int] = []
            for index in range(len(budget_ok)):
                found = self._scan(encoded[offsets[index] : offsets[index + 1]]) if index not in vm_rows else []
                found_regs.extend(found)
                counts.append(len(found))
            regs, per_partition = _regs_array(found_regs), np.array(counts, dtype=np.int64)
        return self._vector_output(data, layout, offsets, regs, per_partition, vm_rows, typed)

    def _vector_output(
        self, data, layout, offsets, regs: np.ndarray, per_partition: np.ndarray, vm_rows: dict, typed: bool
    ):
        """The output of the matches whose group spans are ``regs`` (partition-local), in partition
        order, with the rows the VM gave for the partitions in ``vm_rows``."""
        typed = typed and data.columnar and not vm_rows
        if self.all_rows is not None:  # one output row per match row
            columns, per_partition = all_rows.columns(self, data, layout, offsets, regs, per_partition, typed)
        else:
            columns = self._vector_columns(data, layout, offsets, regs, per_partition, typed)
        count = int(per_partition.sum())
        if typed:
            return MatchColumns(columns, count)
        rows = list(zip(*columns)) if columns else [()] * count
        if not vm_rows:
            return rows
        out: list[tuple] = []
        position = 0
        for index, count in enumerate(per_partition.tolist()):
            out.extend(vm_rows[index] if index in vm_rows else rows[position : position + count])
            position += count
        return out

    def _scan_separated(self, buffer: np.ndarray, offsets: np.ndarray, runnable: np.ndarray):
        """Every match of every runnable partition from one ``split`` over one buffer, as
        (regs, matches per partition); ``regs[i, g]`` is group g's (begin, end) in match i's partition.

        The buffer holds each partition's bytes followed by ``SEPARATOR`` (a partition left to the VM:
        separators only). ``split`` returns one flat list: the bytes before the first match, each group's
        bytes (None if it took no part), the bytes up to the next match, ... Their lengths (and 1 for
        each uncaptured one-row group), summed in order, give every group's position without a match
        object per match. It resumes where the last match ended, as SKIP PAST LAST ROW does; the pattern
        matches at least one row, so no empty match needs the VM's restart rule."""
        if not runnable.all():  # a partition left to the VM: separators only, so nothing matches there
            buffer = np.where(np.repeat(runnable, np.diff(offsets) + 1), buffer, np.uint8(SEPARATOR))
        pieces = self.separated_regex.split(buffer.tobytes())
        captured = self.separated_regex.groups + 1  # the bytes before the match, then its groups
        matches = (len(pieces) - 1) // captured
        width = self.regex.groups + 1
        found = _piece_lengths(pieces)
        if captured == width:
            lengths = found.reshape(matches, width)
        else:  # put back the one-row groups the regex did not capture
            lengths = np.ones((matches, width), dtype=np.int64)
            lengths[:, [g for g in range(width) if g not in self.separated_uncaptured]] = found.reshape(
                matches, captured
            )
        ends = np.cumsum(lengths).reshape(matches, width)
        spans = np.empty((matches, width, 2), dtype=np.int64)
        spans[:, :, 1] = ends
        spans[:, :, 0] = ends - lengths
        spans[:, 0, 0] = ends[:, 0]  # the match begins where the bytes before it end
        spans[:, 0, 1] = ends[:, -1]
        return _localize(spans, offsets)

    def _vector_columns(self, data, layout, offsets, regs: np.ndarray, per_partition: np.ndarray, typed: bool) -> list:
        """The output columns (partition keys, then measures) of the matches whose groups are given."""
        m = len(regs)
        part = np.repeat(np.arange(len(per_partition)), per_partition)
        out = [data.gather(name, layout.first_rows[part], typed) for name in self.machine.partition_names]
        if m == 0:
            none = np.zeros(0, dtype=np.int64)
            return out + [
                data.gather(column, none, typed) if column else data.integers(none, typed)
                for _, column, _ in self.vector
            ]
        starts, stops = regs[:, 0, 0], regs[:, 0, 1]
        base = offsets[:-1][part]
        for kind, column, groups in self.vector:
            if kind == "count":
                if groups is None:
                    counts = stops - starts
                elif not groups:
                    counts = np.zeros(m, dtype=np.int64)
                else:
                    spans = regs[:, groups, 1] - regs[:, groups, 0]
                    counts = np.where(spans > 0, spans, 0).sum(axis=1)
                out.append(data.integers(counts, typed))
                continue
            if kind == "match_number":  # numbered from 1 in each partition
                first_match = np.cumsum(per_partition) - per_partition
                out.append(data.integers(np.arange(m, dtype=np.int64) - first_match[part] + 1, typed))
                continue
            if groups is not None and not groups:  # the variable cannot occur in a match
                local = np.full(m, -1, dtype=np.int64)
            elif groups is None:
                local = np.where(stops == starts, -1, starts if kind == "first" else stops - 1)
            else:
                begin, end = regs[:, groups, 0], regs[:, groups, 1]
                valid = begin < end
                if kind == "first":
                    beyond = np.iinfo(np.int64).max
                    local = np.where(valid, begin, beyond).min(axis=1)
                    local[local == beyond] = -1
                else:
                    local = np.where(valid, end - 1, -1).max(axis=1)
            rows = np.where(local < 0, -1, layout.order[np.where(local < 0, 0, base + local)])
            out.append(data.gather(column, rows, typed))
        return out


def _separated(masks: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The rows' bytes with ``SEPARATOR`` after each partition (partition i's rows then sit at
    ``offsets[i] + i`` onwards)."""
    return np.insert(masks, offsets[1:], np.uint8(SEPARATOR))


# Joins the pieces of a split; no piece holds it (their bytes are masks below 0x80, or separators).
_PIECE_MARK = 0xFE


def _piece_lengths(pieces: list) -> np.ndarray:
    """The lengths of all pieces of a ``split`` but the last (the bytes after the last match)."""
    try:
        # one join in C, then numpy finds the marks: twice as fast as len() per piece
        joined = np.frombuffer(bytes([_PIECE_MARK]).join(pieces), dtype=np.uint8)
    except TypeError:  # a group that took no part is None: length_hint gives it 0
        return np.fromiter(map(operator.length_hint, pieces), dtype=np.int64, count=len(pieces))[:-1]
    marks = np.flatnonzero(joined == _PIECE_MARK)
    lengths = np.diff(marks, prepend=-1)
    lengths -= 1
    return lengths


def _localize(spans: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spans in a ``_separated`` buffer -> (spans within each match's partition, matches per partition)."""
    parts = len(offsets) - 1
    part = np.searchsorted(offsets[1:] + np.arange(parts), spans[:, 0, 0], side="right")
    local = spans - (offsets[:-1][part] + part)[:, None, None]
    return local, np.bincount(part, minlength=parts).astype(np.int64)


def _regs_array(found_regs: list[tuple]) -> np.ndarray:
    """``Match.regs`` of m matches -> an (m, groups + 1, 2) array."""
    if not found_regs:
        return np.zeros((0, 1, 2), dtype=np.int64)
    m, width = len(found_regs), len(found_regs[0])
    flat = itertools.chain.from_iterable(itertools.chain.from_iterable(found_regs))
    return np.fromiter(flat, dtype=np.int64, count=m * width * 2).reshape(m, width, 2)


@dataclass(frozen=True)
class MatchColumns:
    """The fast path's output as columns typed for the input's library (``tables.from_columns``)."""

    columns: list
    count: int


def _run_elsewhere(fallback: Fallback, machine, groups, columns) -> list[tuple]:
    """The output of the partitions ``groups`` ((key, row indices in ORDER BY order), ...) by ``fallback``."""
    rows: list[tuple] = []
    for key, indices in groups:
        rows.extend(fallback(key, {name: [columns[name][i] for i in indices] for name in machine.columns}))
    return rows


# ------------------------------------------------------------------------------------- eligibility


def analyze(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> tuple[FastPlan | None, list[str]]:
    """(plan, []) when the query can take the fast path, else (None, reasons)."""
    try:
        return _build(statement, machine, input_columns), []
    except NotEligible as why:
        return None, [str(why)]


def plan_for(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> FastPlan | None:
    """The fast plan for this machine, built once and kept in ``machine.column_plans``; None when not eligible."""
    kept = machine.column_plans
    if kept.regex is None:
        kept.regex = analyze(statement, machine, input_columns)
    return kept.regex[0]


def eligible(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> bool:
    return plan_for(statement, machine, input_columns) is not None


def explain_lines(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> list[str]:
    """Lines for ``cep explain``: which path the query takes, and why."""
    plan, reasons = analyze(statement, machine, input_columns)
    if plan is None:
        return ["path: Pike VM (not eligible for the fast path: " + "; ".join(reasons) + ")"]
    lines = [
        "path: fast path: DEFINE conditions evaluated column-wise (numpy), pattern run by Python's re",
        f"      over one byte per row: {plan.regex.pattern!r}",
    ]
    if plan.overlapping_loops:
        lines.append("      (batches where two loops on one path can take the same rows run on the Pike VM)")
    if plan.run_items is not None:
        lines.append(
            "      a sequence of runs: batches whose runs are too long for re's restarts are scanned"
            " by numpy in linear time (when each loop's rows exclude the next item's)"
        )
    return lines


def _build(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> FastPlan:
    mr = statement.match
    if mr.within is not None:
        raise NotEligible("WITHIN needs event-time expiry, which Python's re cannot do")
    if getattr(mr, "seek", False):
        raise NotEligible("SEEK")
    if mr.rows_per_match.show_timeout:
        raise NotEligible("SHOW TIMEOUT MATCHES")
    unknown = set(machine.opcodes) - _KNOWN_OPS
    if unknown:
        raise NotEligible("the program uses " + ", ".join(sorted(unknown)))
    labels = machine.label_names
    if len(labels) > MAX_LABELS:
        raise NotEligible(f"more than {MAX_LABELS} pattern variables")
    label_ids = {name: index for index, name in enumerate(labels)}
    label_sets: dict[str, frozenset[int]] = {name: frozenset({label_ids[name]}) for name in labels}
    for subset in mr.subsets:
        label_sets[subset.name.key] = frozenset(label_ids[v.key] for v in subset.variables if v.key in label_ids)
    scope = Scope(ColumnNames(input_columns), label_sets, in_define=True, column_types=machine.integer_columns)

    defines = {d.variable.key: d for d in mr.defines}
    try:
        conditions, used = kernels.compile_defines(
            defines, labels, scope.column, label_sets, column_type=scope.column_type
        )
    except kernels.NotVectorizable as why:
        raise NotEligible(str(why)) from None

    ir = lower(machine.pattern)
    if nesting(ir) > MAX_NESTING:
        raise NotEligible(
            f"the pattern nests more than {MAX_NESTING} levels deep once its bounded quantifiers are unrolled"
        )
    emitted = emit(ir, len(labels))
    if emitted.classes > MAX_UNROLLED_CLASSES:
        raise NotEligible(f"the pattern unrolls to more than {MAX_UNROLLED_CLASSES} row classes")
    try:
        regex = re.compile(emitted.pattern, re.DOTALL)
    except (re.error, OverflowError) as why:  # pragma: no cover - a translation gap
        raise NotEligible(f"the regex engine refuses the translation ({why})") from None
    label_groups: list[tuple[int, Any]] = []
    for group, prio in emitted.label_groups:
        if len(prio) == 1:
            label_groups.append((group, prio[0]))
            continue
        table = bytearray(256)
        for mask in range(256):
            table[mask] = next((label for label in prio if mask >> label & 1), 0)
        label_groups.append((group, bytes(table)))
    overlapping = []
    for (bits_a, path_a), (bits_b, path_b) in itertools.combinations(emitted.loops, 2):
        if bits_a & bits_b:
            if not exclusive(path_a, path_b):
                raise NotEligible(
                    "two loops on one path share a variable (the regex engine could backtrack polynomially)"
                )
        elif not exclusive(path_a, path_b):
            overlapping.append((bits_a, bits_b))
    skip = machine.skip.mode
    vector = every_row = None
    if mr.rows_per_match.mode == "ONE" and skip in (PAST_LAST_ROW, TO_NEXT_ROW):
        vector = _vector_measures(mr, label_sets, label_groups, scope)
    separated_regex, uncaptured = None, ()
    if skip == PAST_LAST_ROW and not emitted.excl_groups and min_rows(ir) > 0 and len(labels) < MAX_LABELS:
        if mr.rows_per_match.mode in all_rows.MODES:  # only with the one-buffer scan
            every_row = all_rows.measures(mr, label_sets, label_groups, scope)
        if vector is not None or every_row is not None:
            separated = emit(ir, len(labels), separated=True)
            separated_regex, uncaptured = re.compile(separated.pattern, re.DOTALL), tuple(separated.uncaptured)
    return FastPlan(
        all_rows=every_row,
        run_items=runs.run_items(ir) if separated_regex is not None else None,
        vector=vector,
        separated_regex=separated_regex,
        separated_uncaptured=uncaptured,
        skip_mode=skip,
        machine=machine,
        statement=statement,
        conditions=conditions,
        condition_columns=tuple(sorted(used)),
        regex=regex,
        label_groups=label_groups,
        excl_groups=emitted.excl_groups,
        overlapping_loops=overlapping,
        loop_bits=[bits for bits, _ in emitted.loops],
    )


def _vector_measures(mr: ast.MatchRecognize, label_sets, label_groups, scope: Scope) -> list | None:
    """ONE ROW PER MATCH measures as (kind, column, groups): kind first/last (the row's value of
    ``column``), count or match_number; ``groups`` the capture groups of the variables read (None: all
    rows). None when some measure needs more (an expression, an offset, a variable whose rows share
    a class with another variable's)."""
    single = {group: lookup for group, lookup in label_groups if lookup.__class__ is int}
    if len(single) != len(label_groups):
        shared = {
            label
            for _, lookup in label_groups
            if lookup.__class__ is not int
            for label in range(8)
            if any(lookup[m] == label for m in range(256))
        }
    else:
        shared = set()

    def groups_of(qualifier):
        if qualifier is None:
            return None
        labels = label_sets.get(qualifier.key)
        if labels is None or labels & shared:
            raise NotEligible("shared class")
        return [group for group, label in single.items() if label in labels]

    out = []
    try:
        for measure in mr.measures:
            expr = measure.expr
            if isinstance(expr, ast.MatchNumber):
                out.append(("match_number", None, None))
            elif isinstance(expr, ast.ColumnRef):
                out.append(("last", scope.column(expr), groups_of(expr.qualifier)))
            elif (
                isinstance(expr, ast.Navigation)
                and expr.kind in ("FIRST", "LAST")
                and isinstance(expr.operand, ast.ColumnRef)
            ):
                if expr.offset is not None and not (isinstance(expr.offset, ast.Literal) and expr.offset.value == 0):
                    return None
                operand = expr.operand
                out.append((expr.kind.lower(), scope.column(operand), groups_of(operand.qualifier)))
            elif (
                isinstance(expr, ast.Aggregate)
                and expr.name == "COUNT"
                and not expr.distinct
                and len(expr.args) == 1
                and isinstance(expr.args[0], ast.Star)
            ):
                out.append(("count", None, groups_of(expr.args[0].qualifier)))
            else:
                return None
    except NotEligible:
        return None
    return out
