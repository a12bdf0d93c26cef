"""The fast path: DEFINE conditions column-wise with numpy, the pattern on Python's C regex engine.

When every DEFINE condition reads only the current row and rows at fixed PREV/NEXT offsets, whether a
row satisfies a variable does not depend on the partial match. Then a whole batch can be matched
without per-row Python work:

1. Partition and sort the batch column-wise (the same order ``CompiledQuery.partitions`` gives).
2. Evaluate each condition over all rows at once (``kernels.py``) into one byte per row: bit v is set
   when variable v's condition holds (a variable with no DEFINE: always set).
3. Translate the pattern into a regular expression over those bytes, each variable a character class
   of the bytes with its bit set, and let ``re`` find the matches, one ``search`` per match.
4. Read each row's variable off the match's capture groups, and emit output, unmatched rows and
   AFTER MATCH SKIP exactly as the VM's ``_finalize`` does, on a ``PartitionMatcher`` used as context.

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
  matched by the VM.

Everything else, and any batch whose data the kernels cannot evaluate exactly, runs on the Pike VM.
"""

from __future__ import annotations

import itertools
import operator
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grammar import ast
from matcher import kernels
from matcher.expressions import Scope
from matcher.partitioning import partition_indices, resolve_column as _resolve
from matcher.program import AT_END, AT_START, DONE, EXCL_BEGIN, EXCL_END, JUMP, LABEL, SPLIT
from matcher.vm import PartitionMatcher

# One byte per row holds the set of variables whose condition holds, so at most 8 variables.
MAX_LABELS = 8
# PERMUTE(n items) expands to n! alternatives; the VM's limit is its program size, ours is smaller.
MAX_PERMUTE_ITEMS = 5
# Bounded quantifiers over groups are unrolled; a pattern larger than this (in classes) goes to the VM.
MAX_UNROLLED_CLASSES = 512
# A partition may cost the regex engine at most this many steps per row (plus a fixed slack) by the
# restart estimate (sum of squared run lengths of the loops' classes); beyond it, the VM (linear) runs.
RESTART_BUDGET = 64
RESTART_SLACK = 4096
# CEP_FASTPATH=0 in the environment (or ENABLED = False) sends every query to the Pike VM: the tests
# run both paths, and a user can rule the fast path out when chasing a difference.
ENABLED = os.environ.get("CEP_FASTPATH", "1") != "0"

_KNOWN_OPS = frozenset({LABEL, SPLIT, JUMP, EXCL_BEGIN, EXCL_END, AT_START, AT_END, DONE})


class NotEligible(Exception):
    """Why a query cannot take the fast path (a static property of the query)."""


# --------------------------------------------------------------------------------------- pattern IR
#
# The pattern, lowered for the regex engine. Single-row pieces (a variable, or an alternation of
# single-row pieces) are *classes*: ("class", prio) where prio lists label ids in preference order;
# a row consumed by the class is labelled with the first of them whose condition holds on it.
#   ("class", prio)                    one row
#   ("loop", prio, min, max, greedy)   a class repeated (max None: unbounded)
#   ("seq", items) / ("alt", items)    concatenation / alternation in preference order
#   ("opt", item, greedy)              item or nothing (unrolled bounded quantifiers)
#   ("anchor", "start" | "end")        ^ / $
#   ("empty",)                         ()
#   ("excl", item)                     {- item -}


def _seq(items: list) -> tuple:
    flat = []
    for item in items:
        if item[0] == "seq":
            flat.extend(item[1])
        elif item[0] != "empty":
            flat.append(item)
    if not flat:
        return ("empty",)
    return flat[0] if len(flat) == 1 else ("seq", tuple(flat))


def _lower(node, label_ids: dict[str, int]) -> tuple:
    if isinstance(node, ast.PatternVar):
        return ("class", (label_ids[node.name.key],))
    if isinstance(node, ast.Empty):
        return ("empty",)
    if isinstance(node, ast.Anchor):
        return ("anchor", node.kind)
    if isinstance(node, ast.Concat):
        return _seq([_lower(item, label_ids) for item in node.items])
    if isinstance(node, ast.Alternation):
        items = [_lower(item, label_ids) for item in node.alternatives]
        if all(item[0] == "class" for item in items):
            # One row whichever branch: a row takes the first branch whose condition holds, and every
            # branch leads to the same place, so preference among them is decided by the row alone.
            return ("class", tuple(dict.fromkeys(label for item in items for label in item[1])))
        return ("alt", tuple(items))
    if isinstance(node, ast.Permute):
        if len(node.items) > MAX_PERMUTE_ITEMS:
            raise NotEligible(f"PERMUTE of more than {MAX_PERMUTE_ITEMS} items")
        items = [_lower(item, label_ids) for item in node.items]
        orders = itertools.permutations(range(len(items)))  # lexicographic, as the compiler expands it
        return ("alt", tuple(_seq([items[i] for i in order]) for order in orders))
    if isinstance(node, ast.Exclusion):
        return ("excl", _lower(node.pattern, label_ids))
    if isinstance(node, ast.Quantified):
        body = _lower(node.term, label_ids)
        if node.max == 0:
            return ("empty",)
        if body[0] == "class":
            if node.min == node.max == 1:
                return body
            return ("loop", body[1], node.min, node.max, node.greedy)
        if node.max is None:
            raise NotEligible("an unbounded quantifier over a group that can span several rows")
        tail = None
        for _ in range(node.max - node.min):
            tail = ("opt", body if tail is None else _seq([body, tail]), node.greedy)
        return _seq([body] * node.min + ([tail] if tail is not None else []))
    if isinstance(node, ast.Absence):
        raise NotEligible("an absence term (!B)")
    raise NotEligible(f"pattern node {type(node).__name__}")


@dataclass
class _Regex:
    """The regex text, and what its capture groups mean."""

    pattern: bytes
    label_groups: list[tuple[int, tuple[int, ...]]]  # (group number, prio)
    excl_groups: list[int]
    loops: list[tuple[int, tuple]]  # (class bits, alternation choices on the path to the loop)
    classes: int = 0


def _class_bytes(bits: int, width: int) -> bytes:
    members = [m for m in range(1 << width) if m & bits]
    return b"[" + b"".join(b"\\x%02x" % m for m in members) + b"]"


def _quantifier(low: int, high: int | None, greedy: bool) -> bytes:
    if (low, high) == (0, None):
        text = b"*"
    elif (low, high) == (1, None):
        text = b"+"
    elif (low, high) == (0, 1):
        text = b"?"
    elif high is None:
        text = b"{%d,}" % low
    elif low == high:
        text = b"{%d}" % low
    else:
        text = b"{%d,%d}" % (low, high)
    return text if greedy else text + b"?"


def _emit(ir: tuple, width: int) -> _Regex:
    out = _Regex(b"", [], [], [])
    counter = itertools.count(1)
    alt_ids = itertools.count()

    def bits_of(prio) -> int:
        bits = 0
        for label in prio:
            bits |= 1 << label
        return bits

    def visit(node, path: tuple) -> bytes:
        kind = node[0]
        if kind == "class":
            out.classes += 1
            out.label_groups.append((next(counter), node[1]))
            return b"(" + _class_bytes(bits_of(node[1]), width) + b")"
        if kind == "loop":
            out.classes += 1
            _, prio, low, high, greedy = node
            out.label_groups.append((next(counter), prio))
            out.loops.append((bits_of(prio), path))
            return b"(" + _class_bytes(bits_of(prio), width) + _quantifier(low, high, greedy) + b")"
        if kind == "seq":
            return b"".join(visit(item, path) for item in node[1])
        if kind == "alt":
            uid = next(alt_ids)
            return b"(?:" + b"|".join(visit(item, path + ((uid, i),)) for i, item in enumerate(node[1])) + b")"
        if kind == "opt":
            return b"(?:" + visit(node[1], path) + b")" + (b"?" if node[2] else b"??")
        if kind == "anchor":
            return b"\\A" if node[1] == "start" else b"\\Z"
        if kind == "empty":
            return b""
        if kind == "excl":
            group = next(counter)
            out.excl_groups.append(group)
            return b"(" + visit(node[1], path) + b")"
        raise AssertionError(node)

    out.pattern = visit(ir, ())
    return out


def _exclusive(path_a: tuple, path_b: tuple) -> bool:
    """Two loops are on different branches of some alternation (never on one path)."""
    choices = dict(path_a)
    return any(uid in choices and choices[uid] != branch for uid, branch in path_b)


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
    skip_mode: str = "PAST_LAST_ROW"
    notes: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=lambda: {"regex_partitions": 0, "vm_partitions": 0})

    # ----------------------------------------------------------------------------------- running

    def run(self, columns: dict[str, list]) -> list[tuple]:
        """Match a whole input (column name -> list of Python values); output rows as the VM gives them."""
        machine = self.machine
        n = len(next(iter(columns.values()))) if columns else 0
        if n == 0:
            return _run_vm_partitions(machine, partition_indices(self.statement, machine, columns), columns)
        layout = _columnar_partitions(self.statement, machine, columns, n)
        if layout is None:
            self.notes.append("partitioned in Python (ORDER BY values are not plain numbers or times)")
            groups = partition_indices(self.statement, machine, columns)
            keys = [key for key, _ in groups]
            order = np.fromiter(itertools.chain.from_iterable(idx for _, idx in groups), dtype=np.int64, count=n)
            counts = np.array([len(idx) for _, idx in groups], dtype=np.int64)
        else:
            keys, order, counts = layout
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        part_of_row = np.repeat(np.arange(len(counts)), counts)
        try:
            masks = self._masks(columns, order, offsets, counts)
        except kernels.Unsupported as why:
            self.notes.append(f"ran on the VM: {why}")
            groups = [(key, order[offsets[i]:offsets[i + 1]].tolist()) for i, key in enumerate(keys)]
            self.stats["vm_partitions"] += len(groups)
            return _run_vm_partitions(machine, groups, columns)
        occurring = np.flatnonzero(np.bincount(masks, minlength=256))
        for bits_a, bits_b in self.overlapping_loops:
            if any((m & bits_a) and (m & bits_b) for m in occurring.tolist()):
                self.notes.append("ran on the VM: two loops on one path can take the same rows")
                groups = [(key, order[offsets[i]:offsets[i + 1]].tolist()) for i, key in enumerate(keys)]
                self.stats["vm_partitions"] += len(groups)
                return _run_vm_partitions(machine, groups, columns)
        budget_ok = self._restart_budget(masks, offsets, counts, part_of_row)

        order_list = order.tolist()
        encoded = masks.tobytes()
        rows: list[tuple] = []
        if self.vector is not None:  # measures read a few rows per match: no need to gather every row
            for index, key in enumerate(keys):
                begin, end = int(offsets[index]), int(offsets[index + 1])
                if budget_ok[index]:
                    self.stats["regex_partitions"] += 1
                    rows.extend(self._match_partition_vector(key, columns, order_list, begin, encoded[begin:end]))
                else:
                    self.stats["vm_partitions"] += 1
                    rows.extend(_run_vm_partitions(machine, [(key, order_list[begin:end])], columns))
            return rows
        if n == 1:
            sorted_cols = {name: (columns[name][order_list[0]],) for name in machine.columns}
        else:
            getter = operator.itemgetter(*order_list)
            sorted_cols = {name: getter(columns[name]) for name in machine.columns}
        for index, key in enumerate(keys):
            begin, end = int(offsets[index]), int(offsets[index + 1])
            part = {name: values[begin:end] for name, values in sorted_cols.items()}
            if budget_ok[index]:
                self.stats["regex_partitions"] += 1
                rows.extend(self._match_partition(key, part, encoded[begin:end]))
            else:
                self.stats["vm_partitions"] += 1
                matcher = PartitionMatcher(machine, key)
                rows.extend(matcher.feed({name: list(values) for name, values in part.items()}))
                rows.extend(matcher.finish())
        return rows

    def _masks(self, columns, order, offsets, counts) -> np.ndarray:
        n = len(order)
        loaders = {}
        for name in self.condition_columns:
            loaders[name] = _gathered_loader(columns[name], order)
        part_start = np.repeat(offsets[:-1], counts)
        part_end = np.repeat(offsets[1:], counts)
        frame = kernels.Frame(n, loaders, part_start, part_end)
        masks = np.zeros(n, dtype=np.uint8)
        for label, condition in enumerate(self.conditions):
            if condition is None:
                masks |= np.uint8(1 << label)
            else:
                masks |= condition(frame).astype(np.uint8) << np.uint8(label)
        return masks

    def _restart_budget(self, masks, offsets, counts, part_of_row) -> np.ndarray:
        """Per partition: may the regex engine run it (its restart cost estimate is within budget)?"""
        parts = len(counts)
        cost = np.zeros(parts, dtype=np.float64)
        n = len(masks)
        if n and self.loop_bits:
            first = np.zeros(n, dtype=bool)
            first[offsets[:-1][counts > 0]] = True
            last = np.zeros(n, dtype=bool)
            last[offsets[1:][counts > 0] - 1] = True
            for bits in set(self.loop_bits):
                member = (masks & np.uint8(bits)) != 0
                before = np.empty(n, dtype=bool)
                before[0] = False
                before[1:] = member[:-1]
                after = np.empty(n, dtype=bool)
                after[-1] = False
                after[:-1] = member[1:]
                starts = np.flatnonzero(member & (~before | first))
                ends = np.flatnonzero(member & (~after | last))
                length = (ends - starts + 1).astype(np.float64)
                cost += np.bincount(part_of_row[starts], weights=length * length, minlength=parts)
        return cost <= RESTART_BUDGET * counts + RESTART_SLACK

    def _match_partition(self, key: tuple, part: dict, encoded: bytes) -> list[tuple]:
        machine = self.machine
        n = len(encoded)
        ctx = PartitionMatcher(machine, key)
        for name, values in part.items():
            ctx.cols[name] = values
        ctx.total = ctx.env.total = n
        ctx.finished = True
        search = self.regex.search
        output_match = machine.output.match
        next_start = machine.next_start
        label_groups, excl_groups = self.label_groups, self.excl_groups
        out = ctx.out
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
            # As PartitionMatcher._finalize does:
            ctx.match_number += 1
            ctx._emit_unmatched(ctx.search_start, start)
            out.extend(output_match(ctx, ctx.match_number, start, stop - 1, labels, excluded))
            if stop > start:
                ctx.covered_upto = max(ctx.covered_upto, stop - 1)
            position = ctx.search_start = next_start(ctx, start, stop - 1, labels)
        ctx._emit_unmatched(ctx.search_start, n)
        return out

    def _match_partition_vector(self, key: tuple, columns: dict, order: list, base: int, encoded: bytes) -> list[tuple]:
        """ONE ROW PER MATCH with SKIP PAST LAST ROW / TO NEXT ROW and measures that only need a match's
        first/last row per variable and row counts: collect the matches' group spans, then compute every
        measure for all matches at once. Same rows as ``output.match`` gives (tests compare)."""
        n = len(encoded)
        search = self.regex.search
        past_last = self.skip_mode == "PAST_LAST_ROW"
        found_regs = []
        position = 0
        while position < n:
            found = search(encoded, position)
            if found is None:
                break
            start, stop = found.span()
            if start >= n:
                break
            found_regs.append(found.regs)
            position = stop if past_last and stop > start else start + 1
        if not found_regs:
            return []
        width = len(found_regs[0])
        flat = itertools.chain.from_iterable(itertools.chain.from_iterable(found_regs))
        regs = np.fromiter(flat, dtype=np.int64, count=len(found_regs) * width * 2).reshape(len(found_regs), width, 2)
        starts, stops = regs[:, 0, 0], regs[:, 0, 1]
        empty = stops == starts
        out: list[list] = []
        for kind, column, groups in self.vector:
            if kind == "count":
                if groups is None:
                    out.append((stops - starts).tolist())
                elif not groups:
                    out.append([0] * len(found_regs))
                else:
                    spans = regs[:, groups, 1] - regs[:, groups, 0]
                    out.append(np.where(spans > 0, spans, 0).sum(axis=1).tolist())
                continue
            if kind == "match_number":
                out.append(list(range(1, len(found_regs) + 1)))
                continue
            if groups is not None and not groups:  # the variable cannot occur in a match
                out.append([None] * len(found_regs))
                continue
            if groups is None:
                rows = np.where(empty, -1, starts if kind == "first" else stops - 1)
            else:
                begin, end = regs[:, groups, 0], regs[:, groups, 1]
                valid = begin < end
                if kind == "first":
                    rows = np.where(valid, begin, n).min(axis=1)
                    rows[rows == n] = -1
                else:
                    rows = np.where(valid, end - 1, -1).max(axis=1)
            values = columns[column]
            out.append([None if row < 0 else values[order[base + row]] for row in rows.tolist()])
        if not out:
            return [key] * len(found_regs)
        return [key + measures for measures in zip(*out)]


def _gathered_loader(values: list, order: np.ndarray):
    def load() -> kernels.Value:
        value = kernels.load_column(values)
        if value.kind == "null":
            return value
        return kernels.Value(value.kind, value.data[order], None if value.nulls is None else value.nulls[order])
    return load


def _run_vm_partitions(machine, groups, columns) -> list[tuple]:
    rows: list[tuple] = []
    for key, indices in groups:
        matcher = PartitionMatcher(machine, key)
        rows.extend(matcher.feed({name: [columns[name][i] for i in indices] for name in machine.columns}))
        rows.extend(matcher.finish())
    return rows


# ------------------------------------------------------------------------------------ partitioning


def _columnar_partitions(statement: ast.Statement, machine, columns, n: int):
    """(keys, order, counts) equal to ``partitioning.partition_indices``, computed with numpy; None if the ORDER BY
    values are of a kind whose Python order numpy cannot reproduce exactly."""
    key_columns = [columns[name] for name in machine.partition_names]
    seen: dict = {}
    if not key_columns:
        codes = np.zeros(n, dtype=np.int64)
        keys = [()]
    elif len(key_columns) == 1 and set(map(type, key_columns[0])) == {str}:
        import pandas as pd  # factorize: codes in order of first appearance, as the dict gives them

        codes, uniques = pd.factorize(np.asarray(key_columns[0], dtype=object), sort=False)
        codes = codes.astype(np.int64, copy=False)
        keys = [(k,) for k in uniques.tolist()]
    elif len(key_columns) == 1:
        setdefault = seen.setdefault
        codes = np.fromiter((setdefault(k, len(seen)) for k in key_columns[0]), dtype=np.int64, count=n)
        keys = [(k,) for k in seen]
    else:
        setdefault = seen.setdefault
        codes = np.fromiter((setdefault(k, len(seen)) for k in zip(*key_columns)), dtype=np.int64, count=n)
        keys = list(seen)
    counts = np.bincount(codes, minlength=len(keys))
    sort_keys = [key for key in statement.match.order_by if isinstance(key.expr, ast.ColumnRef)]
    if not sort_keys:
        return keys, np.argsort(codes, kind="stable"), counts
    if len(sort_keys) == 1 and not sort_keys[0].descending:
        values = columns[_resolve(columns, sort_keys[0].expr.column)]
        if _non_decreasing(values):  # already in order (a time-ordered feed): grouping is enough
            return keys, np.argsort(codes, kind="stable"), counts
    lex = []
    for key in reversed(sort_keys):  # np.lexsort: the last key is the primary one
        converted = _sort_arrays(columns[_resolve(columns, key.expr.column)], key)
        if converted is None:
            return None
        lex.extend(converted)
    lex.append(codes)
    return keys, np.lexsort(lex), counts


def _non_decreasing(values) -> bool:
    try:
        return None not in values and all(map(operator.le, values, itertools.islice(values, 1, None)))
    except TypeError:
        return False


def _sort_arrays(values, key: ast.SortKey):
    """(value key, null rank) arrays that order rows as ``outer.sort_key`` does, or None."""
    import datetime as _dt

    types = set(map(type, values))
    has_null = type(None) in types
    types.discard(type(None))
    n = len(values)
    filled = [0 if v is None else v for v in values] if has_null else values
    try:
        if not types:
            data = np.zeros(n, dtype=np.int64)
        elif types == {int}:
            data = np.array(filled, dtype=np.int64)
            if data.size and np.abs(data).max() >= 2**62:
                return None
        elif types <= {int, float}:
            data = np.array(filled, dtype=np.float64)
            if np.isnan(data).any() or (int in types and np.abs(data).max() > 2**53):
                return None
        else:
            import pandas as pd

            if not types <= {_dt.datetime, pd.Timestamp}:
                return None
            if any(v.tzinfo is not None for v in values if v is not None):
                return None
            data = pd.DatetimeIndex([None if v is None else v for v in values]).asi8.copy()
            if has_null:
                data[np.fromiter((v is None for v in values), dtype=bool, count=n)] = 0
    except (OverflowError, ValueError, TypeError):
        return None
    nulls_first = key.descending if key.nulls_first is None else key.nulls_first
    if has_null:
        is_null = np.fromiter((v is None for v in values), dtype=bool, count=n)
        rank_of_null = (2 if nulls_first else 0) if key.descending else (0 if nulls_first else 2)
        rank = np.where(is_null, rank_of_null, 1)
    else:
        rank = np.ones(n, dtype=np.int64)
    if key.descending:  # reverse=True keeps equal keys in input order: a stable ascending sort of -key
        return [-data, -rank]
    return [data, rank]


# ------------------------------------------------------------------------------------- eligibility


def analyze(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> tuple[FastPlan | None, list[str]]:
    """(plan, []) when the query can take the fast path, else (None, reasons)."""
    try:
        return _build(statement, machine, input_columns), []
    except NotEligible as why:
        return None, [str(why)]


def plan_for(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> FastPlan | None:
    """The fast plan for this machine, built once and kept on the machine; None when not eligible."""
    if not ENABLED:
        return None
    cached = machine.__dict__.get("_fastpath")
    if cached is None:
        plan, reasons = analyze(statement, machine, input_columns)
        cached = (plan, reasons)
        machine.__dict__["_fastpath"] = cached
    return cached[0]


def eligible(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> bool:
    return plan_for(statement, machine, input_columns) is not None


def explain_lines(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> list[str]:
    """Lines for ``cep explain``: which path the query takes, and why."""
    plan, reasons = analyze(statement, machine, input_columns)
    if plan is None:
        return ["path: Pike VM (not eligible for the fast path: " + "; ".join(reasons) + ")"]
    lines = ["path: fast path: DEFINE conditions evaluated column-wise (numpy), pattern run by Python's re",
             f"      over one byte per row: {plan.regex.pattern!r}"]
    if plan.overlapping_loops:
        lines.append("      (batches where two loops on one path can take the same rows run on the Pike VM)")
    return lines


def _build(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> FastPlan:
    mr = statement.match
    if mr.within is not None:
        raise NotEligible("WITHIN needs event-time expiry, which the VM does")
    if getattr(mr, "seek", False):
        raise NotEligible("SEEK")
    if mr.rows_per_match.show_timeout:
        raise NotEligible("SHOW TIMEOUT MATCHES")
    unknown = set(machine.ops) - _KNOWN_OPS
    if unknown:
        raise NotEligible("the program uses " + ", ".join(sorted(unknown)))
    labels = machine.label_names
    if len(labels) > MAX_LABELS:
        raise NotEligible(f"more than {MAX_LABELS} pattern variables")
    label_ids = {name: index for index, name in enumerate(labels)}
    label_sets: dict[str, frozenset[int]] = {name: frozenset({label_ids[name]}) for name in labels}
    for subset in mr.subsets:
        label_sets[subset.name.key] = frozenset(label_ids[v.key] for v in subset.variables if v.key in label_ids)
    columns = {name.casefold(): name for name in input_columns}
    columns.update({name: name for name in input_columns})
    scope = Scope(columns, label_sets, in_define=True)

    defines = {d.variable.key: d for d in mr.defines}
    conditions: list = []
    used: set[str] = set()
    for name in labels:
        definition = defines.get(name)
        if definition is None:
            conditions.append(None)
            continue
        own = label_ids[name]

        def current(qualifier: ast.Identifier, own=own) -> bool:
            found = label_sets.get(qualifier.key)
            return found is not None and own in found

        try:
            conditions.append(kernels.compile_condition(definition.condition, scope.column, current))
        except kernels.NotVectorizable as why:
            raise NotEligible(f"DEFINE {name}: {why}") from None
        used |= kernels.referenced_columns(definition.condition, scope.column)

    ir = _lower(mr.pattern, label_ids)
    emitted = _emit(ir, len(labels))
    if emitted.classes > MAX_UNROLLED_CLASSES:
        raise NotEligible(f"the pattern unrolls to more than {MAX_UNROLLED_CLASSES} row classes")
    try:
        regex = re.compile(emitted.pattern, re.DOTALL)
    except (re.error, RecursionError, OverflowError) as why:  # pragma: no cover - a translation gap
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
            if not _exclusive(path_a, path_b):
                raise NotEligible("two loops on one path share a variable (the regex engine could backtrack polynomially)")
        elif not _exclusive(path_a, path_b):
            overlapping.append((bits_a, bits_b))
    skip = mr.after_match.mode if mr.after_match is not None else "PAST_LAST_ROW"
    vector = None
    if mr.rows_per_match.mode == "ONE" and skip in ("PAST_LAST_ROW", "TO_NEXT_ROW"):
        vector = _vector_measures(mr, label_sets, label_groups, scope)
    return FastPlan(
        vector=vector,
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
        shared = {label for _, lookup in label_groups if lookup.__class__ is not int for label in range(8)
                  if any(lookup[m] == label for m in range(256))}
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
            elif isinstance(expr, ast.Navigation) and expr.kind in ("FIRST", "LAST") and isinstance(expr.operand, ast.ColumnRef):
                if expr.offset is not None and not (isinstance(expr.offset, ast.Literal) and expr.offset.value == 0):
                    return None
                operand = expr.operand
                out.append((expr.kind.lower(), scope.column(operand), groups_of(operand.qualifier)))
            elif (isinstance(expr, ast.Aggregate) and expr.name == "COUNT" and not expr.distinct
                  and len(expr.args) == 1 and isinstance(expr.args[0], ast.Star)):
                out.append(("count", None, groups_of(expr.args[0].qualifier)))
            else:
                return None
    except NotEligible:
        return None
    return out
