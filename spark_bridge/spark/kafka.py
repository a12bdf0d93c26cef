"""Kafka as an input: the events DataFrame (streaming or static) with each message's value parsed into columns.

    read_kafka(spark, "kafka://127.0.0.1:9092/ticks", schema="symbol STRING, ts TIMESTAMP, price DOUBLE")

- **Addresses and options** (``kafka_addresses``) and **the check** before a query starts (``kafka_check``:
  the topics looked up with Kafka's own AdminClient in Spark's JVM; a missing topic is E0490 naming it and
  the servers, unreachable brokers E0491, a bad address or option E0492).
- **Columns**: the value's fields (JSON: ``from_json``; CSV: ``from_csv``), then the message's
  ``kafka_key`` (string), ``kafka_topic``, ``kafka_partition``, ``kafka_offset`` and ``kafka_timestamp``
  (the record's timestamp: usable as the event time), then ``_corrupt_record``: a value that is not
  JSON (or CSV of the schema's shape), a value of the wrong type, a time that does not parse, or an empty
  value (NULL, zero bytes or only blanks) keeps its text there, so the stream sets it aside as a bad row
  with its reason (``not_json``, ``wrong_type``, ``bad_event_time``), exactly as for a line of a file
  (``inputs.mark_bad_rows``).
- **Bytes**: a value (or key) is UTF-8 unless ``encoding`` says otherwise (``--kafka-encoding latin-1``).
  A value or key that is not valid UTF-8 is never decoded with U+FFFD in place of its bad bytes (two
  names differing only there, ``M\xfcller`` and ``M\xe4ller``, would become one partition key): the
  message is a bad row ``not_utf8`` with nothing read from it, its bytes kept for the dead letter
  (``not_utf8_text``). Latin-1 gives every byte a character, so a topic declared Latin-1 has no such row.
- **The schema**: given (``"ts TIMESTAMP, ..."`` or a ``StructType``), or for JSON inferred from the last
  ``SAMPLE_PER_PARTITION`` messages of each partition (``json_fields``: each field the type most of its
  values have; an ISO 8601 text is a timestamp).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from cep.grammar.errors import CepSemanticError
from cep.grammar.parser import parse_schema
from cep.spark_bridge.spark.columns import BASE64_PREFIX, CORRUPT_RECORD, MESSAGE_METADATA, NOT_UTF8_MARK, quote
from cep.spark_bridge.spark.files import json_value, strict_json_numbers
from cep.spark_bridge.spark.inputs import blank_misshapen_csv_lines
from cep.spark_bridge.spark.kafka_addresses import (
    CepKafkaError,
    KafkaAddress,
    bad_address,
    canonical_option,
    is_kafka_url,
    parse_kafka_options,
    parse_kafka_url,
    source_options,
)
from cep.spark_bridge.spark.kafka_check import JvmAdmin, admin_for, check_topics, client_settings
from cep.spark_bridge.spark.types import ISO_DATETIME, sql_to_spark

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

# Imported inside functions: pyspark and py4j, an optional dependency (the "spark" extra) that takes seconds to import.

__all__ = [
    "CepKafkaError",
    "KafkaAddress",
    "ENCODINGS",
    "KAFKA_COLUMNS",
    "VALUE_FORMATS",
    "encoding_name",
    "check_topics",
    "is_kafka_url",
    "kafka_location",
    "parse_kafka_options",
    "parse_kafka_url",
    "read_kafka",
]

VALUE_FORMATS = ("json", "csv")
# How a message's value and key bytes become text (``--kafka-encoding``), by the names people write, with the
# name Spark's ``decode`` knows; None: UTF-8, checked (a message that is not valid UTF-8 is a ``not_utf8`` row).
ENCODINGS: dict[str, str | None] = {"utf-8": None, "latin-1": "ISO-8859-1"}
_ENCODING_ALIASES = {"utf8": "utf-8", "latin1": "latin-1", "iso-8859-1": "latin-1", "iso8859-1": "latin-1"}

# The columns a message adds to its value's fields (name, Spark SQL type).
KAFKA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kafka_key", "string"),
    ("kafka_topic", "string"),
    ("kafka_partition", "int"),
    ("kafka_offset", "bigint"),
    ("kafka_timestamp", "timestamp"),
)
# Enough messages to see every field of a topic whose messages share a shape, few enough to read in a second.
SAMPLE_PER_PARTITION = 1000
# --------------------------------------------------------------------------------------------- schema


def value_schema(schema: str | StructType) -> StructType:
    """A schema as the reader takes it: ``"ts TIMESTAMP, price DOUBLE"`` (cep's type names) or a StructType."""
    from pyspark.sql import types as T

    if isinstance(schema, T.StructType):
        return schema
    columns = parse_schema(schema)
    return T.StructType([T.StructField(name, sql_to_spark(kind, column=name), True) for name, kind in columns.items()])


def infer_json_schema(
    spark: SparkSession,
    address: KafkaAddress,
    options: Mapping[str, str],
    partitions: Mapping[str, int],
    *,
    encoding: str = "utf-8",
    admin: JvmAdmin | None = None,
) -> StructType:
    """The schema of the last ``SAMPLE_PER_PARTITION`` messages of each partition (JSON values, ``json_fields``);
    ``admin``: an open client to ask for the offsets (else one is opened here)."""
    from pyspark.sql import functions as F

    with admin_for(spark, address, options, admin) as admin:
        offsets = admin.offsets(dict(partitions))
    ranges = {
        tp: (max(first, last - SAMPLE_PER_PARTITION), last) for tp, (first, last) in offsets.items() if last > first
    }
    if not ranges:
        raise CepKafkaError(
            f"{address.what} on {address.bootstrap} holds no message yet to take the columns from; give "
            "them with --schema 'ts TIMESTAMP, key STRING, value DOUBLE'",
            code="E0490",
            filename=str(address),
        )

    def as_json(which: int) -> str:
        out: dict[str, dict[str, int]] = {}
        for (topic, p), bounds in sorted(ranges.items()):
            out.setdefault(topic, {})[str(p)] = bounds[which]
        return json.dumps(out)

    assign = json.dumps({t: sorted(p for (tt, p) in ranges if tt == t) for t in sorted({t for t, _ in ranges})})
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", address.bootstrap)
    for key, value in options.items():
        if key.lower().startswith("kafka."):
            reader = reader.option(key, value)
    sample = (
        reader.option("assign", assign)
        .option("startingOffsets", as_json(0))
        .option("endingOffsets", as_json(1))
        .load()
        .select(F.when(utf8_checked(encoding), message_text("value", encoding)).alias("value"))
        .collect()
    )
    schema = json_fields(row["value"] for row in sample)
    if not schema.fields:
        raise CepKafkaError(
            f"the last messages of {address.what} hold no JSON object to take the columns from; give "
            "them with --schema",
            code="E0490",
            filename=str(address),
        )
    return schema


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "timestamp" if ISO_DATETIME.match(value.strip()) else "string"
    return "string"  # an object or an array: read as its JSON text


def json_fields(values: Iterable[str | None]) -> StructType:
    """The columns of JSON objects (texts that are not JSON objects are skipped), in the order fields first
    appear. Each field takes the type most of its non-null values have, numbers counted together (BIGINT
    when every one is whole, else DOUBLE); a text that is an ISO 8601 time is a timestamp; objects and arrays
    are their JSON text. Messages that disagree with the majority are then bad rows (``wrong_type``), not a
    column widened to text, where comparisons would silently become text comparisons."""
    from pyspark.sql import types as T

    kinds: dict[str, Counter] = {}
    for text in values:
        try:
            obj = json.loads(text) if text else None
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        for name, value in obj.items():
            counts = kinds.setdefault(str(name), Counter())
            if value is not None:
                counts[_json_kind(value)] += 1
    types = {
        "boolean": T.BooleanType(),
        "bigint": T.LongType(),
        "double": T.DoubleType(),
        "timestamp": T.TimestampType(),
        "string": T.StringType(),
    }
    fields = []
    for name, counts in kinds.items():
        votes = Counter({("number" if k in ("bigint", "double") else k): n for k, n in counts.items()})
        votes["number"] = counts["bigint"] + counts["double"]
        kind = max(votes, key=lambda k: (votes[k], k == "string")) if +votes else "string"
        if kind == "number":
            kind = "double" if counts["double"] else "bigint"
        fields.append(T.StructField(name, types[kind], True))
    return T.StructType(fields)


# ----------------------------------------------------------------------------------------- the reader


def encoding_name(text: str | None) -> str:
    """``--kafka-encoding``'s value as a key of ``ENCODINGS`` (``utf8``, ``ISO-8859-1`` ... accepted)."""
    name = (text or "utf-8").strip().lower().replace("_", "-")
    name = _ENCODING_ALIASES.get(name, name)
    if name not in ENCODINGS:
        raise bad_address(
            f"--kafka-encoding {text}: a message's bytes are read as {' or '.join(ENCODINGS)} (UTF-8, the "
            "default, sets aside a message that is not valid UTF-8 as a not_utf8 bad row)",
            "--kafka-encoding",
        )
    return name


def message_text(column: str, encoding: str = "utf-8") -> Column:
    """The bytes of a message's ``value`` or ``key`` as text: Latin-1 decoded, or UTF-8 as Spark holds it
    (unchecked: ``utf8_checked`` tells the valid ones)."""
    from pyspark.sql import functions as F

    charset = ENCODINGS[encoding_name(encoding)]
    return F.decode(F.col(column), charset) if charset is not None else F.col(column).cast("string")


def utf8_checked(encoding: str = "utf-8") -> Column:
    """True for a message whose value and key are text in ``encoding`` (Latin-1: always)."""
    from pyspark.sql import functions as F

    if ENCODINGS[encoding_name(encoding)] is not None:
        return F.lit(True)
    value, key = message_text("value"), message_text("key")
    return F.coalesce(F.is_valid_utf8(value), F.lit(True)) & F.coalesce(F.is_valid_utf8(key), F.lit(True))


def read_kafka(
    spark: SparkSession,
    address: str | KafkaAddress,
    *,
    schema: str | StructType | None = None,
    format: str = "json",  # noqa: A002 - the name every Spark reader uses
    options: Mapping[str, str] | Iterable[str] | None = None,
    streaming: bool = True,
    check: bool = True,
    encoding: str = "utf-8",
) -> DataFrame:
    """The events of a Kafka topic: a streaming DataFrame (``streaming``), or a static one of the range the
    topics hold now (``cep run``: from the earliest offsets to the latest, unless ``startingOffsets`` /
    ``endingOffsets`` say otherwise). Columns: the value's fields, ``KAFKA_COLUMNS``, ``_corrupt_record``.

    ``options``: Spark's Kafka source options (a mapping, or ``KEY=VALUE`` items as ``--kafka-option``
    takes them). ``check``: look the topics up first (``check_topics``). ``encoding``: of the values and
    keys (``ENCODINGS``; UTF-8 by default, checked). Needs a session started with the connector:
    ``get_spark(kafka=True)``.
    """
    encoding = encoding_name(encoding)
    if format not in VALUE_FORMATS:
        raise bad_address(f"--format {format}: a Kafka value is read as {' or '.join(VALUE_FORMATS)}", address)
    address = parse_kafka_url(address, topic_required=False) if isinstance(address, str) else address
    if options is None or isinstance(options, Mapping):
        options = {canonical_option(k): str(v) for k, v in dict(options or {}).items()}
    else:
        options = parse_kafka_options(options)
    settings = source_options(address, options, streaming=streaming)
    if check or schema is None:
        with JvmAdmin(spark, address, client_settings(address, options)) as admin:
            partitions = check_topics(spark, address, options, allow_none=streaming, admin=admin) if check else {}
            if schema is None:
                if format != "json":
                    raise bad_address(
                        "a CSV value has no column names: give them with --schema 'ts TIMESTAMP, ...'", address
                    )
                partitions = partitions or check_topics(spark, address, options, admin=admin)
                schema = infer_json_schema(spark, address, options, partitions, encoding=encoding, admin=admin)
    struct = value_schema(schema)
    reader = spark.readStream if streaming else spark.read
    reader = reader.format("kafka")
    for key, value in settings.items():
        reader = reader.option(key, value)
    return kafka_events(reader.load(), struct, format, encoding=encoding)


_PARSED = "__cep_parsed"  # the value as read (a struct), before its fields are checked (kafka_events)
# The value as read with the schema's own floating columns, and whether that read is the strict one's answer
# (``_typed_is_strict``): the strict read's VARIANT numbers and their checks cost the JVM about a quarter of a
# Kafka micro-batch's task time, for messages whose numbers are plain JSON numbers, nearly all of them.
_TYPED, _PLAIN = "__cep_typed", "__cep_plain"
_IS_TEXT = "__cep_is_text"  # the message's value and key are text in the encoding (``utf8_checked``)
# DOUBLE only: Spark's typed parse takes a quoted "1.5" in a DECIMAL column, and may round a FLOAT's text
# otherwise than the strict parse's VARIANT does.
_FLOATING = {"double"}
_TINIEST, _LARGEST = 5e-324, 1.7976931348623157e308  # a finite double that is not zero, in absolute value


def kafka_events(
    raw: DataFrame,
    schema: StructType,
    format: str = "json",  # noqa: A002
    *,
    encoding: str = "utf-8",
    typed_first: bool = True,
) -> DataFrame:
    """Spark's Kafka rows (``key``, ``value``, ``topic``, ...) -> the value's fields, ``KAFKA_COLUMNS`` and
    ``_corrupt_record`` (the value's text when it could not be read whole; empty for a NULL value; for a
    message that is not text in ``encoding``, ``NOT_UTF8_MARK`` and the value's bytes in base64, nothing
    else read: ``inputs.bad_row_reason`` calls it ``not_utf8``).

    ``typed_first``: with JSON values whose number columns are all DOUBLE, each message is read with the schema's
    own types first, and again with the strict read only when that read cannot vouch for it (``_typed_is_strict``);
    False reads every message strictly, the reference the typed read is tested against."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = [f for f in schema.fields if f.name != CORRUPT_RECORD]
    taken = [f.name for f in fields if f.name in dict(KAFKA_COLUMNS)]
    if taken:
        raise CepSemanticError(
            f"the value has a field {taken[0]!r}, a name cep gives the Kafka message's metadata "
            f"({', '.join(n for n, _ in KAFKA_COLUMNS)}); rename it in --schema",
            code="E0284",
        )
    with_corrupt = T.StructType(
        [T.StructField(f.name, f.dataType, True) for f in fields]
        + [T.StructField(CORRUPT_RECORD, T.StringType(), True)]
    )
    text = message_text("value", encoding)
    is_text = utf8_checked(encoding)
    read_options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD}
    numbers: dict[
        str, str
    ] = {}  # a quoted "NaN" in a number column is a string, as in a file (files.strict_json_numbers)
    typed = None
    if format == "json":
        variants, numbers = strict_json_numbers(with_corrupt)
        parsed = F.from_json(text, variants, read_options)
        if typed_first and numbers and set(numbers.values()) <= _FLOATING:
            typed = F.from_json(text, with_corrupt, read_options)
    else:
        ddl = ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in with_corrupt.fields)
        parsed = F.from_csv(text, ddl, read_options)
    # Parsed once, in a projection of its own: the columns below read it many times, often inside CASE branches,
    # where Spark's common-subexpression elimination does not reach, and each read would parse the value again.
    # Spark's optimizer keeps a projection whose result is read more than once and costly to compute. One
    # projection for both parses: ``from_json`` has no generated code of its own, so a projection holding it is
    # left out of Spark's whole-stage programs and generates its code again in every task; and the typed parse,
    # read again by the strict parse's condition, is computed once there (Spark's subexpression elimination).
    # Whether the message is text is a column of it too, read by every field below.
    parses = [is_text.alias(_IS_TEXT)]
    plain = None
    if typed is not None:  # the typed parse first; the strict one only for the messages it cannot vouch for
        plain = _typed_is_strict(typed, list(numbers))
        parses += [typed.alias(_TYPED), plain.alias(_PLAIN)]
        parsed = F.when(~plain, parsed)
        plain = F.col(_PLAIN)
    raw = raw.select("*", *parses, parsed.alias(_PARSED))
    is_text = F.col(_IS_TEXT)
    sources = {
        "kafka_key": F.when(is_text, message_text("key", encoding)),
        "kafka_topic": F.col("topic"),
        "kafka_partition": F.col("partition"),
        "kafka_offset": F.col("offset"),
        "kafka_timestamp": F.col("timestamp"),
    }
    meta = [sources[name].alias(name, metadata={MESSAGE_METADATA: True}) for name, _ in KAFKA_COLUMNS]
    # An empty value (NULL, a tombstone; or zero bytes, or only blanks) has nothing to read: not_json, as the docs say.
    empty = F.col("value").isNull() | ~text.rlike(r"\S")  # the regex stops at the first character not blank
    bytes_kept = F.concat(F.lit(BASE64_PREFIX), F.coalesce(F.base64(F.col("value")), F.lit("")))
    not_text = F.concat(F.lit(bytearray(NOT_UTF8_MARK)), bytes_kept.cast("binary")).cast("string")
    values, unread = _read_fields(F.col(_PARSED), fields, numbers, text, is_text, empty, not_text)
    if plain is not None:  # the typed parse's fields as they are, with no stray number (its numbers are numbers)
        # a value the typed parse read as a struct is not blank: no regular expression over it
        blank = F.col(_TYPED).isNull() & empty
        fast, fast_unread = _read_fields(F.col(_TYPED), fields, {}, text, is_text, blank, not_text)
        values = [F.when(plain, a).otherwise(b) for a, b in zip(fast, values, strict=True)]
        unread = F.when(plain, fast_unread).otherwise(unread)
    values = [value.alias(f.name) for value, f in zip(values, fields, strict=True)]
    df = raw.select(*values, *meta, unread.alias(CORRUPT_RECORD))
    if format == "csv":  # a line with the wrong number of fields: no value can be trusted to its column
        df = blank_misshapen_csv_lines(
            df.select(
                *[F.col(quote(f.name)) for f in fields],
                F.col(CORRUPT_RECORD),
                *[F.col(name) for name, _ in KAFKA_COLUMNS],
            )
        )
        df = df.select(
            *[F.col(quote(f.name)) for f in fields], *[F.col(name) for name, _ in KAFKA_COLUMNS], F.col(CORRUPT_RECORD)
        )
    return df


def _typed_is_strict(typed: Column, floating: Sequence[str]) -> Column:
    """True for a message whose typed parse (``from_json`` with the schema's own DOUBLE and FLOAT columns) is what
    the strict parse (those columns as VARIANT, ``files.strict_json_numbers``) gives: read whole, and each
    floating column NULL or a finite number. Spark's typed parse takes only one kind of JSON string in such a
    column, a name of NaN or of an infinity (``"NaN"``, ``"-Infinity"``, ``"+INF"``...), which the strict parse
    calls a stray string; any other string, an object or an array makes it put the message in its corrupt
    record. So a finite value came from a JSON number, which both parses read as the same double (but for the
    sign of a zero, which the strict read loses: zeros are read strictly too)."""
    from pyspark.sql import functions as F

    # NaN, an infinity and zero: a strict read (zero: its VARIANT keeps no sign, so "-0.0" reads as 0.0)
    finite = [
        typed[name].isNull() | (~F.isnan(typed[name]) & F.abs(typed[name]).between(_TINIEST, _LARGEST))
        for name in floating
    ]
    return typed.isNull() | (typed[CORRUPT_RECORD].isNull() & reduce(lambda a, b: a & b, finite))


def _read_fields(
    parsed: Column,
    fields: Sequence[Any],
    numbers: Mapping[str, str],
    text: Column,
    is_text: Column,
    empty: Column,
    not_text: Column,
) -> tuple[list[Column], Column]:
    """Each field of the ``parsed`` struct (its ``numbers`` VARIANT columns checked, ``files.json_value``), NULL
    unless the message is text; and what of the message is unread (the corrupt record)."""
    from pyspark.sql import functions as F

    values, strays = [], []
    for f in fields:
        value = parsed[f.name]
        if f.name in numbers:
            value, stray = json_value(value, numbers[f.name])
            strays.append(stray)
        values.append(F.when(is_text, value))
    stray_text = [F.when(reduce(lambda a, b: a | b, strays), text)] if strays else []
    unread = F.coalesce(
        F.when(~is_text, not_text), parsed[CORRUPT_RECORD], F.when(empty, F.coalesce(text, F.lit(""))), *stray_text
    )
    return values, unread


def kafka_location() -> Column:
    """Where a bad row came from, for the dead letter's ``_cep_file``: ``TOPIC-PARTITION@OFFSET``
    (Kafka's own name of a partition, then the offset), e.g. ``ticks-3@1042``."""
    from pyspark.sql import functions as F

    return F.concat(
        F.col("kafka_topic"),
        F.lit("-"),
        F.col("kafka_partition").cast("string"),
        F.lit("@"),
        F.col("kafka_offset").cast("string"),
    )
