"""The streaming source of ``cep stream`` over a directory of event files (JSON, CSV or Parquet): the
format of the files, their columns (given, kept from the first start, or inferred from the newest files)
and the reader that keeps an unreadable line as a bad row (``_corrupt_record``)."""

from __future__ import annotations

import json
import os
from functools import reduce

from cep import cli_io
from cep.cli_io import UsageError
from cep.grammar.parser import parse_schema
from cep.spark_bridge.sinks.base import atomic_write
from cep.spark_bridge.spark.columns import CORRUPT_RECORD, quote
from cep.spark_bridge.spark.files import (
    CSV_OPTIONS,
    apply_json_kinds,
    apply_text_types,
    json_kinds,
    json_variant_schema,
    strict_json_numbers,
)
from cep.spark_bridge.spark.inputs import blank_misshapen_csv_lines
from cep.spark_bridge.spark.types import spark_to_sql, sql_to_spark

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

SCHEMA_SAMPLE_FILES = 50  # the newest files read to infer the input's columns (not every file there)


def input_format(path: str, explicit: str | None) -> str:
    if explicit:
        return explicit
    names = sorted(n for n in os.listdir(path) if not n.startswith(("_", "."))) if os.path.isdir(path) else [path]
    for name in names:
        fmt = cli_io.format_of_name(name)
        if fmt is not None:
            return fmt
    raise UsageError(f"cannot tell the format of the files in {path}; use --format {{{','.join(cli_io.FORMATS)}}}")


def stream_source(spark, path: str, fmt: str, schema_text: str | None = None, *, cache: str | None = None):
    """A streaming DataFrame over the files in ``path``; the schema from ``schema_text``, else from
    ``cache`` (a restart reuses the columns its first start found), else from the newest
    ``SCHEMA_SAMPLE_FILES`` files already there (ISO 8601 text columns of JSON become timestamps, as in
    ``cep run``; a CSV is read as text, RFC 4180, and typed by the rule of ``cep run``,
    ``cep.spark_bridge.spark.files``), then kept in ``cache``.

    JSON and CSV are read in Spark's PERMISSIVE mode with a ``_corrupt_record`` column: a line that is
    not JSON, or holds a value the schema's type cannot take (``abc`` or a quoted ``"NaN"`` in a DOUBLE
    column, ``yesterday`` in a TIMESTAMP one), keeps its text there (the streaming bridge rejects it with
    a reason; a number column is read as VARIANT for that, ``files.strict_json_numbers``), and so
    does a JSON line whose ISO 8601 time column does not parse. Extra JSON fields are ignored. A CSV line
    with the wrong number of fields keeps its text too, and all its columns are NULL: which value
    belongs to which column is unknown, so it is rejected as a line not read at all (``not_json``).
    Parquet is read as it is."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    to_time: list[str] = []
    text_types: dict[str, str] = {}  # a CSV read as text: the types it is given after the read
    mixed: dict[str, str] = {}  # JSON columns that mix kinds, read as VARIANT: the kind each is given
    if schema_text:
        try:
            columns = parse_schema(schema_text)
        except Exception as exc:  # CepError
            raise UsageError(f"invalid --schema:\n{exc}") from None
        schema = T.StructType(
            [T.StructField(name, sql_to_spark(kind, column=name), True) for name, kind in columns.items()]
        )
    elif cache and os.path.exists(cache):
        with open(cache, encoding="utf-8") as fh:
            kept = json.load(fh)
        schema, to_time = T.StructType.fromJson(kept["schema"]), list(kept.get("to_time") or [])
        text_types, mixed = dict(kept.get("text_types") or {}), dict(kept.get("json_kinds") or {})
    else:
        schema, to_time, text_types, mixed = _infer_schema(spark, path, fmt)
        if cache:
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            atomic_write(
                cache,
                json.dumps(
                    {
                        "schema": schema.jsonValue(),
                        "to_time": to_time,
                        "text_types": text_types,
                        "json_kinds": mixed,
                        "format": fmt,
                    }
                ),
            )
    if fmt == "json":  # a quoted "NaN" or "1.5" in a number column is a string there, as in cep run
        schema, numbers = strict_json_numbers(schema)
        mixed = {**numbers, **mixed}
    if fmt in ("json", "csv") and CORRUPT_RECORD not in schema.fieldNames():
        schema = T.StructType(list(schema.fields) + [T.StructField(CORRUPT_RECORD, T.StringType(), True)])
    reader = spark.readStream.schema(schema)
    if fmt == "csv":
        reader = reader.options(**{k: v for k, v in CSV_OPTIONS.items() if k != "inferSchema"})
    if fmt in ("json", "csv"):
        reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_RECORD)
    df = reader.format(fmt).load(path)
    if fmt == "csv":
        df = blank_misshapen_csv_lines(df)
        if text_types:
            df = apply_text_types(df, text_types, mark_unread=True)
    if mixed:
        df = apply_json_kinds(df, mixed)
    if to_time:  # a time that does not parse makes the row unreadable, as a wrong type does
        data = [F.col(quote(f.name)) for f in schema.fields if f.name != CORRUPT_RECORD]
        unparsed = reduce(
            lambda a, b: a | b,
            [F.col(quote(n)).isNotNull() & F.try_to_timestamp(F.col(quote(n))).isNull() for n in to_time],
        )
        df = df.withColumn(
            CORRUPT_RECORD,
            F.when(F.col(CORRUPT_RECORD).isNull() & unparsed, F.to_json(F.struct(*data))).otherwise(
                F.col(CORRUPT_RECORD)
            ),
        )
    for name in to_time:
        df = df.withColumn(name, F.try_to_timestamp(F.col(quote(name))))
    return df


def _infer_schema(spark, path: str, fmt: str):
    """(schema, JSON text columns to read as timestamps, a CSV's column types, the kinds of the JSON columns
    that mix kinds) from the newest files of ``path``. A CSV is read as text and typed after the read
    (``files.apply_text_types``), by the rule ``cep run`` follows; a JSON column that mixes kinds is read
    as VARIANT and typed after the read by its kind (``files.apply_json_kinds``), as ``cep run`` types it."""
    from pyspark.sql import types as T

    names = [n for n in os.listdir(path) if not n.startswith(("_", "."))] if os.path.isdir(path) else []
    if not names:
        raise UsageError(
            f"{path} has no files yet to take the columns from; give them with --schema "
            "'ts TIMESTAMP, key STRING, value DOUBLE'"
        )
    newest = sorted(names, key=lambda n: os.path.getmtime(os.path.join(path, n)))[-SCHEMA_SAMPLE_FILES:]
    files = [os.path.join(path, n) for n in sorted(newest)]
    if fmt == "json":
        raw = spark.read.json(files).schema
        if not [n for n in raw.fieldNames() if n != CORRUPT_RECORD]:
            raise UsageError(f"input {files[0]} is empty: no rows, so no columns to match")
        strings = [f.name for f in raw.fields if isinstance(f.dataType, T.StringType) and f.name != CORRUPT_RECORD]
        variants = spark.read.schema(json_variant_schema(raw, strings)).json(files)
        mixed, to_time = json_kinds(variants, strings) if strings else ({}, [])
        return json_variant_schema(raw, list(mixed)), to_time, {}, mixed
    static = cli_io.read_spark(spark, files, fmt)
    if fmt == "csv":
        text_types = {f.name: spark_to_sql(f.dataType) for f in static.schema.fields if f.name != CORRUPT_RECORD}
        return T.StructType([T.StructField(name, T.StringType(), True) for name in text_types]), [], text_types, {}
    return static.schema, [], {}, {}
