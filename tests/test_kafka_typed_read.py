"""cep's Kafka reader reads a message with the schema's own DOUBLE columns first and strictly (numbers as
VARIANT) only when that read cannot vouch for it (``kafka.kafka_events``, ``typed_first``): every column of every
message, bad ones included, must be what the strict read alone gives. No broker: Kafka-shaped rows built here."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.spark

SCHEMA = "symbol STRING, ts TIMESTAMP, price DOUBLE, size DOUBLE"

# Number texts where a typed read and a VARIANT read could part: many digits (a decimal of up to 38 digits in a
# VARIANT, converted to a double), exponents, overflow, integers past 2^53 and past a long, signs, zeros.
NUMBER_TEXTS = [
    "0",
    "-0",
    "-0.0",
    "1",
    "1.5",
    "100.25",
    "9007199254740993",
    "123456789012345678901234567890",
    "1234567890123456789012345678901234567890123",
    "0.1234567890123456789",
    "3.141592653589793238462643383279",
    "1.7976931348623157e308",
    "1e400",
    "-1e400",
    "4.9e-324",
    "1e-400",
    "2.2250738585072011e-308",
    "1E5",
    "1e+5",
    "12345.678901234567",
    "99999999999999999.5",
    "0.30000000000000004",
]
# Values of another kind: the strings Spark's typed read takes in a DOUBLE column and those it refuses, bare
# non-numeric tokens, an escaped NaN, and the other JSON kinds.
OTHER_TEXTS = [
    '"NaN"',
    '"Infinity"',
    '"-Infinity"',
    '"+Infinity"',
    '"INF"',
    '"+INF"',
    '"-INF"',
    '"nan"',
    '"\\u004EaN"',
    '"1.5"',
    '""',
    '"abc"',
    "NaN",
    "Infinity",
    "-Infinity",
    "null",
    "true",
    "[1]",
    '{"a": 1}',
]
WHOLE_MESSAGES = [
    None,
    b"",
    b"   ",
    b"\t\n",
    b"not json",
    b'{"symbol": "A", "ts": "2024-01-01T00:00:',
    b"\xff\xfe not utf-8",
    b'{"symbol": "A\xe9", "ts": "2024-01-01T00:00:00Z", "price": 1}',
    b'{"symbol": "A", "ts": "2024-01-01T00:00:00Z", "price": 1, "price": "NaN"}',
    b'{"symbol": "A", "ts": "2024-01-01T00:00:00Z", "price": "x", "price": 2.5}',
    b'{"symbol": "A", "ts": "2024-01-01T00:00:00Z", "price": 1, "price": 2}',
    b'{"symbol": "A", "ts": "yesterday", "price": 1}',
    b'{"symbol": "A", "ts": null}',
    b"{}",
    b"[]",
    b'{"Price": 3.5, "symbol": "A"}',
    b'{"symbol": "A", "ts": "2024-01-01T00:00:00Z", "price": 1.5, "extra": "NaN"}',
]

number_text = st.sampled_from(NUMBER_TEXTS) | st.floats(allow_nan=False, allow_infinity=False).map(repr)
value_text = number_text | st.sampled_from(OTHER_TEXTS) | st.integers().map(str)


@st.composite
def message(draw) -> bytes | None:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(WHOLE_MESSAGES))
    fields = [f'"symbol": {json.dumps(draw(st.sampled_from(["A", "B", "Ä"])))}']
    if draw(st.booleans()):
        fields.append(f'"ts": "2024-01-01T00:00:0{draw(st.integers(0, 9))}Z"')
    for name in ("price", "size"):
        if draw(st.integers(0, 5)):
            fields.append(f'"{name}": {draw(value_text)}')
    return ("{" + ", ".join(draw(st.permutations(fields))) + "}").encode()


def _read(spark, values: list[bytes | None], typed_first: bool) -> list[tuple]:
    from pyspark.sql import functions as F

    from cep.spark_bridge.spark.kafka import kafka_events, value_schema

    raw = spark.createDataFrame([(None, v, i) for i, v in enumerate(values)], "key BINARY, value BINARY, n LONG")
    raw = raw.select(
        "key",
        "value",
        F.lit("ticks").alias("topic"),
        F.lit(0).alias("partition"),
        F.col("n").alias("offset"),
        F.lit(None).cast("timestamp").alias("timestamp"),
    )
    events = kafka_events(raw, value_schema(SCHEMA), typed_first=typed_first)
    return sorted((tuple(_same(v) for v in row) for row in events.collect()), key=lambda row: row[-3])


def _same(value):
    """NaN equal to NaN, and -0.0 told from 0.0: a value compared as its exact double."""
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else (value, math.copysign(1.0, value))
    return value


def test_every_edge_case_reads_as_the_strict_read_alone(spark):
    values = list(WHOLE_MESSAGES)
    for text in NUMBER_TEXTS + OTHER_TEXTS:
        values.append(f'{{"symbol": "A", "ts": "2024-01-01T00:00:00Z", "price": {text}, "size": 1}}'.encode())
        values.append(f'{{"size": {text}, "price": {text}}}'.encode())
    typed, strict = _read(spark, values, True), _read(spark, values, False)
    assert typed == strict
    # the cases the strict read sets apart are still set apart: a quoted NaN is a stray string, not a number
    by_offset = {row[-3]: row for row in strict}
    quoted_nan = values.index(b'{"symbol": "A", "ts": "2024-01-01T00:00:00Z", "price": "NaN", "size": 1}')
    assert by_offset[quoted_nan][2] is None and by_offset[quoted_nan][-1] is not None


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(message(), min_size=1, max_size=150))
def test_generated_messages_read_as_the_strict_read_alone(spark, values):
    assert _read(spark, values, True) == _read(spark, values, False)
