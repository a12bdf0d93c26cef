"""Static SQL types of output columns, so engines with schemas (Spark, Arrow) can type the matches.

Type names: BIGINT, INTEGER, SMALLINT, TINYINT, DOUBLE, DECIMAL, VARCHAR, BOOLEAN, TIMESTAMP, DATE,
INTERVAL (a duration) and ARRAY<T>. A value whose type cannot be known (a bare NULL) is VARCHAR.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Callable

from cep.grammar import ast
from cep.matcher.sql.values import to_text

INTEGERS = frozenset({"BIGINT", "INTEGER", "INT", "SMALLINT", "TINYINT", "LONG"})
FRACTIONAL = frozenset({"DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC", "NUMBER"})
_LITERAL_TYPES = {"integer": "BIGINT", "decimal": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN",
                  "null": "VARCHAR", "timestamp": "TIMESTAMP", "date": "DATE"}
_TEXT_FUNCTIONS = frozenset({"LOWER", "UPPER", "CONCAT", "CONCAT_WS", "TRIM", "SUBSTR", "SUBSTRING", "ARRAY_JOIN",
                             "REPLACE", "SPLIT_PART", "REGEXP_SUBSTR", "REGEXP_REPLACE", "DATE_FORMAT", "TO_CHAR"})
_DOUBLE_FUNCTIONS = frozenset({"SQRT", "LN", "EXP", "POWER", "LOG10", "LOG2", "LOG"})
_COUNT_FUNCTIONS = frozenset({"LENGTH", "CARDINALITY", "FLOOR", "CEIL", "CEILING", "SIGN", "STRPOS", "POSITION",
                              "YEAR", "QUARTER", "MONTH", "DAY", "DAYOFMONTH", "DAYOFWEEK", "DAYOFYEAR", "WEEKOFYEAR",
                              "WEEKDAY", "HOUR", "MINUTE", "SECOND", "DATEDIFF", "DATE_DIFF", "TIMESTAMPDIFF",
                              "UNIX_TIMESTAMP"})
_BOOLEAN_FUNCTIONS = frozenset({"STARTS_WITH", "STARTSWITH", "ENDS_WITH", "ENDSWITH", "CONTAINS", "REGEXP_LIKE", "RLIKE"})
_TIMESTAMP_FUNCTIONS = frozenset({"DATE_TRUNC", "DATEADD", "TIMESTAMPADD", "TO_TIMESTAMP", "CURRENT_TIMESTAMP", "NOW"})
_DATE_FUNCTIONS = frozenset({"DATE", "TO_DATE", "CURRENT_DATE", "DATE_SUB"})


def _arithmetic(left: str, right: str, op: str = "+") -> str:
    temporal = ("TIMESTAMP", "DATE")
    if left in temporal and right in temporal and op == "-":
        return "INTERVAL"  # a duration: timedelta in Python, DayTimeIntervalType on Spark
    if left in temporal:
        return left  # TIMESTAMP +/- INTERVAL
    if op == "DIV":
        return "BIGINT"
    if op == "/" and left in INTEGERS and right in INTEGERS:
        return "DOUBLE"  # 7 / 2 is 3.5 (values.divide)
    if left in FRACTIONAL or right in FRACTIONAL:
        return "DOUBLE"
    if left in INTEGERS and right in INTEGERS:
        return "BIGINT"
    return "DOUBLE"


def element_type(type_name: str) -> str:
    return type_name[6:-1] if type_name.startswith("ARRAY<") else "VARCHAR"


def infer(expr, column_type: Callable[[ast.ColumnRef], str]) -> str:
    recurse = lambda e: infer(e, column_type)  # noqa: E731
    if isinstance(expr, ast.Literal):
        return _LITERAL_TYPES.get(expr.kind, "VARCHAR")
    if isinstance(expr, ast.ColumnRef):
        return column_type(expr)
    if isinstance(expr, ast.Binary):
        if expr.op in ("+", "-", "*", "/", "%", "DIV"):
            return _arithmetic(recurse(expr.left), recurse(expr.right), expr.op)
        if expr.op == "||":
            left = recurse(expr.left)
            return left if left.startswith("ARRAY<") else "VARCHAR"
        return "BOOLEAN"
    if isinstance(expr, ast.Unary):
        return "BOOLEAN" if expr.op == "NOT" else recurse(expr.operand)
    if isinstance(expr, (ast.IsNull, ast.Between, ast.InList, ast.Like)):
        return "BOOLEAN"
    if isinstance(expr, ast.Case):
        for result in [w.result for w in expr.whens] + ([expr.default] if expr.default is not None else []):
            if not (isinstance(result, ast.Literal) and result.kind == "null"):
                return recurse(result)
        return "VARCHAR"
    if isinstance(expr, ast.Cast):
        name = expr.type.name
        return "BIGINT" if name in INTEGERS else "DOUBLE" if name in FRACTIONAL else "VARCHAR" if name in ("CHAR", "STRING", "TEXT") else \
            "TIMESTAMP" if name.startswith("TIMESTAMP") else "BOOLEAN" if name == "BOOL" else name
    if isinstance(expr, ast.ArrayLiteral):
        return f"ARRAY<{recurse(expr.items[0]) if expr.items else 'VARCHAR'}>"
    if isinstance(expr, ast.FunctionCall):
        return _function_type(expr, recurse)
    if isinstance(expr, ast.Aggregate):
        return _aggregate_type(expr, recurse)
    if isinstance(expr, ast.Navigation):
        return recurse(expr.operand)
    if isinstance(expr, (ast.Classifier, ast.MatchStatus)):
        return "VARCHAR"
    if isinstance(expr, ast.MatchNumber):
        return "BIGINT"
    return "VARCHAR"


def _function_type(expr: ast.FunctionCall, recurse) -> str:
    name, args = expr.name, expr.args
    if name in _TEXT_FUNCTIONS:
        return "VARCHAR"
    if name in _DOUBLE_FUNCTIONS:
        return "DOUBLE"
    if name in _COUNT_FUNCTIONS:
        return "BIGINT"
    if name in _BOOLEAN_FUNCTIONS:
        return "BOOLEAN"
    if name in _TIMESTAMP_FUNCTIONS:
        return "TIMESTAMP"
    if name in _DATE_FUNCTIONS:
        return "DATE"
    if name == "DATE_ADD":
        return "TIMESTAMP" if len(args) == 3 else "DATE"
    if name in ("EXTRACT", "DATE_PART"):
        field = args[0].value if args and isinstance(args[0], ast.Literal) else ""
        return "DECIMAL" if str(field).upper() in ("SECOND", "S", "SEC", "SECONDS", "SECS") else "BIGINT"
    if name == "MOD":
        return _arithmetic(recurse(args[0]), recurse(args[1]), "%") if len(args) == 2 else "DOUBLE"
    if name == "TRUNC":
        argument = recurse(args[0]) if args else "DOUBLE"
        return "DATE" if argument in ("DATE", "TIMESTAMP") else argument
    if name in ("IF", "IFF", "NVL2") and len(args) > 1:
        return recurse(args[1])
    if name == "DECODE" and len(args) > 2:
        return recurse(args[2])
    if name in ("ELEMENT_AT", "ARRAY_MAX", "ARRAY_MIN") and args:
        return element_type(recurse(args[0]))
    return recurse(args[0]) if args else "VARCHAR"


def _aggregate_type(expr: ast.Aggregate, recurse) -> str:
    name, args = expr.name, expr.args
    if name in ("COUNT", "COUNT_IF"):
        return "BIGINT"
    if name in ("AVG", "STDDEV", "STDDEV_SAMP", "VARIANCE", "VAR_SAMP", "MEDIAN", "PERCENTILE_CONT", "PERCENTILE_DISC"):
        return "DOUBLE"
    if name in ("LISTAGG", "STRING_AGG"):
        return "VARCHAR"
    if name in ("BOOL_AND", "BOOL_OR", "EVERY"):
        return "BOOLEAN"
    argument = recurse(args[0]) if args and not isinstance(args[0], ast.Star) else "VARCHAR"
    if name == "SUM":
        return "BIGINT" if argument in INTEGERS else "DOUBLE"
    if name in ("ARRAY_AGG", "COLLECT_LIST", "AGGREGATE_LIST"):
        return f"ARRAY<{argument}>"
    if name in ("MIN", "MAX", "MIN_BY", "MAX_BY") and len(args) == (2 if name in ("MIN", "MAX") else 3):
        return f"ARRAY<{argument}>"
    return argument


def coerce(value, type_name: str):
    """Make a Python value fit its declared output type (e.g. Decimal into DOUBLE) for typed sinks."""
    if value is None:
        return None
    if type_name in ("DOUBLE", "FLOAT", "REAL") and isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        return float(value)
    if type_name in INTEGERS and isinstance(value, float) and value.is_integer():
        return int(value)
    if type_name.startswith("ARRAY<") and isinstance(value, list):
        inner = element_type(type_name)
        return [coerce(item, inner) for item in value]
    if type_name == "VARCHAR" and not isinstance(value, str):
        return to_text(value)
    return value
