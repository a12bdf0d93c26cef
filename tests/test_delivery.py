"""Delivery as the on-call team gets it: each alerting tool's own payload, headers and signatures, one
lane per sink, dead letters redelivered by themselves. No Spark here: the lanes are fed the way the
stream's delivery query feeds them (``DeliveryLanes.spool``), against a real HTTP receiver
(tests/test_sinks.py's ``Receiver``) and a real SQLite file.

Each payload is checked against a JSON Schema written from the receiving tool's documentation
(tests/schemas/, each names its source), with ``jsonschema``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest

from cep.spark_bridge.alerting.status import StatusBook
from cep.spark_bridge.sinks import lanes as lanes_mod
from cep.spark_bridge.sinks.fanout import make_sink
from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal
from cep.spark_bridge.sinks.payloads import BodyFormat, RuleNotes
from cep.spark_bridge.sinks.sql import SQLiteSink
from tests.test_sinks import Receiver, alert, receiver_factory  # noqa: F401 - the fixture

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "tests" / "schemas"
NOTES = {"fraud/card_testing": RuleNotes("critical", "Card {{ card }} tested {{ smalls }} times, then {{ big }}")}


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def notes(rule_id: str, version: str) -> RuleNotes:
    return NOTES.get(rule_id, RuleNotes())


def hook(url: str, tmp_path: Path, **options):
    options = {"timeout": 2.0, "max_attempts": 2, "backoff": 0.01, "max_backoff": 0.02, **options}
    return make_sink("webhook", url, dead_letter_dir=str(tmp_path / "dead"), rule_notes=notes, **options)


def until(predicate, seconds: float = 20.0, what: str = "a condition") -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)  # polling a condition, with a deadline


# ----------------------------------------------------------------------------- formats


FORMATS = {
    "json": ("cep-webhook-json", {}),
    "pagerduty": ("pagerduty-events-v2-trigger", {"routing_key": "R0UTINGKEY0123456789abcdef012345"}),
    "slack": ("slack-incoming-webhook", {}),
    "alertmanager": ("alertmanager-postable-alerts", {}),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_is_what_the_receiving_tool_documents(name, receiver_factory, tmp_path):
    schema_name, options = FORMATS[name]
    receiver = receiver_factory()
    batch = 1 if name == "pagerduty" else 3
    sink = hook(receiver.url, tmp_path, body_format=BodyFormat(name, **options), batch_size=batch)
    hostile = {
        **alert(7),
        "measures": json.dumps({"card": "<!channel> & <@U123>", "smalls": 3, "big": 900.5}),
        "partition_key": json.dumps({"card": "<!channel>"}),
    }
    alerts = [alert(1), alert(2, rule="other/rule"), hostile]
    report = sink.deliver(alerts, batch_id=4)
    assert sum(report.delivered.values()) == 3 and not report.dead_lettered
    bodies = [json.loads(raw) for _, raw in receiver.raw]
    assert len(bodies) == (3 if name == "pagerduty" else 1)
    for body in bodies:
        jsonschema.validate(body, schema(schema_name))
    text = json.dumps(bodies)
    if name == "pagerduty":
        by_key = {b["dedup_key"]: b for b in bodies}
        assert sorted(by_key) == sorted(a["match_id"] for a in alerts)  # PagerDuty folds a repeat into one alert
        first = by_key[alert(1)["match_id"]]
        assert first["routing_key"] == options["routing_key"] and first["event_action"] == "trigger"
        assert (
            first["payload"]["severity"] == "critical"
            and first["payload"]["summary"] == "Card c1 tested 3 times, then 900.5"
        )
        assert first["payload"]["source"] == "card=c1" and first["payload"]["component"] == "fraud/card_testing"
        assert by_key[alert(2)["match_id"]]["payload"]["severity"] == "warning"  # no -- severity: the default
    elif name == "slack":
        assert "<!channel>" not in text and "&lt;!channel&gt; &amp; &lt;@U123&gt;" in text  # no one is pinged
        assert "[CRITICAL] Card c1 tested 3 times, then 900.5" in bodies[0]["text"]
    elif name == "alertmanager":
        labels = {a["labels"]["match_id"]: a["labels"] for a in bodies[0]}
        assert labels[alert(1)["match_id"]] == {
            "alertname": "fraud/card_testing",
            "severity": "critical",
            "match_id": alert(1)["match_id"],
            "source": "cep",
            "card": "c1",
        }
        assert all(a["endsAt"] > a["startsAt"] for a in bodies[0])
    else:
        assert {a["summary"] for a in bodies[0]["alerts"]} >= {
            "Card c1 tested 3 times, then 900.5",
            "other/rule: MATCHED card=c2",
        }


def test_a_template_writes_every_expression_as_json_so_data_cannot_break_the_body(receiver_factory, tmp_path):
    receiver = receiver_factory()
    template = (
        '{"text": {{ "Rule " ~ alert.rule_id ~ " on " ~ alert.measures.card }}, "n": {{ alert.measures.smalls }}, '
        '"keys": {{ alerts | map(attribute="match_id") | list }}}'
    )
    sink = hook(receiver.url, tmp_path, body_format=BodyFormat("template", template=template))
    quoting = {**alert(1), "measures": json.dumps({"card": 'c1", "admin": true, "x": "', "smalls": 3})}
    assert sum(sink.deliver([quoting], batch_id=0).delivered.values()) == 1
    body = json.loads(receiver.raw[0][1])
    assert body == {
        "text": 'Rule fraud/card_testing on c1", "admin": true, "x": "',
        "n": 3,
        "keys": [alert(1)["match_id"]],
    }
    with pytest.raises(ValueError, match="does not compile"):
        BodyFormat("template", template='{"a": {{ alert.rule_id }')
    with pytest.raises(ValueError, match="__class__|unsafe|attribute"):  # the sandbox: no Python internals
        BodyFormat("template", template='{"a": {{ alert.__class__.__mro__ }}}').body([{"rule_id": "r"}])
    broken = hook(receiver.url, tmp_path, body_format=BodyFormat("template", template='{"a": {{ alert.rule_id }}'))
    report = broken.deliver([alert(2)], batch_id=1)  # renders, but not JSON: refused, kept, never sent half-made
    assert sum(report.dead_lettered.values()) == 1 and len(receiver.raw) == 1
    (letter,) = broken.dead_letters.letters()
    assert letter.refused and "not JSON" in letter.error


# ----------------------------------------------------------------------------- headers and signatures


def test_headers_come_from_the_environment_and_are_never_written(receiver_factory, tmp_path, monkeypatch):
    from cep.stream_cli import parse_headers

    monkeypatch.setenv("CEP_TEST_TOKEN", "tok-3f9a1c")
    headers = parse_headers(["Authorization: Bearer $CEP_TEST_TOKEN", "X-Team: fraud"])
    receiver = receiver_factory(["400"])
    sink = hook(receiver.url, tmp_path, headers=headers)
    sink.deliver([alert(1), alert(2)], batch_id=0)  # one refused (a 400): a dead letter
    seen = [h for h, _ in receiver.raw]
    assert {h["Authorization"] for h in seen} == {"Bearer tok-3f9a1c"} and {h["X-Team"] for h in seen} == {"fraud"}
    written = "".join(p.read_text() for p in (tmp_path / "dead").rglob("*.json"))
    assert written and "tok-3f9a1c" not in written and "tok-3f9a1c" not in sink.describe()
    monkeypatch.delenv("CEP_TEST_TOKEN")
    with pytest.raises(ValueError) as missing:
        parse_headers(["Authorization: Bearer ${CEP_TEST_TOKEN}"])
    assert "CEP_TEST_TOKEN is not set" in str(missing.value)
    with pytest.raises(ValueError, match="line break"):
        parse_headers(["X-Evil: a\r\nHost: elsewhere"])


def signature_snippet() -> dict:
    """The verification code of docs/alerting.md, run as a receiver would run it."""
    text = (ROOT / "docs" / "alerting.md").read_text(encoding="utf-8")
    section = text[text.index("### Verifying a signature") :]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/alerting.md", "exec"), namespace)  # the documentation's own snippet
    return namespace


def test_requests_are_signed_and_the_documented_snippet_verifies_them(receiver_factory, tmp_path):
    verify = signature_snippet()["verify"]
    receiver = receiver_factory(["500"])
    sink = hook(receiver.url, tmp_path, secret="whsec-7d1e")
    sink.deliver([alert(1), alert(2)], batch_id=0)  # a retry is signed again
    assert len(receiver.raw) == 3
    for headers, raw in receiver.raw:
        header = headers["X-Cep-Signature"]
        assert re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", header)
        assert verify(b"whsec-7d1e", raw, header)
        assert not verify(b"whsec-7d1e", raw.replace(b"c1", b"c9").replace(b"c2", b"c9"), header)  # tampered
        assert not verify(b"another", raw, header)
        stamp = int(header.split(",")[0][2:])
        assert not verify(b"whsec-7d1e", raw, header.replace(f"t={stamp}", f"t={stamp - 3600}"))  # replayed later


# ----------------------------------------------------------------------------- lanes


@pytest.fixture()
def quick_lanes(monkeypatch):
    monkeypatch.setattr(lanes_mod, "FAILURE_BACKOFF_S", 0.05)
    monkeypatch.setattr(lanes_mod, "FAILURE_BACKOFF_MAX_S", 0.2)
    monkeypatch.setattr(lanes_mod, "IDLE_WAIT_S", 0.05)
    started: list[DeliveryLanes] = []

    def make(sinks, tmp_path: Path) -> DeliveryLanes:
        lanes = DeliveryLanes(sinks, str(tmp_path / "outbox"), Journal(str(tmp_path / "journal")))
        started.append(lanes.start())
        return lanes

    yield make
    for lanes in started:
        lanes.stop(5)


def fold(lanes: DeliveryLanes, book: StatusBook) -> None:
    for name, record in lanes.journal.pending():
        if lanes.settled(record):
            book.fold(name, record)
            lanes.journal.remove(name)


@pytest.mark.parametrize("recovery", ["a new alert goes through", "a probe goes through"])
def test_an_outage_then_recovery_redelivers_the_dead_letters_by_themselves_each_once(
    recovery, receiver_factory, quick_lanes, tmp_path
):
    down = receiver_factory()
    port = down.port
    down.stop()  # the receiver is down: connection refused
    sink = hook(f"http://127.0.0.1:{port}/hook", tmp_path)
    sink.dead_letters.first_wait = 0.2 if recovery == "a probe goes through" else 3600.0
    lanes = quick_lanes([sink], tmp_path)
    lanes.spool(0, [alert(i) for i in range(3)])
    lanes.spool(1, [alert(i) for i in range(3, 5)])
    until(lambda: sink.dead_letters.counts()[0] == 5, what="five dead letters")
    up = receiver_factory(port=port)  # back
    if recovery == "a new alert goes through":
        lanes.spool(2, [alert(5)])
    until(lambda: sink.dead_letters.counts()[0] == 0, what="the dead letters redelivered")
    expected = 6 if recovery == "a new alert goes through" else 5
    assert len(up.processed) == expected
    assert all(n == 1 for n in Counter(k for k, a in up.requests if a == "ok").values())
    book = StatusBook(str(tmp_path / "status.json"))
    until(
        lambda: (fold(lanes, book), book.status["sinks"].get(sink.key(), {}).get("delivered", 0) == expected)[1],
        what="the journal folded",
    )
    entry = book.status["sinks"][sink.key()]
    assert entry["redelivered"] == 5 and entry["dead_lettered"] == 5 and not lanes.journal.pending()
    fold(lanes, book)  # nothing is counted twice
    assert book.status["sinks"][sink.key()]["delivered"] == expected


def test_a_slow_webhook_never_holds_back_sqlite(receiver_factory, quick_lanes, tmp_path):
    receiver = receiver_factory(["hold"] * 100)  # every request waits until the test lets it go
    sink = hook(receiver.url, tmp_path, timeout=60.0)
    database = tmp_path / "alerts.db"
    lanes = quick_lanes([sink, SQLiteSink(str(database))], tmp_path)
    for batch in range(4):
        lanes.spool(batch, [alert(batch * 10 + i) for i in range(3)])

    def in_sqlite() -> int:
        if not database.exists():
            return 0
        with sqlite3.connect(database) as db:
            try:
                return db.execute("SELECT COUNT(*) FROM alerts").fetchone()[0]
            except sqlite3.OperationalError:
                return 0

    until(lambda: in_sqlite() == 12, what="SQLite to get every micro-batch")
    assert receiver.processed == {} and len(receiver.requests) == 1  # the webhook is still on its first request
    snapshot = lanes.snapshot()[sink.key()]
    assert snapshot["queue_batches"] == 4 and snapshot["queue_alerts"] == 12
    receiver.release.set()
    assert lanes.drain(30) == []
    assert len(receiver.processed) == 12


def test_a_failing_database_keeps_its_micro_batches_in_order_and_the_webhook_goes_on(
    receiver_factory, quick_lanes, tmp_path
):
    from cep.spark_bridge.sinks.base import RetryPolicy

    receiver = receiver_factory()
    database = tmp_path / "alerts.db"
    SQLiteSink(str(database)).deliver([], batch_id=-1)
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    sqlite = SQLiteSink(str(database), timeout=0.01, retry=RetryPolicy(max_attempts=1))
    events: list[str] = []
    lanes = quick_lanes([hook(receiver.url, tmp_path), sqlite], tmp_path)
    lanes.on_event = lambda message, level: events.append(message)
    for batch in range(3):
        lanes.spool(batch, [alert(batch * 10 + i) for i in range(2)])
    until(lambda: len(receiver.processed) == 6, what="the webhook")
    until(lambda: lanes.snapshot()[sqlite.key()]["failures"] >= 2, what="the database lane to retry")
    assert (
        lanes.snapshot()[sqlite.key()]["queue_batches"] == 3
        and "database is locked" in lanes.snapshot()[sqlite.key()]["last_error"]
    )
    assert any("not delivered" in e and "the other sinks go on" in e for e in events)
    holder.rollback()
    until(lambda: not lanes.snapshot()[sqlite.key()]["queue_batches"], what="the database to catch up")
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT batch_id, match_id FROM alerts ORDER BY rowid").fetchall()
    assert [b for b, _ in rows] == [0, 0, 1, 1, 2, 2] and any("delivers again" in e for e in events)


def test_a_micro_batch_recorded_as_delivered_before_a_crash_is_not_sent_again(receiver_factory, tmp_path):
    receiver = receiver_factory()
    sink = hook(receiver.url, tmp_path)
    journal = Journal(str(tmp_path / "journal"))
    lanes = DeliveryLanes([sink], str(tmp_path / "outbox"), journal)
    lanes.outbox.put(sink.key(), 7, [alert(1)])
    lanes.outbox.put(sink.key(), 8, [alert(2)])
    journal.write(
        lanes_mod.delivered_name(sink.key(), 7),
        {"kind": "deliver", "sink": sink.key(), "batch": 7, "delivered": {"fraud/card_testing": 1}},
    )
    lanes.start()
    try:
        assert lanes.drain(20) == []
    finally:
        lanes.stop(5)
    assert list(receiver.processed) == [alert(2)["match_id"]]  # 7 went before the crash; 8 now
    assert lanes.outbox.entries(sink.key()) == []


def test_each_sink_s_outbox_is_written_at_the_same_time_and_one_that_fails_fails_the_micro_batch(tmp_path):
    """``stage`` writes every sink's entry (each its own folder and fsyncs, at the same time): one sink whose
    outbox cannot be written raises its error once the others' entries are written whole, so the micro-batch fails
    before the output's commit and nothing is sealed; run again once the disk is fixed, every sink gets it once."""
    sinks = [SQLiteSink(str(tmp_path / f"db{n}.sqlite")) for n in range(3)]
    journal = Journal(str(tmp_path / "journal"))
    lanes = DeliveryLanes(sinks, str(tmp_path / "outbox"), journal)
    folder = tmp_path / "outbox" / sinks[0].key()
    folder.mkdir(parents=True)
    (folder / ".sealed").write_text("-1")
    broken = folder / "000000000004.2.json"
    broken.mkdir()  # where the first sink's entry goes: a folder, so its write fails
    alerts = [alert(1), alert(2)]
    with pytest.raises(IsADirectoryError):
        lanes.stage(4, alerts)
    for sink in sinks[1:]:
        assert lanes.outbox.has(sink.key(), 4) and lanes.outbox.sealed_through(sink.key()) == -1  # not handed over
        assert [a["match_id"] for a in lanes.outbox.load(sink.key(), 4)] == [a["match_id"] for a in alerts]
    broken.rmdir()
    lanes.seal(lanes.stage(4, alerts))  # the micro-batch run again
    assert {sink.key(): lanes.outbox.entries(sink.key()) for sink in sinks} == {s.key(): [(4, 2)] for s in sinks}
    assert {lanes.outbox.sealed_through(sink.key()) for sink in sinks} == {4}
