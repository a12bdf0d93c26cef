"""Spark's ``typeof(x)`` on DuckDB: the type spelled as Spark's ``simpleString`` (``int``, ``decimal(10,2)``,
``array<int>``, ``struct<a:int,b:string>``), not DuckDB's (``INTEGER``, ``DECIMAL(10,2)``, ``INTEGER[]``).

The translation (cep/duckdb_sql.py) writes ``typeof(x)`` as DuckDB's ``typeof(x)`` given to a function cep
registers on the connection (``register_functions`` in cep/duckdb_functions.py), which respells it. DuckDB's
type of a value is Spark's wherever the translation gives Spark's types (the widths in cep/duckdb_widths.py,
DECIMAL arithmetic), so only the spelling differs. A type Spark has no spelling for in DuckDB's terms (an
INTERVAL: Spark's is a day-time or year-month interval, DuckDB's one kind; an unsigned integer) is an error
that says so, never another name.
"""

from __future__ import annotations

from cep.duckdb_nodes import Refusal, place_of, type_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

SPARK_TYPEOF = "cep_spark_typeof"  # the function cep registers on DuckDB's connection

_SIMPLE = {
    "BOOLEAN": "boolean",
    "TINYINT": "tinyint",
    "SMALLINT": "smallint",
    "INTEGER": "int",
    "BIGINT": "bigint",
    "FLOAT": "float",
    "DOUBLE": "double",
    "VARCHAR": "string",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP WITH TIME ZONE": "timestamp",
    "TIME": "time(6)",  # a TIME literal: Spark's TIME of microseconds, as DuckDB's
    "BLOB": "binary",
    '"NULL"': "void",
}


class UnspelledType(ValueError):
    """A DuckDB type with no Spark spelling that the python engine can tell."""


def spark_simple_string(duck: str) -> str:
    """DuckDB's name of a type (as its ``typeof`` writes it) as Spark's ``simpleString``."""
    duck = duck.strip()
    if duck in _SIMPLE:
        return _SIMPLE[duck]
    if duck.endswith("[]"):
        return f"array<{spark_simple_string(duck[:-2])}>"
    if duck.startswith("DECIMAL(") and duck.endswith(")"):
        return "decimal(" + duck[len("DECIMAL(") : -1].replace(" ", "") + ")"
    if duck.startswith("MAP(") and duck.endswith(")"):
        key, value = _top_level_parts(duck[len("MAP(") : -1])
        return f"map<{spark_simple_string(key)},{spark_simple_string(value)}>"
    if duck.startswith("STRUCT(") and duck.endswith(")"):
        fields = []
        for part in _top_level_parts(duck[len("STRUCT(") : -1]):
            name, _, kind = part.strip().partition(" ")
            fields.append(f"{name.strip(chr(34))}:{spark_simple_string(kind)}")
        return "struct<" + ",".join(fields) + ">"
    raise UnspelledType(
        f"the python engine cannot write the type {duck} as Spark's typeof() does (Spark tells kinds of it "
        f"apart that DuckDB does not); run it on Spark: cep run --engine spark"
    )


def _top_level_parts(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses and quotes."""
    parts, depth, quoted, start = [], 0, False, 0
    for at, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
        elif not quoted and depth == 0 and char == ",":
            parts.append(text[start:at])
            start = at + 1
    parts.append(text[start:])
    return parts


def spark_typeof(node, types: dict[int, str]):
    """``typeof(x)`` as DuckDB SQL that writes Spark's spelling; None for another node; Refusal for an INTERVAL,
    whose kind Spark tells (``interval day``, ``interval year to month``) and DuckDB does not."""
    from sqlglot import exp

    if not isinstance(node, exp.Typeof):
        return None
    if isinstance(node.this, exp.Interval) or type_of(node.this, types) == "INTERVAL":
        raise Refusal(
            "the python engine cannot write an interval's type as Spark's typeof() does (Spark's names its "
            "fields: interval day, interval year to month)",
            *place_of(node),
        )
    return exp.Anonymous(this=SPARK_TYPEOF, expressions=[node.copy()])
