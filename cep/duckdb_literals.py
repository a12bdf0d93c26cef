"""Literals Spark reads otherwise than sqlglot: a number's minus sign, and text beside a number (part of the
translation in cep/duckdb_sql.py; docs/sql-statements.md lists the rules)."""

from __future__ import annotations

from cep.duckdb_decimals import DECIMAL_LITERAL, decimal_readings
from cep.duckdb_functions import COMPARISONS
from cep.duckdb_nodes import INTEGRAL, TEXT_TYPES, type_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).


def negative_literals(tree) -> None:
    """``-1::string`` as Spark reads it: a number's minus sign belongs to the literal (Spark's grammar), so
    the cast applies to -1; sqlglot reads -(1::string), the minus of a text. ``-2`` alone is a literal too
    (an INT, where the minus of 2 would be checked as INT arithmetic and widened)."""
    from sqlglot import exp

    for negation in list(tree.find_all(exp.Neg)):
        innermost = negation.this
        while isinstance(innermost, exp.Cast):  # -1::int::string too
            innermost = innermost.this
        if not (isinstance(innermost, exp.Literal) and innermost.is_number):
            continue
        if _double_literal_zero(innermost):  # -0.0D is Java's -0.0: the minus of the DOUBLE, not of a decimal 0
            continue
        signed = exp.Literal(this=f"-{innermost.this}", is_string=False)  # Literal.number would make a Neg
        signed.meta.update((key, innermost.meta[key]) for key in ("start", "end") if key in innermost.meta)
        if innermost is negation.this:  # -2 alone: a literal, an INT as Spark types it (in parentheses, which
            replacement = exp.Paren(this=signed)  # keep sqlglot's INTERVAL (-2) DAY valid)
        else:
            innermost.replace(signed)
            replacement = negation.this
        for key in ("start", "end"):
            if key in negation.meta:
                replacement.meta[key] = negation.meta[key]
        negation.replace(replacement)


def _double_literal_zero(literal) -> bool:
    """Whether ``literal`` is a zero written with Spark's DOUBLE or FLOAT suffix (``0.0D``, ``0F``; sqlglot
    reads it as a cast of the number, which its place in the text, longer than the number, tells apart)."""
    start, end = literal.meta.get("start"), literal.meta.get("end")
    if start is None or end is None or end - start + 1 <= len(literal.this):
        return False
    try:
        return float(literal.this) == 0
    except ValueError:
        return False


def text_literals_as_numbers(node, types: dict[int, str], cast):
    """Text literals compared with an integer or a DOUBLE (``b = '12'``, ``b IN ('+.5', 3)``, ``x BETWEEN '1'
    AND '1.5d'``), cast as Spark's analyser casts them, to the number's type by Spark's reading (``'+.5'``
    is an error beside a BIGINT; DuckDB compared the texts, or read ``'1.5d'`` as none); None elsewhere.
    ``cast``: the translation of a CAST node (Spark's reading of text)."""
    from sqlglot import exp

    def as_number(literal, kind):
        if not (isinstance(literal, exp.Literal) and literal.is_string):
            return literal.copy()
        target = "BIGINT" if kind in INTEGRAL else "DOUBLE"
        return cast(exp.Cast(this=literal.copy(), to=exp.DataType.build(target)), types)

    booleans = _text_beside_booleans(node, types, cast)
    if booleans is not None:
        return booleans
    numbers = (*INTEGRAL, "DOUBLE", "FLOAT")
    new = node.copy()
    if type(node).__name__ in COMPARISONS:
        kinds = (type_of(node.this, types), type_of(node.expression, types))
        literal = [isinstance(side, exp.Literal) and side.is_string for side in (node.this, node.expression)]
        if kinds[0] in numbers and literal[1]:
            new.set("expression", as_number(node.expression, kinds[0]))
            return new
        if kinds[1] in numbers and literal[0]:
            new.set("this", as_number(node.this, kinds[1]))
            return new
        return None
    if not isinstance(node, (exp.In, exp.Between)) or node.args.get("query") is not None:
        return None
    kind = type_of(node.this, types)
    items = node.expressions if isinstance(node, exp.In) else [node.args["low"], node.args["high"]]
    if kind not in numbers or not any(isinstance(item, exp.Literal) and item.is_string for item in items):
        return None
    if isinstance(node, exp.Between):
        for key in ("low", "high"):
            new.set(key, as_number(node.args[key], kind))
    else:
        new.set("expressions", [as_number(item, kind) for item in node.expressions])
    return new


def _text_beside_booleans(node, types: dict[int, str], cast):
    """Text compared with a BOOLEAN (``flag = ' N '``, ``' N ' IN (flag, NULL)``, ``s BETWEEN flag AND true``):
    Spark casts the text to BOOLEAN by its words (trimmed, in any case: ``t true y yes 1``, ``f false n no 0``;
    other text an error), where DuckDB's cast refused ``' N '`` (found by the differential, seed 63); None
    elsewhere."""
    from sqlglot import exp

    if type(node).__name__ in COMPARISONS:
        keys = [("this", None), ("expression", None)]
    elif isinstance(node, exp.Between):
        keys = [("this", None), ("low", None), ("high", None)]
    elif isinstance(node, exp.In) and node.args.get("query") is None:
        keys = [("this", None), *(("expressions", n) for n in range(len(node.expressions)))]
    else:
        return None
    operands = [node.args[key] if n is None else node.args[key][n] for key, n in keys]
    kinds = [type_of(operand, types) for operand in operands]
    if "BOOLEAN" not in kinds or not any(kind in TEXT_TYPES for kind in kinds):
        return None
    new = node.copy()
    copies = [new.args[key] if n is None else new.args[key][n] for key, n in keys]
    for copied, kind in zip(copies, kinds, strict=True):
        if kind in TEXT_TYPES:
            copied.replace(cast(exp.Cast(this=copied.copy(), to=exp.DataType.build("BOOLEAN")), types))
    return new


def decimal_literals_as_sparks(tree) -> None:
    """A decimal literal in Spark's type: ``0.5`` is Spark's DECIMAL(1,1) (its digits without the leading
    zeros), DuckDB's DECIMAL(2,1) (every digit written), so the python engine's ``0.5`` as a value, in
    ``typeof``, ``array(0.5, 0.05)`` and in DuckDB's own sentences about it (``cannot apply + to DATE and
    DECIMAL(1,1)``) was of another type. A pass after the translation: its rules read the literal as written
    (Spark's DECIMAL arithmetic types it itself); a literal whose two types agree (``12.5``) is left as it is,
    and so is one already cast (``2.5D``, the operand of a CAST) or standing where a cast cannot (a LIMIT)."""
    from sqlglot import exp

    # where a cast cannot stand (DuckDB's PERCENTILE_CONT(0.5) WITHIN GROUP takes a number as written), or
    # where the literal's type is no result's (a fraction of a percentile)
    written_only = (exp.Cast, exp.TableSample, exp.Limit, exp.Offset, exp.DataTypeParam, exp.WindowSpec)
    written_only += (exp.PercentileCont, exp.PercentileDisc, exp.Quantile, exp.ApproxQuantile)
    for literal in list(tree.find_all(exp.Literal)):
        pointed = DECIMAL_LITERAL.fullmatch(literal.this) if literal.is_number else None
        if pointed is None or isinstance(literal.parent, written_only):
            continue
        ducks = (len(pointed.group(1)) + len(pointed.group(2)), len(pointed.group(2)))
        (sparks,) = decimal_readings(literal, {})
        if sparks != ducks and ducks[0] <= _DUCKDB_DECIMAL_DIGITS:
            literal.replace(exp.Cast(this=literal.copy(), to=exp.DataType.build(f"DECIMAL({sparks[0]}, {sparks[1]})")))


# DuckDB's widest DECIMAL (a longer literal is its DOUBLE, and Spark's refusal or DOUBLE: left as it is).
_DUCKDB_DECIMAL_DIGITS = 38
