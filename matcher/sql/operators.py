"""The operator closures of the clause's expressions: the hot comparison and arithmetic of DEFINE conditions
(Python's operator where the operand types allow it, ``values`` otherwise), each error located at its
expression, and integer results kept within the integer type Spark gives the operation (``bounded``).

``expressions.py`` compiles expressions to closures and calls these for the operators; nothing here knows
about rows or matches beyond reading the row under test inline (``Env.cols``).
"""

from __future__ import annotations

import operator
from decimal import Decimal
from functools import partial

from cep.grammar import ast
from cep.grammar.errors import CepRuntimeError
from cep.matcher.sql import values


def is_integer_arithmetic(expr) -> bool:
    """An operation whose integer result can leave its type's range (Spark's ARITHMETIC_OVERFLOW)."""
    if isinstance(expr, ast.Binary):
        return expr.op in ("+", "-", "*", "%", "DIV")
    if isinstance(expr, ast.Unary):
        return expr.op == "-"
    if isinstance(expr, ast.Aggregate):
        return expr.name == "SUM"  # of integers a BIGINT, which Spark's ANSI SUM keeps to
    # ROUND(i, -1) of an INT is an INT: 2147483647 rounds past its range
    return isinstance(expr, ast.FunctionCall) and expr.name in ("ABS", "ROUND")


def bounded(closure, op: str, integer_type: str | None, span):
    """``closure`` whose integer results outside ``integer_type``'s range are Spark's overflow error, at ``span``
    (``closure`` itself when there is no integer type)."""
    if integer_type is None:
        return closure
    least, most = values.INTEGER_RANGES[integer_type]

    def bounded(env, position=None):
        result = closure(env, position)
        if type(result) is int and not least <= result <= most:
            raise values.integer_overflow(op, result, integer_type).locate(span)
        return result

    bounded.__wrapped__ = closure  # what it checks (a measure read from the final state stays one)
    return bounded


def located(closure, span):
    """``closure`` whose run-time errors point at ``span`` (the innermost failing expression wins: an error
    that already has a position keeps it). The try costs nothing until something raises."""

    def at_span(env, position=None):
        try:
            return closure(env, position)
        except CepRuntimeError as error:
            raise error.locate(span) from None

    return at_span


def general_operation(function, span, left, right):
    """``function(left, right)`` off the fast path of ``comparison``/``arithmetic``: the place where their
    errors arise, so that they are located without a try on the fast path."""
    try:
        return function(left, right)
    except CepRuntimeError as error:
        raise error.locate(span) from None


_COMPARE = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


# Types Python compares exactly as SQL does, with no conversion (bool is not among them: SQL does
# not order booleans against numbers).
_DIRECT = (int, float, str)


def comparison(op: str, left, right, constant=None, span=None):
    """A comparison closure: NULL if either side is NULL; Python's operator when the types allow it.

    This is the hottest closure of most DEFINE conditions, hence the direct operator call;
    ``values.compare`` gives the error message when the types cannot be compared. A right side that is
    a literal number or string (``constant``) is not called at all, nor is a side that reads the row
    under test (``current_row_reader``): the conditional read costs a fifth of a call.

    NaN equals NaN and is larger than every other number (``values.nan_compare``); Python's operator
    says otherwise only when its answer is ``unsettled`` (False, or True for ``<>``), so only then is
    NaN looked for.
    """
    function = _COMPARE[op]
    unsettled = op == "<>"
    nan_compare = values.nan_compare
    direct = _DIRECT
    general = partial(values.compare, op)
    lc, rc = getattr(left, "column", None), getattr(right, "column", None)
    if type(constant) is Decimal:  # `price < 0.10`: a decimal literal against a float column
        as_float = float(constant)  # what values.compare turns it into against a float

        def compare_decimal(env, position=None):
            lv = left(env, position) if lc is None else env.cols[lc][env.row - env.base]
            if lv is None:
                return None
            if type(lv) is float:
                result = function(lv, as_float)
                return nan_compare(op, True, False) if result is unsettled and lv != lv else result
            return general_operation(general, span, lv, constant)

        compare_decimal.located = True
        return compare_decimal
    if type(constant) in direct:
        rv, rv_is_str = constant, type(constant) is str

        def compare_constant(env, position=None):
            lv = left(env, position) if lc is None else env.cols[lc][env.row - env.base]
            if lv is None:
                return None
            if type(lv) in direct and (type(lv) is str) == rv_is_str:
                result = function(lv, rv)
                return nan_compare(op, True, False) if result is unsettled and lv != lv else result
            return general_operation(general, span, lv, rv)

        compare_constant.located = True
        return compare_constant

    def compare(env, position=None):
        lv = left(env, position) if lc is None else env.cols[lc][env.row - env.base]
        if lv is None:
            return None
        rv = right(env, position) if rc is None else env.cols[rc][env.row - env.base]
        if rv is None:
            return None
        if type(lv) in direct and type(rv) in direct and (type(lv) is str) == (type(rv) is str):
            result = function(lv, rv)
            if result is unsettled and (lv != lv or rv != rv):
                return nan_compare(op, lv != lv, rv != rv)
            return result
        return general_operation(general, span, lv, rv)  # Decimal/float mixing, datetimes, and the error for the rest

    compare.located = True
    return compare


PLAIN_ARITHMETIC = {
    "+": (operator.add, values.add),
    "-": (operator.sub, values.subtract),
    "*": (operator.mul, values.multiply),
}
_PLAIN_NUMBERS = (int, float)


def arithmetic(op: str, left, right, constant=None, span=None, integer_type: str | None = None):
    """+, - or * : Python's operator on ints and floats (what ``values`` does for them), else ``values``.

    A decimal literal on the right (``A.price - 0.10``) meets a float column as the float ``values``
    would turn it into. A side that reads the row under test is read inline, as in ``comparison``.
    An integer result outside ``integer_type``'s range (the type Spark gives the operation) is Spark's
    overflow error, located at ``span``.
    """
    plain, general = PLAIN_ARITHMETIC[op]
    numbers = _PLAIN_NUMBERS
    lc, rc = getattr(left, "column", None), getattr(right, "column", None)
    if type(constant) is Decimal:
        as_float = float(constant)

        def arithmetic_decimal(env, position=None):
            lv = left(env, position) if lc is None else env.cols[lc][env.row - env.base]
            if type(lv) is float:
                return plain(lv, as_float)
            return general_operation(general, span, lv, constant)

        arithmetic_decimal.located = True
        return arithmetic_decimal

    def arithmetic(env, position=None):
        lv = left(env, position) if lc is None else env.cols[lc][env.row - env.base]
        rv = right(env, position) if rc is None else env.cols[rc][env.row - env.base]
        if type(lv) in numbers and type(rv) in numbers:
            return plain(lv, rv)
        return general_operation(general, span, lv, rv)

    arithmetic.located = True
    if integer_type is None:
        return arithmetic
    least, most = values.INTEGER_RANGES[integer_type]

    def bounded_arithmetic(env, position=None):
        lv = left(env, position) if lc is None else env.cols[lc][env.row - env.base]
        rv = right(env, position) if rc is None else env.cols[rc][env.row - env.base]
        result = (
            plain(lv, rv) if type(lv) in numbers and type(rv) in numbers else general_operation(general, span, lv, rv)
        )
        if type(result) is int and not least <= result <= most:
            raise values.integer_overflow(op, result, integer_type).locate(span)
        return result

    bounded_arithmetic.located = True
    return bounded_arithmetic
