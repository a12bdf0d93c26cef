"""What a user types for Kafka, checked without Spark or a broker: ``kafka://`` addresses, the source options
(a typo Spark would ignore is an error here), the alert message the sinks send, and the command line's
answers to Kafka options that do not fit."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep.cli import main
from cep.spark_bridge.sinks.kafka import (
    KafkaExactlyOnceSink,
    SharedMessages,
    alert_message,
    stable_transactional_id,
)
from cep.spark_bridge.spark.kafka import (
    CepKafkaError,
    KafkaAddress,
    parse_kafka_options,
    parse_kafka_url,
    source_options,
)


def test_an_address_names_servers_and_topics():
    address = parse_kafka_url("kafka://broker-1:9093,broker-2/ticks,orders")
    assert address == KafkaAddress(("broker-1:9093", "broker-2:9092"), ("ticks", "orders"))
    assert address.bootstrap == "broker-1:9093,broker-2:9092"
    assert address.subscription() == {"subscribe": "ticks,orders"}
    assert str(address) == "kafka://broker-1:9093,broker-2:9092/ticks,orders"
    assert address.what == "topics 'ticks', 'orders'"


def test_a_topic_part_that_no_topic_name_can_be_is_a_pattern():
    address = parse_kafka_url("kafka://127.0.0.1:9092/ticks-.*")
    assert address.pattern == "ticks-.*" and address.topics == ()
    assert address.subscription() == {"subscribePattern": "ticks-.*"}
    assert parse_kafka_url("kafka://h:1/a%3Fb").pattern == "a?b"  # '?' starts the query string unless escaped
    assert parse_kafka_url("kafka://h/t.v1_x-y").topics == ("t.v1_x-y",)  # '.', '_', '-' are topic characters


def test_query_parameters_are_kept_for_the_sinks():
    address = parse_kafka_url("kafka://h:9093/alerts?security.protocol=SASL_SSL&sasl.mechanism=PLAIN")
    assert address.params == (("security.protocol", "SASL_SSL"), ("sasl.mechanism", "PLAIN"))
    assert address.topics == ("alerts",)


@pytest.mark.parametrize(
    "url, says",
    [
        ("http://h:9092/t", "starts with kafka://"),
        ("kafka:///t", "no bootstrap server"),
        ("kafka://h:port/t", "is not HOST:PORT"),
        ("kafka://h:99999/t", "is not HOST:PORT"),
        ("kafka://h:9092/", "no topic"),
        ("kafka://h:9092/ticks-(", "neither topic names"),
    ],
)
def test_a_bad_address_is_E0492_and_says_what_is_wrong(url, says):
    with pytest.raises(CepKafkaError) as caught:
        parse_kafka_url(url)
    assert caught.value.code == "E0492" and says in str(caught.value)
    assert str(caught.value).startswith(url)  # rendered with the address in front


def test_options_are_spelled_as_spark_spells_them_and_typos_are_refused(tmp_path):
    options = parse_kafka_options(
        ["startingoffsets=latest", "MAXOFFSETSPERTRIGGER=500", "kafka.security.protocol=SASL_SSL"]
    )
    assert options == {
        "startingOffsets": "latest",
        "maxOffsetsPerTrigger": "500",
        "kafka.security.protocol": "SASL_SSL",
    }
    with pytest.raises(CepKafkaError, match="did you mean startingOffsets"):
        parse_kafka_options(["startingOffset=latest"])
    with pytest.raises(CepKafkaError, match="come from the kafka:// address"):
        parse_kafka_options(["kafka.bootstrap.servers=x:1"])
    with pytest.raises(CepKafkaError, match="expected KEY=VALUE"):
        parse_kafka_options(["startingOffsets"])
    secrets = tmp_path / "kafka.properties"
    secrets.write_text("# SASL\nkafka.sasl.mechanism=PLAIN\n\nkafka.sasl.jaas.config=x required;\n")
    assert parse_kafka_options([f"@{secrets}"]) == {
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": "x required;",
    }
    secrets.write_text("kafka.sasl.mechanism=PLAIN\nstartOffsets=1\n")
    with pytest.raises(CepKafkaError, match=r"kafka.properties:2"):
        parse_kafka_options([f"@{secrets}"])


def test_source_options_start_from_the_earliest_offsets_and_a_static_read_ends_at_the_latest():
    address = parse_kafka_url("kafka://h:1/t")
    assert source_options(address, {}, streaming=True) == {
        "kafka.bootstrap.servers": "h:1",
        "subscribe": "t",
        "startingOffsets": "earliest",
    }
    assert source_options(address, {"startingOffsets": "latest"}, streaming=False) == {
        "kafka.bootstrap.servers": "h:1",
        "subscribe": "t",
        "startingOffsets": "latest",
        "endingOffsets": "latest",
    }
    with pytest.raises(CepKafkaError, match="endingOffsets is for a static read"):
        source_options(address, {"endingOffsets": "latest"}, streaming=True)
    with pytest.raises(CepKafkaError, match="topics are in the address"):
        source_options(address, {"subscribePattern": "x.*"}, streaming=True)
    assign = source_options(
        parse_kafka_url("kafka://h:1", topic_required=False), {"assign": '{"t": [0]}'}, streaming=True
    )
    assert assign["assign"] == '{"t": [0]}' and "subscribe" not in assign


ALERT = {
    "rule_id": "fraud/card_testing",
    "rule_version": "0df2709fe840dd75",
    "match_id": "e411026248f15bf144165be79ca99b0f",
    "match_status": "MATCHED",
    "partition_key": '{"card_id": "C003"}',
    "first_event_time": dt.datetime(2024, 3, 4, 13, 23, 7),
    "last_event_time": dt.datetime(2024, 3, 4, 13, 27, 1),
    "measures": '{"card_id": "C003", "tests": 3, "big_amount": 793.3, "merchant": "caf\u00e9"}',
    "emit_time": dt.datetime(2026, 11, 26, 2, 17, 23, 24000),
    "suppressed": False,
}


def test_an_alert_is_one_json_message_keyed_by_its_match_id():
    message = alert_message(ALERT)
    assert message["key"] == b"e411026248f15bf144165be79ca99b0f"
    value = json.loads(message["value"])
    assert value == {
        "rule_id": "fraud/card_testing",
        "rule_version": "0df2709fe840dd75",
        "match_id": "e411026248f15bf144165be79ca99b0f",
        "match_status": "MATCHED",
        "partition_key": {"card_id": "C003"},
        "first_event_time": "2024-03-04T13:23:07Z",
        "last_event_time": "2024-03-04T13:27:01Z",
        "measures": {"card_id": "C003", "tests": 3, "big_amount": 793.3, "merchant": "caf\u00e9"},
        "emit_time": "2026-11-26T02:17:23.024000Z",
        "suppressed": False,
    }
    assert "caf\u00e9".encode() in message["value"]  # UTF-8, not \\u escapes
    assert dict(message["headers"]) == {
        "cep-rule-id": b"fraud/card_testing",
        "cep-rule-version": b"0df2709fe840dd75",
        "cep-match-status": b"MATCHED",
        "content-type": b"application/json",
    }
    assert message["timestamp"] == int(dt.datetime(2026, 11, 26, 2, 17, 23, 24000, tzinfo=dt.UTC).timestamp() * 1000)


def test_a_redelivered_alert_is_byte_identical():
    """The delivery reads the committed alert row again: same row in, same bytes out, whatever the dict order."""
    again = dict(reversed(list(ALERT.items())))
    assert alert_message(again) == alert_message(ALERT)


def test_the_transactional_id_is_made_once_per_checkpoint_and_sink(tmp_path):
    first = stable_transactional_id(str(tmp_path / "sinks"), "kafka-exactly-once://h:1/alerts")
    assert first.startswith("cep-")
    assert stable_transactional_id(str(tmp_path / "sinks"), "kafka-exactly-once://h:1/alerts") == first
    assert stable_transactional_id(str(tmp_path / "sinks"), "kafka-exactly-once://h:1/other") != first
    assert stable_transactional_id(str(tmp_path / "elsewhere"), "kafka-exactly-once://h:1/alerts") != first
    with pytest.raises(ValueError, match="needs a transactional_id or a state_dir"):
        KafkaExactlyOnceSink("kafka-exactly-once://h:1/alerts", check=False)


def test_the_command_line_refuses_kafka_options_that_do_not_fit(tmp_path, capsys):
    query = tmp_path / "q.sql"
    query.write_text("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.x AS x PATTERN (A) DEFINE A AS x > 0)")
    (tmp_path / "in").mkdir()
    ck = str(tmp_path / "ck")
    cases = [
        (
            [
                "stream",
                str(query),
                "--input",
                str(tmp_path / "in"),
                "--checkpoint",
                ck,
                "--kafka-option",
                "startingOffsets=latest",
            ],
            "--kafka-option is for a Kafka input",
        ),
        (
            ["stream", str(query), "--input", "kafka://127.0.0.1:1/t", "--checkpoint", ck, "--format", "parquet"],
            "a Kafka message value is read as json or csv",
        ),
        (
            [
                "stream",
                str(query),
                "--input",
                "kafka://127.0.0.1:1/t",
                "--checkpoint",
                ck,
                "--kafka-option",
                "maxOffsetPerTrigger=5",
            ],
            "did you mean maxOffsetsPerTrigger",
        ),
        (
            [
                "stream",
                str(query),
                "--input",
                "kafka://127.0.0.1:1/t",
                "--checkpoint",
                ck,
                "--sink",
                "kafka://127.0.0.1:1/a",
                "x",
            ],
            "takes no further argument",
        ),
        (["run", str(query), "--input", "kafka://127.0.0.1:1/t", "--input", "kafka://127.0.0.1:1/u"], "is read alone"),
        (["run", str(query), "--input", str(query), "--schema", "x INT"], "cannot tell the format"),
    ]
    for argv, says in cases:
        assert main(argv) == 2, argv
        assert says in capsys.readouterr().err


def test_an_inferred_field_takes_the_type_most_of_its_values_have():
    from cep.spark_bridge.spark.kafka import json_fields

    sample = [
        '{"symbol": "A", "ts": "2024-01-02 09:30:00", "price": 97.5, "n": 3, "tags": ["x"], "ok": true}',
        '{"symbol": "B", "ts": "2024-01-02T09:31:00Z", "price": 98, "n": 4, "extra": null}',
        '{"symbol": "C", "ts": "yesterday", "price": "x", "n": 5}',  # a bad message: outvoted, not widening
        '{"symbol": "D", "ts": "2024-01-02 09:32:00", "price": 99.0, "n": 6}',
        "not json",
        "[1, 2]",
        None,
    ]
    assert [(f.name, f.dataType.simpleString()) for f in json_fields(sample).fields] == [
        ("symbol", "string"),
        ("ts", "timestamp"),
        ("price", "double"),
        ("n", "bigint"),
        ("tags", "string"),
        ("ok", "boolean"),
        ("extra", "string"),
    ]


class _Sink:  # stands for a Kafka sink in the memo's register of sinks (a weak reference)
    pass


_TIMES = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1))
_ALERT_VALUES = {
    "rule_id": st.sampled_from(["r1", "r2"]),
    "rule_version": st.sampled_from(["v1", None]),
    "match_id": st.sampled_from(["m1", "m2", "m3"]),
    "match_status": st.sampled_from(["MATCHED", "TIMEOUT"]),
    "partition_key": st.sampled_from(['{"k": "a"}', '{"k": 1}', "not json"]),
    # naive UTC, or the same instant in a zone of its own: equal instants, the same message
    "first_event_time": st.one_of(_TIMES, _TIMES.map(lambda t: t.replace(tzinfo=dt.UTC)), st.none()),
    "last_event_time": _TIMES,
    "measures": st.sampled_from(['{"x": 1}', '{"x": 1.0}', '{"x": NaN}']),
    "emit_time": st.one_of(_TIMES, st.none()),
    # a flag, or values equal to one that are not: 1 == True, but they are different JSON
    "suppressed": st.sampled_from([False, True, 1, 0, None]),
}


@settings(max_examples=60, deadline=None)
@given(
    alerts=st.lists(st.fixed_dictionaries(_ALERT_VALUES), min_size=1, max_size=40),
    per_generation=st.integers(1, 8),
)
def test_two_kafka_sinks_share_each_alerts_message_and_it_is_the_one_alert_message_makes(alerts, per_generation):
    """The memo of the process's Kafka sinks gives each alert the bytes ``alert_message`` gives it, whether it
    encoded them or the other sink did, across its generations; with two sinks the second gets the first's."""
    memo = SharedMessages(per_generation)
    sinks = [_Sink(), _Sink()]
    memo.sinks.update(sinks)
    for alert in alerts:  # the two lanes, one alert apart
        first = memo.message(alert)
        again = memo.message(dict(alert))
        assert first == again == alert_message(alert)
        if type(alert["suppressed"]) is not int:
            assert again is first or per_generation == 1
    del sinks[1]
    assert memo.message(alerts[0]) == alert_message(alerts[0])  # one sink: encoded each time, nothing kept
    assert memo.message(alerts[0]) is not memo.message(alerts[0])
