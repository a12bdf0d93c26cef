"""The sequence engine's output without a Python step per row: ONE ROW PER MATCH measures computed for
all matches at once.

``sequence.py`` finds, for every start row, whether a match starts there and how many rows each item
takes; AFTER MATCH SKIP picks the starts that count (``program/skip.py``, the walk every engine shares),
and the measures of those matches are computed here.

Measures are compiled to *column programs* (``compile_measures``): each leaf reads, for every match at
once, a row of the match (a variable's first/last row, with constant offsets), a count, an integer
SUM (cumulative sums: integer additions are exact in any order) or MATCH_NUMBER(); each operation
(``+ - *``, unary minus) applies the function the Pike VM applies, value by value, to Python values:
the same results by construction. A measure of another shape (function calls, CASE, AVG/MIN/MAX,
DISTINCT, SUM over floats or DECIMALs, CLASSIFIER...) is the VM's own compiled measure closure, called
once per match over a ``MatchView`` of that match's rows (``_per_match``): the same code, so the same
values, types and errors, with a Python step per match instead of per row. A TIMEOUT row (SHOW TIMEOUT
MATCHES) is computed as a match over its partial match's rows, with no MATCH_NUMBER() and
MATCH_STATUS() 'TIMEOUT', as ``OutputBuilder.timeout`` does. A measure that reads rows outside its
match (PREV/NEXT: the rows before a match are not gathered), a skip that fails (E0401), a run-time
error in a measure or an ambiguous start sends its partition (or, for an error, the batch) back to
``PartitionOutput``, which the VM shares.
"""

from __future__ import annotations

import decimal
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cep.grammar import ast
from cep.grammar.errors import CepRuntimeError
from cep.matcher.sql.context import Env, MatchView
from cep.matcher.sql.types import infer, integer_bounds
from cep.matcher.sql.values import add, multiply, negate, subtract
from cep.matcher.vector.kernels import Unsupported
from cep.matcher.vector.layout import present_in

_PLAIN_NUMBERS = (int, float)
_ARITHMETIC = {"+": (operator.add, add), "-": (operator.sub, subtract), "*": (operator.mul, multiply)}


class NotColumnar(Exception):
    """A measure the column programs do not compute: the output goes through PartitionOutput."""


@dataclass
class Matches:
    """The matches to output, as arrays over them: their first row (global, in ORDER BY order), each
    item's first row and row count, the partition index and MATCH_NUMBER()."""

    start: np.ndarray
    item_begin: np.ndarray  # (items, m)
    item_count: np.ndarray  # (items, m)
    number: np.ndarray
    order: np.ndarray  # global position -> input row
    data: Any  # the ListInput / ArrayInput (gather) of the batch
    load: Callable  # column name -> kernels.Value in global order
    loaded: dict  # the columns the conditions loaded (kernels.Value in global order): read without a gather
    timeout: np.ndarray | None = None  # which rows are TIMEOUT rows (a partial match): no number, status TIMEOUT
    floor: np.ndarray | None = None  # per match, its partition's first row (``reading_before``: PREV stops there)

    @property
    def end(self) -> np.ndarray:
        return self.start + self.item_count.sum(axis=0) - 1


# A program's values: a list of Python values, or an int64/float64 array standing for Python ints/floats
# (no NULL), kept as an array so that arithmetic on it runs in numpy when that is exact.
Program = Callable[[Matches], Any]
_INT64_BOUND = 2**63


# ------------------------------------------------------------------------------------- compiling


def compile_measures(
    measures,
    column_of: Callable[[ast.ColumnRef], str],
    item_of_label: Callable[[ast.Identifier], int],
    status: str,
    vm_measures: tuple[Callable, ...],
    item_labels: tuple[int, ...],
    label_names: tuple[str, ...],
    column_type: Callable[[ast.ColumnRef], str] = lambda ref: "BIGINT",
) -> list[Program] | None:
    """A program per measure: a column program where it computes the measure exactly, else the VM's own
    measure closure (``vm_measures``, ``OutputLayout.measures``) run once per match (``_per_match``);
    None when a measure reads rows outside its match (PREV/NEXT); ``reading_before`` takes PREV.
    ``column_type`` types integer arithmetic as the VM does (``Scope.column_type``): a result outside its
    type's range is left to the VM's closure, which raises Spark's overflow error at the expression."""
    programs = []
    for measure, closure in zip(measures, vm_measures):
        if _outside_match(measure.expr):
            return None
        general = _per_match(closure, item_labels, label_names, status)
        try:
            fast = _compile(measure.expr, column_of, item_of_label, status, column_type)
        except NotColumnar:
            programs.append(general)
            continue
        programs.append(_either(fast, general))
    return programs


def per_match_names(measures, programs: list[Program]) -> list[str]:
    """The measures computed per match by the VM's measure code (``explain`` names them)."""
    return [measure.name.name for measure, program in zip(measures, programs) if getattr(program, "per_match", False)]


def reads_after(measures) -> bool:
    """Does a measure read rows after its match (NEXT)? Only ``PartitionOutput`` holds those."""
    return any(isinstance(node, ast.Navigation) and node.kind == "NEXT" for m in measures for node in ast.walk(m.expr))


def reads_before(measures) -> bool:
    """Does a measure read rows before its match (PREV)? ``reading_before`` computes those."""
    return any(isinstance(node, ast.Navigation) and node.kind == "PREV" for m in measures for node in ast.walk(m.expr))


def _outside_match(expr) -> bool:
    """Does ``expr`` read a row that may lie outside the match (PREV/NEXT in MEASURES; LAG/LEAD stay in it)?"""
    return any(isinstance(node, ast.Navigation) and node.kind in ("PREV", "NEXT") for node in ast.walk(expr))


def _either(fast: Program, general: Program) -> Program:
    """The column program, or the per-match one when the values turn out to be of a kind it does not
    compute exactly (a SUM over floats, a column the kernels do not hold...)."""

    def run(m: Matches):
        try:
            return fast(m)
        except (NotColumnar, Unsupported):
            return general(m)

    return run


class _MatchRows(dict):
    """The rows of the matches, column by column, gathered on first read: a match's rows are contiguous
    (``offsets[j]`` is where match j's first row is), so a column is one gather for all matches."""

    def __init__(self, m: Matches, rows: np.ndarray) -> None:
        super().__init__()
        self.m, self.rows = m, rows

    def __missing__(self, column: str) -> list:
        values = list(self.m.data.gather(column, self.m.order[self.rows], False))
        self[column] = values
        return values


def _per_match(closure: Callable, item_labels: tuple[int, ...], label_names: tuple[str, ...], status: str) -> Program:
    """The VM's measure ``closure`` evaluated for each match as ``OutputBuilder.match`` (or ``.timeout``)
    evaluates it: over a ``MatchView`` of the match's labelled rows, at its last row, with its MATCH_NUMBER()
    and MATCH_STATUS(): the same code, so the same values, types and errors. A match's rows are read
    at its own global positions (``env.base`` shifts them onto the gathered rows), which is exact as long
    as the measure reads only rows of the match (``_outside_match``)."""

    def evaluate(m: Matches) -> list:
        counts = m.item_count.T.tolist()
        sizes = m.item_count.sum(axis=0)
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        rows = np.repeat(m.start - offsets[:-1], sizes) + np.arange(int(offsets[-1]), dtype=np.int64)
        env = Env(_MatchRows(m, rows), label_names)
        env.total = len(m.order)
        timeouts = m.timeout.tolist() if m.timeout is not None else [False] * len(counts)
        out = []
        for start, offset, size, number, spans, timeout in zip(
            m.start.tolist(), offsets.tolist(), sizes.tolist(), m.number.tolist(), counts, timeouts
        ):
            labels = [label for label, count in zip(item_labels, spans) for _ in range(count)]
            end = start + size - 1
            env.base = start - offset
            env.row = end if size else None
            env.view = MatchView(start, labels, env.row)
            env.match_number, env.match_status = (None, "TIMEOUT") if timeout else (number, status)
            out.append(closure(env))
        return out

    evaluate.per_match = True
    return evaluate


def reading_before(
    closures: tuple[Callable, ...],
    item_labels: tuple[int, ...],
    label_names: tuple[str, ...],
    status: str,
    lookback: int,
) -> list[Program]:
    """Programs for measures that read rows before their match (PREV in MEASURES, up to ``lookback`` rows
    back): the VM's measure closures, all of them once per match, as ``_per_match`` evaluates one, over the
    match's rows and the ``lookback`` rows before it, positions counted from its partition's first row
    (``Matches.floor``), so that a PREV before that row is NULL, as on the VM. NEXT is not taken (a match's
    measures would wait for rows after it: ``machine.lookahead``)."""
    computed: dict[int, tuple[Matches, list[tuple]]] = {}

    def table(m: Matches) -> list[tuple]:
        found = computed.get(id(m))
        if found is not None and found[0] is m:
            return found[1]
        sizes = m.item_count.sum(axis=0)
        low = np.maximum(m.start - lookback, m.floor)
        widths = m.start + sizes - low  # rows read per match: its own and those before it
        offsets = np.zeros(len(widths) + 1, dtype=np.int64)
        np.cumsum(widths, out=offsets[1:])
        rows = np.repeat(low - offsets[:-1], widths) + np.arange(int(offsets[-1]), dtype=np.int64)
        env = Env(_MatchRows(m, rows), label_names)
        timeouts = m.timeout.tolist() if m.timeout is not None else [False] * len(sizes)
        out = []
        for start, low_row, floor, offset, size, number, spans, timeout in zip(
            m.start.tolist(),
            low.tolist(),
            m.floor.tolist(),
            offsets.tolist(),
            sizes.tolist(),
            m.number.tolist(),
            m.item_count.T.tolist(),
            timeouts,
        ):
            labels = [label for label, count in zip(item_labels, spans) for _ in range(count)]
            first, last = start - floor, start - floor + size - 1  # positions in the partition
            env.base = low_row - floor - offset
            env.total = last + 1
            env.row = last if size else None
            env.view = MatchView(first, labels, env.row)
            env.match_number, env.match_status = (None, "TIMEOUT") if timeout else (number, status)
            out.append(tuple(closure(env) for closure in closures))
        computed.clear()
        computed[id(m)] = (m, out)
        return out

    def program(index: int) -> Program:
        def run(m: Matches) -> list:
            return [values[index] for values in table(m)]

        run.per_match = True  # ``per_match_names``: the VM's measure code, once per match
        return run

    return [program(index) for index in range(len(closures))]


def _within_type(program: Program, expr, column_type) -> Program:
    """``program`` of integer arithmetic ``expr`` whose results must stay in the range of its integer type
    (Spark's: an INT + an INT is an INT); a result outside it is ``Unsupported``, so the VM's closure runs and
    raises the overflow error at the row's match."""
    bounds = integer_bounds(infer(expr, column_type))
    if bounds is None:
        return program
    least, most = bounds

    def within(m):
        values = program(m)
        if isinstance(values, np.ndarray):
            outside = values.dtype == np.int64 and len(values) and (values.min() < least or values.max() > most)
        else:  # Python values (the exact path): already one step per match
            outside = any(type(v) is int and not least <= v <= most for v in values)
        if outside:
            raise Unsupported("an integer result outside its type's range (the VM raises the overflow)")
        return values

    return within


def _compile(expr, column_of, item_of, status: str, column_type=lambda ref: "BIGINT") -> Program:
    def recurse(node):
        return _compile(node, column_of, item_of, status, column_type)

    if isinstance(expr, ast.MatchNumber):
        return lambda m: (
            m.number if not _timeouts(m) else [None if t else n for n, t in zip(m.number.tolist(), m.timeout.tolist())]
        )
    if isinstance(expr, ast.MatchStatus):
        return lambda m: (
            [status] * len(m.start) if not _timeouts(m) else ["TIMEOUT" if t else status for t in m.timeout.tolist()]
        )
    if isinstance(expr, ast.ColumnRef):
        return _row_value(column_of(expr), _rows_of(expr.qualifier, item_of), "LAST", 0)
    if isinstance(expr, ast.Navigation) and expr.kind in ("FIRST", "LAST") and isinstance(expr.operand, ast.ColumnRef):
        n = 0
        if expr.offset is not None:
            if not (isinstance(expr.offset, ast.Literal) and type(expr.offset.value) is int and expr.offset.value >= 0):
                raise NotColumnar("a non-constant offset")
            n = expr.offset.value
        operand = expr.operand
        return _row_value(column_of(operand), _rows_of(operand.qualifier, item_of), expr.kind, n)
    if isinstance(expr, ast.Aggregate) and not expr.distinct and len(expr.args) == 1 and not expr.order_by:
        return _within_type(_aggregate(expr, column_of, item_of), expr, column_type)
    if isinstance(expr, ast.Literal) and type(expr.value) is int:
        value = expr.value
        if abs(value) < 2**62:
            return lambda m: np.full(len(m.start), value, dtype=np.int64)
        return lambda m: [value] * len(m.start)
    if isinstance(expr, ast.Unary) and expr.op in ("-", "+"):
        operand = recurse(expr.operand)
        if expr.op == "+":
            return operand

        def negated(m):
            values = operand(m)
            if isinstance(values, np.ndarray) and (values.dtype == np.float64 or not (values == -_INT64_BOUND).any()):
                return -values
            return [negate(v) for v in _as_output(values)]

        return _within_type(negated, expr, column_type)
    if isinstance(expr, ast.Binary) and expr.op in _ARITHMETIC:
        plain, general = _ARITHMETIC[expr.op]
        left = recurse(expr.left)
        if isinstance(expr.right, ast.Literal) and type(expr.right.value) is decimal.Decimal:
            constant, as_float = expr.right.value, float(expr.right.value)  # as the VM's _arithmetic does

            def with_decimal(m):
                values = left(m)
                if isinstance(values, np.ndarray) and values.dtype == np.float64:
                    return _NUMPY[expr.op](values, as_float)
                return [plain(v, as_float) if type(v) is float else general(v, constant) for v in _as_output(values)]

            return with_decimal  # a DECIMAL literal: no integer result
        right = recurse(expr.right)

        def arithmetic(m):
            a, b = left(m), right(m)
            exact = _exact(expr.op, a, b)
            if exact is not None:
                return exact
            return [
                plain(x, y) if type(x) in _PLAIN_NUMBERS and type(y) in _PLAIN_NUMBERS else general(x, y)
                for x, y in zip(_as_output(a), _as_output(b))
            ]

        return _within_type(arithmetic, expr, column_type)
    raise NotColumnar(type(expr).__name__)


_NUMPY = {"+": np.add, "-": np.subtract, "*": np.multiply}


def _timeouts(m: Matches) -> bool:
    return m.timeout is not None and bool(m.timeout.any())


def _exact(op: str, a, b) -> np.ndarray | None:
    """``a op b`` in numpy when both are arrays of one kind and it is what Python computes (floats: the
    same IEEE operation; integers: no overflow), else None."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.dtype != b.dtype:
        return None
    if a.dtype == np.int64 and len(a):
        big_a, big_b = int(np.abs(a).max()), int(np.abs(b).max())
        if (big_a * big_b if op == "*" else big_a + big_b) >= _INT64_BOUND:
            return None
    return _NUMPY[op](a, b)


def _as_output(values) -> list:
    return values.tolist() if isinstance(values, np.ndarray) else values


def _rows_of(qualifier: ast.Identifier | None, item_of) -> Callable[[Matches], tuple]:
    """(first row, row count) of a variable's rows in each match (None: all its rows)."""
    if qualifier is None:
        return lambda m: (m.start, m.item_count.sum(axis=0))
    index = item_of(qualifier)
    return lambda m: (m.item_begin[index], m.item_count[index])


def _row_value(column: str, rows_of, kind: str, n: int) -> Program:
    def read(m: Matches) -> list:
        first, count = rows_of(m)
        valid = count > n
        row = first + n if kind == "FIRST" else first + count - 1 - n
        loaded = m.loaded.get(column)
        if (
            loaded is not None
            and loaded.kind == "int"
            and valid.all()
            and (loaded.nulls is None or not loaded.nulls[row].any())
        ):
            return loaded.data[row]  # the column's Python ints, without a gather
        inputs = np.where(valid, m.order[np.where(valid, row, 0)], -1)
        return list(m.data.gather(column, inputs, False))

    return read


def _aggregate(expr: ast.Aggregate, column_of, item_of) -> Program:
    arg = expr.args[0]
    if expr.name == "COUNT" and isinstance(arg, ast.Star):
        rows_of = _rows_of(arg.qualifier, item_of)
        return lambda m: rows_of(m)[1]
    if expr.name not in ("COUNT", "SUM") or not isinstance(arg, ast.ColumnRef):
        raise NotColumnar(f"{expr.name}()")
    rows_of, column, name = _rows_of(arg.qualifier, item_of), column_of(arg), expr.name

    def fold(m: Matches) -> list:
        first, count = rows_of(m)
        if name == "COUNT":  # needs only where the values are NULL, whatever their kind (times, text...)
            return _range_sums(_present(m, column).astype(np.int64), first, count)
        try:
            value = m.load(column)
        except Unsupported:
            raise NotColumnar("SUM over a column the kernels do not hold") from None
        seen = _range_sums(present_in(value, len(m.order)).astype(np.int64), first, count)
        if value.kind == "null":
            return [None] * len(first)
        size = len(m.order)
        if value.kind != "int":  # float sums are left-to-right additions in the VM: not a difference of cumsums
            raise NotColumnar(f"SUM over a {value.kind} column")
        data = value.data if value.nulls is None else np.where(value.nulls, 0, value.data)
        if data.size and int(np.abs(data).max()) * size >= 2**62:
            raise NotColumnar("SUM of integers that could overflow 64 bits")
        totals = _range_sums(data, first, count)
        if seen.all():
            return totals
        return [None if k == 0 else t for k, t in zip(seen.tolist(), totals.tolist())]

    return fold


def _present(m: Matches, column: str) -> np.ndarray:
    """Whether each row (in ORDER BY order) holds a value of ``column``: from the values the conditions
    loaded, else from the input (``present``: a NULL mask, without building Python values)."""
    loaded = m.loaded.get(column)
    return present_in(loaded, len(m.order)) if loaded is not None else m.data.present(column, m.order)


def _range_sums(values: np.ndarray, first: np.ndarray, count: np.ndarray) -> np.ndarray:
    running = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(values, out=running[1:])
    return running[first + count] - running[first]


def columns(programs: list[Program], matches: Matches) -> list[list] | None:
    """The measures' values for the matches, or None when computing one raised (the VM then says where)."""
    try:
        return [_as_output(program(matches)) for program in programs]
    except (CepRuntimeError, NotColumnar, Unsupported):
        return None
