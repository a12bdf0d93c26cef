"""SQL scalar semantics on Python values: NULL propagation, numeric promotion, casts, LIKE, functions.

Values are plain Python: None (NULL), bool, int, float, decimal.Decimal, str, datetime, date, list (ARRAY).
Nothing here knows about rows or matches; ``expressions.py`` wires these operations into closures.
"""

from __future__ import annotations

import datetime as _dt
import math
from decimal import ROUND_05UP, ROUND_DOWN, ROUND_HALF_UP, Context, Decimal, InvalidOperation

from cep.grammar.errors import CepRuntimeError
from cep.grammar.limits import MAX_DECIMAL_PRECISION
from cep.matcher.sql import datetimes as T
from cep.matcher.sql import math_functions
from cep.matcher.sql.text_patterns import PatternError, pattern_error, regexp_like, regexp_replace, regexp_substr
from cep.matcher.sql.text_patterns import like as _like_text

# DECIMAL arithmetic is exact, as Spark's: Python's default context rounds to 28 significant digits,
# fewer than the 38 a DECIMAL(38, s) holds. 76 digits hold the exact sum, difference or product of two
# 38-digit values; a result column is then rounded to its type by the engine that has one (Spark).
DECIMAL_CONTEXT = Context(prec=76, rounding=ROUND_HALF_UP)
# A quotient has no exact form: it keeps 40 significant digits, the last rounded "05 up" (toward zero,
# unless that leaves a last digit of 0 or 5). Rounding it again half up to a DECIMAL's scale (at most 38
# digits, so two guard digits at least) then gives the exact quotient rounded once, as Spark's division
# does; rounded half up to 38 digits instead, 9999999999999999999 / 26 ended in ...538|5 and rounded up to
# ...539 at scale 19. (Not more digits: an untyped Arrow result column holds at most 76.)
QUOTIENT_CONTEXT = Context(prec=40, rounding=ROUND_05UP)
# The digits AVG adds to its argument's scale (DECIMAL(p+4, s+4)).
AVG_EXTRA_SCALE = 4


def is_nan(value) -> bool:
    """NaN (float or Decimal): a value, equal to itself and larger than every other number (Spark's rule)."""
    return value != value and isinstance(value, (float, Decimal))


def less(left, right) -> bool:
    """``left < right`` in SQL's order of numbers: NaN is larger than every other number and equal to
    itself (Spark's rule, so MIN, MAX, ORDER BY and comparisons agree on every engine)."""
    if left < right:
        return True
    return right != right and left == left


def is_plain_date(value) -> bool:
    """A DATE value: a ``datetime.date`` that is not a ``datetime`` (its subclass)."""
    return isinstance(value, _dt.date) and not isinstance(value, _dt.datetime)


def as_timestamp(value):
    """A DATE as the TIMESTAMP of its midnight (Spark's implicit cast where a DATE meets a TIMESTAMP); any
    other value as it is."""
    return _dt.datetime(value.year, value.month, value.day) if is_plain_date(value) else value


def times_alike(values: list) -> list:
    """``values`` with each DATE made a TIMESTAMP when TIMESTAMPs are among them (Spark widens DATE to
    TIMESTAMP in comparisons, COALESCE, GREATEST, LEAST, MIN and MAX); Python refuses to order the two."""
    if any(isinstance(v, _dt.datetime) for v in values) and any(is_plain_date(v) for v in values):
        return [as_timestamp(v) for v in values]
    return values


def _numeric_pair(left, right):
    """Make Decimal and float operands agree (Python refuses to mix them), and a DATE and a TIMESTAMP."""
    if isinstance(left, _dt.date) and isinstance(right, _dt.date):
        return tuple(times_alike([left, right]))
    if isinstance(left, Decimal) and isinstance(right, float):
        return float(left), right
    if isinstance(left, float) and isinstance(right, Decimal):
        return left, float(right)
    return left, right


def _is_number(value) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _type_error(op: str, left, right) -> CepRuntimeError:
    text = next((v for v in (left, right) if isinstance(v, str)), None)
    hint = None
    if text is not None and any(isinstance(v, (_dt.date, _dt.datetime)) for v in (left, right)):
        kind = "DATE" if len(text.strip()) == 10 else "TIMESTAMP"
        hint = f"a time is compared with text: write a time literal, {kind} '{text.strip()}', or CAST the text"
    return CepRuntimeError(
        f"cannot apply '{op}' to {type(left).__name__} {left!r} and {type(right).__name__} {right!r}",
        code="E0410",
        hint=hint,
    )


def _time_out_of_range(op: str, left, right) -> CepRuntimeError:
    return CepRuntimeError(f"{left!r} {op} {right!r} is outside the years 1 to 9999 a timestamp can hold", code="E0410")


def add(left, right):
    if left is None or right is None:
        return None
    if _is_number(left) and _is_number(right):
        left, right = _numeric_pair(left, right)
        if type(left) is Decimal or type(right) is Decimal:
            return DECIMAL_CONTEXT.add(left, right)
        return left + right
    if isinstance(left, (_dt.datetime, _dt.date)) and isinstance(right, _dt.timedelta):
        try:
            return left + right
        except OverflowError:
            raise _time_out_of_range("+", left, right) from None
    raise _type_error("+", left, right)


def subtract(left, right):
    if left is None or right is None:
        return None
    if _is_number(left) and _is_number(right):
        left, right = _numeric_pair(left, right)
        if type(left) is Decimal or type(right) is Decimal:
            return DECIMAL_CONTEXT.subtract(left, right)
        return left - right
    if isinstance(left, (_dt.datetime, _dt.date)) and isinstance(right, (_dt.timedelta, _dt.datetime, _dt.date)):
        try:
            return left - right
        except OverflowError:
            raise _time_out_of_range("-", left, right) from None
        except TypeError:  # a naive and an aware datetime
            raise _type_error("-", left, right) from None
    raise _type_error("-", left, right)


def multiply(left, right):
    if left is None or right is None:
        return None
    if _is_number(left) and _is_number(right):
        left, right = _numeric_pair(left, right)
        if type(left) is Decimal or type(right) is Decimal:
            return DECIMAL_CONTEXT.multiply(left, right)
        return left * right
    raise _type_error("*", left, right)


def divide(left, right):
    """SQL division as Spark, Oracle and Snowflake do it: ``7 / 2`` is 3.5 (integers divide as DOUBLE;
    DECIMAL stays DECIMAL); ``DIV`` (``integer_divide``) is the integer quotient. Division by zero is
    NULL (Spark's non-ANSI answer): a streaming job must not die on one bad row (docs/semantics.md).
    """
    if left is None or right is None:
        return None
    if not (_is_number(left) and _is_number(right)):
        raise _type_error("/", left, right)
    if right == 0:
        return None
    if isinstance(left, int) and isinstance(right, int):
        return left / right
    if isinstance(left, Decimal) or isinstance(right, Decimal):
        if not isinstance(left, float) and not isinstance(right, float):
            return QUOTIENT_CONTEXT.divide(Decimal(left), Decimal(right))
    left, right = _numeric_pair(left, right)
    return left / right


def integer_divide(left, right):
    """``a DIV b``: the quotient truncated toward zero, a whole number (Spark's DIV); NULL for b = 0. Spark's DIV
    takes integers and DECIMALs only (a DOUBLE side is its analysis error): a DOUBLE the compiler could not see
    (a column whose type only its values tell) is refused here, before any quotient, whatever the divisor."""
    if left is None or right is None:
        return None
    if not (_is_number(left) and _is_number(right)):
        raise _type_error("DIV", left, right)
    if isinstance(left, float) or isinstance(right, float):
        raise CepRuntimeError(
            f"cannot apply 'DIV' to {left!r} and {right!r}: DIV takes integers and DECIMALs, as in Spark",
            code="E0410",
            hint="write CAST(a / b AS BIGINT) (truncated toward zero, as DIV is), or CAST the DOUBLE to a DECIMAL",
        )
    if right == 0:
        return None
    if isinstance(left, int) and isinstance(right, int):
        quotient = abs(left) // abs(right)
        return quotient if (left >= 0) == (right >= 0) else -quotient
    # Truncated exactly: a quotient rounded first (Decimal's 28 digits) could round ...x.99999 up past x.
    return int(DECIMAL_CONTEXT.divide_int(Decimal(left), Decimal(right)))


def modulo(left, right):
    if left is None or right is None:
        return None
    if not (_is_number(left) and _is_number(right)):
        raise _type_error("%", left, right)
    if right == 0:
        return None
    if isinstance(left, int) and isinstance(right, int):
        remainder = abs(left) % abs(right)
        return remainder if left >= 0 else -remainder
    left, right = _numeric_pair(left, right)
    if type(left) is Decimal or type(right) is Decimal:
        return DECIMAL_CONTEXT.remainder(left, right)  # the sign of the dividend, as fmod and SQL
    # Java's % on doubles: an infinite dividend gives NaN (Python's fmod raises)
    return math.fmod(left, right) if math.isfinite(left) else math.nan


def concat(left, right):
    if left is None or right is None:
        return None
    if isinstance(left, list) and isinstance(right, list):
        return left + right
    return to_text(left) + to_text(right)


def integer_overflow(op: str, value: int, type_name: str) -> CepRuntimeError:
    """Spark's ANSI ARITHMETIC_OVERFLOW: the integer result ``value`` of ``op`` is outside ``type_name``'s range
    (an INT + an INT is an INT, as in Spark SQL; a wider number in a column typed narrower is never given)."""
    least, most = INTEGER_RANGES[type_name]
    return CepRuntimeError(
        f"integer overflow: '{op}' gives {value}, outside the range of {type_name} ({least} to {most}); Spark SQL "
        "fails here too (ANSI mode)",
        code="E0410",
        hint="CAST an operand to BIGINT (or to DECIMAL(38,0) past BIGINT) to compute in a wider type",
    )


def negate(value):
    if value is None:
        return None
    if _is_number(value):
        return -value
    raise CepRuntimeError(f"cannot negate {type(value).__name__} {value!r}", code="E0410")


def compare(op: str, left, right):
    """=, <>, <, <=, >, >= with NULL -> NULL; NaN equals NaN and is larger than every other number."""
    if left is None or right is None:
        return None
    left, right = _numeric_pair(left, right)
    try:
        if op == "=":
            result = left == right
        elif op == "<>":
            result = left != right
        elif op == "<":
            result = left < right
        elif op == "<=":
            result = left <= right
        elif op == ">":
            result = left > right
        elif op == ">=":
            result = left >= right
        else:
            raise ValueError(op)
    except TypeError:
        raise _type_error(op, left, right) from None
    if (left != left or right != right) and _is_number(left) and _is_number(right):
        return nan_compare(op, left != left, right != right)
    return result


def nan_compare(op: str, left_nan: bool, right_nan: bool) -> bool:
    """A comparison of two numbers at least one of which is NaN, in Spark's order (NaN largest, NaN = NaN)."""
    if op == "=":
        return left_nan and right_nan
    if op == "<>":
        return not (left_nan and right_nan)
    if op == "<":
        return right_nan and not left_nan
    if op == "<=":
        return right_nan
    if op == ">":
        return left_nan and not right_nan
    return left_nan  # >=


def distinct_from(left, right) -> bool:
    """``a IS DISTINCT FROM b``: NULL-safe inequality (two NULLs are not distinct), never NULL."""
    if left is None or right is None:
        return (left is None) != (right is None)
    return compare("<>", left, right)


def logical_not(value):
    return None if value is None else not value


def to_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _dt.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def like(value, pattern, escape=None, case_insensitive: bool = False):
    """``value LIKE pattern [ESCAPE escape]`` in time linear in the value (text_patterns.py)."""
    if value is None or pattern is None:
        return None
    try:
        return _like_text(to_text(value), to_text(pattern), escape, case_insensitive)
    except PatternError as error:
        raise pattern_error(error) from None


# ------------------------------------------------------------------------------------------------ casts


def safe_cast(value, type_name: str, params: tuple[int, ...] = ()):
    """TRY_CAST: the cast, or NULL where the value does not convert."""
    try:
        return cast(value, type_name, params)
    except CepRuntimeError:
        return None


# The range of each integer type a CAST names (Spark's TINYINT, SMALLINT, INT, BIGINT): a value outside it is
# Spark's ANSI overflow error, never a wider number in a column typed narrower.
INTEGER_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "LONG": (-(2**63), 2**63 - 1),
}
# What Spark trims around a text it casts to a number: every character up to the space (UTF8String.trimAll).
_CAST_TRIMMED = "".join(map(chr, range(33)))


def _integer(value, type_name: str) -> int:
    """CAST(value AS an integer type) as Spark's ANSI mode casts: a fraction truncated toward zero (2.7 is 2,
    -2.5 is -2), text a whole number only (``' +12 '``; ``'2.7'`` is an error), out of the type's range an
    error (CAST_OVERFLOW), as is NaN or an infinity."""
    if isinstance(value, str):
        text = value.strip(_CAST_TRIMMED)
        if not text.lstrip("+-").isdigit() or len(text) - len(text.lstrip("+-")) > 1 or not text.isascii():
            raise ValueError(value)
        number = int(text)
    elif isinstance(value, (float, Decimal)):
        number = int(Decimal(value).to_integral_value(rounding=ROUND_DOWN))
    else:
        number = int(value)
    least, most = INTEGER_RANGES[type_name]
    if not least <= number <= most:
        raise CepRuntimeError(
            f"the value {value!r} cannot be cast to {type_name}: it is out of that type's range (as on Spark, "
            "in ANSI mode)",
            code="E0411",
        )
    return number


# Spark's DECIMAL with no size written is a DECIMAL(10,0).
_DEFAULT_DECIMAL_PRECISION = 10


def _to_decimal(value, params: tuple[int, ...]) -> Decimal | None:
    """Spark's cast to DECIMAL(p,s): rounded half up to s digits; NULL for NaN or an infinity (in ANSI mode too);
    more integer digits than p - s is Spark's ANSI error (NUMERIC_VALUE_OUT_OF_RANGE), E0410 (NULL for TRY_CAST)."""
    precision = params[0] if params else _DEFAULT_DECIMAL_PRECISION
    scale = params[1] if len(params) > 1 else 0
    if isinstance(value, float) and not math.isfinite(value):
        return None
    exact = Decimal(str(value))
    if exact.is_finite() and not exact.is_zero() and exact.adjusted() >= precision - scale + 1:
        raise _out_of_decimal_range(value, precision, scale)  # past the type before rounding, past any context
    rounded = exact.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=DECIMAL_CONTEXT)
    if not rounded.is_zero() and rounded.adjusted() >= precision - scale:
        raise _out_of_decimal_range(value, precision, scale)
    return rounded


def _out_of_decimal_range(value, precision: int, scale: int) -> CepRuntimeError:
    return CepRuntimeError(
        f"{value} cannot be represented as DECIMAL({precision},{scale}): it has more than {precision - scale} "
        "digits before the point (Spark SQL fails here too, in ANSI mode)",
        code="E0410",
        hint="CAST to a wider DECIMAL, or use TRY_CAST for NULL instead",
    )


def cast(value, type_name: str, params: tuple[int, ...] = ()):
    if value is None:
        return None
    try:
        if type_name in INTEGER_RANGES:
            return _integer(value, type_name)
        if type_name in ("DOUBLE", "REAL", "FLOAT"):
            return float(value)
        if type_name in ("DECIMAL", "NUMERIC", "NUMBER"):
            return _to_decimal(value, params)
        if type_name in ("VARCHAR", "CHAR", "STRING", "TEXT"):
            return to_text(value)
        if type_name == "BOOLEAN":
            if isinstance(value, str):
                lowered = value.strip().lower()
                if lowered in ("true", "false"):
                    return lowered == "true"
                raise ValueError(value)
            return bool(value)
        if type_name in ("TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ"):
            if isinstance(value, _dt.datetime):
                return value
            if isinstance(value, _dt.date):
                return _dt.datetime(value.year, value.month, value.day)
            return _dt.datetime.fromisoformat(str(value).strip())
        if type_name == "DATE":
            if isinstance(value, _dt.datetime):
                return value.date()
            if isinstance(value, _dt.date):
                return value
            return _dt.date.fromisoformat(str(value).strip())
    except (ValueError, TypeError, InvalidOperation, ArithmeticError):
        raise CepRuntimeError(f"cannot cast {value!r} to {type_name}", code="E0411") from None
    raise CepRuntimeError(f"unknown type {type_name} in CAST", code="E0411")


# -------------------------------------------------------------------------------------------- functions


def _null_if_any_null(function):
    def wrapper(*args):
        if any(arg is None for arg in args):
            return None
        return function(*args)

    return wrapper


def _coalesce(*args):
    return next((arg for arg in times_alike(list(args)) if arg is not None), None)


def _nullif(left, right):
    return None if left is not None and compare("=", left, right) else left


def _greatest(*args):
    """Spark's GREATEST: the largest argument, NULLs skipped (NULL only when every argument is)."""
    present = [a for a in args if a is not None]
    return greatest(times_alike(present)) if present else None


def _least(*args):
    """Spark's LEAST: the smallest argument, NULLs skipped (NULL only when every argument is)."""
    present = [a for a in args if a is not None]
    return least(times_alike(present)) if present else None


def greatest(values):
    """``max(values)`` in SQL's order of numbers (NaN largest); the first of equal values."""
    if not any(v != v for v in values):
        return max(values)
    best = values[0]
    for value in values[1:]:
        if less(best, value):
            best = value
    return best


def least(values):
    """``min(values)`` in SQL's order of numbers (NaN largest); the first of equal values."""
    if not any(v != v for v in values):
        return min(values)
    best = values[0]
    for value in values[1:]:
        if less(value, best):
            best = value
    return best


def order_key(value):
    """A sort key giving SQL's order of numbers (NaN after every other number) to ``sorted``."""
    return (1, 0) if value != value else (0, value)


def _concat_ws(separator, *args):
    if separator is None:
        return None
    parts = []
    for arg in args:
        if isinstance(arg, list):
            parts.extend(to_text(item) for item in arg if item is not None)
        elif arg is not None:
            parts.append(to_text(arg))
    return separator.join(parts)


def _concat(*args):
    return None if any(a is None for a in args) else "".join(to_text(a) for a in args)


def _array_join(array, separator, null_replacement=None):
    if array is None or separator is None:
        return None
    items = [to_text(x) if x is not None else null_replacement for x in array]
    return separator.join(item for item in items if item is not None)


def _element_at(array, index):
    if array is None or index is None:
        return None
    if isinstance(array, dict):
        return array.get(index)
    if index == 0 or abs(index) > len(array):
        return None
    return array[index - 1] if index > 0 else array[index]


def _array_max(array):
    values = [x for x in array or [] if x is not None]
    return greatest(values) if values and array is not None and len(values) == len(array) else None


def _array_min(array):
    values = [x for x in array or [] if x is not None]
    return least(values) if values and array is not None and len(values) == len(array) else None


def _map(keys, values):
    if keys is None or values is None:
        return None
    return dict(zip(keys, values))


def _if(condition, then_value, else_value=None):
    return then_value if condition else else_value


def _nvl2(value, not_null, null):
    return null if value is None else not_null


def _decode(value, *pairs):
    """DECODE(x, s1, r1, s2, r2, ..., [default]): the result of the first search value equal to x, where a
    NULL search matches a NULL x (Oracle, Snowflake and Spark agree)."""
    for index in range(0, len(pairs) - 1, 2):
        if not distinct_from(value, pairs[index]):
            return pairs[index + 1]
    return pairs[-1] if len(pairs) % 2 else None


def _mod(left, right):
    return modulo(left, right)


def _text_function(function):
    """A function of text arguments; a bad pattern becomes the run-time error E0413."""

    def wrapper(*args):
        if any(arg is None for arg in args):
            return None
        try:
            return function(*(to_text(arg) if isinstance(arg, (str, bool, _dt.date)) else arg for arg in args))
        except PatternError as error:
            raise pattern_error(error) from None

    return wrapper


def _split_part(text, delimiter, part):
    """SPLIT_PART(text, delimiter, n): the n-th piece (from the end when n < 0); '' past the pieces (Spark)."""
    if part == 0:
        raise CepRuntimeError("SPLIT_PART counts pieces from 1 (or from -1 at the end), not from 0", code="E0410")
    pieces = text.split(delimiter) if delimiter else [text]
    index = part - 1 if part > 0 else len(pieces) + part
    return pieces[index] if 0 <= index < len(pieces) else ""


def _position(substring, text, start=1):
    """POSITION(s IN x) / POSITION(s, x[, start]): the 1-based place of s in x at or after start, 0 if none."""
    return text.find(substring, max(start, 1) - 1) + 1


def _replace(text, search, replacement=""):
    return text.replace(search, replacement) if search else text


def _to_char(value, pattern=None):
    if pattern is not None and isinstance(value, (_dt.date, _dt.datetime)):
        return T.format_datetime(value, pattern)
    return to_text(value)


_TIME_FIELDS = (
    "YEAR",
    "QUARTER",
    "MONTH",
    "DAY",
    "DAYOFMONTH",
    "DAYOFWEEK",
    "DAYOFYEAR",
    "WEEKOFYEAR",
    "WEEKDAY",
    "HOUR",
    "MINUTE",
    "SECOND",
)


def _date_add(first, second, third=None):
    """DATE_ADD(x, days) (Spark, a date) or DATE_ADD(unit, n, x) (Trino, TIMESTAMPADD)."""
    return T.date_add(first, second) if third is None else T.timestamp_add(first, second, third)


def _date_diff(first, second, third=None):
    """DATEDIFF(end, start) in days (Spark) or DATEDIFF(unit, start, end) in whole units (TIMESTAMPDIFF)."""
    return T.date_diff(first, second) if third is None else T.timestamp_diff(first, second, third)


# Scalar functions by upper-case name. ``None``-propagation is decided per function, as SQL does:
# COALESCE, CONCAT_WS, IF and NULLIF look at NULLs themselves; the rest return NULL on a NULL argument.
SCALAR_FUNCTIONS = {
    "ABS": _null_if_any_null(abs),
    # numbers at the edges of their domains as Spark (math_functions.py)
    **{name: _null_if_any_null(function) for name, function in math_functions.FUNCTIONS.items()},
    "LOWER": _null_if_any_null(lambda s: to_text(s).lower()),
    "UPPER": _null_if_any_null(lambda s: to_text(s).upper()),
    "LENGTH": _null_if_any_null(lambda s: len(to_text(s))),
    "TRIM": _null_if_any_null(lambda s: to_text(s).strip()),
    "SUBSTR": _null_if_any_null(
        lambda s, start, length=None: to_text(s)[start - 1 : (start - 1 + length) if length is not None else None]
    ),
    "SUBSTRING": _null_if_any_null(
        lambda s, start, length=None: to_text(s)[start - 1 : (start - 1 + length) if length is not None else None]
    ),
    "CONCAT": _concat,
    "CONCAT_WS": _concat_ws,
    "COALESCE": _coalesce,
    "NULLIF": _nullif,
    "GREATEST": _greatest,
    "LEAST": _least,
    "IF": _if,
    "ARRAY_JOIN": _array_join,
    "ELEMENT_AT": _element_at,
    "ARRAY_MAX": _array_max,
    "ARRAY_MIN": _array_min,
    "CARDINALITY": _null_if_any_null(len),
    "MAP": _map,
    # NULLs and choices (Oracle, Snowflake, Spark)
    "NVL": _coalesce,
    "IFNULL": _coalesce,
    "NVL2": _nvl2,
    "IFF": _if,
    "DECODE": _decode,
    # numbers
    "MOD": _mod,
    "TRUNC": _null_if_any_null(T.trunc),
    # text
    "REPLACE": _text_function(_replace),
    "SPLIT_PART": _text_function(_split_part),
    "STRPOS": _text_function(lambda text, sub: text.find(sub) + 1),
    "POSITION": _text_function(_position),
    "STARTS_WITH": _text_function(lambda text, prefix: text.startswith(prefix)),
    "STARTSWITH": _text_function(lambda text, prefix: text.startswith(prefix)),
    "ENDS_WITH": _text_function(lambda text, suffix: text.endswith(suffix)),
    "ENDSWITH": _text_function(lambda text, suffix: text.endswith(suffix)),
    "CONTAINS": _text_function(lambda text, part: part in text),
    "REGEXP_LIKE": _text_function(regexp_like),
    "RLIKE": _text_function(regexp_like),
    "REGEXP_SUBSTR": _text_function(regexp_substr),
    "REGEXP_REPLACE": _text_function(regexp_replace),
    # dates and times (datetimes.py)
    "EXTRACT": _null_if_any_null(T.extract),
    "DATE_PART": _null_if_any_null(T.extract),
    **{name: _null_if_any_null(T.field_function(name)) for name in _TIME_FIELDS},
    "DATE_TRUNC": _null_if_any_null(T.date_trunc),
    "DATEADD": _null_if_any_null(T.timestamp_add),
    "TIMESTAMPADD": _null_if_any_null(T.timestamp_add),
    "DATE_ADD": _null_if_any_null(_date_add),
    "DATE_SUB": _null_if_any_null(lambda value, days: T.date_add(value, -days)),
    "DATEDIFF": _null_if_any_null(_date_diff),
    "DATE_DIFF": _null_if_any_null(_date_diff),
    "TIMESTAMPDIFF": _null_if_any_null(T.timestamp_diff),
    "DATE": _null_if_any_null(T.as_date),
    "TO_DATE": _null_if_any_null(T.to_date),
    "TO_TIMESTAMP": _null_if_any_null(T.to_timestamp),
    "DATE_FORMAT": _null_if_any_null(T.format_datetime),
    "TO_CHAR": _null_if_any_null(_to_char),
    "UNIX_TIMESTAMP": lambda *args: None if any(a is None for a in args) else T.unix_timestamp(*args),
    "CURRENT_TIMESTAMP": T.current_timestamp,
    "NOW": T.current_timestamp,
    "CURRENT_DATE": T.current_date,
}


# ----------------------------------------------------------------------------------------- aggregates


def _non_null(values):
    return [v for v in values if v is not None]


_PLAIN_NUMBERS = (int, float)
_PLAIN_TYPES = frozenset(_PLAIN_NUMBERS)


def _sum(values):
    present = _non_null(values)
    if not present:
        return None
    if set(map(type, present)) <= _PLAIN_TYPES:  # all plain numbers (no generator: this is per match)
        return sum(present[1:], present[0])  # same left-to-right additions as the fold below, in C
    total = present[0]
    for value in present[1:]:
        total = add(total, value)
    return total


def _avg(values):
    present = _non_null(values)
    if not present:
        return None
    if Decimal in set(map(type, present)) and all(type(v) in (Decimal, int) for v in present):
        total, scale = Decimal(0), 0
        for value in present:
            total = DECIMAL_CONTEXT.add(total, value)
            scale = max(scale, decimal_scale(value))
        return decimal_average(total, len(present), scale)
    return float(sum(float(v) for v in present)) / len(present)


def decimal_scale(value) -> int:
    """The digits after the point a Decimal is written with (an int has none)."""
    return max(0, -value.as_tuple().exponent) if type(value) is Decimal and value.is_finite() else 0


def decimal_average(total: Decimal, count: int, scale: int) -> Decimal:
    """AVG of DECIMALs as Spark computes it: the exact quotient rounded half up to the argument's scale
    plus four digits (``DECIMAL(p + 4, s + 4)``)."""
    quotient = DECIMAL_CONTEXT.divide(total, count)
    if not quotient.is_finite():
        return quotient
    return quotient.quantize(
        Decimal(1).scaleb(-min(scale + AVG_EXTRA_SCALE, MAX_DECIMAL_PRECISION)),
        rounding=ROUND_HALF_UP,
        context=DECIMAL_CONTEXT,
    )


def _variance(values):
    present = [float(v) for v in _non_null(values)]
    if len(present) < 2:
        return None
    mean = sum(present) / len(present)
    return sum((v - mean) ** 2 for v in present) / (len(present) - 1)


def _extreme(pick, values, count=None):
    present = times_alike(_non_null(values))
    if count is not None:
        return sorted(present, key=order_key, reverse=pick is greatest)[:count] if present else None
    return pick(present) if present else None


def _by(pick, values, keys, count=None):
    pairs = [(k, v) for v, k in zip(values, keys) if k is not None]
    if not pairs:
        return None
    if count is not None:
        ordered = sorted(pairs, key=lambda p: order_key(p[0]), reverse=pick is greatest)
        return [v for _, v in ordered[:count]]
    best = pairs[0]
    for pair in pairs[1:]:
        if less(best[0], pair[0]) if pick is greatest else less(pair[0], best[0]):
            best = pair
    return best[1]


def _bool_and(values):
    present = _non_null(values)
    return all(present) if present else None


def _bool_or(values):
    present = _non_null(values)
    return any(present) if present else None


# Aggregates whose arguments after the first are constant parameters (ExpressionCompiler._parametrized).
PARAMETRIZED = frozenset(
    {
        "LISTAGG",
        "STRING_AGG",
        "COLLECT_LIST",
        "AGGREGATE_LIST",
        "MEDIAN",
        "PERCENTILE_CONT",
        "PERCENTILE_DISC",
        "APPROX_PERCENTILE",
    }
)


def sorted_by(keys: list, items: list, descending: bool, nulls_first: bool | None) -> list:
    """``items`` in the order of their ``keys`` (stable; NULL keys last ascending, first descending, unless told)."""
    if nulls_first is None:
        nulls_first = descending
    present = sorted(
        (pair for pair in zip(keys, range(len(items))) if pair[0] is not None),
        key=lambda pair: pair[0],
        reverse=descending,
    )
    if descending:  # a stable descending sort keeps ties in their first order
        present = sorted(present, key=lambda pair: pair[0], reverse=True)
    missing = [index for key, index in zip(keys, range(len(items))) if key is None]
    order = [index for _, index in present]
    order = missing + order if nulls_first else order + missing
    return [items[index] for index in order]


def _percentile_cont(values: list, fraction):
    """Linear interpolation between the two values around ``fraction`` of the way (Spark, PostgreSQL)."""
    _fraction_check(fraction)
    present = [float(v) for v in values if v is not None]
    if not present:
        return None
    place = float(fraction) * (len(present) - 1)
    low, high = math.floor(place), math.ceil(place)
    return present[low] + (present[high] - present[low]) * (place - low)


def _percentile_disc(values: list, fraction):
    """The first value whose cumulative share reaches ``fraction`` (Spark's percentile_disc, a DOUBLE)."""
    _fraction_check(fraction)
    present = [v for v in values if v is not None]
    if not present:
        return None
    return float(present[max(0, math.ceil(float(fraction) * len(present)) - 1)])


def _approx_percentile(values: list, fraction, accuracy=None):
    """Spark's APPROX_PERCENTILE, exactly: the smallest value with at least ``fraction`` of the values at
    or below it (Spark's answer whenever the rows are fewer than its accuracy, 10,000 by default). A list
    of fractions gives a list."""
    present = sorted(v for v in values if v is not None)
    if isinstance(fraction, list):
        return [_approx_percentile(present, f) for f in fraction] if present else None
    _fraction_check(fraction)
    if not present:
        return None
    return present[max(0, math.ceil(float(fraction) * len(present)) - 1)]


def _fraction_check(fraction) -> None:
    if fraction is None or not 0 <= float(fraction) <= 1:
        raise CepRuntimeError(f"a percentile's fraction must be between 0 and 1, not {fraction!r}", code="E0410")


def _parametrized(name: str, values: list, extra: tuple):
    if name in ("COLLECT_LIST", "AGGREGATE_LIST"):
        return _non_null(values)  # Spark's collect_list: NULLs left out, an empty list over no rows
    if name in ("LISTAGG", "STRING_AGG"):
        separator = extra[0] if extra and extra[0] is not None else ""
        present = [to_text(v) for v in values if v is not None]
        return to_text(separator).join(present) if present else None
    if name == "MEDIAN":
        return _percentile_cont(sorted(_non_null(values)), 0.5)
    if name == "PERCENTILE_CONT":
        return _percentile_cont(values, extra[0] if extra else None)
    if name == "PERCENTILE_DISC":
        return _percentile_disc(values, extra[0] if extra else None)
    return _approx_percentile(values, *extra[:1])


def aggregate(name: str, columns: list[list], distinct: bool = False, extra: tuple = ()):
    """Fold one aggregate over the argument values of the rows it ranges over.

    ``columns[0]`` holds the first argument's value per row, ``columns[1]`` the second's (MAX_BY, MIN_BY);
    ``extra`` holds constant trailing arguments (the N of ``MIN(x, n)``).
    """
    values = columns[0] if columns else []
    if distinct:
        seen = []
        nan_seen = False
        for value in values:
            if value != value:  # NaN equals NaN in DISTINCT, as in grouping
                if nan_seen:
                    continue
                nan_seen = True
                seen.append(value)
            elif value not in seen:
                seen.append(value)
        values = seen
    if name in PARAMETRIZED:
        return _parametrized(name, values, extra)
    if name == "COUNT":
        return len(_non_null(values))
    if name == "COUNT_IF":
        return sum(1 for v in values if v)
    if name == "SUM":
        return _sum(values)
    if name == "AVG":
        return _avg(values)
    if name == "MIN":
        return _extreme(least, values, *extra)
    if name == "MAX":
        return _extreme(greatest, values, *extra)
    if name == "ARRAY_AGG":
        return list(values) if values else None
    if name in ("ARBITRARY", "ANY_VALUE"):
        return next((v for v in values if v is not None), None)
    if name in ("BOOL_AND", "EVERY"):
        return _bool_and(values)
    if name == "BOOL_OR":
        return _bool_or(values)
    if name == "MAX_BY":
        return _by(greatest, values, columns[1], *extra)
    if name == "MIN_BY":
        return _by(least, values, columns[1], *extra)
    if name == "MAP_AGG":
        return {k: v for k, v in zip(values, columns[1]) if k is not None} if values else None
    if name == "MULTIMAP_AGG":
        grouped: dict = {}
        for k, v in zip(values, columns[1]):
            if k is not None:
                grouped.setdefault(k, []).append(v)
        return grouped if values else None
    if name == "MAP_UNION":
        merged: dict = {}
        for value in values:
            if value is not None:
                for k, v in value.items():
                    merged.setdefault(k, v)
        return merged if values else None
    if name in ("VARIANCE", "VAR_SAMP"):
        return _variance(values)
    if name in ("STDDEV", "STDDEV_SAMP"):
        variance = _variance(values)
        return None if variance is None else math.sqrt(variance)
    raise CepRuntimeError(f"unknown aggregate {name}", code="E0412")


AGGREGATES = (
    frozenset(
        {
            "COUNT",
            "COUNT_IF",
            "SUM",
            "AVG",
            "MIN",
            "MAX",
            "ARRAY_AGG",
            "ARBITRARY",
            "ANY_VALUE",
            "BOOL_AND",
            "EVERY",
            "BOOL_OR",
            "MAX_BY",
            "MIN_BY",
            "VARIANCE",
            "VAR_SAMP",
            "STDDEV",
            "STDDEV_SAMP",
            "MAP_AGG",
            "MULTIMAP_AGG",
            "MAP_UNION",
        }
    )
    | PARAMETRIZED
)
