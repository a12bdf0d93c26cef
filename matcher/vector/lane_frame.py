"""What a DEFINE condition reads of the match so far, for the sequence engine's lanes (``sequence.py``).

``History`` compiles those reads (another variable's row, FIRST/LAST with constant offsets, running
aggregates) into kernels over a ``LaneFrame``: one partial match per lane, the row under test ``cur``.
``Accumulator`` carries a running aggregate per lane as ``running.py`` folds it for the Pike VM: the
same additions in the same order, so the same bits.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cep.grammar import ast
from cep.matcher.vector import kernels

# From Python 3.12 sum() compensates float rounding, so a left-to-right SUM or AVG over floats is no
# longer what the VM computes (running.py): those go to the VM there.
PLAIN_FLOAT_SUMS = sys.version_info < (3, 12)
AGGREGATES = ("SUM", "COUNT", "AVG", "MIN", "MAX")


@dataclass(frozen=True)
class Slot:
    """A running aggregate: ``name`` over ``column`` (None: ``COUNT(*)``) of the rows labelled ``label``
    (None: every row of the match so far)."""

    name: str
    label: int | None
    column: str | None


# --------------------------------------------------------------------------------- compiling history


class History:
    """Compiles what a condition reads of the match so far into kernels over a ``LaneFrame``."""

    def __init__(self, label_of: Callable[[ast.Identifier], int], slots: list[Slot]) -> None:
        self.label_of = label_of
        self.slots = slots

    def variable_column(self, ref: ast.ColumnRef, name: str, offset: int):
        label = self.label_of(ref.qualifier)
        return lambda frame: frame.logical(label, name, "LAST", 0, offset)

    def logical(self, node: ast.Navigation, column_of):
        operand = node.operand
        if not isinstance(operand, ast.ColumnRef):
            raise kernels.NotVectorizable(f"{node.kind}() of an expression")
        n = 0
        if node.offset is not None:
            if not (
                isinstance(node.offset, ast.Literal)
                and isinstance(node.offset.value, int)
                and not isinstance(node.offset.value, bool)
                and node.offset.value >= 0
            ):
                raise kernels.NotVectorizable(f"a non-constant {node.kind} offset")
            n = node.offset.value
        label = None if operand.qualifier is None else self.label_of(operand.qualifier)
        name, kind = column_of(operand), node.kind
        return lambda frame: frame.logical(label, name, kind, n, 0)

    def aggregate(self, node: ast.Aggregate, column_of):
        if node.name not in AGGREGATES or node.distinct or len(node.args) != 1:
            raise kernels.NotVectorizable(f"{node.name}() is not carried column-wise")
        arg = node.args[0]
        if isinstance(arg, ast.Star) and node.name == "COUNT":
            slot = Slot("COUNT", None if arg.qualifier is None else self.label_of(arg.qualifier), None)
        elif isinstance(arg, ast.ColumnRef):
            slot = Slot(node.name, None if arg.qualifier is None else self.label_of(arg.qualifier), column_of(arg))
        else:
            raise kernels.NotVectorizable(f"{node.name}() of an expression")
        if slot not in self.slots:
            self.slots.append(slot)
        index = self.slots.index(slot)
        return lambda frame: frame.aggregate(index)


class LaneFrame:
    """The kernels' frame over partial matches: lane i tests row ``cur[i]`` as variable ``current``
    (None: a match's last row, for measures)."""

    def __init__(self, lanes, lane: np.ndarray, cur: np.ndarray, current: int | None) -> None:
        self.lanes = lanes
        self.lane = lane
        self.cur = cur
        self.current = current
        self.n = len(lane)

    def column(self, name: str, offset: int = 0) -> kernels.Value:
        return self.lanes.column(name, self.cur, self.lane, offset)

    def rows_of(self, label: int | None):
        """(first row, last row, has any) of the rows labelled ``label`` so far (None: every row)."""
        if label is None:
            return self.lane, self.cur, np.ones(self.n, dtype=bool)
        lanes = self.lanes
        index = lanes.item_of[label]
        first = lanes.item_begin[index, self.lane]
        count = lanes.item_count[index, self.lane]
        if label == self.current:
            # the row tested is the variable's next row; when it is its first (the next item tested where
            # a run might end), the item has no begin yet: the row tested is where it begins
            first = np.where(count == 0, self.cur, first)
            count = count + 1
        return first, first + count - 1, count > 0

    def logical(self, label: int | None, name: str, kind: str, n: int, offset: int) -> kernels.Value:
        """FIRST/LAST(name, n) among the rows of ``label``; then ``offset`` rows physically (PREV/NEXT)."""
        first, last, has = self.rows_of(label)
        row = first + n if kind == "FIRST" else last - n
        valid = has & (row >= first) & (row <= last)
        value = self.lanes.column(name, np.where(valid, row, self.lane), self.lane, offset)  # the start: a row inside
        if value.kind == "null":
            return value
        nulls = ~valid if value.nulls is None else (value.nulls | ~valid)
        return kernels.Value(value.kind, value.data, nulls)

    def aggregate(self, index: int) -> kernels.Value:
        return self.lanes.acc[index].value(self)


class Accumulator:
    """One running aggregate per lane, folded row by row as ``running.py`` folds it."""

    def __init__(self, slot: Slot, lanes) -> None:
        self.slot = slot
        self.lanes = lanes
        n = lanes.n
        self.count = np.zeros(n, dtype=np.int64)  # non-NULL rows folded
        self.column = None
        if slot.column is not None:
            column = lanes.values[slot.column]
            self.column = column
            if slot.name != "COUNT":
                # MIN/MAX of times compare their int64 ticks, as Python compares the datetimes
                ordered = ("int", "float", "null") + (kernels.TIME_KINDS if slot.name in ("MIN", "MAX") else ())
                if column.kind not in ordered:
                    raise kernels.Unsupported(f"{slot.name} over a {column.kind} column")
                if column.kind == "float" and slot.name in ("SUM", "AVG") and not PLAIN_FLOAT_SUMS:
                    raise kernels.Unsupported(f"{slot.name} over floats (compensated by sum() on this Python)")
                if (
                    column.kind == "int"
                    and slot.name == "SUM"
                    and column.data.size
                    and int(np.abs(column.data).max()) * max(column.data.size, 1) >= 2**62
                ):
                    raise kernels.Unsupported("SUM of integers that could overflow 64 bits")
        dtype = (
            np.float64
            if (slot.name == "AVG" or (self.column is not None and self.column.kind == "float"))
            else np.int64
        )
        self.total = np.zeros(n, dtype=dtype)

    def _ranges(self, label: int | None) -> bool:
        return self.slot.label is None or self.slot.label == label

    def _row(self, rows: np.ndarray):
        """(present, value) of the aggregated column at ``rows`` (global chunk rows)."""
        if self.column is None:
            return np.ones(len(rows), dtype=bool), None
        if self.column.kind == "null":
            return np.zeros(len(rows), dtype=bool), np.zeros(len(rows), dtype=self.total.dtype)
        at = rows + self.lanes.begin
        present = np.ones(len(rows), dtype=bool) if self.column.nulls is None else ~self.column.nulls[at]
        return present, self.column.data[at]

    def _fold(self, total, count, present, value):
        name = self.slot.name
        if name == "COUNT":
            return total, count + present
        if name in ("SUM", "AVG"):
            value = value.astype(self.total.dtype, copy=False)
            return np.where(present, np.where(count > 0, total + value, value), total), count + present
        better = value < total if name == "MIN" else value > total
        with np.errstate(invalid="ignore"):
            replace = present & ((count == 0) | better)
        return np.where(replace, value, total), count + present

    def add(self, label: int, lanes: np.ndarray, rows: np.ndarray) -> None:
        if not self._ranges(label) or not len(lanes) or (self.column is not None and self.column.kind == "null"):
            return
        present, value = self._row(rows)
        if self.slot.name == "COUNT":
            self.count[lanes] += present
            return
        self.total[lanes], self.count[lanes] = self._fold(self.total[lanes], self.count[lanes], present, value)

    def value(self, frame: LaneFrame) -> kernels.Value:
        lanes = frame.lane
        total, count = self.total[lanes], self.count[lanes]
        if frame.current is not None and self._ranges(frame.current):  # the row under test counts
            present, value = self._row(frame.cur)
            if self.slot.name == "COUNT":
                count = count + present
            else:
                total, count = self._fold(total, count, present, value)
        if self.slot.name == "COUNT":
            return kernels.Value("int", count, None)
        empty = count == 0
        if self.slot.name == "AVG":
            with np.errstate(all="ignore"):
                result = total / np.where(empty, 1, count)
            return kernels.Value("float", result, empty if empty.any() else None)
        kind = "float" if self.total.dtype == np.float64 else "int"
        if self.column is not None and self.column.kind in kernels.TIME_KINDS:
            kind = self.column.kind
        if self.column is not None and self.column.kind == "null":
            return kernels.NULL
        return kernels.Value(kind, total, empty if empty.any() else None)

    def snapshot(self, m: int):
        return [np.zeros(m, dtype=self.total.dtype), np.zeros(m, dtype=np.int64)]

    def save(self, snap, at: np.ndarray, lanes: np.ndarray) -> None:
        snap[0][at] = self.total[lanes]
        snap[1][at] = self.count[lanes]

    def restore(self, snap, at: np.ndarray, lanes: np.ndarray) -> None:
        self.total[lanes] = snap[0][at]
        self.count[lanes] = snap[1][at]
