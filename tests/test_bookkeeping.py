"""Bookkeeping that survives damage: a dead letter, an outbox entry, a journal record or ``status.json``
that cannot be read (a disk that filled, a copy cut short, a hand edit) is named in a message, set aside as
``<name>.damaged`` (never deleted), and the counts go on from what is intact. What a damaged file held
counts as not delivered: the intact alerts in it are delivered, never silently dropped.

No Spark: the lanes are fed as the stream's delivery query feeds them, against a real HTTP receiver
(tests/test_sinks.py's ``Receiver``) and a real SQLite file; the journal is folded as the stream folds it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cep.spark_bridge.alerting.status import StatusBook, read_status
from cep.spark_bridge.sinks import lanes as lanes_mod
from cep.spark_bridge.sinks.base import atomic_write, intact_items
from cep.spark_bridge.sinks.dead_letters import DeadLetterBox
from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal
from cep.spark_bridge.sinks.sql import SQLiteSink
from tests.test_delivery import fold, hook, until
from tests.test_sinks import alert, receiver_factory  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[1]


def truncate(path: Path, keep: float) -> None:
    """Cut ``path`` short, as a full disk or an interrupted copy leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def payload(i: int) -> dict:
    """An alert as a dead letter keeps it: JSON values."""
    return json.loads(json.dumps(alert(i), default=str))


def cep(*args: str) -> subprocess.CompletedProcess:
    """The ``cep`` command as its user runs it, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from cep.cli import main; sys.exit(main(sys.argv[1:]))", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def quick(monkeypatch) -> None:
    monkeypatch.setattr(lanes_mod, "FAILURE_BACKOFF_S", 0.05)
    monkeypatch.setattr(lanes_mod, "FAILURE_BACKOFF_MAX_S", 0.2)
    monkeypatch.setattr(lanes_mod, "IDLE_WAIT_S", 0.05)


# ---------------------------------------------------------------------------------- the salvage itself


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=8)), max_size=4), max_size=6
    ),
    st.floats(0.0, 1.0),
)
def test_a_cut_short_list_gives_back_exactly_its_whole_items(items, keep):
    text = json.dumps({"batch_id": 3, "alerts": items}, ensure_ascii=False)
    cut = text[: int(len(text) * keep)]
    found = intact_items(cut, "alerts")
    # Independent source: an item is whole when its own text ends inside the cut.
    whole, at = [], cut.find("[")
    for item in items:
        piece = json.dumps(item, ensure_ascii=False)
        at = text.find(piece, at + 1 if whole else at)
        if at < 0 or at + len(piece) > len(cut):
            break
        whole.append(item)
        at += len(piece) - 1
    assert found == whole


# ---------------------------------------------------------------------------------- dead letters


def test_a_truncated_dead_letter_is_set_aside_named_and_its_whole_alerts_redelivered(
    receiver_factory, monkeypatch, tmp_path
):
    quick(monkeypatch)
    down = receiver_factory()
    port = down.port
    down.stop()
    sink = hook(f"http://127.0.0.1:{port}/hook", tmp_path, batch_size=3)
    sink.dead_letters.first_wait = 0.2
    events: list[str] = []
    lanes = DeliveryLanes(
        [sink],
        str(tmp_path / "outbox"),
        Journal(str(tmp_path / "journal")),
        on_event=lambda message, level: events.append(message),
    )
    for batch in range(4):
        lanes.outbox.put(sink.key(), batch, [alert(batch * 10 + i) for i in range(3)])
    lanes.start()
    try:
        until(lambda: sink.dead_letters.counts() == (4, 0, 12), what="four dead letters of 3 alerts")
        lanes.stop(5)
        letters = sorted(Path(sink.dead_letters.directory).glob("*.json"))
        victim = letters[-1]
        text = victim.read_text()
        cut = [i for i in range(len(text)) if text.startswith('"match_id"', i)][1] + 5  # inside the second alert
        victim.write_text(text[:cut])  # the letter now holds one whole alert of its three

        up = receiver_factory(port=port)
        lanes = DeliveryLanes(
            [sink],
            str(tmp_path / "outbox"),
            Journal(str(tmp_path / "journal")),
            on_event=lambda message, level: events.append(message),
        ).start()
        until(lambda: sink.dead_letters.counts()[0] == 0, what="the dead letters redelivered")
    finally:
        lanes.stop(5)
    damaged = list(Path(sink.dead_letters.directory).glob("*.damaged"))
    assert [p.name for p in damaged] == [victim.name + ".damaged"] and damaged[0].read_text() == text[:cut]
    assert any(str(victim) in e and "damaged" in e and "1 readable alert" in e for e in events)
    delivered = Counter(a["match_id"] for _, body in up.processed.items() for a in body.get("alerts", [body]))
    assert sum(delivered.values()) == 10 and set(delivered.values()) == {1}  # 9 whole letters' alerts + the 1 intact
    book = StatusBook(str(tmp_path / "status.json"))
    fold(lanes, book)
    entry = book.status["sinks"][sink.key()]
    assert entry["redelivered"] == 10
    assert lanes.snapshot()[sink.key()]["damaged_files"] == [str(damaged[0])]


def test_cep_deliver_lists_and_sends_a_truncated_letter_and_names_it(receiver_factory, tmp_path):
    receiver = receiver_factory()
    checkpoint = tmp_path / "ck"
    sink = hook(receiver.url, checkpoint, batch_size=2)
    box = sink.dead_letters
    for n in range(4):
        box.put(f"batch-{n}", [payload(n * 2), payload(n * 2 + 1)], ["HTTP 503"], batch_id=n)
    victim = Path(box.directory) / "batch-3.json"
    truncate(victim, 0.6)
    listed = cep("deliver", "--checkpoint", str(checkpoint), "--dead-letter", str(checkpoint / "dead"))
    assert listed.returncode == 0, listed.stderr
    assert f"{victim}.damaged" in listed.stdout and str(victim) in listed.stderr and "damaged" in listed.stderr
    assert "4 dead letter(s)" in listed.stdout
    sent = cep(
        "deliver",
        "--checkpoint",
        str(checkpoint),
        "--dead-letter",
        str(checkpoint / "dead"),
        "--sink",
        "webhook",
        receiver.url,
    )
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "4 dead letter(s) delivered" in sent.stdout
    delivered = [a["match_id"] for body in receiver.processed.values() for a in body["alerts"]]
    assert len(delivered) in (7, 8) and len(set(delivered)) == len(delivered)
    assert set(delivered) >= {alert(i)["match_id"] for i in range(6)}


# ---------------------------------------------------------------------------------- the outbox


def test_a_truncated_outbox_entry_is_named_set_aside_and_the_sink_goes_on(monkeypatch, tmp_path):
    quick(monkeypatch)
    database = tmp_path / "alerts.db"
    sqlite = SQLiteSink(str(database))
    events: list[str] = []
    lanes = DeliveryLanes(
        [sqlite],
        str(tmp_path / "outbox"),
        Journal(str(tmp_path / "journal")),
        on_event=lambda message, level: events.append(message),
    )
    for batch in range(3):
        lanes.outbox.put(sqlite.key(), batch, [alert(batch * 10 + i) for i in range(4)])
    entry = next(Path(lanes.outbox.directory, sqlite.key()).glob("000000000001.*.json"))
    text = entry.read_text()
    cut = text[: [i for i in range(len(text)) if text.startswith('"match_id"', i)][2] + 3]  # in the third alert
    entry.write_text(cut)
    lanes.start()
    try:
        assert lanes.drain(30) == []
    finally:
        lanes.stop(5)
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT batch_id FROM alerts ORDER BY rowid").fetchall()
    assert [b for (b,) in rows] == [0] * 4 + [1] * 2 + [2] * 4  # the two whole alerts of batch 1 went
    assert (entry.parent / (entry.name + ".damaged")).read_text() == cut and not entry.exists()
    assert any(str(entry) in e and "set aside" in e and "2 could not be read" in e for e in events)
    assert not any("not delivered" in e for e in events)  # never FAILING behind a file it cannot read
    assert lanes.snapshot()[sqlite.key()]["damaged_files"] == [str(entry) + ".damaged"]


# ---------------------------------------------------------------------------------- the journal


def test_a_damaged_delivery_record_counts_as_not_delivered_and_is_sent_again(receiver_factory, tmp_path):
    receiver = receiver_factory()
    sink = hook(receiver.url, tmp_path)
    events: list[str] = []
    journal = Journal(str(tmp_path / "journal"), on_damage=lambda message, path: events.append(message))
    lanes = DeliveryLanes([sink], str(tmp_path / "outbox"), journal)
    lanes.outbox.put(sink.key(), 7, [alert(1), alert(2)])
    name = lanes_mod.delivered_name(sink.key(), 7)
    journal.write(name, {"kind": "deliver", "sink": sink.key(), "batch": 7, "delivered": {"fraud/card_testing": 2}})
    truncate(Path(journal.directory) / f"{name}.json", 0.5)  # a crash (or a bad disk) cut the record short
    lanes.start()
    try:
        assert lanes.drain(20) == []
    finally:
        lanes.stop(5)
    assert sorted(receiver.processed) != [] and len(receiver.processed) == 2  # sent again: idempotent by match_id
    book = StatusBook(str(tmp_path / "status.json"))
    fold(lanes, book)
    assert book.status["sinks"][sink.key()]["delivered"] == 2
    assert (Path(journal.directory) / f"{name}.json.damaged").exists()
    assert any(f"{name}.json" in e and "set aside" in e for e in events)


# ---------------------------------------------------------------------------------- status.json


def test_a_damaged_status_file_is_set_aside_and_the_counts_come_from_its_backup(tmp_path):
    path = tmp_path / "status.json"
    book = StatusBook(str(path))
    book.fold(
        "batch.000000000000",
        {
            "kind": "batch",
            "batch": 0,
            "time": "2024-01-01T00:00:00Z",
            "bad_rows": {"not_json": 3},
            "late_rows": 2,
            "calls": [],
        },
    )
    book.fold(
        "deliver.s.000000000000",
        {"kind": "deliver", "sink": "s", "label": "sqlite x", "delivered": {"r": 5}, "dead_lettered": {}, "retries": 0},
    )
    book.write()
    truncate(path, 0.5)
    assert "damaged" in read_status(str(tmp_path))["damaged_status"]  # cep status reads the backup meanwhile
    again = StatusBook(str(path))
    assert again.status["sinks"]["s"]["delivered"] == 5 and again.status["bad_rows"] == {"not_json": 3}
    assert again.status["late_rows"] == 2 and again.folded("deliver.s.000000000000")
    assert (tmp_path / "status.json.damaged").exists()
    messages = [d["message"] for d in again.status["damaged"]]
    assert any(str(path) in m and "set aside" in m for m in messages)
    assert any("rebuilt from" in m and "status.backup.json" in m for m in messages)


def test_both_status_copies_damaged_start_from_zero_and_say_so(tmp_path):
    path = tmp_path / "status.json"
    book = StatusBook(str(path))
    book.fold("deliver.s.000000000001", {"kind": "deliver", "sink": "s", "delivered": {"r": 5}})
    book.write()
    truncate(path, 0.3)
    truncate(tmp_path / "status.backup.json", 0.7)
    again = StatusBook(str(path))
    assert again.status["sinks"] == {}
    assert any("starts again from 0" in d["message"] for d in again.status["damaged"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.backup.json.damaged", "status.json.damaged"]


def test_cep_status_names_a_damaged_status_file_and_reads_its_backup(tmp_path):
    book = StatusBook(str(tmp_path / "status.json"))
    book.status["state"] = "stopped"
    book.fold("deliver.s.000000000001", {"kind": "deliver", "sink": "s", "label": "sqlite x", "delivered": {"r": 5}})
    book.write()
    truncate(tmp_path / "status.json", 0.4)
    shown = cep("status", "--checkpoint", str(tmp_path))
    assert shown.returncode == 3, shown.stdout + shown.stderr  # stopped, read from the backup
    assert "STATUS FILE DAMAGED" in shown.stdout and "delivered 5" in shown.stdout


def test_bookkeeping_files_are_private_to_the_streams_user(tmp_path):
    atomic_write(str(tmp_path / "x.json"), "{}")
    assert os.stat(tmp_path / "x.json").st_mode & 0o777 == 0o600
    box = DeadLetterBox(str(tmp_path / "dead"))
    letter = box.put("k", [payload(1)], ["HTTP 500"], batch_id=1)
    assert os.stat(letter.path).st_mode & 0o777 == 0o600
