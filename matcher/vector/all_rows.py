"""ALL ROWS PER MATCH computed column-wise: the fast path's output when every match row is a row out.

The vector path (``fastpath._scan_separated``) gives each match's group spans, partition-local, as an
(m, groups + 1, 2) array. Here they are expanded to one entry per output row with numpy (``np.repeat``
of the match lengths), and each measure is computed for all rows at once, as the VM's ``MatchView``
answers it at each row (RUNNING: the match's rows up to the current one; FINAL: the whole match):

- an unqualified column: the current row's value (``LAST(col)``: the same; FINAL: the match's last row);
- ``v.col`` / ``LAST(v.col)``: the last row so far labelled in v's set (a running maximum of row
  indices, reset at each match by comparing it with the match's first output index); FINAL: its value
  at the match's last row;
- ``FIRST(col)`` / ``FIRST(v.col)``: the match's first row (labelled in v's set); RUNNING, NULL until
  such a row has been reached, as ``MatchView.first_in`` says;
- ``COUNT(*)`` / ``COUNT(v.*)``: a cumulative count with per-match resets; FINAL: the match's total;
- ``MATCH_NUMBER()``, and ``CLASSIFIER()`` (the label of the current row's capture group).

A row's label is known from the spans alone when every capture group matches a single variable; a
measure that needs labels is not taken here otherwise. Every value is then gathered from the input
rows by ``data.gather`` (typed for a frame's library), so the columns equal the VM's rows, and
``tests/test_fastpath.py`` compares the two.
"""

from __future__ import annotations

import numpy as np

from cep.grammar import ast
from cep.matcher.vector.pattern_regex import NotEligible

MODES = ("ALL_SHOW_EMPTY", "ALL_OMIT_EMPTY")  # the pattern cannot match empty here: the two agree


def measures(mr: ast.MatchRecognize, label_sets, label_groups, scope) -> list | None:
    """The measures as (kind, column, labels, final): kind row (the current row), first, last, count,
    match_number or classifier; ``labels`` the label set read (None: every row). None when some
    measure needs more, or needs row labels that a group shared by several variables hides."""
    single = all(lookup.__class__ is int for _, lookup in label_groups)
    out = []
    try:
        for measure in mr.measures:
            out.append(_measure(measure.expr, label_sets, scope))
    except NotEligible:
        return None
    if not single and any(labels is not None for _, _, labels, _ in out):
        return None
    return out


def _measure(expr, label_sets, scope) -> tuple:
    """One measure as (kind, column, labels, final); raises NotEligible when it is not one of these."""
    if isinstance(expr, ast.MatchNumber):
        return ("match_number", None, None, False)
    if isinstance(expr, ast.Classifier) and expr.variable is None:
        return ("classifier", None, (), False)
    if isinstance(expr, ast.ColumnRef):
        labels = _labels(label_sets, expr.qualifier)
        return ("row" if labels is None else "last", scope.column(expr), labels, False)
    if isinstance(expr, ast.Navigation) and expr.kind in ("FIRST", "LAST") and isinstance(expr.operand, ast.ColumnRef):
        if expr.offset is not None and not (isinstance(expr.offset, ast.Literal) and expr.offset.value == 0):
            raise NotEligible("an offset")
        operand = expr.operand
        return (
            expr.kind.lower(),
            scope.column(operand),
            _labels(label_sets, operand.qualifier),
            expr.semantics == "FINAL",
        )
    if (
        isinstance(expr, ast.Aggregate)
        and expr.name == "COUNT"
        and not expr.distinct
        and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Star)
    ):
        return ("count", None, _labels(label_sets, expr.args[0].qualifier), expr.semantics == "FINAL")
    raise NotEligible("a measure not computed column-wise")


def _labels(label_sets, qualifier) -> frozenset[int] | None:
    if qualifier is None:
        return None
    found = label_sets.get(qualifier.key)
    if found is None:
        raise NotEligible("unknown qualifier")  # the VM reports it
    return found


def columns(plan, data, layout, offsets, regs: np.ndarray, per_partition: np.ndarray, typed: bool):
    """(output columns, output rows per partition) of the matches whose group spans are ``regs``:
    partition columns, ORDER BY columns, measures, the other input columns (``OutputLayout``)."""
    output = plan.machine.output.layout
    m = len(regs)
    starts, stops = regs[:, 0, 0], regs[:, 0, 1]
    lengths = stops - starts
    total = int(lengths.sum())
    match_part = np.repeat(np.arange(len(per_partition)), per_partition)
    ends = np.cumsum(lengths)
    first_out = ends - lengths  # each match's first output row
    match_of = np.repeat(np.arange(m), lengths)
    index = np.arange(total, dtype=np.int64)
    within = index - first_out[match_of]
    sorted_rows = (offsets[:-1][match_part] + starts)[match_of] + within
    rows = layout.order[sorted_rows]  # the input row of each output row
    rows_per_partition = np.bincount(match_part, weights=lengths, minlength=len(per_partition)).astype(np.int64)

    out = [data.gather(name, layout.first_rows[match_part[match_of]], typed) for name in plan.machine.partition_names]
    out += [data.gather(name, rows, typed) for name in output.row_columns[: output.order_count]]
    labels = (
        _row_labels(plan.label_groups, regs, first_out, total)
        if any(spec[2] is not None for spec in plan.all_rows)
        else None
    )
    first_match = np.cumsum(per_partition) - per_partition
    numbers = np.arange(m, dtype=np.int64) - first_match[match_part] + 1  # numbered from 1 in each partition
    out += measure_columns(plan.all_rows, plan.machine.label_names, data, rows, lengths, numbers, labels, typed)
    out += [data.gather(name, rows, typed) for name in output.row_columns[output.order_count :]]
    return out, rows_per_partition


def measure_columns(specs, label_names, data, rows, lengths, numbers, labels, typed: bool) -> list:
    """Each measure (``measures``' specs) at every output row of m matches, as the VM's ``MatchView``
    answers it there. ``rows``: the input row of each output row, match after match; ``lengths``: each
    match's rows; ``numbers``: each match's MATCH_NUMBER(); ``labels``: each output row's label id (None
    when no measure reads labels)."""
    m, total = len(lengths), len(rows)
    ends = np.cumsum(lengths)
    first_out = ends - lengths  # each match's first output row
    match_of = np.repeat(np.arange(m), lengths)
    index = np.arange(total, dtype=np.int64)
    within = index - first_out[match_of]
    none = np.full(total, -1, dtype=np.int64)
    out = []
    for kind, column, label_set, final in specs:
        if kind == "match_number":
            out.append(data.integers(np.asarray(numbers, dtype=np.int64)[match_of], typed))
            continue
        if kind == "classifier":
            names = np.array(list(label_names), dtype=object)
            out.append(names[labels].tolist())
            continue
        member = None
        if label_set is not None:
            table = np.zeros(257, dtype=bool)
            table[list(label_set)] = True
            member = table[labels]
        if kind == "count":
            if member is None:
                counts = lengths[match_of] if final else within + 1
            else:
                so_far = np.cumsum(member)
                before = (so_far[first_out] - member[first_out])[match_of] if m else so_far
                counts = so_far[ends - 1][match_of] - before if final else so_far - before
            out.append(data.integers(counts, typed))
            continue
        if kind == "row" or (kind == "last" and member is None and not final):
            at = index
        elif member is None:  # FIRST(col), FINAL LAST(col): the match's first / last row
            at = first_out[match_of] if kind == "first" else (ends - 1)[match_of]
        elif kind == "first":  # FIRST(v.col): the match's first such row; RUNNING, once it has been reached
            found = np.minimum.reduceat(np.where(member, index, total), first_out) if m else first_out
            found = np.where(found < ends, found, -1)
            at = found[match_of]
            if not final:
                at = np.where(at <= index, at, -1)
        else:  # the last row so far in the set: a running maximum, reset where it falls before the match
            latest = np.maximum.accumulate(np.where(member, index, -1))
            latest[latest < first_out[match_of]] = -1
            at = latest[(ends - 1)[match_of]] if final else latest
        picked = np.where(at < 0, none, rows[np.where(at < 0, 0, at)]) if total else none
        out.append(data.gather(column, picked, typed))
    return out


def _row_labels(label_groups, regs: np.ndarray, first_out: np.ndarray, total: int) -> np.ndarray:
    """The label of each output row: each single-variable group's rows, laid out in row order."""
    positions, lengths, labels = [], [], []
    for group, label in label_groups:
        begin, end = regs[:, group, 0], regs[:, group, 1]
        taken = begin < end
        positions.append((first_out + begin - regs[:, 0, 0])[taken])
        lengths.append((end - begin)[taken])
        labels.append(np.full(int(taken.sum()), label, dtype=np.int64))
    if not positions:
        return np.full(total, 256, dtype=np.int64)
    position, length, label = np.concatenate(positions), np.concatenate(lengths), np.concatenate(labels)
    order = np.argsort(position, kind="stable")
    out = np.repeat(label[order], length[order])
    if len(out) != total:  # pragma: no cover - a bug in the spans, not user error
        raise AssertionError(f"fast path: {len(out)} labels for {total} match rows")
    return out
