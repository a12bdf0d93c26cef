"""Kafka messages whose bytes are not UTF-8, and backtests that give the live stream's match ids, against the
real broker (tests/kafka_broker.py) and a live rule-set stream (``AlertStream``) in the tests' own session.

* ``M\\xfcller`` and ``M\\xe4ller`` (Latin-1 bytes) in a value, and a key that is not UTF-8: decoded with
  U+FFFD they would be one partition key and make a false match. They are ``not_utf8`` bad rows on the
  stream and in ``cep run --rules --input kafka://`` (counted, in the dead letter with their bytes as
  base64); ``--kafka-encoding latin-1`` reads them as two names instead. The expected alerts come from
  Python's own decoding of the same bytes (strict UTF-8, or Latin-1) and ``q.run``.
* ``cep run QUERY --rule-id ID --input kafka://`` (both engines) gives exactly the stream's alert ids for the
  rule ``ID``; without ``--rule-id`` the ids are the statement's own (``Query.on_spark``'s), none of the
  stream's.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time

import pytest

import cep
from cep.cli import main
from cep.spark_bridge.alerting.stream import AlertStream
from cep.spark_bridge.sinks.alerts import jsonable
from cep.spark_bridge.spark.kafka import kafka_location, read_kafka
from tests.kafka_broker import produce
from tests.kafka_tests.test_kafka_stream import committed_records

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

T0 = dt.datetime(2024, 1, 1)
SCHEMA = "name STRING, ts TIMESTAMP, amount DOUBLE"
SESSION = "2 minutes"
# Two events of one name, the second larger: a match. Two names merged into one would match too.
RISE = """SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY name ORDER BY ts
    MEASURES FIRST(A.ts) AS start_ts, LAST(B.amount) AS top
    ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B) DEFINE B AS B.amount > A.amount)"""


def message(name: bytes, seconds: int, amount: float, key: bytes | None = None) -> dict:
    """A message whose value is JSON text holding ``name``'s bytes as they are (no escaping)."""
    ts = (T0 + dt.timedelta(seconds=seconds)).isoformat()
    value = b'{"name": "' + name + b'", "ts": "' + ts.encode() + b'", "amount": ' + str(amount).encode() + b"}"
    return {"key": key if key is not None else name, "value": value}


MESSAGES = [
    message(b"Anna", 0, 1.0),
    message(b"M\xfcller", 5, 1.0),  # Latin-1 bytes: not UTF-8
    message("Zoë".encode(), 7, 4.0),  # UTF-8, as it should be
    message(b"M\xe4ller", 10, 2.0),  # with the one above, one key M\ufffdller would match
    message(b"Anna", 20, 3.0),
    message(b"Bob", 25, 5.0, key=b"B\xf6b"),  # a valid value under a key that is not UTF-8
    message(b"Bob", 30, 2.0),
    message("Zoë".encode(), 40, 9.0),
    message(b"ZZZ", 86_400, 1.0),  # far ahead: the watermark passes everything before it
]


def decoded(encoding: str) -> tuple[list[dict], list[int]]:
    """(the events Python's own decoding reads from MESSAGES, the offsets of the messages it cannot read)."""
    events, unreadable = [], []
    for offset, m in enumerate(MESSAGES):
        try:
            m["key"].decode(encoding)
            row = json.loads(m["value"].decode(encoding))
        except UnicodeDecodeError:
            unreadable.append(offset)
            continue
        events.append({**row, "ts": dt.datetime.fromisoformat(row["ts"])})
    return events, unreadable


def expected_measures(encoding: str) -> list[str]:
    events = decoded(encoding)[0]
    rows = cep.compile(RISE).run(events, session_timeout=SESSION)
    return sorted(json.dumps({k: jsonable(v) for k, v in row.items()}, sort_keys=True) for row in rows)


def replay(args: list[str]) -> int:
    return main(["run", *args, "--session-timeout", SESSION])


@pytest.mark.timeout(1200)
def test_bytes_that_are_not_utf8_are_bad_rows_and_backtests_give_the_stream_s_ids(
    kafka_broker, kafka_topic, spark, tmp_path, capsys
):
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    boot = kafka_broker.bootstrap
    topic = kafka_topic(1)
    url = f"kafka://{boot}/{topic}"
    produce(boot, topic, MESSAGES)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "rise.sql").write_text(RISE, encoding="utf-8")
    expected = expected_measures("utf-8")
    unreadable = decoded("utf-8")[1]
    assert unreadable == [1, 3, 5] and expected != expected_measures("latin-1")  # the oracle tells them apart

    checkpoint = tmp_path / "ck"
    stream = AlertStream(
        spark,
        str(rules),
        read_kafka(spark, url, schema=SCHEMA),
        checkpoint=str(checkpoint),
        watermark="1 minute",
        session_timeout=SESSION,
        trigger="1 second",
        source_location=kafka_location(),
    )
    stream.start()

    def alerts() -> list[dict]:
        written = (checkpoint / "matches" / "_spark_metadata").exists()
        return committed_records(checkpoint / "matches") if written else []

    try:
        deadline = time.monotonic() + 600
        while len(alerts()) < len(expected) or sum(stream.status.get("bad_rows", {}).values()) < len(unreadable):
            stream.check()
            stream.poll()
            assert time.monotonic() < deadline, f"{len(alerts())} of {len(expected)} alerts; {stream.status}"
            time.sleep(0.5)
        stream.process_all_available()
        stream.poll()
    finally:
        stream.stop()
    live = alerts()
    assert sorted(json.dumps(json.loads(a["measures"]), sort_keys=True) for a in live) == expected
    assert not any("\ufffd" in json.dumps(a, ensure_ascii=False) for a in live)
    assert stream.status["bad_rows"] == {"not_utf8": len(unreadable)}
    dead = committed_records(checkpoint / "dead-letter" / "bad-rows")
    assert sorted((r["_cep_error"], r["_cep_error_code"], r["_cep_file"]) for r in dead) == [
        ("not_utf8", "E0447", f"{topic}-0@{offset}") for offset in unreadable
    ]
    by_offset = {int(r["_cep_file"].rsplit("@", 1)[1]): r["_cep_input"] for r in dead}
    assert {o: base64.b64decode(text.removeprefix("base64:")) for o, text in by_offset.items()} == {
        o: MESSAGES[o]["value"] for o in unreadable
    }
    live_ids = sorted(a["match_id"] for a in live)

    # The rule set's backtest: the stream's alerts, ids and bad rows.
    out, dead_letter = tmp_path / "rules.json", tmp_path / "bad.jsonl"
    code = replay(["--rules", str(rules), "--input", url, "--dead-letter", str(dead_letter), "-o", str(out)])
    assert code == 0
    assert sorted(json.loads(line)["match_id"] for line in out.read_text().splitlines()) == live_ids
    bad = [json.loads(line) for line in dead_letter.read_text().splitlines()]
    assert sorted((r["_cep_error"], r["_cep_file"], r["_cep_input"]) for r in bad) == sorted(
        (r["_cep_error"], r["_cep_file"], r["_cep_input"]) for r in dead
    )
    assert "bad rows: 3 (not_utf8 3)" in capsys.readouterr().out

    # One query with the stream's rule id, on both engines: the stream's ids. Without it: the query's own.
    query = rules / "rise.sql"
    for engine in ("python", "spark"):
        out = tmp_path / f"as-rule-{engine}.json"
        args = [str(query), "--input", url, "--engine", engine, "--rule-id", "rise", "-o", str(out)]
        assert replay(args) == 0
        assert sorted(json.loads(line)["match_id"] for line in out.read_text().splitlines()) == live_ids
    out = tmp_path / "own-ids.json"
    assert replay([str(query), "--input", url, "--engine", "python", "--match-ids", "-o", str(out)]) == 0
    own = [json.loads(line)["match_id"] for line in out.read_text().splitlines()]
    assert len(own) == len(live_ids) and not set(own) & set(live_ids)

    # Declared Latin-1: every byte is a character, so nothing is bad and the two names stay two keys.
    out = tmp_path / "latin1.json"
    capsys.readouterr()
    code = replay(["--rules", str(rules), "--input", url, "--kafka-encoding", "latin-1", "-o", str(out)])
    assert code == 0
    assert "bad rows: 0" in capsys.readouterr().out
    found = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((as_object(a["partition_key"])["name"], as_object(a["measures"])["top"]) for a in found) == sorted(
        (row["name"], row["top"]) for row in latin1_matches()
    )


def as_object(value):
    return json.loads(value) if isinstance(value, str) else value


def latin1_matches() -> list[dict]:
    """The matches of RISE over MESSAGES decoded as Latin-1 by Python, with their partition's name."""
    query = RISE.replace("MEASURES", "MEASURES A.name AS name,")
    return cep.compile(query).run(decoded("latin-1")[0], session_timeout=SESSION)


def test_an_encoding_cep_cannot_read_is_refused_before_anything_starts(tmp_path, capsys):
    query = tmp_path / "rise.sql"
    query.write_text(RISE, encoding="utf-8")
    code = main(["run", str(query), "--input", "kafka://127.0.0.1:9/t", "--kafka-encoding", "ebcdic"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--kafka-encoding ebcdic" in err and "utf-8 or latin-1" in err
