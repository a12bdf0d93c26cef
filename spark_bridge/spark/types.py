"""Spark data types <-> the SQL type names the matcher speaks.

The matcher names types as SQL does: BIGINT, INTEGER, DOUBLE, DECIMAL(p,s), VARCHAR, BOOLEAN, TIMESTAMP,
DATE and ``ARRAY<T>``. This module maps Spark's ``DataType`` objects to those names (for
``plan.output_types``) and back (for the output schema of ``applyInPandas``).

A Spark type with no SQL name here (binary, map, struct, interval, ...) is read as VARCHAR: the batch
bridge casts such a column to string before the matcher sees it (``needs_string_cast``). Going the other
way, a type name we cannot turn into a Spark type is an error that says which name and which column.

``normalize_type_name`` works without Spark: pyspark is imported inside the functions that need it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.spark.columns import quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

# A value that looks like an ISO-8601 date or timestamp (what a CSV or JSON column of times holds): the readers
# that guess a schema take such a text column for a timestamp column.
ISO_DATETIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?$"
)

# Spellings users and other engines write, folded onto the matcher's names.
_ALIASES = {
    "INTERVAL": "INTERVAL",
    "INTERVAL DAY TO SECOND": "INTERVAL",
    "BIGINT": "BIGINT",
    "LONG": "BIGINT",
    "INT64": "BIGINT",
    "INTEGER": "INTEGER",
    "INT": "INTEGER",
    "INT32": "INTEGER",
    "SMALLINT": "SMALLINT",
    "SHORT": "SMALLINT",
    "TINYINT": "TINYINT",
    "BYTE": "TINYINT",
    "DOUBLE": "DOUBLE",
    "DOUBLE PRECISION": "DOUBLE",
    "FLOAT": "DOUBLE",
    "FLOAT64": "DOUBLE",
    "REAL": "DOUBLE",
    "DECIMAL": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "DEC": "DECIMAL",
    "VARCHAR": "VARCHAR",
    "STRING": "VARCHAR",
    "TEXT": "VARCHAR",
    "CHAR": "VARCHAR",
    "CHARACTER VARYING": "VARCHAR",
    "BOOLEAN": "BOOLEAN",
    "BOOL": "BOOLEAN",
    "TIMESTAMP": "TIMESTAMP",
    "TIMESTAMP_NTZ": "TIMESTAMP",
    "TIMESTAMP_LTZ": "TIMESTAMP",
    "DATETIME": "TIMESTAMP",
    "DATE": "DATE",
}

_PARAMS = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9 ]*?)\s*(?:\(\s*([0-9\s,]*)\s*\))?\s*$")


def normalize_type_name(name: str) -> str:
    """``'string'`` -> ``'VARCHAR'``, ``'array<int>'`` -> ``'ARRAY<INTEGER>'``,
    ``'decimal(10, 2)'`` -> ``'DECIMAL(10,2)'``.

    Raises ``ValueError`` for a name that is not a known SQL type.
    """
    text = name.strip()
    upper = text.upper()
    if upper.startswith("ARRAY"):
        rest = text[5:].strip()
        if (rest.startswith("<") and rest.endswith(">")) or (rest.startswith("(") and rest.endswith(")")):
            return f"ARRAY<{normalize_type_name(rest[1:-1])}>"
        raise ValueError(f"unknown type {name!r}: write ARRAY<element type>")
    match = _PARAMS.match(text)
    if match is None:
        raise ValueError(f"unknown type {name!r}")
    base = " ".join(match.group(1).upper().split())
    if base not in _ALIASES:
        raise ValueError(
            f"unknown type {name!r} "
            "(known: BIGINT, INTEGER, DOUBLE, DECIMAL, VARCHAR, BOOLEAN, TIMESTAMP, DATE, ARRAY<T>)"
        )
    canonical = _ALIASES[base]
    params = match.group(2)
    if canonical == "DECIMAL" and params:
        numbers = [p.strip() for p in params.split(",") if p.strip()]
        return f"DECIMAL({','.join(numbers)})"
    return canonical


def spark_to_sql(data_type: DataType) -> str:
    """The matcher's name for a Spark type; types with no SQL name become VARCHAR (see ``needs_string_cast``)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.LongType):
        return "BIGINT"
    if isinstance(data_type, T.IntegerType):
        return "INTEGER"
    if isinstance(data_type, T.ShortType):
        return "SMALLINT"  # kept narrow: the clause's SMALLINT arithmetic is a SMALLINT's, as in Spark SQL
    if isinstance(data_type, T.ByteType):
        return "TINYINT"
    if isinstance(data_type, (T.DoubleType, T.FloatType)):
        return "DOUBLE"
    if isinstance(data_type, T.DecimalType):
        return f"DECIMAL({data_type.precision},{data_type.scale})"
    if isinstance(data_type, (T.StringType, T.VarcharType, T.CharType)):
        return "VARCHAR"
    if isinstance(data_type, T.BooleanType):
        return "BOOLEAN"
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        return "TIMESTAMP"
    if isinstance(data_type, T.DateType):
        return "DATE"
    if isinstance(data_type, T.DayTimeIntervalType):
        return "INTERVAL"
    if isinstance(data_type, T.ArrayType):
        element = data_type.elementType
        if needs_string_cast(element):
            return "ARRAY<VARCHAR>"
        return f"ARRAY<{spark_to_sql(element)}>"
    return "VARCHAR"


def needs_string_cast(data_type: DataType) -> bool:
    """True for a Spark type the matcher cannot take as is: the bridge casts it to string first."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.ArrayType):
        return needs_string_cast(data_type.elementType)
    return not isinstance(
        data_type,
        (
            T.LongType,
            T.IntegerType,
            T.ShortType,
            T.ByteType,
            T.DoubleType,
            T.FloatType,
            T.DecimalType,
            T.StringType,
            T.VarcharType,
            T.CharType,
            T.BooleanType,
            T.TimestampType,
            T.TimestampNTZType,
            T.DateType,
            T.DayTimeIntervalType,
        ),
    )


def sql_to_spark(type_name: str, *, column: str | None = None) -> DataType:
    """The Spark type for one of the matcher's type names; a clear ``CepSemanticError`` when there is none."""
    from pyspark.sql import types as T

    try:
        name = normalize_type_name(type_name)
    except ValueError as exc:
        where = f" of output column {column!r}" if column else ""
        raise CepSemanticError(
            f"cannot run on Spark: the type {type_name!r}{where} has no Spark equivalent ({exc})",
            code="E0290",
        ) from None
    if name.startswith("ARRAY<"):
        return T.ArrayType(sql_to_spark(name[6:-1], column=column), containsNull=True)
    if name.startswith("DECIMAL"):
        if "(" in name:
            precision, _, scale = name[8:-1].partition(",")
            return T.DecimalType(int(precision), int(scale or 0))
        return T.DecimalType(38, 18)
    return {
        "BIGINT": T.LongType(),
        "INTEGER": T.IntegerType(),
        "SMALLINT": T.ShortType(),
        "TINYINT": T.ByteType(),
        "DOUBLE": T.DoubleType(),
        "VARCHAR": T.StringType(),
        "BOOLEAN": T.BooleanType(),
        "TIMESTAMP": T.TimestampType(),
        "DATE": T.DateType(),
        "INTERVAL": T.DayTimeIntervalType(),
    }[name]


def cast_untyped(df: DataFrame) -> DataFrame:
    """``df`` with every column the matcher has no type for (``needs_string_cast``) cast to string."""
    from pyspark.sql import functions as F

    for name in [field.name for field in df.schema.fields if needs_string_cast(field.dataType)]:
        df = df.withColumn(name, F.col(quote(name)).cast("string"))
    return df


def output_schema(columns: Iterable[tuple[str, str]], *, naive_times: bool = False) -> StructType:
    """A Spark ``StructType`` (all fields nullable) from ``[(name, SQL type name), ...]``.

    The matcher has one TIMESTAMP type; ``naive_times`` makes it Spark's TIMESTAMP_NTZ (``naive_times_in``
    says when: a naive time in gives a naive time out, as on the python engine)."""
    from pyspark.sql import types as T

    fields = []
    for name, type_name in columns:
        data_type = sql_to_spark(type_name, column=name)
        if naive_times and isinstance(data_type, T.TimestampType):
            data_type = T.TimestampNTZType()
        fields.append(T.StructField(name, data_type, True))
    return T.StructType(fields)


def naive_times_in(schema: StructType) -> bool:
    """True when the input has times and every one is TIMESTAMP_NTZ (wall-clock times, no instant): the
    output's times are then TIMESTAMP_NTZ too, never turned into instants of the session's zone."""
    from pyspark.sql import types as T

    kinds = {
        type(field.dataType)
        for field in schema.fields
        if isinstance(field.dataType, (T.TimestampType, T.TimestampNTZType))
    }
    return kinds == {T.TimestampNTZType}
