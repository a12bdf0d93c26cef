"""Static SQL types of output columns, so engines with schemas (Spark, Arrow) can type the matches.

Type names: BIGINT, INTEGER, SMALLINT, TINYINT, DOUBLE, DECIMAL(p,s), VARCHAR, BOOLEAN, TIMESTAMP, DATE,
INTERVAL (a duration) and ARRAY<T>. A value whose type cannot be known (a bare NULL) is VARCHAR.

DECIMAL types follow Spark's rules (``spark.sql.decimalOperations.allowPrecisionLoss``, its default),
so a query's output columns have the type Spark itself would give them: ``a + b`` and ``a - b`` are
``DECIMAL(max(s1,s2) + max(p1-s1, p2-s2) + 1, max(s1,s2))``, ``a * b`` is ``DECIMAL(p1+p2+1, s1+s2)``,
``a / b`` is ``DECIMAL(p1-s1+s2 + max(6, s1+p2+1), max(6, s1+p2+1))``; a precision past 38 keeps the
integer digits and gives up scale down to 6 (``_fit``); an integer meets a DECIMAL as DECIMAL(20,0)
(BIGINT) or DECIMAL(10,0) (INTEGER), a DOUBLE makes the result DOUBLE. ``SUM`` of DECIMAL(p,s) is
DECIMAL(p+10, s), ``AVG`` is DECIMAL(p+4, s+4) (``values.decimal_average`` rounds it so). The Python
engine computes exactly (``values.DECIMAL_CONTEXT``); ``coerce`` rounds a value to its column's type.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from cep.grammar import ast
from cep.grammar.errors import CepRuntimeError
from cep.grammar.functions import AGGREGATES, SCALARS
from cep.matcher.sql.values import DECIMAL_CONTEXT, INTEGER_RANGES, MAX_DECIMAL_PRECISION, as_timestamp, to_text

# Imported inside functions: pyarrow (heavy and optional; only an Arrow input needs it).

INTEGERS = frozenset({"BIGINT", "INTEGER", "INT", "SMALLINT", "TINYINT", "LONG"})
FRACTIONAL = frozenset({"DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC", "NUMBER"})
# The integer type a CAST names, as Spark types it (``CAST(x AS SMALLINT)`` is a SMALLINT, with its own range).
_INTEGER_CASTS = {"INTEGER": "INTEGER", "INT": "INTEGER", "SMALLINT": "SMALLINT", "TINYINT": "TINYINT"}
_LITERAL_TYPES = {
    "integer": "BIGINT",
    "decimal": "DOUBLE",
    "string": "VARCHAR",
    "boolean": "BOOLEAN",
    "null": "VARCHAR",
    "timestamp": "TIMESTAMP",
    "date": "DATE",
}


# DECIMAL without a precision (a CAST to plain DECIMAL) is Spark's DECIMAL(10,0); a column typed just
# DECIMAL (a schema written without one) is read as Spark's widest system default, DECIMAL(38,18).
_CAST_DECIMAL = (10, 0)
_UNSIZED_DECIMAL = (38, 18)
# The DECIMAL an integer becomes when it meets one (Spark's DecimalType.forType).
_INTEGER_DECIMALS = {
    "BIGINT": (20, 0),
    "LONG": (20, 0),
    "INTEGER": (10, 0),
    "INT": (10, 0),
    "SMALLINT": (5, 0),
    "TINYINT": (3, 0),
}
_DECIMAL = re.compile(r"^(?:DECIMAL|NUMERIC)(?:\((\d+)\s*(?:,\s*(\d+))?\))?$")
# The scale Spark keeps at least when a result's precision passes 38 (``DecimalType.MINIMUM_ADJUSTED_SCALE``).
_MINIMUM_ADJUSTED_SCALE = 6


def decimal_type(precision: int, scale: int) -> str:
    return f"DECIMAL({precision},{scale})"


def decimal_params(type_name: str) -> tuple[int, int] | None:
    """(precision, scale) of a DECIMAL type name (``DECIMAL`` alone: DECIMAL(38,18)); None for another type."""
    match = _DECIMAL.match(type_name)
    if match is None:
        return None
    if match.group(1) is None:
        return _UNSIZED_DECIMAL
    return int(match.group(1)), int(match.group(2) or 0)


def is_decimal(type_name: str) -> bool:
    return _DECIMAL.match(type_name) is not None


def bounded_decimal(precision: int, scale: int) -> tuple[int, int]:
    """Spark's ``adjustPrecisionScale``: past 38 digits, keep the integer digits and at least 6 of scale."""
    if precision <= MAX_DECIMAL_PRECISION:
        return precision, scale
    integer_digits = precision - scale
    minimum = min(scale, _MINIMUM_ADJUSTED_SCALE)
    return MAX_DECIMAL_PRECISION, max(MAX_DECIMAL_PRECISION - integer_digits, minimum)


def _fit(precision: int, scale: int) -> str:
    return decimal_type(*bounded_decimal(precision, scale))


def unbounded_decimal_arithmetic(left: tuple[int, int], right: tuple[int, int], op: str) -> tuple[int, int]:
    """Spark's (precision, scale) of ``left op right`` (``+ - * / %``) before its 38-digit limit
    (``bounded_decimal``)."""
    (p1, s1), (p2, s2) = left, right
    if op in ("+", "-"):
        scale = max(s1, s2)
        return scale + max(p1 - s1, p2 - s2) + 1, scale
    if op == "*":
        return p1 + p2 + 1, s1 + s2
    if op == "/":
        scale = max(_MINIMUM_ADJUSTED_SCALE, s1 + p2 + 1)
        return p1 - s1 + s2 + scale, scale
    scale = max(s1, s2)  # %
    return min(p1 - s1, p2 - s2) + scale, scale


def _decimal_arithmetic(left: tuple[int, int], right: tuple[int, int], op: str) -> str:
    return _fit(*unbounded_decimal_arithmetic(left, right, op))


def integer_decimal(type_name: str) -> tuple[int, int] | None:
    """The DECIMAL an integer type becomes when it meets one (Spark's ``DecimalType.forType``)."""
    return _INTEGER_DECIMALS.get(type_name)


def _literal_decimal(expr) -> str | None:
    """Spark's type for an integer literal that meets a DECIMAL: DECIMAL(its digits, 0)."""
    if isinstance(expr, ast.Literal) and expr.kind == "integer" and isinstance(expr.value, int):
        return decimal_type(max(1, len(str(abs(expr.value)))), 0)
    return None


def _arithmetic(left: str, right: str, op: str = "+") -> str:
    temporal = ("TIMESTAMP", "DATE")
    if left in temporal and right in temporal and op == "-":
        return "INTERVAL"  # a duration: timedelta in Python, DayTimeIntervalType on Spark
    if left in temporal:
        return left  # TIMESTAMP +/- INTERVAL
    if op == "DIV":
        return "BIGINT"
    if is_decimal(left) or is_decimal(right):
        sizes = [decimal_params(t) or _INTEGER_DECIMALS.get(t) for t in (left, right)]
        if all(size is not None for size in sizes):
            return _decimal_arithmetic(sizes[0], sizes[1], op)
        return "DOUBLE"  # a DOUBLE (or an untyped value) makes it DOUBLE
    if op == "/" and left in INTEGERS and right in INTEGERS:
        return "DOUBLE"  # 7 / 2 is 3.5 (values.divide)
    if left in FRACTIONAL or right in FRACTIONAL:
        return "DOUBLE"
    if left in INTEGERS and right in INTEGERS:
        return wider_integer(left, right)  # Spark: INT + INT is an INT, INT + BIGINT a BIGINT
    return "DOUBLE"


def wider_integer(left: str, right: str) -> str:
    """The wider of two integer types (Spark's result type of integral arithmetic: it never widens)."""
    return left if _INTEGER_DECIMALS[left][0] >= _INTEGER_DECIMALS[right][0] else right


def integer_bounds(type_name: str) -> tuple[int, int] | None:
    """(least, greatest) value of an integer type (``values.INTEGER_RANGES``), None for any other type: an
    integer result outside them is Spark's ANSI overflow error."""
    return INTEGER_RANGES.get(type_name)


def element_type(type_name: str) -> str:
    return type_name[6:-1] if type_name.startswith("ARRAY<") else "VARCHAR"


def infer(expr, column_type: Callable[[ast.ColumnRef], str], known: dict[int, str] | None = None) -> str:
    """The SQL type of ``expr``. ``known`` (node id -> type, the caller keeping the nodes alive) remembers
    every node typed: a compiler that types each operation as it goes (``Scope.integer_type``) then types a
    node once, and its recursion stops at the nearest node already typed, so a chain of calls nested to
    ``limits.MAX_NESTING_DEPTH`` is typed without recursing through the whole chain at each level."""
    if known is None:
        return _infer(expr, column_type, lambda e: infer(e, column_type))
    found = known.get(id(expr))
    if found is None:
        found = known[id(expr)] = _infer(expr, column_type, lambda e: infer(e, column_type, known))
    return found


def _infer(expr, column_type: Callable[[ast.ColumnRef], str], recurse: Callable[[Any], str]) -> str:
    if isinstance(expr, ast.Literal):
        if expr.kind == "integer" and isinstance(expr.value, int) and -(2**31) <= expr.value < 2**31:
            return "INTEGER"  # as Spark types an integral literal: an INT where it fits, else a BIGINT
        if expr.kind == "decimal":
            return _decimal_literal_type(expr)
        return _LITERAL_TYPES.get(expr.kind, "VARCHAR")
    if isinstance(expr, ast.ColumnRef):
        return column_type(expr)
    if isinstance(expr, ast.Binary):
        if expr.op in ("+", "-", "*", "/", "%", "DIV"):
            left, right = recurse(expr.left), recurse(expr.right)
            if is_decimal(left) or is_decimal(right):  # an integer literal is a DECIMAL of its own digits
                left, right = _literal_decimal(expr.left) or left, _literal_decimal(expr.right) or right
            return _arithmetic(left, right, expr.op)
        if expr.op == "||":
            left = recurse(expr.left)
            return left if left.startswith("ARRAY<") else "VARCHAR"
        return "BOOLEAN"
    if isinstance(expr, ast.Unary):
        operand = expr.operand
        if expr.op == "-" and isinstance(operand, ast.Literal) and isinstance(operand.value, int):
            # Spark reads a minus before a number as part of the literal: -2147483648 is an INT, as a literal
            # of that value is (so `-2147483648 - c` is INT arithmetic, and overflows as one)
            return infer(ast.Literal(operand.span, "integer", -operand.value, "-" + operand.text), column_type)
        return "BOOLEAN" if expr.op == "NOT" else recurse(expr.operand)
    if isinstance(expr, (ast.IsNull, ast.Between, ast.InList, ast.Like)):
        return "BOOLEAN"
    if isinstance(expr, ast.Case):
        results = [w.result for w in expr.whens] + ([expr.default] if expr.default is not None else [])
        found = [recurse(r) for r in results if not (isinstance(r, ast.Literal) and r.kind == "null")]
        return common_type(found) if found else "VARCHAR"
    if isinstance(expr, ast.Cast):
        name = expr.type.name
        if name in ("DECIMAL", "NUMERIC", "NUMBER"):
            params = tuple(expr.type.params) + _CAST_DECIMAL[len(expr.type.params) :]
            return decimal_type(*params[:2])
        return (
            _INTEGER_CASTS[name]
            if name in _INTEGER_CASTS
            else "BIGINT"
            if name in INTEGERS
            else "DOUBLE"
            if name in FRACTIONAL
            else "VARCHAR"
            if name in ("CHAR", "STRING", "TEXT")
            else "TIMESTAMP"
            if name.startswith("TIMESTAMP")
            else "BOOLEAN"
            if name == "BOOL"
            else name
        )
    if isinstance(expr, ast.ArrayLiteral):
        return f"ARRAY<{recurse(expr.items[0]) if expr.items else 'VARCHAR'}>"
    if isinstance(expr, (ast.FunctionCall, ast.Aggregate)):
        return _call_type(expr, recurse)
    if isinstance(expr, ast.Navigation):
        return recurse(expr.operand)
    if isinstance(expr, (ast.Classifier, ast.MatchStatus)):
        return "VARCHAR"
    if isinstance(expr, ast.MatchNumber):
        return "BIGINT"
    return "VARCHAR"


def _call_type(expr: ast.FunctionCall | ast.Aggregate, recurse) -> str:
    """A call's result type: the one its entry in grammar/functions.py gives, or its rule applied to the
    arguments' types (``_RULES``). A function the table does not know has its first argument's type."""
    table = AGGREGATES if isinstance(expr, ast.Aggregate) else SCALARS
    signature = table.get(expr.name)
    if signature is None:
        return _argument_type(expr.args, 0, recurse)
    rule = _RULES.get(signature.result)
    return signature.result if rule is None else rule(expr, recurse)


def _argument_type(args, index: int, recurse) -> str:
    """The type of argument ``index`` (the first when there are fewer); VARCHAR for none or ``*``."""
    index = index if index < len(args) else 0
    present = index < len(args) and not isinstance(args[index], ast.Star)
    return recurse(args[index]) if present else "VARCHAR"


def _field_type(expr, recurse) -> str:
    field = expr.args[0].value if expr.args and isinstance(expr.args[0], ast.Literal) else ""
    return "DECIMAL" if str(field).upper() in ("SECOND", "S", "SEC", "SECONDS", "SECS") else "INTEGER"


def _days_or_units_type(expr, recurse) -> str:
    """DATEDIFF(end, start): Spark's INT of days; DATEDIFF(unit, start, end): TIMESTAMPDIFF's BIGINT of units."""
    return "BIGINT" if len(expr.args) == 3 else "INTEGER"


def _truncated_type(expr, recurse) -> str:
    argument = recurse(expr.args[0]) if expr.args else "DOUBLE"
    return "DATE" if argument in ("DATE", "TIMESTAMP") else argument


def _sum_type(expr, recurse) -> str:
    argument = _argument_type(expr.args, 0, recurse)
    size = decimal_params(argument)
    if size is not None:
        return decimal_type(min(size[0] + 10, MAX_DECIMAL_PRECISION), size[1])
    return "BIGINT" if argument in INTEGERS else "DOUBLE"


def _average_type(expr, recurse) -> str:
    size = decimal_params(_argument_type(expr.args, 0, recurse))
    if size is None:
        return "DOUBLE"
    return decimal_type(min(size[0] + 4, MAX_DECIMAL_PRECISION), min(size[1] + 4, MAX_DECIMAL_PRECISION))


def _extreme_type(expr, recurse) -> str:
    """MIN(x) has x's type; MIN(x, n) and MIN_BY(x, y, n) are arrays of the n smallest."""
    argument = _argument_type(expr.args, 0, recurse)
    with_count = len(expr.args) == (2 if expr.name in ("MIN", "MAX") else 3)
    return f"ARRAY<{argument}>" if with_count else argument


def _widest_type(expr, recurse) -> str:
    """COALESCE, GREATEST, LEAST, NVL, IFNULL: the arguments' common type (``common_type``)."""
    found = [recurse(arg) for arg in expr.args if not isinstance(arg, ast.Star)]
    return common_type(found) if found else "VARCHAR"


def common_type(found: list[str]) -> str:
    """The type Spark brings values of these types to (CASE's results, COALESCE's arguments): a TIMESTAMP
    where a DATE meets a TIMESTAMP; among numbers a DOUBLE beside a DOUBLE, else a DECIMAL wide enough for
    each (its integer digits and its scale, an INT as DECIMAL(10,0)) beside a DECIMAL, else the widest
    integer; otherwise the first one's type."""
    kinds = set(found)
    if {"DATE", "TIMESTAMP"} <= kinds:
        return "TIMESTAMP"
    if not all(kind in INTEGERS or kind in FRACTIONAL or is_decimal(kind) for kind in found):
        return found[0]
    if any(kind in FRACTIONAL and not is_decimal(kind) for kind in found):
        return "DOUBLE"
    sizes = [decimal_params(kind) or _INTEGER_DECIMALS[kind] for kind in found]
    if any(is_decimal(kind) for kind in found):
        # Spark's wider DECIMAL keeps the integer digits and gives up scale past 38 digits, with no 6-digit
        # floor as arithmetic has: DECIMAL(38,10) beside DECIMAL(38,0) is DECIMAL(38,0) (checked on Spark 4.2).
        integer_digits = max(size[0] - size[1] for size in sizes)
        scale = min(max(size[1] for size in sizes), MAX_DECIMAL_PRECISION - integer_digits)
        return decimal_type(integer_digits + scale, scale)
    return max(found, key=lambda kind: _INTEGER_DECIMALS[kind][0])


def _decimal_literal_type(expr) -> str:
    """Spark's type of a number written with a point (``1.5``, ``0.05``, ``1.``): DECIMAL(its digits, the
    digits after the point); with an exponent (``1.5e3``) or past 38 digits a DOUBLE."""
    if "e" in expr.text.lower() or not isinstance(expr.value, Decimal):
        return "DOUBLE"
    digits, exponent = len(expr.value.as_tuple().digits), expr.value.as_tuple().exponent
    scale = max(0, -exponent)
    precision = max(digits, scale, 1)
    return decimal_type(precision, scale) if precision <= MAX_DECIMAL_PRECISION else "DOUBLE"


def _remainder_type(expr, recurse) -> str:
    if len(expr.args) != 2:
        return "DOUBLE"
    return _arithmetic(recurse(expr.args[0]), recurse(expr.args[1]), "%")


def _element_type(expr, recurse) -> str:
    return element_type(recurse(expr.args[0])) if expr.args else "VARCHAR"


# The rules of grammar/functions.py's table (its ``RULE_FAMILIES``) -> the type each gives (Spark's).
_RULES: dict[str, Callable[[ast.FunctionCall | ast.Aggregate, Callable], str]] = {
    "same": lambda expr, recurse: _argument_type(expr.args, 0, recurse),
    "second": lambda expr, recurse: _argument_type(expr.args, 1, recurse),
    "third": lambda expr, recurse: _argument_type(expr.args, 2, recurse),
    "element": _element_type,
    "array_of": lambda expr, recurse: f"ARRAY<{_argument_type(expr.args, 0, recurse)}>",
    "widest": _widest_type,
    "remainder": _remainder_type,
    "truncated": _truncated_type,
    "date_or_timestamp": lambda expr, recurse: "TIMESTAMP" if len(expr.args) == 3 else "DATE",
    "field": _field_type,
    "days_or_units": _days_or_units_type,
    "sum": _sum_type,
    "average": _average_type,
    "extreme": _extreme_type,
    "same_or_array": lambda expr, recurse: _argument_type(expr.args, 0, recurse),
    "map": lambda expr, recurse: _argument_type(expr.args, 0, recurse),
}


def coerce(value, type_name: str):
    """Make a Python value fit its declared output type (e.g. Decimal into DOUBLE) for typed sinks."""
    if value is None:
        return None
    if type_name in ("DOUBLE", "FLOAT", "REAL") and isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        return float(value)
    if type_name in INTEGERS and isinstance(value, float) and value.is_integer():
        return int(value)
    size = decimal_params(type_name)
    if size is not None and isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return fit_decimal(value, *size)
    if type_name.startswith("ARRAY<") and isinstance(value, list):
        inner = element_type(type_name)
        return [coerce(item, inner) for item in value]
    if type_name == "VARCHAR" and not isinstance(value, str):
        return to_text(value)
    return value


def fit_decimal(value, precision: int, scale: int) -> Decimal | None:
    """``value`` rounded half up to ``scale`` digits (Spark's cast to DECIMAL(precision, scale)); a value
    with more integer digits than the type holds is an error, as in Spark's ANSI mode (its default)."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise CepRuntimeError(f"{value!r} cannot be a DECIMAL({precision},{scale})", code="E0410")
        value = Decimal(repr(value))
    rounded = round_decimal(Decimal(value), precision, scale)
    if rounded is None:
        raise CepRuntimeError(
            f"{value} does not fit DECIMAL({precision},{scale}) ({precision - scale} digits before the point)",
            code="E0410",
            hint="the result of SUM or arithmetic over DECIMAL columns overflows the type Spark gives it; "
            "cast the column to a wider DECIMAL or to DOUBLE",
        )
    return rounded


def round_decimal(value: Decimal, precision: int, scale: int) -> Decimal | None:
    """``value`` rounded half up to ``scale`` digits, as Spark's cast to DECIMAL(precision, scale) makes
    it; None when it has more integer digits than the type holds (Spark's cast gives NULL, ANSI an error)."""
    if not value.is_zero() and value.adjusted() > precision - scale:  # too long before rounding, past any context
        return None
    rounded = value.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=DECIMAL_CONTEXT)
    return rounded if rounded.adjusted() < precision - scale else None


# An Arrow integer type (its bit width, plus one when unsigned) -> the Spark type that holds every value of it, as
# Spark's Parquet reader types it: int8 a TINYINT, uint8 and int16 a SMALLINT, uint16 and int32 an INT, wider a BIGINT.
_ARROW_INTEGERS = {
    8: "TINYINT",
    9: "SMALLINT",
    16: "SMALLINT",
    17: "INTEGER",
    32: "INTEGER",
    33: "BIGINT",
    64: "BIGINT",
    65: "BIGINT",
}


def arrow_type_name(arrow_type) -> str:
    """The SQL type of an Arrow type (a Parquet file's, an Arrow table's): what Spark reads it as."""
    import pyarrow.types as t  # pyarrow: optional and heavy, needed only for an Arrow input

    if t.is_decimal(arrow_type):
        return decimal_type(arrow_type.precision, arrow_type.scale)
    if t.is_boolean(arrow_type):
        return "BOOLEAN"
    if t.is_integer(arrow_type):
        return _ARROW_INTEGERS[arrow_type.bit_width + (not t.is_signed_integer(arrow_type))]
    if t.is_floating(arrow_type):
        return "DOUBLE"
    if t.is_timestamp(arrow_type):
        return "TIMESTAMP"
    if t.is_date(arrow_type):
        return "DATE"
    if t.is_duration(arrow_type):
        return "INTERVAL"
    if t.is_list(arrow_type) or t.is_large_list(arrow_type):
        return f"ARRAY<{arrow_type_name(arrow_type.value_type)}>"
    return "VARCHAR"


# Integer types narrower than a BIGINT, each by the name the clause types it with: an INT, a SMALLINT and a TINYINT
# column keep their type inside the clause as Spark SQL keeps it (SMALLINT + SMALLINT is a SMALLINT).
_NARROW_INTEGERS = {"INTEGER": "INTEGER", "INT": "INTEGER", "SMALLINT": "SMALLINT", "TINYINT": "TINYINT"}
_COMPILED_TYPES = {**_NARROW_INTEGERS, "DOUBLE": "DOUBLE", "FLOAT": "DOUBLE", "REAL": "DOUBLE"}
# A numpy integer dtype (its kind, its size in bytes) -> its SQL type, as ``_ARROW_INTEGERS`` types Arrow's.
_NUMPY_INTEGERS = {
    ("i", 1): "TINYINT",
    ("u", 1): "SMALLINT",
    ("i", 2): "SMALLINT",
    ("u", 2): "INTEGER",
    ("i", 4): "INTEGER",
}


def narrow_integer_columns(types: dict[str, str | None]) -> dict[str, str]:
    """The integer columns among ``types`` (column -> SQL type) narrower than a BIGINT, each with its type
    (INTEGER, SMALLINT or TINYINT). The matcher holds every integer as a Python int; this says which are
    narrower than a BIGINT, so that their arithmetic is typed and bounded as Spark's. The DOUBLE (FLOAT) columns
    are among them too, as DOUBLE: what Spark refuses of a DOUBLE (``a DIV b``) is then refused before a row
    is read, and their arithmetic is never bounded as a BIGINT's."""
    found = {name: _COMPILED_TYPES.get(kind.upper()) for name, kind in types.items() if kind is not None}
    return {name: kind for name, kind in found.items() if kind is not None}


def frame_integer_columns(frame) -> dict[str, str]:
    """``narrow_integer_columns`` of a pyarrow Table or a pandas DataFrame, from its column types: an Arrow or
    pandas int32 (``Int32``, ``int32[pyarrow]``...) column is an INT, int16 a SMALLINT, int8 a TINYINT (an
    unsigned one the next wider type, which holds all its values)."""
    schema = getattr(frame, "schema", None)
    if schema is not None and hasattr(schema, "names"):  # a pyarrow Table
        return narrow_integer_columns({name: arrow_type_name(field.type) for name, field in zip(schema.names, schema)})
    found: dict[str, str | None] = {}
    for name, dtype in getattr(frame, "dtypes", {}).items():
        arrow_type = getattr(dtype, "pyarrow_dtype", None)
        if arrow_type is not None:
            found[str(name)] = arrow_type_name(arrow_type)
        elif getattr(dtype, "kind", None) in ("i", "u"):
            found[str(name)] = _NUMPY_INTEGERS.get((dtype.kind, dtype.itemsize), "BIGINT")
    return narrow_integer_columns(found)


def value_type_name(values) -> str | None:
    """The SQL type of a column of Python values with no declared type; None when it holds a ``Decimal``,
    which carries no precision and scale (such a column's arithmetic stays exact)."""
    found = {type(v) for v in values if v is not None}
    if any(issubclass(k, Decimal) for k in found):
        return None
    if found and found <= {bool}:
        return "BOOLEAN"
    if found and all(issubclass(k, int) and not issubclass(k, bool) for k in found):
        return "BIGINT"
    if found and all(issubclass(k, (int, float)) and not issubclass(k, bool) for k in found):
        return "DOUBLE"
    if found and all(issubclass(k, dt.datetime) for k in found):
        return "TIMESTAMP"
    if found and all(issubclass(k, dt.date) for k in found):
        return "DATE"
    return "VARCHAR"


def fit_to_type(value, type_name: str):
    """A result value made what Spark gives for its column's type: a ``Decimal`` in a DECIMAL(p,s) column
    rounded half up to its scale (``fit_decimal``: E0410 when it overflows), in a DOUBLE one a float;
    every other value as it is."""
    if type_name == "TIMESTAMP":
        return as_timestamp(value)  # COALESCE(ts, DATE '9999-12-31') where ts is NULL: a TIMESTAMP
    if not isinstance(value, Decimal):
        return value
    if type_name in ("DOUBLE", "FLOAT", "REAL"):
        return float(value)
    size = decimal_params(type_name)
    return fit_decimal(value, *size) if size is not None else value
