"""Spark's result types where DuckDB computes the same value in another width: Spark's INT functions
(``length``, ``year``, ``instr``, ``row_number``...) are DuckDB's BIGINTs, Spark's ``DIV`` is a BIGINT where
DuckDB keeps the operands' INT, Spark's ``floor`` of a DECIMAL(10,2) is a DECIMAL(9,0) where DuckDB's is a
DECIMAL(10,0). The translation (cep/duckdb_sql.py) casts each such call to Spark's type, so
that what is computed from it (an INT's arithmetic and its overflow, an INT beside a DECIMAL as DECIMAL(10,0))
and the result column are Spark's. The values fit: a length, a year or a rank is far inside INT's range."""

from __future__ import annotations

from cep.duckdb_decimals import decimal_readings, numeric_kind, widened_decimal_type
from cep.duckdb_nodes import type_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

# sqlglot's node classes of Spark's functions whose result is an INT (Spark's `ExpressionDescription`s: the
# string lengths and positions, the date parts, `datediff` without a unit, `size`, `ascii`), each checked against
# Spark's own type in tests/test_sql_widths.py. DuckDB's are BIGINTs.
_INT_FUNCTIONS = frozenset(
    {
        "Length",
        "BitLength",
        "StrPosition",
        "Ascii",
        "Levenshtein",
        "RegexpCount",
        "RegexpInstr",
        "ArraySize",
        "UnixDate",
        "DateDiff",
        "Year",
        "Quarter",
        "Month",
        "Day",
        "DayOfMonth",
        "DayOfWeek",
        "DayOfYear",
        "WeekOfYear",
        "Hour",
        "Minute",
        "Second",
    }
)
# Spark's window functions whose result is an INT (DuckDB's: BIGINT); the cast wraps the whole window.
_INT_WINDOW_FUNCTIONS = frozenset({"RowNumber", "Rank", "DenseRank", "Ntile"})


def spark_width(original, types: dict[int, str]) -> str | None:
    """Spark's type of ``original`` (a node of the user's statement, its operands translated) where DuckDB
    computes it in another width (the translation casts it), else None."""
    from sqlglot import exp

    name = type(original).__name__
    widened = widened_decimal_type(original, types)  # coalesce, if, CASE, array... of DECIMALs: their common type
    if widened is not None:
        return widened
    if isinstance(original, (exp.Floor, exp.Ceil, exp.Round)) and numeric_kind(original.this, types) == "DECIMAL":
        # Spark's floor, ceil and round of a DECIMAL(p, s) keep p - s + 1 integer digits (DuckDB's: p - s, or p)
        readings = decimal_readings(original, types)
        return f"DECIMAL({readings[0][0]}, {readings[0][1]})" if readings else None
    if name == "DateDiff" and original.args.get("unit") is not None:
        return None  # datediff(unit, a, b) is timestampdiff's BIGINT, as DuckDB's date_sub is
    if name in _INT_FUNCTIONS:
        return "INT"
    if isinstance(original, exp.Window) and type(original.this).__name__ in _INT_WINDOW_FUNCTIONS:
        return "INT"
    if isinstance(original, exp.IntDiv):  # Spark's DIV is a BIGINT whatever its operands (DuckDB's //: theirs)
        return "BIGINT"
    if _outermost_call(original, exp.RegrCount):  # Spark's: a BIGINT (DuckDB's: a UINTEGER)
        return "BIGINT"
    if isinstance(original, exp.DecodeCase) and len(original.expressions) % 2:
        return _decode_without_default(original, types)
    if isinstance(original, exp.Factorial):  # Spark's: a BIGINT (DuckDB's a HUGEINT, a DECIMAL(38,0) in an array)
        return "BIGINT"
    return None


def _decode_without_default(original, types: dict[int, str]) -> str | None:
    """Spark's ``decode(x, search, result, ...)`` without a default is a CASE whose ELSE is a STRING's NULL, so
    its numbers take the type a number beside a text has: a BIGINT for integers, a DOUBLE for the others
    (``decode(s, 'a', 1)`` is a BIGINT, DuckDB's an INT), a STRING where every result is NULL; None for other
    results, which keep their type."""
    from sqlglot import exp

    results = [result for result in original.expressions[2::2] if not isinstance(result, exp.Null)]
    if not results:
        return "VARCHAR"  # decode(s, 'a', NULL): the STRING's NULL
    kinds = {numeric_kind(result, types) for result in results}
    if not kinds <= {"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"}:
        return None
    return "BIGINT" if kinds <= {"TINYINT", "SMALLINT", "INT", "BIGINT"} else "DOUBLE"


def int_literals_beside_narrow_integers(node, types: dict[int, str]) -> None:
    """Spark's integer literal is an INT, so beside a TINYINT or SMALLINT (``array(t, 1)``, ``coalesce(t, 1)``,
    ``t + 1``) the result is an INT; DuckDB types the literal as narrowly as it fits, and keeps the narrow type.
    Such a literal operand of ``node`` becomes a cast to INT, in place."""
    from sqlglot import exp

    if isinstance(node, (exp.Array, exp.Coalesce, exp.Greatest, exp.Least)):
        operands = [node.this, *node.expressions] if node.this is not None else list(node.expressions)
    elif isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
        operands = [node.this, node.expression]
    else:
        return
    if not any(type_of(operand, types) in _NARROW_INTEGERS for operand in operands):
        return
    for operand in operands:
        inner = operand.unnest()
        if isinstance(inner, exp.Literal) and inner.is_int:
            typed = exp.Cast(this=operand.copy(), to=exp.DataType.build("INT"))
            typed.meta.update(operand.meta)
            operand.replace(typed)


_NARROW_INTEGERS = ("TINYINT", "SMALLINT")


def _outermost_call(node, kind) -> bool:
    """Whether ``node`` is an aggregate call of ``kind`` with its FILTER and OVER around it, the outermost of
    them (a cast inside them would split the call from its window: DuckDB refuses CAST(f(x)) OVER ())."""
    from sqlglot import exp

    around = (exp.Window, exp.Filter)
    if isinstance(node.parent, around) and node.arg_key == "this":
        return False
    while isinstance(node, around):
        node = node.this
    return isinstance(node, kind)


def cast_to_width(translated, kind: str):
    """``translated`` (a node no longer in the tree) cast to ``kind``, keeping the places and types a later
    rule reads from its meta."""
    from sqlglot import exp

    cast = exp.Cast(this=translated, to=exp.DataType.build(kind))
    cast.meta.update(translated.meta)
    return cast
