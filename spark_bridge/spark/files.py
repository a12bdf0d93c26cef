"""Reading event files on Spark as the Python engine reads them (``cep.cli_io.read_pandas``).

    read_files(spark, paths, fmt) -> DataFrame

* **CSV** by RFC 4180 (``CSV_OPTIONS``: a quoted field may hold ``""`` and line breaks; without
  ``multiLine`` and ``escape`` Spark splits such a record in two), every field read as text, then typed
  by the rule of ``cep.matcher.rows.text_types`` (``text_types``, one aggregation over the file, a second
  for the columns that may be DOUBLE) and converted (``apply_text_types``). Spark's own ``inferSchema``
  reads ``007`` as 7 and ``NA`` as text in a numeric column; this does neither.
* **JSON** with Spark's types, and each string column whose every value is an ISO 8601 time as a
  timestamp (``text_types.string_type``).
* **Parquet** as it is.

``apply_text_types`` also types a CSV *stream* (``cep stream``) with the types found in the files already
there: a later value that does not fit its column's type (``abc`` in a DOUBLE column) leaves the row
unread, its fields kept as JSON in ``_corrupt_record`` (``inputs.mark_bad_rows`` then rejects it).
"""

from __future__ import annotations

import os
from functools import reduce
from typing import TYPE_CHECKING, Any

from cep.matcher.rows.text_types import NULL_MARKERS, PATTERNS, TextEvidence, column_type, string_type
from cep.spark_bridge.spark.columns import CORRUPT_RECORD, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

# Spark's CSV reader made an RFC 4180 reader: a header line, quoted fields that hold line breaks
# (``multiLine``) and doubled quotes (``escape``, whose default is a backslash), every field text.
CSV_OPTIONS = {"header": "true", "multiLine": "true", "escape": '"', "inferSchema": "false"}
# The Spark type of each type name ``text_types.column_type`` gives.
_SPARK_TYPES = {"BIGINT": "bigint", "DECIMAL(38,0)": "decimal(38,0)", "DOUBLE": "double", "BOOLEAN": "boolean",
                "TIMESTAMP": "timestamp"}
# The times a Python datetime holds: a Spark timestamp outside them is no time for the matcher.
_FIRST_TIME, _LAST_TIME = "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999"


def read_files(spark: Any, paths: list[str], fmt: str) -> "DataFrame":
    """The files as one DataFrame, typed as the Python engine types them (see the module docstring)."""
    if fmt == "csv":
        raw = spark.read.options(**CSV_OPTIONS).csv(paths)
        return apply_text_types(raw, text_types(raw))
    if fmt == "parquet":
        return spark.read.parquet(*paths)
    df = spark.read.option("multiLine", json_holds_array(paths[0])).json(paths)
    return _json_times(df)


def json_holds_array(path: str) -> bool:
    """A JSON file (or the first JSON file of a directory) holding one array rather than one object per
    line; False for a path this machine cannot open (a remote one: Spark reads it, as lines)."""
    target = path
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path)
                       if n.lower().endswith((".json", ".jsonl", ".ndjson")) and not n.startswith(("_", ".")))
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


def _matches(column: "Column", name: str) -> "Column":
    # Java's ``$`` also matches before a final line break; ``\z`` is the end of the text, as Python's fullmatch.
    return column.rlike(PATTERNS[name].replace("$", "\\z"))


def _time(column: "Column") -> "Column":
    from pyspark.sql import functions as F

    parsed = column.try_cast("timestamp")
    return F.when(parsed.between(F.lit(_FIRST_TIME).cast("timestamp"), F.lit(_LAST_TIME).cast("timestamp")), parsed)


def _evidence_columns(name: str, index: int) -> list["Column"]:
    from pyspark.sql import functions as F

    c = F.col(quote(name))
    plain = c.isNotNull() & ~c.isin(*NULL_MARKERS)

    def count(condition: "Column", what: str) -> "Column":
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
    ]


def _counts(df: "DataFrame", names: list[str]) -> dict[str, dict[str, int]]:
    """The evidence counts of each column (one Spark job)."""
    if not names:
        return {}
    row = df.agg(*[column for i, name in enumerate(names) for column in _evidence_columns(name, i)]).collect()[0]
    fields = ("values", "markers", "integers", "wide_integers", "numbers", "finite", "booleans", "timestamps")
    return {name: {field: int(row[f"{field}{i}"] or 0) for field in fields} for i, name in enumerate(names)}


def text_types(df: "DataFrame", names: list[str] | None = None) -> dict[str, str]:
    """The type ``text_types.column_type`` gives each text column of ``df`` (all of them by default)."""
    from pyspark.sql import functions as F

    names = [n for n in (df.columns if names is None else names) if n != CORRUPT_RECORD]
    counts = _counts(df, names)
    # Only a column of numbers that are not all integers may be DOUBLE: count its distinct texts and values.
    candidates = [n for n in names if counts[n]["numbers"] == counts[n]["values"] - counts[n]["markers"] > 0
                  and counts[n]["integers"] != counts[n]["numbers"] and counts[n]["wide_integers"] != counts[n]["numbers"]]
    distinct: dict[str, tuple[int, int]] = {}
    if candidates:
        checks = []
        for i, name in enumerate(candidates):
            c = F.col(quote(name))
            number = _matches(c, "number")
            checks += [F.count_distinct(F.when(number, c)).alias(f"texts{i}"),
                       F.count_distinct(F.when(number, c.try_cast("double"))).alias(f"values{i}")]
        row = df.agg(*checks).collect()[0]
        distinct = {name: (int(row[f"texts{i}"]), int(row[f"values{i}"])) for i, name in enumerate(candidates)}
    types = {}
    for name in names:
        texts, values = distinct.get(name, (0, 0))
        types[name] = column_type(TextEvidence(distinct_number_texts=texts, distinct_numbers=values, **counts[name]))
    return types


def apply_text_types(df: "DataFrame", types: dict[str, str], *, mark_unread: bool = False) -> "DataFrame":
    """``df``'s text columns converted to ``types`` (NULL markers NULL in a typed column). With
    ``mark_unread``, a row with a value that does not convert gets its fields as JSON in ``_corrupt_record``
    (kept if Spark already put its line there)."""
    from pyspark.sql import functions as F

    converted = []
    failed = []
    for name in df.columns:
        c = F.col(quote(name))
        type_name = types.get(name, "VARCHAR")
        if name == CORRUPT_RECORD or type_name == "VARCHAR":
            converted.append(c.alias(name))
            continue
        value = _time(c) if type_name == "TIMESTAMP" else c.try_cast(_SPARK_TYPES[type_name])
        converted.append(F.when(~c.isin(*NULL_MARKERS), value).alias(name))
        failed.append(c.isNotNull() & ~c.isin(*NULL_MARKERS) & value.isNull())
    if mark_unread and failed:
        data = [F.col(quote(n)) for n in df.columns if n != CORRUPT_RECORD]
        unread = F.when(reduce(lambda a, b: a | b, failed), F.to_json(F.struct(*data)))
        previous = F.col(CORRUPT_RECORD) if CORRUPT_RECORD in df.columns else F.lit(None).cast("string")
        converted = [c for c, n in zip(converted, df.columns) if n != CORRUPT_RECORD]
        converted.append(F.coalesce(previous, unread).alias(CORRUPT_RECORD))
    return df.select(*converted)


def _json_times(df: "DataFrame") -> "DataFrame":
    """A JSON DataFrame with each string column of ISO 8601 times as a timestamp."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    strings = [f.name for f in df.schema.fields if isinstance(f.dataType, T.StringType) and f.name != CORRUPT_RECORD]
    counts = _counts(df, strings)
    times = [n for n in strings
             if string_type(TextEvidence(values=counts[n]["values"], timestamps=counts[n]["timestamps"])) == "TIMESTAMP"
             and counts[n]["markers"] == 0]
    for name in times:
        df = df.withColumn(name, _time(F.col(quote(name))))
    return df
