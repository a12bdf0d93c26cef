"""Reading event files on Spark as the Python engine reads them (``cep.cli_io.read_pandas``).

    read_files(spark, paths, fmt) -> DataFrame

* **CSV** by RFC 4180 (``CSV_OPTIONS``: a quoted field may hold ``""`` and line breaks; without
  ``multiLine`` and ``escape`` Spark splits such a record in two), every field read as text, then typed
  by the rule of ``cep.matcher.rows.text_types`` (``text_types``, one aggregation over the file, a second
  for the columns that may be DOUBLE) and converted (``apply_text_types``). Spark's own ``inferSchema``
  reads ``007`` as 7 and ``NA`` as text in a numeric column; this does neither.
* **JSON** with Spark's types, except where a column mixes JSON kinds (numbers and strings, say), for
  which Spark's inference falls back to STRING and would compare ``5.0`` and ``abc`` as text. Such a
  column is typed by the rule of the Python engine's row checks (``cep.matcher.rows.validate``): the
  kind most of its values have (on a tie, the kind met first), and each row holding another kind keeps
  its fields as JSON in ``_corrupt_record`` with that value NULL, so it is set aside as ``wrong_type``
  (``bad_event_time`` in the event time column). How: every STRING column Spark infers is read as a
  VARIANT, which keeps each value's JSON kind; the one aggregation that counts the ISO 8601 times also
  counts the kinds (``json_kinds``), and ``apply_json_kinds`` converts. A column of strings alone most of
  whose values are ISO 8601 times becomes a timestamp (``text_types.string_type``, the python reader's rule),
  its other strings bad rows; ``_corrupt_record`` is kept only when a row is unread.
* **Parquet** as it is.

``apply_text_types`` also types a CSV *stream* (``cep stream``) with the types found in the files already
there: a later value that does not fit its column's type (``abc`` in a DOUBLE column) leaves the row
unread, its fields kept as JSON in ``_corrupt_record`` (``inputs.mark_bad_rows`` then rejects it);
``apply_json_kinds`` types a JSON stream's mixed columns with the kinds the files already there hold.
"""

from __future__ import annotations

import os
from functools import reduce
from typing import TYPE_CHECKING, Any

from cep.matcher.rows.text_types import (
    DECLARED_PATTERNS,
    DECLARED_RANGES,
    NULL_MARKERS,
    PATTERNS,
    RepeatedColumnError,
    TextEvidence,
    column_type,
    declared_family,
    repeated_column,
    resolve_declared,
    string_type,
)
from cep.matcher.sql.types import decimal_params
from cep.spark_bridge.spark.columns import CORRUPT_RECORD, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

# Spark's CSV reader made an RFC 4180 reader: a header line, quoted fields that hold line breaks
# (``multiLine``) and doubled quotes (``escape``, whose default is a backslash), every field text.
CSV_OPTIONS = {"header": "true", "multiLine": "true", "escape": '"', "inferSchema": "false"}
# The Spark type of each type name ``text_types.column_type`` gives or a CSV's --schema declares
# (every DECIMAL(p,s) too: ``_spark_type``).
_SPARK_TYPES = {
    "BIGINT": "bigint",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "TIMESTAMP": "timestamp",
    "INTEGER": "int",
    "SMALLINT": "smallint",
    "TINYINT": "tinyint",
    "DATE": "date",
}
# The times a Python datetime holds: a Spark timestamp outside them is no time for the matcher.
_FIRST_TIME, _LAST_TIME = "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999"


def read_files(spark: Any, paths: list[str], fmt: str, *, declared: dict[str, str] | None = None) -> DataFrame:
    """The files as one DataFrame, typed as the Python engine types them (see the module docstring).
    ``declared``: a CSV's column types given by the user; a row with a value that is not of its declared
    type gets its fields in ``_corrupt_record`` (the replay's bad rows), as the Python engine keeps the text
    for its row checks."""
    if fmt == "csv":
        header = spark.read.options(**{**CSV_OPTIONS, "header": "false"}).csv(paths).first()
        repeated = repeated_column(list(header)) if header is not None else None
        if repeated:  # Spark would rename the columns v2 and v3 (their positions): refused as the Python reader does
            raise RepeatedColumnError(f"input {', '.join(paths)}: {repeated}")
        raw = spark.read.options(**CSV_OPTIONS).csv(paths)
        if declared:
            declared = resolve_declared(declared, raw.columns)
            inferred = text_types(raw, [name for name in raw.columns if name not in declared])
            return apply_text_types(raw, {**inferred, **declared}, mark_unread=True, declared=frozenset(declared))
        return apply_text_types(raw, text_types(raw))
    if fmt == "parquet":
        return spark.read.parquet(*paths)
    return _read_json(spark, paths)


def json_holds_array(path: str) -> bool:
    """A JSON file (or the first JSON file of a directory) holding one array rather than one object per
    line; False for a path this machine cannot open (a remote one: Spark reads it, as lines)."""
    target = path
    if os.path.isdir(path):
        files = sorted(
            os.path.join(path, n)
            for n in os.listdir(path)
            if n.lower().endswith((".json", ".jsonl", ".ndjson")) and not n.startswith(("_", "."))
        )
        if not files:
            return False
        target = files[0]
    try:
        with open(target, encoding="utf-8") as fh:
            while True:
                ch = fh.read(1)
                if not ch or not ch.isspace():
                    return ch == "["
    except (OSError, UnicodeDecodeError):
        return False


def _matches(column: Column, name: str) -> Column:
    # Java's ``$`` also matches before a final line break; ``\z`` is the end of the text, as Python's fullmatch.
    return column.rlike(PATTERNS[name].replace("$", "\\z"))


def _declared_text(column: Column, type_name: str) -> Column:
    """Whether a text is one of the declared type (``text_types.DECLARED_PATTERNS``, ranges included)."""
    from pyspark.sql import functions as F

    fits = column.rlike(DECLARED_PATTERNS[declared_family(type_name)])
    if type_name in DECLARED_RANGES:
        low, high = DECLARED_RANGES[type_name]
        number = column.try_cast("decimal(20,0)")
        fits = fits & number.between(F.lit(low).cast("decimal(20,0)"), F.lit(high).cast("decimal(20,0)"))
    return fits


def _spark_type(type_name: str) -> str:
    """The Spark type (DDL) of a text column's type name: ``_SPARK_TYPES``, DECIMAL(p,s) as decimal(p,s)."""
    size = decimal_params(type_name)
    return f"decimal({size[0]},{size[1]})" if size is not None else _SPARK_TYPES[type_name]


def _time(column: Column) -> Column:
    from pyspark.sql import functions as F

    parsed = column.try_cast("timestamp")
    return F.when(parsed.between(F.lit(_FIRST_TIME).cast("timestamp"), F.lit(_LAST_TIME).cast("timestamp")), parsed)


def _evidence_columns(name: str, index: int) -> list[Column]:
    from pyspark.sql import functions as F

    c = F.col(quote(name))
    plain = c.isNotNull() & ~c.isin(*NULL_MARKERS)

    def count(condition: Column, what: str) -> Column:
        return F.sum(F.when(plain & condition, 1).otherwise(0)).alias(f"{what}{index}")

    return [
        F.count(c).alias(f"values{index}"),
        F.sum(F.when(c.isin(*NULL_MARKERS), 1).otherwise(0)).alias(f"markers{index}"),
        count(_matches(c, "integer") & c.try_cast("bigint").isNotNull(), "integers"),
        count(_matches(c, "wide_integer"), "wide_integers"),
        count(_matches(c, "number"), "numbers"),
        count(_matches(c, "finite"), "finite"),
        count(_matches(c, "boolean"), "booleans"),
        count(_matches(c, "timestamp") & _time(c).isNotNull(), "timestamps"),
        count(_matches(c, "date") & _time(c).isNotNull(), "dates"),
    ]


def _counts(df: DataFrame, names: list[str]) -> dict[str, dict[str, int]]:
    """The evidence counts of each column (one Spark job)."""
    if not names:
        return {}
    return _read_counts(
        df.agg(*[column for i, name in enumerate(names) for column in _evidence_columns(name, i)]).collect()[0], names
    )


def _read_counts(row: Any, names: list[str]) -> dict[str, dict[str, int]]:
    """The evidence counts of each column from the row of an aggregation of ``_evidence_columns``."""
    fields = ("values", "markers", "integers", "wide_integers", "numbers", "finite", "booleans", "timestamps", "dates")
    return {name: {field: int(row[f"{field}{i}"] or 0) for field in fields} for i, name in enumerate(names)}


def text_types(df: DataFrame, names: list[str] | None = None) -> dict[str, str]:
    """The type ``text_types.column_type`` gives each text column of ``df`` (all of them by default)."""
    from pyspark.sql import functions as F

    names = [n for n in (df.columns if names is None else names) if n != CORRUPT_RECORD]
    counts = _counts(df, names)
    # Only a column of numbers that are not all integers may be DOUBLE: count its distinct texts and values.
    candidates = [
        n
        for n in names
        if counts[n]["numbers"] == counts[n]["values"] - counts[n]["markers"] > 0
        and counts[n]["integers"] != counts[n]["numbers"]
        and counts[n]["wide_integers"] != counts[n]["numbers"]
    ]
    distinct: dict[str, tuple[int, int]] = {}
    if candidates:
        checks = []
        for i, name in enumerate(candidates):
            c = F.col(quote(name))
            number = _matches(c, "number")
            checks += [
                F.count_distinct(F.when(number, c)).alias(f"texts{i}"),
                F.count_distinct(F.when(number, c.try_cast("double"))).alias(f"values{i}"),
            ]
        row = df.agg(*checks).collect()[0]
        distinct = {name: (int(row[f"texts{i}"]), int(row[f"values{i}"])) for i, name in enumerate(candidates)}
    types = {}
    for name in names:
        texts, values = distinct.get(name, (0, 0))
        types[name] = column_type(TextEvidence(distinct_number_texts=texts, distinct_numbers=values, **counts[name]))
    return types


def text_times(df: DataFrame) -> DataFrame:
    """``df``'s text columns that the Python reader of a typed file reads as times (``cli_io.infer_datetimes``:
    more than half their values ISO 8601 times, ``text_types.string_type``) as timestamps. A row whose value
    in such a column is no time gets its fields in ``_corrupt_record``: a bad row (``bad_event_time`` in the
    event time column), as the Python engine's row checks set it aside. One Spark job counts the texts."""
    from pyspark.sql import types as T

    names = [f.name for f in df.schema.fields if isinstance(f.dataType, T.StringType) and f.name != CORRUPT_RECORD]
    counts = _counts(df, names)
    times = {
        name: "TIMESTAMP"
        for name in names
        if string_type(TextEvidence(values=counts[name]["values"], timestamps=counts[name]["timestamps"]))
        == "TIMESTAMP"
    }
    return apply_text_types(df, times, mark_unread=True) if times else df


def apply_text_types(
    df: DataFrame, types: dict[str, str], *, mark_unread: bool = False, declared: frozenset[str] = frozenset()
) -> DataFrame:
    """``df``'s text columns converted to ``types`` (NULL markers NULL in a typed column). With
    ``mark_unread``, a row with a value that does not convert gets its fields as JSON in ``_corrupt_record``
    (kept if Spark already put its line there). A ``declared`` column converts the texts of
    ``text_types.DECLARED_PATTERNS`` (in its range) and no other."""
    from pyspark.sql import functions as F

    converted = []
    failed = []
    for name in df.columns:
        c = F.col(quote(name))
        type_name = types.get(name, "VARCHAR")
        if name == CORRUPT_RECORD or type_name == "VARCHAR":
            converted.append(c.alias(name))
            continue
        value = _time(c) if type_name == "TIMESTAMP" else c.try_cast(_spark_type(type_name))
        if name in declared:
            value = F.when(_declared_text(c, type_name), value)
        converted.append(F.when(~c.isin(*NULL_MARKERS), value).alias(name))
        failed.append(c.isNotNull() & ~c.isin(*NULL_MARKERS) & value.isNull())
    if mark_unread and failed:
        data = [F.col(quote(n)) for n in df.columns if n != CORRUPT_RECORD]
        unread = F.when(reduce(lambda a, b: a | b, failed), F.to_json(F.struct(*data)))
        previous = F.col(CORRUPT_RECORD) if CORRUPT_RECORD in df.columns else F.lit(None).cast("string")
        converted = [c for c, n in zip(converted, df.columns) if n != CORRUPT_RECORD]
        converted.append(F.coalesce(previous, unread).alias(CORRUPT_RECORD))
    return df.select(*converted)


# The JSON kinds the Python engine's row checks tell apart (``validate``: number, string, boolean, map,
# array), numbers in two: ``integer`` for a JSON integer (a BIGINT column when every number is one), else
# ``number`` (DOUBLE); a VARIANT keeps the difference (``5`` is a BIGINT in it, ``5.0`` a DECIMAL).
JSON_KINDS = ("integer", "number", "string", "boolean", "object", "array")
_NUMBERS = ("integer", "number")
# The Spark type of a mixed column of each kind; objects and arrays stay their JSON text, as Spark's own
# STRING fallback gives them.
_KIND_TYPES = {"integer": "bigint", "number": "double", "string": "string", "boolean": "boolean"}


def _read_json(spark: Any, paths: list[str]) -> DataFrame:
    """JSON files with the column types of the module docstring: Spark's inference, then one aggregation."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    multi_line = json_holds_array(paths[0])
    inferred = spark.read.option("multiLine", multi_line).json(paths)
    strings = [
        f.name for f in inferred.schema.fields if isinstance(f.dataType, T.StringType) and f.name != CORRUPT_RECORD
    ]
    if not strings:
        return inferred
    df = spark.read.schema(json_variant_schema(inferred.schema, strings)).option("multiLine", multi_line).json(paths)
    mixed, times = json_kinds(df, strings)
    if not (mixed or times):
        return apply_json_kinds(df, {name: "string" for name in strings}, mark_unread=False)
    typed = apply_json_kinds(df, {name: mixed.get(name, "string") for name in strings}, times=times)
    # A time column may hold a string that is no time, a mixed one a value of another kind: such a row is
    # kept in CORRUPT_RECORD. A file without one reads as the python engine reads it, without the column.
    if CORRUPT_RECORD in inferred.columns or typed.where(F.col(CORRUPT_RECORD).isNotNull()).limit(1).count():
        return typed
    return typed.drop(CORRUPT_RECORD)


def json_variant_schema(schema: Any, names: list[str]) -> Any:
    """``schema`` with the columns ``names`` read as VARIANT (each value keeps its JSON kind)."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, T.VariantType(), True) if f.name in names else f for f in schema.fields])


def _kind(value: Column) -> Column:
    """The JSON kind (``JSON_KINDS``) of a VARIANT value; NULL for a JSON null or a missing key."""
    from pyspark.sql import functions as F

    schema = F.schema_of_variant(value)
    return (
        F.when(value.isNull() | (schema == "VOID"), F.lit(None).cast("string"))
        .when(schema.isin("TINYINT", "SMALLINT", "INT", "BIGINT"), "integer")
        .when(schema.rlike("^(DECIMAL|DOUBLE|FLOAT)"), "number")
        .when(schema == "STRING", "string")
        .when(schema == "BOOLEAN", "boolean")
        .when(schema.startswith("OBJECT"), "object")
        .otherwise("array")
    )


def json_kinds(df: DataFrame, names: list[str]) -> tuple[dict[str, str], list[str]]:
    """From one aggregation over the VARIANT columns ``names`` of ``df``: ({column: kind} for the columns
    that mix kinds, the columns of strings alone that are all ISO 8601 times). A mixed column's kind is
    the one most of its values have (integers and other numbers one kind), on a tie the one met first:
    the rule of ``validate`` for a column without a declared type."""
    from pyspark.sql import functions as F

    seen = "__cep_seen"
    frame = df.select(
        *[_kind(F.col(quote(n))).alias(f"__cep_k{i}") for i, n in enumerate(names)],
        *[
            F.when(_kind(F.col(quote(n))) == "string", F.try_variant_get(F.col(quote(n)), "$", "string")).alias(
                f"__cep_s{i}"
            )
            for i, n in enumerate(names)
        ],
        F.monotonically_increasing_id().alias(seen),
    )
    tallies = [
        F.sum(F.when(F.col(f"__cep_k{i}") == kind, 1).otherwise(0)).alias(f"{kind}{i}")
        for i in range(len(names))
        for kind in JSON_KINDS
    ]
    firsts = [
        F.min(F.when(F.col(f"__cep_k{i}") == kind, F.col(seen))).alias(f"first_{kind}{i}")
        for i in range(len(names))
        for kind in JSON_KINDS
    ]
    evidence = [column for i in range(len(names)) for column in _evidence_columns(f"__cep_s{i}", i)]
    row = frame.agg(*tallies, *firsts, *evidence).collect()[0]
    counts = _read_counts(row, names)
    mixed: dict[str, str] = {}
    times = []
    for i, name in enumerate(names):
        tally = {kind: int(row[f"{kind}{i}"] or 0) for kind in JSON_KINDS}
        first = {kind: row[f"first_{kind}{i}"] for kind in JSON_KINDS if tally[kind]}
        if set(first) <= {"string"}:
            found = TextEvidence(
                values=counts[name]["values"], markers=counts[name]["markers"], timestamps=counts[name]["timestamps"]
            )
            if string_type(found) == "TIMESTAMP":
                times.append(name)
            continue
        grouped = {("number" if kind in _NUMBERS else kind): (0, 0) for kind in first}
        for kind, met in first.items():
            key = "number" if kind in _NUMBERS else kind
            n, earliest = grouped[key]
            grouped[key] = (n + tally[kind], met if not n else min(earliest, met))
        winner = min(grouped, key=lambda kind: (-grouped[kind][0], grouped[kind][1]))
        mixed[name] = ("number" if tally["number"] else "integer") if winner == "number" else winner
    return mixed, times


def strict_json_numbers(schema: Any) -> tuple[Any, dict[str, str]]:
    """``schema`` with its DOUBLE, FLOAT and DECIMAL columns read as VARIANT, and {column: its Spark type}
    for ``apply_json_kinds``, which converts them back.

    Spark's JSON reader takes a quoted number in such a column: ``"1.5"`` in a DECIMAL one, and
    ``"NaN"``, ``"Infinity"``, ``"-INF"`` in a DOUBLE one (``allowNonNumericNumbers``, its default,
    which the bare tokens ``NaN`` and ``Infinity`` need too, and Python's ``json`` reads those as
    numbers). The Python engine's row checks see a string there, a ``wrong_type`` row. A VARIANT keeps
    the two apart: a quoted value is a STRING in it, a bare token a DOUBLE."""
    from pyspark.sql import types as T

    numbers = {
        f.name: f.dataType.simpleString()
        for f in schema.fields
        if isinstance(f.dataType, (T.DoubleType, T.FloatType, T.DecimalType))
    }
    return json_variant_schema(schema, list(numbers)), numbers


def json_value(value: Column, kind: str) -> tuple[Column, Column]:
    """(the VARIANT ``value`` as its column's type, whether it is a stray: a value of another kind, or one
    the type cannot hold). ``kind``: one of ``JSON_KINDS``, or a numeric Spark type (``strict_json_numbers``)."""
    from pyspark.sql import functions as F

    found = _kind(value)
    if kind in _KIND_TYPES:
        typed = F.try_variant_get(value, "$", _KIND_TYPES[kind])
    elif kind in JSON_KINDS:  # an object or an array: its JSON text
        typed = F.to_json(value)
    else:  # a declared numeric type: any JSON number, never a string
        typed = F.try_variant_get(value, "$", kind)
    fits = found.isin(*_NUMBERS) if kind in _NUMBERS or kind not in JSON_KINDS else found == kind
    typed = F.when(fits, typed)
    return typed, found.isNotNull() & typed.isNull()


def apply_json_kinds(
    df: DataFrame, kinds: dict[str, str], *, times: list[str] = (), mark_unread: bool = True
) -> DataFrame:
    """``df`` with its VARIANT columns converted: each to the type of its kind (``kinds``, as
    ``json_value`` takes them; ``times``: a column of strings read as timestamps). A row holding a value
    of another kind (or one its type cannot hold) gets the value NULL and, unless Spark already put its
    line there, its fields as JSON in ``_corrupt_record`` (added with ``mark_unread``; without it, only
    kept if ``df`` has one)."""
    from pyspark.sql import functions as F

    converted, strays = {}, []
    for name, kind in kinds.items():
        typed, stray = json_value(F.col(quote(name)), kind)
        if name in times:
            typed = _time(typed)
            stray = _kind(F.col(quote(name))).isNotNull() & typed.isNull()
        strays.append(stray)
        converted[name] = typed
    columns = [converted[n].alias(n) if n in converted else F.col(quote(n)) for n in df.columns if n != CORRUPT_RECORD]
    if not mark_unread and CORRUPT_RECORD not in df.columns:
        return df.select(*columns)
    fields = F.to_json(F.struct(*[F.col(quote(n)) for n in df.columns if n != CORRUPT_RECORD]))
    unread = F.when(reduce(lambda a, b: a | b, strays), fields) if strays else F.lit(None).cast("string")
    previous = F.col(CORRUPT_RECORD) if CORRUPT_RECORD in df.columns else F.lit(None).cast("string")
    return df.select(*columns, F.coalesce(previous, unread).alias(CORRUPT_RECORD))
