"""The types the translation's rules read (cep/duckdb_sql.py): each operand a rule needs the type of is marked,
and sqlglot's type annotation of a qualified copy of the statement, over the tables' schemas, gives its SQL
type name; Spark's integer widths (cep/duckdb_widths.py) and its wide integral literals where sqlglot's differ."""

from __future__ import annotations

import re
from collections.abc import Mapping

from cep.duckdb_decimals import DECIMAL_META, common_type_arguments
from cep.duckdb_functions import COMPARISONS
from cep.duckdb_nodes import TYPED_META, time_operand_keys
from cep.duckdb_widths import spark_width

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

# The result types of the functions cep/duckdb_sql.py keeps as calls (OWN_FUNCTIONS), which sqlglot leaves untyped.
_RESULT_TYPES = {
    "DATE_FORMAT": "VARCHAR",
    "TO_CHAR": "VARCHAR",
    "TO_DATE": "DATE",
    "TO_TIMESTAMP": "TIMESTAMP",
    "UNIX_TIMESTAMP": "BIGINT",
    "TRUNC": "DATE",
    "DATE_TRUNC": "TIMESTAMP",
    "FROM_UNIXTIME": "VARCHAR",
    "MAKE_DATE": "DATE",
}
# The functions kept as calls whose first argument's type a rule reads.
_TYPED_CALLS = ("UNIX_TIMESTAMP", "TO_CHAR", "TO_DATE", "TO_TIMESTAMP", "DATE_FORMAT", "TRUNC")


def annotated_types(tree, schema: Mapping[str, Mapping[str, str]], *, checking: bool = False) -> dict[int, str]:
    """Node id -> its SQL type name (upper case, no parameters), for the nodes whose type a rule needs;
    read from sqlglot's annotation of a qualified copy of the statement. ``checking``: only the types that
    no table's column decides (a cast's, or an expression's without a column), which `cep check` can know."""
    from sqlglot import exp
    from sqlglot.optimizer.annotate_types import annotate_types
    from sqlglot.optimizer.qualify import qualify

    wanted = 0
    originals = {}
    for node in tree.walk():
        for operand in _typed_operands(node):
            wanted += 1
            operand.meta[TYPED_META] = wanted
            originals[wanted] = operand
    if not wanted:
        return {}
    lowered = {
        name.casefold(): {column.casefold(): kind for column, kind in columns.items()}
        for name, columns in schema.items()
    }
    copy = tree.copy()
    for made in list(copy.find_all(exp.TimestampFromParts)):  # make_timestamp: sqlglot leaves it untyped
        typed = exp.Cast(this=exp.Null(), to=exp.DataType.build("TIMESTAMP"))
        typed.meta.update(made.meta)
        made.replace(typed)
    for literal in list(copy.find_all(exp.Literal)):  # Spark's integral literal past INT's range (sqlglot: an INT)
        wide = _wide_literal_type(literal)
        if wide is not None:
            inner = literal.copy()
            inner.meta.pop(TYPED_META, None)  # the type a rule reads is the cast's
            typed = exp.Cast(this=inner, to=exp.DataType.build(wide))
            typed.meta.update(literal.meta)
            literal.replace(typed)
    for extreme in list(copy.find_all(exp.ArrayMax, exp.ArrayMin)):
        if isinstance(extreme.parent, (exp.Cast, exp.TryCast)):
            # sqlglot leaves array_max untyped; its element's type, read as sqlglot types arr[0], is the family
            # the cast's rules need (its width, which sqlglot may not give as Spark does, is the cast's own)
            element = exp.Bracket(this=extreme.this.copy(), expressions=[exp.Literal.number(0)])
            element.meta.update(extreme.meta)
            extreme.replace(element)
    for call in list(copy.find_all(exp.Anonymous)):  # the functions kept as calls: their result types
        kind = _RESULT_TYPES.get(str(call.this).upper())
        if kind is not None:
            operand = call.expressions[0] if call.expressions else exp.Null()
            if str(call.this).upper() == "MAKE_DATE" and len(call.expressions) > 1:  # each field typed
                operand = exp.Coalesce(this=operand, expressions=call.expressions[1:])
            typed = exp.Cast(this=operand, to=exp.DataType.build(kind))
            typed.meta.update(call.meta)  # the call may be an operand a rule needs the type of
            call.replace(typed)
    try:
        copy = qualify(copy, schema=lowered, dialect="spark", validate_qualify_columns=False, quote_identifiers=False)
        copy = annotate_types(copy, schema=lowered, dialect="spark")
    except Exception:  # noqa: BLE001 - sqlglot's optimizer raises many kinds; the rules then refuse
        return {}
    found = {}
    for node in copy.walk():
        number = node.meta.get(TYPED_META)
        kind = node.args.get("true") if isinstance(node, exp.Nvl2) else node  # sqlglot leaves NVL2 untyped
        if number is None or kind.type is None or kind.type.this == exp.DataType.Type.UNKNOWN:
            continue
        if checking and not isinstance(node, exp.Cast) and node.find(exp.Column) is not None:
            continue
        found[number] = (
            _integer_width(originals[number]) or _rounded_integer(node) or kind.type.this.name.upper().replace("_", "")
        )
        if isinstance(node, exp.Column) and found[number] == "DECIMAL" and len(kind.type.expressions) == 2:
            # A column's DECIMAL(p, s), for Spark's DECIMAL arithmetic (sqlglot's of an expression is not Spark's).
            size = tuple(int(param.name) for param in kind.type.expressions)
            originals[number].meta[DECIMAL_META] = (size,)
    return found


def _integer_width(node) -> str | None:
    """Spark's integer type of ``node`` where DuckDB's differs (``spark_width``): the type a rule reads."""
    width = spark_width(node, {})
    return width if width in ("INT", "BIGINT") else None


def _rounded_integer(node) -> str | None:
    """Spark's round of an integer keeps the integer's type (``round(i, -1)`` is an INT), where sqlglot types it
    as a DOUBLE: a RANGE frame over it is named as over an INT (found by the differential, seed 58)."""
    from sqlglot import exp

    operand = node.this if isinstance(node, exp.Round) else None
    kind = operand.type.this.name.upper() if operand is not None and operand.type is not None else None
    return kind if kind in ("TINYINT", "SMALLINT", "INT", "BIGINT") else None


def _wide_literal_type(literal) -> str | None:
    """Spark's type of an integral literal that does not fit an INT: a BIGINT, or past it a DECIMAL of
    its digits; None for any other literal."""
    if literal.is_string or not re.fullmatch(r"-?[0-9]+", literal.this):
        return None
    value = int(literal.this)
    if -(2**31) <= value < 2**31:
        return None
    return "BIGINT" if -(2**63) <= value < 2**63 else f"DECIMAL({len(literal.this.lstrip('-'))}, 0)"


def _typed_operands(node) -> tuple:
    """The operands of ``node`` whose types a rule needs (none for most nodes)."""
    from sqlglot import exp

    if isinstance(node, (exp.Div, exp.IntDiv, exp.SafeDivide)):
        return (node.this, node.expression)
    if isinstance(node, (exp.Sum, exp.Avg)) and isinstance(node.this, exp.Distinct):
        return tuple(node.this.expressions[:1])
    if isinstance(node, (exp.Cast, exp.Sum, exp.Round, exp.Floor, exp.Ceil, exp.Avg, exp.Abs, exp.Reverse)):
        return (node.this,)
    if isinstance(node, (exp.Variance, exp.VariancePop, exp.Stddev, exp.StddevSamp, exp.StddevPop)):
        return (node.this,)  # a text: Spark reads it as a DOUBLE
    if isinstance(node, (exp.Corr, exp.CovarPop, exp.CovarSamp)):
        return (node.this, node.expression)
    if isinstance(node, (exp.Upper, exp.Lower, exp.Initcap, exp.Typeof)):
        return (node.this,)
    if isinstance(node, exp.MakeInterval) and node.args.get("second") is not None:
        return (node.args["second"],)
    if isinstance(node, (exp.Concat, exp.ConcatWs)):
        return tuple(node.expressions)
    if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):  # a DATE beside a text literal; DECIMALs
        return (node.this, *node.expressions)
    if isinstance(node, (exp.If, exp.Nvl2, exp.Case)) and not isinstance(node.parent, exp.Case):
        return tuple(common_type_arguments(node))  # DECIMALs brought to Spark's common type
    if isinstance(node, (exp.Max, exp.Min, exp.First, exp.Last, exp.FirstValue, exp.LastValue, exp.Lag, exp.Lead)):
        return (node.this,)  # the DECIMAL they keep, for Spark's arithmetic on it
    if isinstance(node, exp.DPipe) or type(node).__name__ in COMPARISONS:
        return (node.this, node.expression)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.SafeAdd, exp.SafeSubtract, exp.SafeMultiply)):
        return (node.this, node.expression)
    if isinstance(node, (exp.Neg, exp.Dayname, exp.Monthname, exp.ToBase64)):
        return (node.this,)
    if isinstance(node, exp.Chr):
        return tuple(node.expressions[:1])
    if isinstance(node, exp.In):  # a DATE or number beside text literals
        return (node.this, *node.expressions)
    if isinstance(node, exp.Between):
        return (node.this, node.args["low"], node.args["high"])
    if isinstance(node, exp.Array):  # a TINYINT or SMALLINT beside an integer literal
        return tuple(node.expressions)
    if isinstance(node, exp.Bracket):  # an array's element
        return (node.this,)
    if isinstance(node, exp.Anonymous) and str(node.this).upper() in _TYPED_CALLS and node.expressions:
        return (node.expressions[0],)
    if isinstance(node, exp.Anonymous) and str(node.this).upper() == "MAKE_DATE":  # integer fields only
        return tuple(node.expressions)
    if isinstance(node, exp.Anonymous) and str(node.this).upper() == "DATE_TRUNC" and len(node.expressions) > 1:
        return (node.expressions[1],)
    if isinstance(node, exp.DecodeCase) and len(node.expressions) % 2:  # decode without a default: its results
        return tuple(node.expressions[2::2])
    if isinstance(node, exp.Window) and node.args.get("order") is not None:  # a RANGE frame's key: Spark's name
        return tuple(key.this for key in node.args["order"].expressions)
    return tuple(node.args[key] for key in time_operand_keys(node) if node.args.get(key) is not None)
