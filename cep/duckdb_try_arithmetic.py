"""Spark's ``try_add``, ``try_subtract`` and ``try_multiply`` on DuckDB: the operator's value, NULL where Spark's
ANSI arithmetic would fail on an overflow (part of the translation in cep/duckdb_sql.py).

sqlglot reads them as its SafeAdd, SafeSubtract and SafeMultiply, which it cannot write for DuckDB. Of two
integers the result has the wider operand's type (``try_add(i, b)`` of an INT and a BIGINT is a BIGINT, as on
Spark): the translation computes it as a HUGEINT, which holds any sum or product of two BIGINTs, and gives
NULL where that does not fit the type. A DOUBLE or FLOAT beside a number has no overflow (it goes to infinity
on both engines), so the operator stands as it is. Spark's DECIMAL result (its own precision, NULL past 38
digits), a DATE or an interval operand, or a type the translation cannot tell: refused.
"""

from __future__ import annotations

from cep.duckdb_nodes import INTEGRAL, Refusal, place_of, type_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
}
_DOUBLES = ("DOUBLE", "FLOAT")


def try_arithmetic(node, types: dict[int, str]):
    """Spark's try_add, try_subtract or try_multiply ``node`` as DuckDB SQL; None for another node."""
    from sqlglot import exp

    operators = {exp.SafeAdd: exp.Add, exp.SafeSubtract: exp.Sub, exp.SafeMultiply: exp.Mul}
    operator = operators.get(type(node))
    if operator is None:
        return None
    name = {exp.Add: "TRY_ADD", exp.Sub: "TRY_SUBTRACT", exp.Mul: "TRY_MULTIPLY"}[operator]
    kinds = [type_of(side, types) for side in (node.this, node.expression)]
    if all(kind in INTEGRAL for kind in kinds):
        result = max(kinds, key=INTEGRAL.index)
        wide = operator(
            this=exp.Cast(this=node.this.copy(), to=exp.DataType.build("HUGEINT")),
            expression=exp.Cast(this=node.expression.copy(), to=exp.DataType.build("HUGEINT")),
        )
        low, high = _RANGES[result]
        within = exp.Between(this=wide.copy(), low=exp.Literal.number(low), high=exp.Literal.number(high))
        return exp.Case(ifs=[exp.If(this=within, true=exp.Cast(this=wide, to=exp.DataType.build(result)))])
    if any(kind in _DOUBLES for kind in kinds) and all(kind in (*INTEGRAL, *_DOUBLES) for kind in kinds):
        return operator(this=node.this.copy(), expression=node.expression.copy())
    known = [kind for kind in kinds if kind is not None]
    raise Refusal(
        f"the python engine runs {name} only of integers and DOUBLEs (Spark's DECIMAL result, and a DATE or an "
        f"interval, are not translated){'; here: ' + ' and '.join(known) if known else ''}",
        *place_of(node),
        untyped=len(known) < len(kinds),
    )
