"""The clause's numeric functions with Spark's answers at the edges of their domains.

Spark computes them with Java's ``Math``/``StrictMath`` on DOUBLEs: where Java gives NaN or an infinity,
so does Spark, and so do these; Python's ``math`` raises instead (``ValueError: math domain error``,
``OverflowError``) or, for ``**``, answers with a complex number. Each function here takes non-NULL Python
values (``values.SCALAR_FUNCTIONS`` returns NULL for a NULL argument before calling it) and returns the
value of the type Spark gives it: a float for a DOUBLE, an int for a BIGINT.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Context, Decimal

# Java's long: FLOOR and CEIL of a DOUBLE are BIGINTs, converted as Java's (long) cast converts (saturating).
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INFINITY = math.inf
# Digits enough to round any DECIMAL(38, s) or a double's 17 significant digits at a place inside them.
_ROUNDING = Context(prec=80)
NAN = math.nan


def as_double(value) -> float:
    """A numeric argument as the DOUBLE Spark casts it to (an INT, a BIGINT or a DECIMAL)."""
    return float(value)


def java_long(value: float) -> int:
    """Java's ``(long) d``: NaN is 0, a value past a long's range is the nearest end of it."""
    if value != value:
        return 0
    if value >= 2.0**63:
        return LONG_MAX
    if value <= -(2.0**63):
        return LONG_MIN
    return int(value)


def _is_odd_integer(value: float) -> bool:
    # Every double of magnitude 2**53 or more is even.
    return math.isfinite(value) and value.is_integer() and abs(value) < 2.0**53 and int(value) % 2 == 1


def java_pow(base: float, exponent: float) -> float:
    """Java's ``Math.pow`` (Spark's POWER): C99's ``pow`` but for ``1 ** NaN`` and ``(+-1) ** +-Infinity``,
    which Java makes NaN; an overflow is an infinity, ``0 ** negative`` an infinity, a negative base to a
    fractional power NaN, as Java answers."""
    if exponent == 0:
        return 1.0
    if base != base or exponent != exponent or (math.isinf(exponent) and abs(base) == 1.0):
        return NAN
    try:
        return math.pow(base, exponent)
    except OverflowError:
        return -INFINITY if base < 0 and _is_odd_integer(exponent) else INFINITY
    except ValueError:
        if base == 0:  # a zero to a negative power; -0.0 to an odd one keeps its sign
            return -INFINITY if math.copysign(1.0, base) < 0 and _is_odd_integer(exponent) else INFINITY
        return NAN  # a negative base to a power that is not an integer


def power(base, exponent) -> float:
    return java_pow(as_double(base), as_double(exponent))


def sqrt(value) -> float:
    """Math.sqrt: NaN below zero (-0.0 is itself)."""
    value = as_double(value)
    return math.sqrt(value) if value >= 0 or value != value else NAN


def exp(value) -> float:
    """Math.exp: Infinity past a double's range, 0.0 below it."""
    value = as_double(value)
    try:
        return math.exp(value)
    except OverflowError:
        return INFINITY


def _logarithm(value: float) -> float | None:
    """The natural logarithm of a DOUBLE, NULL at or below zero (Spark's LN, LOG, LOG2, LOG10: a log's
    asymptote is NULL, not -Infinity); NaN stays NaN, Infinity is Infinity."""
    if value <= 0:
        return None
    return math.log(value)


def ln(value) -> float | None:
    return _logarithm(as_double(value))


def log10(value) -> float | None:
    value = as_double(value)
    return math.log10(value) if value > 0 or value != value else None


def log2(value) -> float | None:
    """Spark's LOG2 divides: ln(x) / ln(2) (not C's log2, which differs in the last digit for some x)."""
    found = _logarithm(as_double(value))
    return None if found is None else found / math.log(2.0)


def log(base, value=None) -> float | None:
    """LOG(x) is the natural logarithm; LOG(b, x) is ln(x) / ln(b), NULL where b or x is at or below zero.
    A base of 1 divides by zero as doubles do: Infinity, -Infinity or NaN (Spark's Logarithm)."""
    if value is None:
        return ln(base)
    numerator, denominator = _logarithm(as_double(value)), _logarithm(as_double(base))
    if numerator is None or denominator is None:
        return None
    if denominator == 0:
        return NAN if numerator == 0 or numerator != numerator else math.copysign(INFINITY, numerator)
    return numerator / denominator


def _whole(value, rounding):
    """FLOOR or CEIL: a DOUBLE's is a BIGINT (Java's cast: NaN 0, past the range its end); an integer is
    itself; a DECIMAL's a whole DECIMAL."""
    if isinstance(value, float):
        return java_long(rounding(value)) if math.isfinite(value) else java_long(value)
    if isinstance(value, int):
        return value
    return rounding(value)


def floor(value):
    return _whole(value, math.floor)


def ceil(value):
    return _whole(value, math.ceil)


def round_half_up(value, digits=0):
    """ROUND half away from zero to ``digits`` (Spark's ROUND). A DOUBLE is rounded as its shortest decimal
    text (Java's BigDecimal of it), NaN and the infinities are themselves, and a zero result is 0.0 (a
    BigDecimal has no negative zero)."""
    if isinstance(value, int) and digits >= 0:
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return value
    exact = Decimal(str(value))
    if exact.as_tuple().exponent >= -digits:  # no digit past the place: as it is (1e300 has 301 digits to keep)
        return value + 0 if isinstance(value, float) else value
    rounded = exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP, context=_ROUNDING)
    if isinstance(value, float):
        return float(rounded) + 0.0  # -0.0 + 0.0 is 0.0
    if isinstance(value, int):
        return int(rounded)
    return rounded


def signum(value) -> float:
    """Spark's SIGN (Java's Math.signum): a DOUBLE, 1.0 or -1.0; a zero (-0.0 too) and NaN are themselves."""
    value = as_double(value)
    return value if value == 0 or value != value else math.copysign(1.0, value)


# Each by its upper-case SQL name; ``values.SCALAR_FUNCTIONS`` makes a NULL argument NULL before calling one.
FUNCTIONS = {
    "ROUND": round_half_up,
    "FLOOR": floor,
    "CEIL": ceil,
    "CEILING": ceil,
    "SQRT": sqrt,
    "LN": ln,
    "EXP": exp,
    "POWER": power,
    "SIGN": signum,
    "LOG10": log10,
    "LOG2": log2,
    "LOG": log,
}
