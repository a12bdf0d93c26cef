"""The type names of schemas and casts: the spellings of Spark, Flink and Trino -> one canonical name
(``normalize_type``), a DECIMAL's size Spark refuses (``decimal_problem``), and the family of a type
(``family_of_type``: two values can be compared when their families match), the operators each pair of
families takes (``ARITHMETIC_FAMILIES``), and what is a DOUBLE before any row is read (``is_floating``)."""

from __future__ import annotations

import re

from cep.grammar import ast, limits

__all__ = ["CAST_TYPES", "LITERAL_FAMILY", "decimal_problem", "family_of_type", "normalize_type"]

# Type families: two values can be compared when their families match.
_FAMILY = {
    "BIGINT": "number",
    "INTEGER": "number",
    "INT": "number",
    "SMALLINT": "number",
    "TINYINT": "number",
    "LONG": "number",
    "DOUBLE": "number",
    "FLOAT": "number",
    "REAL": "number",
    "DECIMAL": "number",
    "NUMERIC": "number",
    "VARCHAR": "string",
    "CHAR": "string",
    "STRING": "string",
    "BOOLEAN": "boolean",
    "TIMESTAMP": "time",
    "DATE": "time",
    "NUMBER": "number",
    "TEXT": "string",
    "BIGDECIMAL": "number",
    "TIMESTAMP_NTZ": "time",
    "TIMESTAMP_LTZ": "time",
    "BOOL": "boolean",
}
CAST_TYPES = frozenset(_FAMILY)
LITERAL_FAMILY = {
    "integer": "number",
    "decimal": "number",
    "string": "string",
    "boolean": "boolean",
    "timestamp": "time",
    "date": "time",
}


# Schema type spellings (Spark, Flink, Trino) -> the names used in schemas given to check().
_TYPE_ALIASES = {
    "STRING": "VARCHAR",
    "VARCHAR": "VARCHAR",
    "CHAR": "VARCHAR",
    "TEXT": "VARCHAR",
    "BIGINT": "BIGINT",
    "LONG": "BIGINT",
    "INT": "INTEGER",
    "INTEGER": "INTEGER",
    "SMALLINT": "SMALLINT",
    "SHORT": "SMALLINT",
    "TINYINT": "TINYINT",
    "BYTE": "TINYINT",
    "DOUBLE": "DOUBLE",
    "FLOAT": "DOUBLE",
    "REAL": "DOUBLE",
    "DECIMAL": "DECIMAL",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "NUMBER": "DECIMAL",
    "BOOLEAN": "BOOLEAN",
    "BOOL": "BOOLEAN",
    "TIMESTAMP": "TIMESTAMP",
    "TIMESTAMP_NTZ": "TIMESTAMP",
    "TIMESTAMP_LTZ": "TIMESTAMP",
    "DATE": "DATE",
}
# The size of a DECIMAL written without one: Spark's DDL reads DECIMAL, DEC and NUMERIC as DECIMAL(10,0)
# (``DecimalType.USER_DEFAULT``); Oracle's NUMBER without one holds any scale, so the widest default.
_UNSIZED_DECIMALS = {"DECIMAL": (10, 0), "DEC": (10, 0), "NUMERIC": (10, 0), "NUMBER": (38, 18)}
# A type's size as written after its name: '(10, 2)', '(10)'.
_TYPE_SIZE = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
# Accepted in schemas, kept as written (upper case): no ordering and no arithmetic on them.
_OPAQUE_TYPES = ("ARRAY", "MAP", "STRUCT", "BINARY")


def normalize_type(word: str, rest: str = "") -> str | None:
    """A schema type as written ('STRING'; 'DECIMAL' with rest '(10, 2)'; 'ARRAY' with '<INT>')
    -> the canonical name ('VARCHAR', 'DECIMAL(10,2)', 'ARRAY<INT>'), or None when unknown (or a
    DECIMAL's size is out of range: ``decimal_problem`` says why)."""
    word = word.upper()
    if word in _OPAQUE_TYPES:
        return (word + rest).upper().replace(" ", "")
    size = _TYPE_SIZE.fullmatch(rest)
    if word not in _TYPE_ALIASES or (rest and size is None) or decimal_problem(word, rest) is not None:
        return None
    if _TYPE_ALIASES[word] != "DECIMAL":
        return _TYPE_ALIASES[word]
    precision, scale = (int(size.group(1)), int(size.group(2) or 0)) if size else _UNSIZED_DECIMALS[word]
    return f"DECIMAL({precision},{scale})"


def decimal_problem(word: str, rest: str) -> str | None:
    """Why a DECIMAL type as written (``normalize_type``'s arguments) has a size Spark refuses, or None
    (a DECIMAL that is fine, or another type)."""
    size = _TYPE_SIZE.fullmatch(rest)
    if _TYPE_ALIASES.get(word.upper()) != "DECIMAL" or size is None:
        return None
    precision, scale = int(size.group(1)), int(size.group(2) or 0)
    if not 1 <= precision <= limits.MAX_DECIMAL_PRECISION:
        return f"'{word}{rest}': a DECIMAL's precision is 1 to {limits.MAX_DECIMAL_PRECISION}, not {precision}"
    if scale > precision:
        return f"'{word}{rest}': a DECIMAL's scale is 0 to its precision ({precision}), not {scale}"
    return None


def family_of_type(type_name: str) -> str | None:
    """'DECIMAL(10,2)' -> 'number'; ARRAY/MAP/STRUCT types -> their upper-cased head ('array')."""
    head = re.match(r"[A-Za-z_]*", type_name).group().upper()
    return _FAMILY.get(head) or (head.lower() if head else None)


_FLOATING_TYPES = frozenset({"DOUBLE", "FLOAT", "REAL"})


def is_floating(node, column_type) -> bool:
    """Whether ``node`` is a DOUBLE or FLOAT as far as its text and the schema tell (a number with an exponent,
    a CAST to one, a column so typed, ``column_type(ref)`` giving its schema type or None, or arithmetic on
    one), for what Spark refuses of a DOUBLE before running (DIV); the matcher types the rest."""
    if isinstance(node, ast.Literal):
        return isinstance(node.value, float)
    if isinstance(node, ast.Cast):
        return node.type.name in _FLOATING_TYPES
    if isinstance(node, ast.ColumnRef):
        type_name = column_type(node)
        return type_name is not None and type_name.upper() in _FLOATING_TYPES
    if isinstance(node, ast.Unary):
        return is_floating(node.operand, column_type)
    if isinstance(node, ast.Binary) and node.op in ("+", "-", "*", "%"):
        return is_floating(node.left, column_type) or is_floating(node.right, column_type)
    return False


# (left family, right family) -> (operators allowed, result family)
ARITHMETIC_FAMILIES = {
    ("number", "number"): ({"+", "-", "*", "/", "%", "DIV"}, "number"),
    ("time", "interval"): ({"+", "-"}, "time"),
    ("interval", "time"): ({"+"}, "time"),
    ("interval", "interval"): ({"+", "-"}, "interval"),
    ("number", "interval"): ({"*"}, "interval"),
    ("interval", "number"): ({"*", "/"}, "interval"),
    ("time", "time"): ({"-"}, "interval"),
}
# A family's name in a sentence (``cannot apply '+' to text and a number``).
TYPE_WORDS = {
    "number": "a number",
    "string": "text",
    "boolean": "a boolean",
    "time": "a time",
    "interval": "an interval",
    "array": "an array",
    "map": "a map",
}
