"""Spark's DECIMAL arithmetic on the python engine (part of the translation in cep/duckdb_sql.py).

Spark types ``a + b``, ``a - b``, ``a * b``, ``a / b`` and ``a % b`` of DECIMALs by its own rules (the rules
of ``matcher/sql/types.py``, which the clause follows too): an integer meets a DECIMAL as DECIMAL(10, 0) (an
INT) or DECIMAL(20, 0) (a BIGINT), an integer literal as DECIMAL(its digits, 0), ``2.5`` is a DECIMAL(2, 1);
``SUM`` is DECIMAL(p + 10, s), ``AVG`` DECIMAL(p + 4, s + 4) rounded half up, a quotient is the exact one
rounded half up to its scale. DuckDB has rules of its own (DECIMAL(10,2) * DECIMAL(10,2) is its
DECIMAL(18, 4), which overflows past 18 digits; a quotient is a DOUBLE), so the translation computes each
result exactly and casts it to Spark's type: operands widened to 38 digits for ``+ - * %``, and the quotient
on DuckDB's 128-bit integers. Where Spark's result passes 38 digits and Spark rounds it to fewer decimals
(its ``allowPrecisionLoss``), where a quotient would pass 38 digits, and where the type depends on what the
python engine cannot tell (an integer column that may be an INT or a BIGINT on Spark, a DECIMAL from a
function whose type is not known here), the translation refuses at the operator.
"""

from __future__ import annotations

import re

from cep.duckdb_nodes import INTEGRAL, PLACE_META, Refusal, call_duck, fail_with, place_of, type_of
from cep.matcher.sql.types import bounded_decimal, integer_decimal, unbounded_decimal_arithmetic
from cep.matcher.sql.values import MAX_DECIMAL_PRECISION

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

# The meta key of a node whose DECIMAL types the translation knows: Spark's (precision, scale) readings, the
# python engine's own first (an integer column read as a BIGINT here may be an INT on Spark).
DECIMAL_META = "cep_decimal"
DECIMAL_LITERAL = re.compile(r"-?([0-9]*)\.([0-9]*)")
_INTEGER_LITERAL = re.compile(r"-?([0-9]+)")
# AVG's quotient runs on DuckDB's 128-bit integers: the sum's digits (its argument's precision + 10) plus the
# 4 more decimals of Spark's AVG must stay within 38.
_AVERAGE_DIGITS = MAX_DECIMAL_PRECISION - 10 - 4
# Spark's AVG of a DECIMAL(p, s) keeps this many more decimals than its argument.
_AVERAGE_EXTRA_SCALE = 4
Readings = tuple[tuple[int, int], ...]


def numeric_kind(node, types: dict[int, str]) -> str | None:
    """``node``'s type; a number literal with a point and no exponent is a DECIMAL, as Spark reads ``2.5``
    (sqlglot: a DOUBLE), and so is a cast to DECIMAL the translation wrote."""
    from sqlglot import exp

    if isinstance(node, exp.Paren) and type_of(node, types) is None:
        return numeric_kind(node.this, types)
    if isinstance(node, exp.Literal) and node.is_number and DECIMAL_LITERAL.fullmatch(node.this):
        return "DECIMAL"
    if isinstance(node, exp.Cast) and node.to.is_type("decimal"):  # EXTRACT(SECOND), translated
        return "DECIMAL"
    kept = numeric_kind(node.this, types) if isinstance(node, (exp.Round, exp.Abs, exp.Neg)) else None
    if kept == "DECIMAL" or kept in INTEGRAL:
        return kept  # Spark's round, abs and minus keep an integer's or a DECIMAL's type (sqlglot: DOUBLE)
    if isinstance(node, (exp.Floor, exp.Ceil)) and numeric_kind(node.this, types) == "DECIMAL":
        return "DECIMAL"  # Spark's floor and ceil of a DECIMAL are DECIMALs (sqlglot says DOUBLE)
    return type_of(node, types)


def decimal_arithmetic(node, types: dict[int, str]) -> bool:
    """Whether Spark computes ``node`` (an operator's two sides) as a DECIMAL: a DECIMAL beside a DECIMAL
    or an integer (a DOUBLE on either side makes it a DOUBLE, as DuckDB's is)."""
    kinds = tuple(numeric_kind(side, types) for side in (node.this, node.expression))
    return "DECIMAL" in kinds and all(kind in INTEGRAL + ("DECIMAL",) for kind in kinds)


def decimal_readings(node, types: dict[int, str]) -> Readings | None:
    """The DECIMAL types Spark may give ``node`` where it meets a DECIMAL (an integer's too), the python
    engine's reading first; None where they cannot be told."""
    from sqlglot import exp

    if DECIMAL_META in node.meta:
        return node.meta[DECIMAL_META]
    if isinstance(node, (exp.Paren, exp.Neg, exp.Abs)):
        inner = decimal_readings(node.this, types)
        if inner is None and isinstance(node, exp.Paren) and type_of(node, types) in INTEGRAL:
            # Typed before the translation (what it holds now, INT arithmetic with its overflow check, is not).
            return (integer_decimal(type_of(node, types)),)
        return inner
    if isinstance(node, exp.Literal) and node.is_number:
        return _literal_reading(node.this)
    if isinstance(node, exp.Cast):
        if node.to.is_type("decimal"):
            sizes = [int(param.name) for param in node.to.expressions]
            return ((sizes[0], sizes[1] if len(sizes) > 1 else 0),) if sizes else ((10, 0),)
        reading = integer_decimal(node.to.this.name.upper().replace("INTEGER", "INT"))
        return (reading,) if reading else None
    function = _function_readings(node, types)
    if function is not None or _rule(node) == _WIDENS:
        return function  # a widening function's None: an argument's type cannot be told (not DuckDB's reading)
    kind = type_of(node, types)
    if isinstance(node, exp.Count):
        return (integer_decimal("BIGINT"),)
    reading = integer_decimal(kind or "")
    return (reading,) if reading else None


def _literal_reading(text: str) -> Readings | None:
    """Spark's DECIMAL of a number literal: an integer as DECIMAL(its digits, 0), ``0.05`` as DECIMAL(2, 2)."""
    whole = _INTEGER_LITERAL.fullmatch(text)
    if whole is not None:
        return ((max(1, len(whole.group(1).lstrip("0"))), 0),)
    pointed = DECIMAL_LITERAL.fullmatch(text)
    if pointed is None:
        return None  # an exponent: a DOUBLE
    scale = len(pointed.group(2))
    precision = max(1, len((pointed.group(1) + pointed.group(2)).lstrip("0")))
    return ((max(precision, scale), scale),)


# Spark's DECIMAL result of each function of a DECIMAL, as its analyser derives it (sqlglot's node class -> the
# rule; each checked against Spark's own type in tests/test_sql_decimal_functions.py):
# - _KEEPS: the argument's type (Spark's dataType is its child's: abs, minus, max, min, first, last, lag...);
# - _WIDENS: the arguments' common type, TypeCoercion's wider DECIMAL (an INT as DECIMAL(10,0), a BIGINT as
#   DECIMAL(20,0), an integer literal as its type's; past 38 digits the integer digits kept, decimals given up:
#   Spark 4's boundedPreferIntegralDigits), to which Spark casts every argument: coalesce (nvl, ifnull),
#   greatest, least, if, nvl2, CASE's branches, array's elements;
# - _FLOORS: floor and ceil, DECIMAL(p - s + 1, 0) (with a number of digits, round's type);
# - _ROUNDS: round, p - s + 1 integer digits and min(s, digits) decimals;
# - _SUMS: SUM, DECIMAL(p + 10, s). AVG (DECIMAL(p + 4, s + 4)) is computed whole by spark_decimal_average.
_KEEPS, _WIDENS, _FLOORS, _ROUNDS, _SUMS = "keeps", "widens", "floors", "rounds", "sums"
DECIMAL_RESULTS = {
    **dict.fromkeys(("Abs", "Neg", "Paren", "Max", "Min", "First", "Last", "FirstValue", "LastValue"), _KEEPS),
    **dict.fromkeys(("Lag", "Lead", "AnyValue", "Window"), _KEEPS),
    **dict.fromkeys(("Coalesce", "Greatest", "Least", "If", "Nvl2", "Case", "Array"), _WIDENS),
    **dict.fromkeys(("Floor", "Ceil"), _FLOORS),
    "Round": _ROUNDS,
    "Sum": _SUMS,
}
# Spark negates a DECIMAL of more than 18 digits with Scala's BigDecimal, whose arithmetic keeps 34 significant
# digits (DECIMAL128): -x and abs(x) of a value of 35 or more digits are rounded (half even) to 34 of them.
_NEGATION_DIGITS = 34


def _rule(node) -> str | None:
    """``node``'s rule in DECIMAL_RESULTS; an If inside a CASE is one of its branches, not a function."""
    from sqlglot import exp

    if isinstance(node, exp.If) and isinstance(node.parent, exp.Case):
        return None
    return DECIMAL_RESULTS.get(type(node).__name__)


def common_type_arguments(node) -> list:
    """The arguments of a _WIDENS function that Spark brings to one type (a NULL literal takes any)."""
    from sqlglot import exp

    if isinstance(node, (exp.If, exp.Nvl2)):
        arguments = [node.args.get("true"), node.args.get("false")]
    elif isinstance(node, exp.Case):
        arguments = [branch.args.get("true") for branch in node.args.get("ifs") or []] + [node.args.get("default")]
    elif isinstance(node, exp.Array):
        arguments = list(node.expressions)
    else:
        arguments = [node.this, *node.expressions]
    return [argument for argument in arguments if argument is not None and not isinstance(argument, exp.Null)]


def _function_readings(node, types: dict[int, str]) -> Readings | None:
    """Spark's DECIMAL types of a function of a DECIMAL by its rule in DECIMAL_RESULTS (of integers too, for
    the _WIDENS functions); None for another function, or where an argument's cannot be told."""
    rule = _rule(node)
    if rule is None:
        return None
    if rule == _WIDENS:
        return _common_readings(common_type_arguments(node), types)
    argument = _argument(node)
    arguments = decimal_readings(argument, types)
    if rule == _KEEPS or arguments is None or numeric_kind(argument, types) != "DECIMAL":
        return arguments  # of an integer: an integer (SUM's and floor's cast to BIGINT by the translation)
    if rule == _FLOORS and not node.args.get("decimals"):
        return tuple((max(1, min(p - s + 1, MAX_DECIMAL_PRECISION)), 0) for p, s in arguments)
    if rule in (_FLOORS, _ROUNDS):
        digits = _integer_literal(node.args.get("decimals"))
        if digits is None:
            return None
        return tuple(_rounded(p, s, digits) for p, s in arguments)
    return tuple((min(p + 10, MAX_DECIMAL_PRECISION), s) for p, s in arguments)  # _SUMS


def _common_readings(arguments: list, types: dict[int, str]) -> Readings | None:
    """The wider DECIMAL of ``arguments`` (each reading of each), or None where one's cannot be told."""
    readings = [_widened_readings(argument, types) for argument in arguments]
    if not readings or any(reading is None for reading in readings):
        return None
    common = readings[0]
    for reading in readings[1:]:
        common = tuple(dict.fromkeys(_wider(left, right) for left in common for right in reading))
    return common


def spark_decimal_functions(node, types: dict[int, str]) -> None:
    """Spark's DECIMAL functions, in place on ``node`` (its arguments translated) before it is translated: the
    arguments of a _WIDENS function cast to their common DECIMAL, as Spark's analyser casts them (DuckDB picks
    its own: a BIGINT as DECIMAL(19,0), and past 38 digits the larger scale, which a wide value does not fit).
    Refusal where Spark's value cannot be made here: an argument beside a DECIMAL whose type cannot be told,
    -x and abs(x) of more than 34 digits (Spark rounds them), floor and ceil with digits (Spark's is a
    DECIMAL, DuckDB's a DOUBLE)."""
    from sqlglot import exp

    rule = _rule(node)
    if rule == _WIDENS:
        _widen_arguments(node, types)
        return
    if rule == _FLOORS and node.args.get("decimals") is not None:
        name = type(node).__name__.lower()
        raise Refusal(
            f"the python engine cannot compute {name}(x, digits) as Spark does (Spark's is an exact DECIMAL, of "
            f"a DOUBLE too, DuckDB's a DOUBLE); write round(x, digits), or {name}(x) of x scaled",
            *place_of(node),
        )
    if not isinstance(node, (exp.Neg, exp.Abs)) or numeric_kind(node.this, types) != "DECIMAL":
        return
    argument, name = node.this, "-x" if isinstance(node, exp.Neg) else "abs"
    readings = decimal_readings(argument, types)
    widest = max((precision for precision, _ in readings), default=0) if readings else None
    if widest is None or widest > _NEGATION_DIGITS:
        which = "whose type it cannot tell" if widest is None else f"of more than {_NEGATION_DIGITS} digits"
        raise Refusal(
            f"the python engine cannot compute {name} of a DECIMAL {which} as Spark does (Spark keeps "
            f"{_NEGATION_DIGITS} significant digits of a wider value, rounded); cast it to a DECIMAL of at most "
            f"{_NEGATION_DIGITS} digits",
            *place_of(node),
            untyped=widest is None,
        )


def _widen_arguments(node, types: dict[int, str]) -> None:
    """The arguments of the _WIDENS function ``node`` cast, in place, to Spark's common DECIMAL where one of
    them is a DECIMAL and the others integers (a DOUBLE among them makes a DOUBLE, as on DuckDB)."""
    from sqlglot import exp

    arguments = common_type_arguments(node)
    kinds = [numeric_kind(argument, types) for argument in arguments]
    if "DECIMAL" not in kinds or any(kind not in (*INTEGRAL, "DECIMAL", None) for kind in kinds):
        return
    common = None if None in kinds else _common_readings(arguments, types)
    if common is None:
        raise Refusal(
            f"the python engine cannot tell the type of an argument of {type(node).__name__.upper()} beside a "
            "DECIMAL, on which the result's type depends",
            *place_of(node),
            untyped=True,
        )
    precision, scale = common[0]
    for argument in arguments:
        if numeric_kind(argument, types) == "DECIMAL" and decimal_readings(argument, types) == ((precision, scale),):
            continue
        cast = exp.Cast(this=argument.copy(), to=_type(f"DECIMAL({precision}, {scale})"))
        cast.meta.update((key, argument.meta[key]) for key in ("start", "end", PLACE_META) if key in argument.meta)
        cast.meta[DECIMAL_META] = ((precision, scale),)
        argument.replace(cast)


def widened_decimal_type(node, types: dict[int, str]) -> str | None:
    """Spark's type of the _WIDENS function ``node`` whose arguments ``spark_decimal_functions`` cast to a
    common DECIMAL (``DECIMAL(p, s)``, an array's ``DECIMAL(p, s)[]``), else None."""
    from sqlglot import exp

    if _rule(node) != _WIDENS or DECIMAL_META not in node.meta and not _all_decimal(node, types):
        return None
    readings = decimal_readings(node, types)
    if readings is None:
        return None
    kind = f"DECIMAL({readings[0][0]}, {readings[0][1]})"
    return kind + "[]" if isinstance(node, exp.Array) else kind


def _all_decimal(node, types: dict[int, str]) -> bool:
    """Whether the arguments of ``node`` are a DECIMAL and integers (their common type a DECIMAL)."""
    kinds = [numeric_kind(argument, types) for argument in common_type_arguments(node)]
    return "DECIMAL" in kinds and all(kind in (*INTEGRAL, "DECIMAL") for kind in kinds)


def _argument(node):
    """The first argument of a function (of SUM(DISTINCT x) and AVG(DISTINCT x): x)."""
    from sqlglot import exp

    return node.this.expressions[0] if isinstance(node.this, exp.Distinct) else node.this


def _widened_readings(node, types: dict[int, str]) -> Readings | None:
    """``node``'s DECIMAL types where Spark widens it to a common type (coalesce, greatest): an integer literal
    as its type's DECIMAL (an INT's DECIMAL(10, 0)), not as its digits as in arithmetic."""
    from sqlglot import exp

    inner = node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    value = _integer_literal(inner) if isinstance(inner, exp.Literal) else None
    if value is not None:
        return (integer_decimal("INT" if -(2**31) <= value < 2**31 else "BIGINT"),)
    return decimal_readings(node, types)


def _integer_literal(node) -> int | None:
    from sqlglot import exp

    if node is None:
        return 0
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_number and _INTEGER_LITERAL.fullmatch(node.this):
        return int(node.this)
    return None


def _rounded(precision: int, scale: int, digits: int) -> tuple[int, int]:
    """Spark's type of ``round(x, digits)`` of a DECIMAL(precision, scale): one more integer digit."""
    integer_digits = precision - scale + 1
    if digits < 0:
        return min(max(integer_digits, -digits + 1), MAX_DECIMAL_PRECISION), 0
    kept = min(scale, digits)
    return min(integer_digits + kept, MAX_DECIMAL_PRECISION), kept


def _wider(left: tuple[int, int], right: tuple[int, int]) -> tuple[int, int]:
    """Spark's wider DECIMAL of two (``widerDecimalType``): the larger scale and integer part; past 38 digits,
    Spark 4 keeps the integer part and gives up decimals (``boundedPreferIntegralDigits``: DECIMAL(38,30)
    beside a BIGINT's DECIMAL(20,0) is a DECIMAL(38,18))."""
    scale = max(left[1], right[1])
    precision = max(left[0] - left[1], right[0] - right[1]) + scale
    if precision <= MAX_DECIMAL_PRECISION:
        return precision, scale
    return MAX_DECIMAL_PRECISION, max(0, scale - (precision - MAX_DECIMAL_PRECISION))


def spark_decimal_arithmetic(node, types: dict[int, str], guard_divisor):
    """``node`` (``+ - * / %``) computed as Spark computes it where Spark's result is a DECIMAL, or None
    where it is not; ``guard_divisor``: the translation's rule for a divisor of 0 (Spark's ANSI error)."""
    from sqlglot import exp

    operator = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}.get(type(node))
    if operator is None:
        return None
    kinds = [numeric_kind(side, types) for side in (node.this, node.expression)]
    if "DECIMAL" in kinds and None in kinds and not any(isinstance(side, exp.Null) for side in node.iter_expressions()):
        # Spark's result is a DECIMAL if the other operand is an integer (of a width the type depends on), a
        # DOUBLE if it is one; DuckDB would pick by its own reading (dec * array_max(array(i)) was its
        # DECIMAL(18,2), Spark's DECIMAL(21,2); found by the differential, seed 28)
        raise Refusal(
            # no cast to suggest: a cast of a value whose type the translation cannot tell is refused as well
            f"the python engine cannot tell the type of an operand of {operator} beside a DECIMAL, on which the "
            "result's type depends",
            *place_of(node),
            untyped=True,
        )
    if not decimal_arithmetic(node, types):
        return None
    left, right = decimal_readings(node.this, types), decimal_readings(node.expression, types)
    if left is None or right is None:
        raise Refusal(
            f"the python engine cannot tell the DECIMAL type Spark gives an operand of {operator}, on which the "
            f"result's type and rounding depend; cast it: CAST(x AS DECIMAL(p, s))",
            *place_of(node),
            untyped=True,
        )
    natural = unbounded_decimal_arithmetic(left[0], right[0], operator)
    precision, scale = bounded_decimal(*natural)
    results = tuple(
        dict.fromkeys(bounded_decimal(*unbounded_decimal_arithmetic(a, b, operator)) for a in left for b in right)
    )
    if operator == "/" and natural[0] > MAX_DECIMAL_PRECISION:
        raise Refusal(
            f"the python engine cannot divide DECIMAL({left[0][0]},{left[0][1]}) by DECIMAL({right[0][0]},"
            f"{right[0][1]}) as Spark does: the quotient passes 38 digits (Spark's DECIMAL({precision},{scale})); "
            "cast an operand to DOUBLE or to a narrower DECIMAL",
            *place_of(node),
        )
    if scale < natural[1]:
        raise Refusal(
            f"the python engine cannot compute DECIMAL({left[0][0]},{left[0][1]}) {operator} "
            f"DECIMAL({right[0][0]},{right[0][1]}) as Spark does: past 38 digits Spark rounds the result to "
            f"DECIMAL({precision},{scale}); cast an operand to DOUBLE or to a narrower DECIMAL",
            *place_of(node),
        )
    kind = _type(f"DECIMAL({precision}, {scale})")
    if operator == "/":
        computed = _quotient(node, left[0], right[0], scale)
    else:
        computed = node.copy()
        if operator == "*":
            # The left operand widened to 38 digits: DuckDB's own product type then holds the exact value (of
            # two DECIMAL(10,2) its product is a DECIMAL(18,4), which fails past 18 digits).
            computed.set("this", _as_decimal(node.this, MAX_DECIMAL_PRECISION, left[0][1]))
            computed.set("expression", _as_decimal(node.expression, *right[0]))
        else:
            # + - %: both operands as DECIMAL(38, s) of the larger scale, which holds both (Spark's type is
            # within 38 digits at that scale); DuckDB computes two DECIMALs of other scales as DOUBLEs.
            common = max(left[0][1], right[0][1])
            if max(left[0][0] - left[0][1], right[0][0] - right[0][1]) + common > MAX_DECIMAL_PRECISION:
                raise Refusal(
                    f"the python engine cannot compute DECIMAL({left[0][0]},{left[0][1]}) {operator} "
                    f"DECIMAL({right[0][0]},{right[0][1]}) as Spark does: the operands do not fit 38 digits at "
                    f"{common} decimals; cast an operand to a narrower DECIMAL",
                    *place_of(node),
                )
            computed.set("this", _as_decimal(node.this, MAX_DECIMAL_PRECISION, common))
            computed.set("expression", _as_decimal(node.expression, MAX_DECIMAL_PRECISION, common))
        if operator == "%":
            computed = guard_divisor(computed)
    result = exp.Cast(this=computed, to=kind)
    result.meta[DECIMAL_META] = results
    return result


def _type(text: str):
    """sqlglot's type of ``text``, without the positions its parser leaves on the parameters (which
    ``place_of`` would read as the user's text)."""
    from sqlglot import exp

    built = exp.DataType.build(text)
    for part in built.walk():
        for key in ("start", "end", "line", "col"):
            part.meta.pop(key, None)
    return built


def _as_decimal(node, precision: int, scale: int):
    from sqlglot import exp

    return exp.Cast(this=node.copy(), to=_type(f"DECIMAL({precision}, {scale})"))


def _unscaled(value):
    """The DECIMAL ``value`` as the 128-bit integer of its digits (DuckDB writes every decimal of its scale)."""
    from sqlglot import exp

    digits = call_duck(
        "replace",
        exp.Cast(this=value, to=_type("VARCHAR")),
        exp.Literal.string("."),
        exp.Literal.string(""),
    )
    return exp.Cast(this=digits, to=_type("HUGEINT"))


def _power_of_ten(exponent: int):
    from sqlglot import exp

    return exp.Cast(this=exp.Literal.string("1" + "0" * exponent), to=_type("HUGEINT"))


def _rounded_quotient(numerator, denominator, scale: int):
    """``numerator / denominator`` (128-bit integers) rounded half away from zero, as the DECIMAL of
    ``scale`` decimals whose digits it is (NULL for a denominator of 0: the caller fails first). Once, as
    Spark rounds its quotient (to its type's scale, not to 39 decimals first)."""
    from sqlglot import exp

    divisor = exp.Nullif(this=denominator.copy(), expression=exp.Literal.number(0))
    truncated = exp.IntDiv(this=numerator.copy(), expression=divisor.copy())  # DuckDB's // truncates toward zero
    remainder = call_duck("abs", exp.Mod(this=numerator.copy(), expression=divisor.copy()))
    half_or_more = exp.GTE(  # |remainder| / |denominator| >= 1/2
        this=exp.Mul(this=remainder, expression=exp.Literal.number(2)),
        expression=call_duck("abs", denominator.copy()),
    )
    away = exp.Mul(this=call_duck("sign", numerator.copy()), expression=call_duck("sign", denominator.copy()))
    rounded = exp.Add(
        this=truncated, expression=exp.Case(ifs=[exp.If(this=half_or_more, true=away)], default=exp.Literal.number(0))
    )
    unit = exp.Cast(
        this=exp.Literal.string("0." + "0" * (scale - 1) + "1" if scale else "1"),
        to=_type(f"DECIMAL({max(scale, 1)}, {scale})"),
    )
    return exp.Mul(this=exp.Cast(this=rounded, to=_type("DECIMAL(38, 0)")), expression=unit)


def _quotient(node, left: tuple[int, int], right: tuple[int, int], scale: int):
    """Spark's exact quotient rounded half up to ``scale`` decimals: the dividend's digits shifted by the
    scales, divided as 128-bit integers (within 38 digits: the caller refused a longer quotient)."""
    from sqlglot import exp

    dividend = _unscaled(_as_decimal(node.this, *left))
    divisor = _unscaled(_as_decimal(node.expression, *right))
    shift = scale - left[1] + right[1]  # at least 1: Spark's scale exceeds the dividend's
    numerator = exp.Mul(this=dividend, expression=_power_of_ten(shift))
    zero = exp.and_(
        exp.EQ(this=divisor.copy(), expression=exp.Literal.number(0)),
        exp.Not(this=exp.Is(this=exp.Paren(this=node.this.copy()), expression=exp.Null())),
    )
    return exp.Case(
        ifs=[exp.If(this=zero, true=fail_with("division by zero", place_of(node)))],
        default=_rounded_quotient(numerator, divisor, scale),
    )


def spark_decimal_sum(node, types: dict[int, str]):
    """Spark's SUM of a DECIMAL(p, s) (``node`` the Window or the FILTER around it too) is a DECIMAL(p + 10, s),
    DuckDB's a DECIMAL(38, s): the same value, cast to Spark's type. None where ``node`` is no such SUM."""
    from sqlglot import exp

    summed = node.this if isinstance(node, (exp.Window, exp.Filter)) else node
    if (
        not isinstance(summed, exp.Sum)
        or isinstance(node, exp.Sum)
        and isinstance(node.parent, (exp.Window, exp.Filter))
    ):
        return None  # over a window or with FILTER, the cast wraps the whole call
    if numeric_kind(_argument(summed), types) != "DECIMAL":
        return None
    readings = _function_readings(summed, types)
    if readings is None:
        return None
    result = exp.Cast(this=node.copy(), to=_type(f"DECIMAL({readings[0][0]}, {readings[0][1]})"))
    result.meta[DECIMAL_META] = readings
    return result


def spark_decimal_average(node, types: dict[int, str]):
    """Spark's AVG of a DECIMAL(p, s): the exact mean rounded half up to a DECIMAL(p + 4, s + 4) (DuckDB's is a
    DOUBLE), as the SUM divided by the COUNT on 128-bit integers. Refused over a window or with FILTER (the
    rewrite is two aggregates), or past DECIMAL(24, s) (the sum's digits then pass 38). None where
    ``node`` is no such AVG."""
    from sqlglot import exp

    argument = _argument(node)
    if not isinstance(node, exp.Avg) or numeric_kind(argument, types) != "DECIMAL":
        return None
    readings = decimal_readings(argument, types)
    if readings is None or isinstance(node.parent, (exp.Window, exp.Filter)) or readings[0][0] > _AVERAGE_DIGITS:
        raise Refusal(
            "the python engine cannot compute this AVG of a DECIMAL as Spark does (an exact DECIMAL, rounded half "
            f"up; computed here only without OVER or FILTER, of a DECIMAL of at most {_AVERAGE_DIGITS} digits "
            "whose type is known): cast the argument to DOUBLE",
            *place_of(node),
        )
    precision, scale = readings[0]
    total = exp.Sum(this=node.this.copy())
    count = exp.Count(this=node.this.copy())
    numerator = exp.Mul(
        this=_unscaled(exp.Cast(this=total, to=_type(f"DECIMAL(38, {scale})"))),
        expression=_power_of_ten(_AVERAGE_EXTRA_SCALE),
    )
    denominator = exp.Cast(this=count, to=_type("HUGEINT"))
    mean = _rounded_quotient(numerator, denominator, scale + _AVERAGE_EXTRA_SCALE)
    result_type = f"DECIMAL({precision + _AVERAGE_EXTRA_SCALE}, {scale + _AVERAGE_EXTRA_SCALE})"
    result = exp.Cast(this=mean, to=_type(result_type))
    result.meta[DECIMAL_META] = ((precision + _AVERAGE_EXTRA_SCALE, scale + _AVERAGE_EXTRA_SCALE),)
    return result
