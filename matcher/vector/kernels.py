"""DEFINE conditions evaluated column-wise with numpy, for the fast path (``fastpath.py``).

A condition that reads only the current row and rows at fixed PREV/NEXT offsets is a function of the
row alone, so it can be evaluated for every row of a batch at once. ``compile_condition`` turns such a
condition into a *kernel*: a function from a ``Frame`` (the batch's columns, sorted by partition and
ORDER BY, with partition bounds) to a boolean array "the condition is TRUE on this row".

The kernels follow ``values.py`` and ``expressions.py`` exactly, including SQL's three-valued logic:
every intermediate result carries a null mask, and a condition that is NULL does not hold. Where numpy
cannot give exactly the answer Python values would (a type mix the VM would reject or treat
specially, integers that could overflow 64 bits, decimals that a float cannot stand for), a kernel
raises ``Unsupported`` and the caller runs those rows on the Pike VM instead. So the fast path never
has to be right about an odd case: it only has to notice it.

Two kinds of refusal:
- ``NotVectorizable`` at compile time: the condition uses something kernels do not evaluate
  (navigation into the match history, aggregates, CLASSIFIER, functions, CASE, ...). The query is not
  eligible for the fast path at all.
- ``Unsupported`` at run time: this batch's data has a type mix kernels do not reproduce exactly.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from cep.grammar import ast
from cep.grammar.errors import CepError
from cep.matcher.sql.intervals import interval_to_timedelta
from cep.matcher.sql.types import infer, integer_bounds

# Imported inside functions: pandas (heavy; only a column of Python datetimes needs it, to convert them in C).

# Integers up to this magnitude convert to float64 exactly, so int/float comparisons agree with Python's.
_EXACT_FLOAT_INT = 2**53
# Integer arithmetic is done in int64 only when the operands' magnitudes guarantee no overflow.
_INT64_SAFE = 2**62
# The operators numpy computes exactly as SQL does on both ints and floats; / and % need NULL on zero.
_EXACT_UFUNCS = {"+": np.add, "-": np.subtract, "*": np.multiply}
# A PREV/NEXT offset up to this many rows marks the rows it leaves the partition from one distance at
# a time (a few writes per partition); a larger one compares every row with its partition's bounds.
_EDGE_ROWS_SET_ONE_BY_ONE = 8

# Times are int64 ticks, so that arithmetic on them is exact integer arithmetic: a timestamp is
# microseconds since 1970-01-01 (Python's and Spark's precision), a DATE days since then, an interval
# (what ``ts - PREV(ts)`` and ``INTERVAL '5' MINUTE`` are: a ``timedelta`` in the VM) microseconds.
_MICROS_PER_DAY = 86_400_000_000
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_ORDINAL = _EPOCH.toordinal()
# The instants a ``datetime`` holds (years 1 to 9999): beyond them the VM raises an error, so a kernel
# whose result leaves them declines the batch and the VM raises it. A day short of each end, so that a
# literal with a fixed offset (whose wall clock, which Python checks, is within a day of its instant)
# never decides it differently.
_FIRST_MICROS = (_dt.datetime.min - _EPOCH) // _dt.timedelta(microseconds=1) + _MICROS_PER_DAY
_LAST_MICROS = (_dt.datetime.max - _EPOCH) // _dt.timedelta(microseconds=1) - _MICROS_PER_DAY
_FIRST_DAY = _dt.date.min.toordinal() - _EPOCH_ORDINAL
_LAST_DAY = _dt.date.max.toordinal() - _EPOCH_ORDINAL
# A timedelta can hold up to 999999999 days, beyond int64 microseconds: an interval literal of 2**62 µs
# (about 146,000 years) or more is left to the VM, so time + interval never overflows int64.
_INTERVAL_LIMIT = 2**62
# The kinds of times: naive timestamps, UTC timestamps (``tables.instant`` makes every aware input time
# UTC; Python refuses to order or subtract a naive and an aware time), dates, intervals.
_TIMES = ("ts", "tsz", "date")
TIME_KINDS = _TIMES + ("interval",)


class NotVectorizable(Exception):
    """The condition cannot be compiled to a kernel (a static property of the query)."""


class Unsupported(Exception):
    """This batch's data cannot be evaluated exactly by a kernel; run it on the VM."""


# ------------------------------------------------------------------------------------------- values


@dataclass
class Value:
    """An intermediate result: ``kind`` is int, float, bool, str, ts, tsz, date, interval or null (all NULL).

    Times are int64 ticks (see ``_TIMES``): ts (a naive timestamp) and tsz (a UTC one) in microseconds
    since 1970-01-01, date in days since then, interval (a ``timedelta``) in microseconds.

    ``data`` is an array with one entry per row, or a Python scalar for a constant; ``nulls`` is a bool
    array, or None when nothing is NULL. For kind null, ``data`` and ``nulls`` are unused.
    Constants of kind ``dec`` (a DECIMAL literal) keep their exact ``Decimal`` in ``data``.
    """

    kind: str
    data: object = None
    nulls: np.ndarray | None = None

    @property
    def is_constant(self) -> bool:
        return not isinstance(self.data, np.ndarray)


NULL = Value("null")


def _or_nulls(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


class Frame:
    """The batch a kernel runs over: columns in partition + ORDER BY order, partitions contiguous.

    ``offsets`` holds each partition's first row, then the number of rows, so a PREV/NEXT read outside
    the row's partition is NULL, as in the VM.
    """

    def __init__(self, n: int, columns: dict[str, Callable[[], Value]], offsets: np.ndarray):
        self.n = n
        self._loaders = columns
        self._cache: dict[str, Value] = {}
        self._shifted: dict[tuple[str, int], Value] = {}
        self.offsets = np.asarray(offsets, dtype=np.int64)

    def column(self, name: str, offset: int = 0) -> Value:
        base = self._cache.get(name)
        if base is None:
            base = self._cache[name] = self._loaders[name]()
        if offset == 0 or base.kind == "null":
            return base
        found = self._shifted.get((name, offset))
        if found is None:
            found = self._shifted[(name, offset)] = self._shift(base, offset)
        return found

    def _outside(self, offset: int) -> np.ndarray:
        """Rows whose row ``offset`` away lies outside their partition: the first (or last) ``offset``
        rows of each partition, set partition by partition rather than computed for every row."""
        starts, ends = self.offsets[:-1], self.offsets[1:]
        if abs(offset) > _EDGE_ROWS_SET_ONE_BY_ONE:
            counts = ends - starts
            rows = np.arange(self.n, dtype=np.int64)
            if offset < 0:
                return rows - np.repeat(starts, counts) < -offset
            return np.repeat(ends, counts) - rows <= offset
        outside = np.zeros(self.n, dtype=bool)
        edge = starts if offset < 0 else ends - 1
        step = 1 if offset < 0 else -1
        for distance in range(min(abs(offset), self.n)):
            rows = edge + distance * step
            outside[rows[(rows >= starts) & (rows < ends)]] = True
        return outside

    def _shift(self, value: Value, offset: int) -> Value:
        """Row i gets row i + offset's value: a copy of the column shifted by slicing, NULL where
        i + offset leaves row i's partition."""
        outside = self._outside(offset)
        data = value.data
        step = min(abs(offset), self.n)
        if self.n:
            data = np.empty_like(value.data)
            if offset < 0:
                data[step:] = value.data[: self.n - step]
                data[:step] = value.data[0]  # outside the partition: NULL, any value will do
            else:
                data[: self.n - step] = value.data[step:]
                data[self.n - step :] = value.data[-1]
        if value.nulls is not None:
            nulls = np.ones_like(value.nulls)
            if offset < 0:
                nulls[step:] = value.nulls[: self.n - step]
            else:
                nulls[: self.n - step] = value.nulls[step:]
            outside |= nulls
        return Value(value.kind, data, outside)


def load_column(values) -> Value:
    """A column of Python values (None for NULL) -> a kernel ``Value``; ``Unsupported`` for odd types."""
    types = set(map(type, values))
    has_null = type(None) in types
    types.discard(type(None))
    n = len(values)
    if not types:
        return NULL
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=n) if has_null else None
    filled = [0 if v is None else v for v in values] if has_null else values
    if types == {float}:
        return Value("float", np.array(filled, dtype=np.float64), nulls)
    if types == {int}:
        try:
            return Value("int", np.array(filled, dtype=np.int64), nulls)
        except OverflowError:
            raise Unsupported("an integer column holds values beyond 64 bits") from None
    if types == {int, float}:
        data = np.array(filled, dtype=np.float64)
        finite = data[np.isfinite(data)]
        if finite.size and np.abs(finite).max() > _EXACT_FLOAT_INT:
            raise Unsupported("a column mixes integers and floats of magnitude beyond 2**53")
        return Value("float", data, nulls)
    if types == {bool}:
        return Value("bool", np.array(filled, dtype=bool), nulls)
    if types == {str}:
        filled = [("" if v is None else v) for v in values] if has_null else values
        return load_strings(filled, nulls)
    if types == {_dt.datetime}:
        return _load_timestamps(values, nulls)
    if types == {_dt.date}:
        days = np.fromiter((_EPOCH_ORDINAL if v is None else v.toordinal() for v in values), dtype=np.int64, count=n)
        return Value("date", days - _EPOCH_ORDINAL, nulls)
    names = ", ".join(sorted(t.__name__ for t in types))
    raise Unsupported(f"a column holds values of types the kernels do not evaluate: {names}")


def _load_timestamps(values: list, nulls: np.ndarray | None) -> Value:
    """Plain datetimes -> microseconds: all naive (ts) or all UTC (tsz, as ``tables.instant`` leaves an
    aware input time); a mix, or another zone, is left to the VM, which orders such values its own way."""
    zones = {v.tzinfo for v in values if v is not None}
    if zones == {None}:
        kind, dtype = "ts", "datetime64[us]"
    elif zones == {_dt.UTC}:
        kind, dtype = "tsz", "datetime64[us, UTC]"
    else:
        raise Unsupported("a time column mixes naive and zoned times, or holds a zone other than UTC")
    import pandas as pd  # its datetime conversion runs in C (about 1 µs a value; Python's takes 1.3 µs)

    filler = _EPOCH if kind == "ts" else _EPOCH.replace(tzinfo=_dt.UTC)
    # an object array: pandas' own conversion of a list first copies it element by element
    objects = np.fromiter(values, dtype=object, count=len(values))
    if nulls is not None:
        objects[nulls] = filler
    return Value(kind, pd.DatetimeIndex(objects, dtype=dtype).asi8.astype(np.int64, copy=False), nulls)


def load_strings(values, nulls: np.ndarray | None) -> Value:
    """Strings (a list or object array, "" where NULL) -> a kernel ``Value`` of numpy unicode."""
    data = np.array(values, dtype=str)
    # numpy's fixed-width strings drop trailing NULs: such a value would compare wrongly
    if data.size and np.char.str_len(data).sum() != sum(map(len, values)):
        raise Unsupported("a string column holds values ending in NUL")
    return Value("str", data, nulls)


# ----------------------------------------------------------------------------------------- compiler

Kernel = Callable[[Frame], Value]


def compile_condition(
    expr,
    column_of: Callable[[ast.ColumnRef], str],
    current_labels: Callable[[ast.Identifier], bool],
    history=None,
    column_type: Callable[[ast.ColumnRef], str] | None = None,
):
    """DEFINE condition -> (frame -> bool array of rows where it is TRUE). Raises ``NotVectorizable``.

    ``column_of`` resolves a column reference to the batch's column name; ``current_labels(q)`` says
    whether a qualifier ``q`` names the variable being defined (or a subset containing it), in which
    case ``q.price`` is the current row's price. ``history`` (``lane_frame.History``) compiles what reads
    the match so far (another variable's row, FIRST/LAST, aggregates) for a frame of partial matches;
    without it such a condition is not vectorizable. ``column_type`` (``Scope.column_type``) types integer
    arithmetic as the VM does: a result that may leave its type's range (an INT's) is left to the VM, which
    raises Spark's overflow error where a row's result does.
    """
    kernel = compile_value(expr, column_of, current_labels, history, column_type)

    def condition(frame: Frame) -> np.ndarray:
        value = kernel(frame)
        if value.kind != "bool":  # the VM tests `is True`: NULL, numbers and strings never hold
            return np.zeros(frame.n, dtype=bool)
        data = np.broadcast_to(np.asarray(value.data, dtype=bool), (frame.n,))
        if value.nulls is None:
            return data.copy()
        return data & ~value.nulls

    return condition


def compile_defines(
    defines,
    labels,
    column_of: Callable[[ast.ColumnRef], str],
    label_sets: dict,
    history=None,
    column_type: Callable[[ast.ColumnRef], str] | None = None,
):
    """Each label's DEFINE as a kernel condition (None: no DEFINE, every row), and the columns they read.

    ``defines`` maps a variable's key to its ``ast.Define``; ``labels`` are the variables in label order;
    ``label_sets`` maps a qualifier's key to the label ids it names (a variable, or a subset), so that in
    B's DEFINE a qualifier naming B (or a subset holding it) reads the current row. A condition that
    cannot be compiled raises ``NotVectorizable`` naming its variable."""
    conditions: list = []
    used: set[str] = set()
    for own, name in enumerate(labels):
        definition = defines.get(name)
        if definition is None:
            conditions.append(None)
            continue

        def current(qualifier: ast.Identifier, own=own) -> bool:
            found = label_sets.get(qualifier.key)
            return found is not None and own in found

        try:
            conditions.append(compile_condition(definition.condition, column_of, current, history, column_type))
        except NotVectorizable as why:
            raise NotVectorizable(f"DEFINE {name}: {why}") from None
        used |= referenced_columns(definition.condition, column_of)
    return conditions, used


def compile_value(
    expr,
    column_of: Callable[[ast.ColumnRef], str],
    current_labels: Callable[[ast.Identifier], bool],
    history=None,
    column_type: Callable[[ast.ColumnRef], str] | None = None,
) -> Kernel:
    """An expression -> (frame -> ``Value``), as ``compile_condition`` compiles it."""
    return _Compiler(column_of, current_labels, history, column_type).compile(expr, 0)


def referenced_columns(expr, column_of: Callable[[ast.ColumnRef], str]) -> set[str]:
    out = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.ColumnRef):
            out.add(column_of(node))
    return out


_COMPARISONS = {
    "=": np.equal,
    "<>": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}
_ARITHMETIC = ("+", "-", "*", "/", "%", "DIV")


class _Compiler:
    def __init__(self, column_of, current_labels, history=None, column_type=None) -> None:
        self.column_of = column_of
        self.current_labels = current_labels
        self.history = history
        self.column_type = column_type or (lambda ref: "BIGINT")

    def integer_limit(self, expr) -> int:
        """The magnitude integer arithmetic ``expr`` may reach in int64 before the VM must decide: its integer
        type's largest value (Spark's type, as ``Scope.integer_type``), at most 2**62."""
        bounds = integer_bounds(infer(expr, self.column_type))
        return _INT64_SAFE if bounds is None else min(_INT64_SAFE, bounds[1])

    def compile(self, expr, offset: int) -> Kernel:
        """``offset``: the row read relative to the current one (PREV/NEXT move it)."""
        if isinstance(expr, ast.Literal):
            value = _literal(expr)
            return lambda frame: value
        if isinstance(expr, ast.IntervalLiteral):
            value = _interval(expr)
            return lambda frame: value
        if isinstance(expr, ast.ColumnRef):
            if expr.qualifier is not None and not self.current_labels(expr.qualifier):
                if self.history is None:
                    raise NotVectorizable(f"'{expr.qualifier.name}.{expr.column.name}' reads another variable's row")
                return self.history.variable_column(expr, self.column_of(expr), offset)
            name = self.column_of(expr)
            return lambda frame: frame.column(name, offset)
        if isinstance(expr, ast.Aggregate) and self.history is not None and offset == 0:
            return self.history.aggregate(expr, self.column_of)
        if isinstance(expr, ast.Navigation):
            if expr.kind in ("FIRST", "LAST") and self.history is not None and offset == 0:
                return self.history.logical(expr, self.column_of)
            if expr.kind not in ("PREV", "NEXT"):
                raise NotVectorizable(f"{expr.kind}() reads the match history")
            if offset != 0:
                raise NotVectorizable("nested PREV/NEXT")
            n = _constant_offset(expr)
            if any(
                isinstance(node, (ast.Navigation, ast.Aggregate, ast.Classifier)) for node in ast.walk(expr.operand)
            ):
                raise NotVectorizable(f"{expr.kind}() of a navigation, aggregate or CLASSIFIER")
            return self.compile(expr.operand, -n if expr.kind == "PREV" else n)
        if isinstance(expr, ast.Unary):
            operand = self.compile(expr.operand, offset)
            if expr.op == "NOT":
                return lambda frame: _not(operand(frame))
            if expr.op == "-":
                limit = self.integer_limit(expr)
                return lambda frame: _negate(operand(frame), limit)
            if expr.op == "+":
                return operand
        if isinstance(expr, ast.Binary):
            left, right = self.compile(expr.left, offset), self.compile(expr.right, offset)
            op = expr.op
            if op == "AND":
                return lambda frame: _and(left(frame), right(frame))
            if op == "OR":
                return lambda frame: _or(left(frame), right(frame))
            if op in _COMPARISONS:
                return lambda frame: _compare(op, left(frame), right(frame))
            if op in _ARITHMETIC:
                limit = self.integer_limit(expr)
                return lambda frame: _arithmetic(op, left(frame), right(frame), limit)
            raise NotVectorizable(f"operator {op}")
        if isinstance(expr, ast.IsNull):
            operand, negated = self.compile(expr.operand, offset), expr.negated
            return lambda frame: _is_null(operand(frame), negated, frame.n)
        if isinstance(expr, ast.Between):
            operand = self.compile(expr.operand, offset)
            low, high = self.compile(expr.low, offset), self.compile(expr.high, offset)
            negated = expr.negated

            def between(frame):
                value = operand(frame)
                result = _and(_compare(">=", value, low(frame)), _compare("<=", value, high(frame)))
                return _not(result) if negated else result

            return between
        if isinstance(expr, ast.InList):
            operand = self.compile(expr.operand, offset)
            items = [self.compile(item, offset) for item in expr.items]
            negated = expr.negated
            return lambda frame: _in_list(operand(frame), [item(frame) for item in items], negated, frame.n)
        raise NotVectorizable(f"{type(expr).__name__} is not evaluated column-wise")


def _interval(expr: ast.IntervalLiteral) -> Value:
    """``INTERVAL '10' MINUTE`` as the VM reads it (``interval_to_timedelta``), in whole microseconds."""
    try:
        delta = interval_to_timedelta(expr)
    except (CepError, OverflowError):
        raise NotVectorizable("an interval the VM reads (or rejects) its own way") from None
    micros = delta // _dt.timedelta(microseconds=1)
    if abs(micros) >= _INTERVAL_LIMIT:
        raise NotVectorizable("an interval of 2**62 microseconds or more")
    return Value("interval", micros)


def _constant_offset(node: ast.Navigation) -> int:
    if node.offset is None:
        return 1
    offset = node.offset
    if (
        isinstance(offset, ast.Literal)
        and offset.kind == "integer"
        and isinstance(offset.value, int)
        and offset.value >= 0
    ):
        return offset.value
    raise NotVectorizable(f"a non-constant {node.kind} offset")


def _literal(expr: ast.Literal) -> Value:
    value = expr.value
    if value is None:
        return NULL
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            return Value("ts", (value - _EPOCH) // _dt.timedelta(microseconds=1))
        if not isinstance(value.tzinfo, _dt.timezone):  # a zone whose offset changes: wall-clock arithmetic
            raise NotVectorizable("a timestamp literal in a time zone with daylight saving")
        # a fixed offset: Python compares and subtracts it with UTC times by the instant, as here
        try:
            instant = value.astimezone(_dt.UTC).replace(tzinfo=None)
        except OverflowError:
            raise NotVectorizable("a timestamp literal whose instant is outside the years 1 to 9999") from None
        return Value("tsz", (instant - _EPOCH) // _dt.timedelta(microseconds=1))
    if isinstance(value, _dt.date):
        return Value("date", value.toordinal() - _EPOCH_ORDINAL)
    if isinstance(value, bool):
        return Value("bool", value)
    if isinstance(value, int):
        if abs(value) >= 2**63:
            raise NotVectorizable("an integer literal beyond 64 bits")
        return Value("int", value)
    if isinstance(value, float):
        return Value("float", value)
    if isinstance(value, Decimal):
        return Value("dec", value)
    if isinstance(value, str):
        return Value("str", value)
    raise NotVectorizable(f"a {expr.kind} literal")


# ---------------------------------------------------------------------------------------- operators


def _numeric_operands(left: Value, right: Value, *, for_comparison: bool):
    """Bring two numeric values to a common numpy representation, exactly as Python would compare
    or combine them; returns (kind, left_data, right_data)."""
    kinds = {left.kind, right.kind}
    if kinds == {"int"}:
        return "int", left.data, right.data
    if "dec" in kinds:
        if kinds == {"dec"}:
            raise Unsupported("arithmetic on two DECIMAL literals")
        other = right if left.kind == "dec" else left
        dec = left if left.kind == "dec" else right
        if other.kind == "int":
            # int vs Decimal is exact in Python; float(d) gives the same answer only if no integer lies
            # between d and float(d), and only for comparisons (arithmetic would give a Decimal).
            as_float = float(dec.data)
            if (
                not for_comparison
                or math.floor(dec.data) != math.floor(as_float)
                or math.ceil(dec.data) != math.ceil(as_float)
            ):
                raise Unsupported("an integer combined with a DECIMAL literal")
            _check_exact_float(other)
        data_l = float(left.data) if left.kind == "dec" else _as_float(left)
        data_r = float(right.data) if right.kind == "dec" else _as_float(right)
        return "float", data_l, data_r
    return "float", _as_float(left), _as_float(right)


def _check_exact_float(value: Value) -> None:
    if value.kind != "int":
        return
    if value.is_constant:
        if abs(value.data) > _EXACT_FLOAT_INT:
            raise Unsupported("an integer beyond 2**53 compared with a float")
        return
    if value.data.size and np.abs(value.data).max() > _EXACT_FLOAT_INT:
        raise Unsupported("an integer beyond 2**53 compared with a float")


def _as_float(value: Value):
    if value.kind == "float":
        return value.data
    _check_exact_float(value)
    if value.is_constant:
        return float(value.data)
    return value.data.astype(np.float64)


def _compare(op: str, left: Value, right: Value) -> Value:
    if left.kind == "null" or right.kind == "null":
        return NULL
    numeric = ("int", "float", "dec")
    if left.kind in numeric and right.kind in numeric:
        _, a, b = _numeric_operands(left, right, for_comparison=True)
    elif left.kind == right.kind and left.kind in ("bool", "str") + TIME_KINDS:
        a, b = left.data, right.data
    else:
        raise Unsupported(f"comparison of {left.kind} with {right.kind}")
    with np.errstate(invalid="ignore"):
        data = _COMPARISONS[op](a, b)
        if "float" in (left.kind, right.kind):
            data = _nan_order(op, data, np.isnan(a), np.isnan(b))
    return Value("bool", data, _or_nulls(left.nulls, right.nulls))


def _nan_order(op: str, data, a_nan, b_nan):
    """``data`` corrected where a side is NaN: NaN equals NaN and is larger than every other number
    (Spark's order, as ``values.nan_compare``)."""
    if not (np.any(a_nan) or np.any(b_nan)):
        return data
    if op == "=":
        return data | (a_nan & b_nan)
    if op == "<>":
        return data & ~(a_nan & b_nan)
    if op == "<":
        return data | (b_nan & ~a_nan)
    if op == "<=":
        return data | b_nan
    if op == ">":
        return data | (a_nan & ~b_nan)
    return data | a_nan  # >=


def _magnitude(value: Value) -> int:
    if value.is_constant:
        return abs(int(value.data))
    if value.data.size == 0:
        return 0
    return int(max(abs(int(value.data.max())), abs(int(value.data.min()))))


def _arithmetic(op: str, left: Value, right: Value, limit: int = _INT64_SAFE) -> Value:
    """``left op right`` as ``values`` computes it; integers in int64 only while no result can reach ``limit``
    (the largest value of the operation's integer type, ``_Compiler.integer_limit``): past it the batch is
    ``Unsupported`` and the VM computes it, and raises the overflow error where a row's result overflows."""
    if left.kind == "null" or right.kind == "null":
        return NULL
    if left.kind in TIME_KINDS or right.kind in TIME_KINDS:
        return _time_arithmetic(op, left, right)
    numeric = ("int", "float", "dec")
    if left.kind not in numeric or right.kind not in numeric:
        raise Unsupported(f"arithmetic on {left.kind} and {right.kind}")
    kind, a, b = _numeric_operands(left, right, for_comparison=False)
    nulls = _or_nulls(left.nulls, right.nulls)
    if op in ("/", "%", "DIV") and right.is_constant and b == 0:
        return NULL  # division by zero is NULL (values.divide)
    if op == "DIV" and kind != "int":
        raise Unsupported("DIV of fractional numbers")
    if kind == "int":
        ma, mb = _magnitude(left), _magnitude(right)
        if op in ("+", "-") and ma + mb >= limit or op == "*" and ma * mb >= limit:
            raise Unsupported("integer arithmetic that could overflow its type (INT or BIGINT)")
        if op in _EXACT_UFUNCS:
            return Value("int", _EXACT_UFUNCS[op](a, b), nulls)
        zero = np.equal(b, 0)
        safe_b = np.where(zero, 1, b)
        if op == "/":  # 7 / 2 is 3.5 (values.divide)
            with np.errstate(all="ignore"):
                return Value("float", np.true_divide(a, safe_b), _zero_nulls(nulls, zero))
        if op == "DIV":  # truncates toward zero
            quotient = np.abs(a) // np.abs(safe_b)
            data = np.where((np.asarray(a) >= 0) == (np.asarray(safe_b) >= 0), quotient, -quotient)
        else:  # the remainder takes the dividend's sign
            remainder = np.abs(a) % np.abs(safe_b)
            data = np.where(np.asarray(a) >= 0, remainder, -remainder)
        return Value("int", data, _zero_nulls(nulls, zero))
    with np.errstate(all="ignore"):
        if op in _EXACT_UFUNCS:
            return Value("float", _EXACT_UFUNCS[op](a, b), nulls)
        zero = np.equal(b, 0)
        safe_b = np.where(zero, 1.0, b)
        data = np.divide(a, safe_b) if op == "/" else np.fmod(a, safe_b)
    return Value("float", data, _zero_nulls(nulls, zero))


def _time_arithmetic(op: str, left: Value, right: Value) -> Value:
    """``values.add`` / ``values.subtract`` on times, in int64 ticks: time - time of one kind is an
    interval, time +/- interval a time of the same kind. Python's ``date`` keeps whole days: it adds an
    interval's ``days`` (rounded down) and subtracts them too (``date - timedelta(hours=1)`` is the same
    date, ``date + -timedelta(hours=1)`` the day before). Everything else (interval + interval, a time
    + a number, naive - UTC, ...) is an error or another type in the VM: left to it."""
    nulls = _or_nulls(left.nulls, right.nulls)
    if op == "-" and left.kind == right.kind and left.kind in _TIMES:
        difference = np.subtract(left.data, right.data)
        if left.kind == "date":
            difference = difference * _MICROS_PER_DAY
        return Value("interval", difference, nulls)
    if op not in ("+", "-") or left.kind not in _TIMES or right.kind != "interval":
        raise Unsupported(f"'{op}' on {left.kind} and {right.kind}")
    step = right.data
    if left.kind == "date":
        step = np.floor_divide(step, _MICROS_PER_DAY)
        first, last = _FIRST_DAY, _LAST_DAY
    else:
        first, last = _FIRST_MICROS, _LAST_MICROS
    result = np.add(left.data, step) if op == "+" else np.subtract(left.data, step)
    inside = (np.asarray(result) >= first) & (np.asarray(result) <= last)
    if nulls is not None:
        inside = inside | nulls
    if not np.all(inside):
        raise Unsupported("a time outside the years 1 to 9999 (the VM raises the error)")
    return Value(left.kind, result, nulls)


def _zero_nulls(nulls, zero) -> np.ndarray | None:
    """Division by zero is NULL (values.divide)."""
    zero = np.asarray(zero)
    if zero.ndim == 0 or not zero.any():
        return nulls
    return zero if nulls is None else (nulls | zero)


def _negate(value: Value, limit: int = _INT64_SAFE) -> Value:
    if value.kind == "null":
        return NULL
    if value.kind == "int":
        if _magnitude(value) >= limit:
            raise Unsupported("negating an integer that could overflow its type (INT or BIGINT)")
        return Value("int", np.negative(value.data), value.nulls)
    if value.kind == "float":
        return Value("float", np.negative(value.data), value.nulls)
    raise Unsupported(f"negating a {value.kind}")


def _logical(value: Value) -> Value:
    if value.kind not in ("bool", "null"):
        raise Unsupported(f"AND/OR/NOT of a {value.kind}")
    return value


def _not(value: Value) -> Value:
    value = _logical(value)
    if value.kind == "null":
        return NULL
    return Value("bool", np.logical_not(value.data), value.nulls)


def _known(value: Value, truth: bool, n: int) -> np.ndarray:
    """Rows where ``value`` is known to be ``truth`` (not NULL)."""
    if value.kind == "null":
        return np.zeros(n, dtype=bool)
    data = np.broadcast_to(np.asarray(value.data, dtype=bool), (n,))
    hit = data if truth else ~data
    return hit if value.nulls is None else (hit & ~value.nulls)


def _null_mask(value: Value, n: int) -> np.ndarray | None:
    if value.kind == "null":
        return np.ones(n, dtype=bool)
    return None if value.nulls is None else np.broadcast_to(value.nulls, (n,))


def _size(*values: Value) -> int:
    """The row count of the operands: constants may be arrays of one element, so take the longest."""
    size = 1
    for value in values:
        for part in (value.data, value.nulls):
            if isinstance(part, np.ndarray) and part.ndim == 1:
                size = max(size, part.shape[0])
    return size


def _and(left: Value, right: Value) -> Value:
    left, right = _logical(left), _logical(right)
    n = _size(left, right)
    false = _known(left, False, n) | _known(right, False, n)
    nulls = _or_nulls(_null_mask(left, n), _null_mask(right, n))
    true = _known(left, True, n) & _known(right, True, n)
    if nulls is not None:
        nulls = nulls & ~false
    return Value("bool", true, nulls)


def _or(left: Value, right: Value) -> Value:
    left, right = _logical(left), _logical(right)
    n = _size(left, right)
    true = _known(left, True, n) | _known(right, True, n)
    nulls = _or_nulls(_null_mask(left, n), _null_mask(right, n))
    if nulls is not None:
        nulls = nulls & ~true
    return Value("bool", true, nulls)


def _is_null(value: Value, negated: bool, n: int) -> Value:
    if value.kind == "null":
        return Value("bool", not negated)
    if value.nulls is None:
        return Value("bool", negated)
    return Value("bool", ~value.nulls if negated else value.nulls.copy())


def _in_list(value: Value, items: list[Value], negated: bool, n: int) -> Value:
    """values.in_list: NULL operand -> NULL; any equal item -> TRUE; else NULL if an item was NULL."""
    if value.kind == "null":
        return NULL
    hit = np.zeros(n, dtype=bool)
    saw_null = np.zeros(n, dtype=bool)
    for item in items:
        result = _compare("=", value, item)
        hit |= _known(result, True, n)
        mask = _null_mask(result, n)
        if mask is not None:
            saw_null |= mask
    operand_null = _null_mask(value, n)
    nulls = (~hit) & saw_null
    if operand_null is not None:
        nulls = nulls | operand_null
    data = ~hit if negated else hit
    return Value("bool", data, nulls)
