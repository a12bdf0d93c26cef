"""Alert sinks: a webhook against a real local HTTP server that fails on purpose, SQLite and PostgreSQL
upserts, the console line. No Spark here (the Spark file sink is exercised in test_alerting.py).

The webhook server is a ``ThreadingHTTPServer`` on 127.0.0.1 in a thread of the test. Like a real
receiver, it processes each ``Idempotency-Key`` once and answers 200 to a repeat without processing it
again. Its ``plan`` lists what it does with the first requests: "500", "timeout" (holds the request past
the client's timeout, then processes it), "400"; after the plan, it accepts. Stopping it makes the next
requests fail with "connection refused". The only sleeps are the sink's own backoffs, a few ms here.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep.spark_bridge.sinks import base as sink_base
from cep.spark_bridge.sinks.alerts import ALERT_NAMES, alert_payload, iso_utc, jsonable
from cep.spark_bridge.sinks.base import CepSinkError, RetryPolicy
from cep.spark_bridge.sinks.console import ConsoleSink
from cep.spark_bridge.sinks.fanout import deliver_batch, make_sink
from cep.spark_bridge.sinks.sql import PostgresSink, SQLiteSink
from cep.spark_bridge.sinks.webhook import WebhookSink

T0 = dt.datetime(2024, 1, 1, 9, 30)


def alert(
    i: int, *, rule: str = "fraud/card_testing", suppressed: bool = False, emitted: dt.datetime | None = None
) -> dict:
    return {
        "rule_id": rule,
        "rule_version": "3a10c574d2458489",
        "match_id": f"{i:032x}",
        "match_status": "MATCHED",
        "partition_key": json.dumps({"card": f"c{i}"}),
        "first_event_time": T0 + dt.timedelta(seconds=i),
        "last_event_time": T0 + dt.timedelta(seconds=i + 5),
        "measures": json.dumps({"card": f"c{i}", "smalls": 3, "big": 900.5}),
        "emit_time": emitted or dt.datetime(2024, 1, 1, 10, 0),
        "suppressed": suppressed,
    }


# ---------------------------------------------------------------------------------- the test server


class Receiver:
    """A webhook receiver on 127.0.0.1 that fails the first requests as ``plan`` says.

    Actions: "ok", "500", "400", "429", "timeout" (held past the client's timeout, then processed),
    "hold" (held until ``release`` is set, then processed and answered 200), "302 URL" (a redirect to URL).
    ``requests`` lists (idempotency key, action); ``raw`` every request as (headers, body bytes)."""

    def __init__(self, plan=(), port: int = 0) -> None:
        self.plan = list(plan)
        self.requests: list[tuple[str, str]] = []  # (idempotency key, what was done)
        self.processed: dict[str, dict] = {}  # key -> body, once per key
        self.raw: list[tuple[dict, bytes]] = []
        self.release = threading.Event()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802 - a client that followed a redirect would come here
                with receiver.lock:
                    receiver.requests.append((self.headers.get("Idempotency-Key"), "GET"))
                self.send_response(200)
                self.end_headers()

            def do_POST(self):  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                body = json.loads(raw)
                key = self.headers.get("Idempotency-Key")
                with receiver.lock:
                    action = receiver.plan.pop(0) if receiver.plan else "ok"
                    receiver.requests.append((key, action))
                    receiver.raw.append((dict(self.headers), raw))
                try:
                    if action == "timeout":
                        receiver.release.wait(5)  # the client gave up long ago; process it anyway, late
                        receiver.process(key, body)
                        return
                    if action == "hold":
                        receiver.release.wait(60)
                    if action in ("500", "400", "429"):
                        self.send_response(int(action))
                        if action == "429":  # throttled: "come back in a second"
                            self.send_header("Retry-After", "1")
                        self.end_headers()
                        return
                    if action.startswith("302 "):
                        self.send_response(302)
                        self.send_header("Location", action.split(" ", 1)[1])
                        self.end_headers()
                        return
                    receiver.process(key, body)
                    self.send_response(200)
                    self.end_headers()
                    self.wfile.write(b'{"ok": true}')
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def process(self, key: str, body: dict) -> None:
        with self.lock:
            if key not in self.processed:
                self.processed[key] = body

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture()
def receiver_factory():
    started: list[Receiver] = []

    def make(plan=(), port: int = 0) -> Receiver:
        receiver = Receiver(plan, port)
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        try:
            receiver.stop()
        except OSError:
            pass


def webhook(url: str, tmp_path: Path, **options) -> WebhookSink:
    defaults = {"timeout": 0.3, "max_attempts": 5, "backoff": 0.005, "max_backoff": 0.02, "retry_budget": 10.0}
    defaults.update(options)
    return WebhookSink(url, dead_letter_dir=str(tmp_path / "dead"), **defaults)


def dead_letters(tmp_path: Path) -> dict[str, dict]:
    directory = tmp_path / "dead"
    if not directory.exists():
        return {}
    return {p.stem: json.loads(p.read_text()) for p in directory.glob("*.json")}


# ------------------------------------------------------------------------------------------ webhook


def test_webhook_retries_500s_and_a_timeout_then_delivers_each_match_once(receiver_factory, tmp_path):
    receiver = receiver_factory(["500", "500", "timeout"])
    sink = webhook(receiver.url, tmp_path)
    alerts = [alert(i) for i in range(4)]
    report = sink.deliver(alerts, batch_id=7)
    assert sum(report.delivered.values()) == 4 and not report.dead_lettered and report.retries == 3
    ids = sorted(a["match_id"] for a in alerts)
    # One request per match, keyed by its match_id; the first one took four attempts.
    first = ids[0]
    assert [action for key, action in receiver.requests if key == first] == ["500", "500", "timeout", "ok"]
    assert sorted(k for k, _ in receiver.requests if k != first) == ids[1:]
    receiver.release.set()  # let the held request finish: it is processed late, and still only once
    assert sorted(receiver.processed) == ids
    for key, body in receiver.processed.items():
        assert [a["match_id"] for a in body["alerts"]] == [key]
        assert body["alerts"][0]["measures"] == {
            "card": body["alerts"][0]["partition_key"]["card"],
            "smalls": 3,
            "big": 900.5,
        }
        assert body["alerts"][0]["first_event_time"].endswith("Z")
    # The micro-batch delivered again (a replay after a crash): same keys, nothing processed twice.
    again = sink.deliver(alerts, batch_id=7)
    assert sum(again.delivered.values()) == 4
    assert len(receiver.processed) == 4 and len(receiver.requests) == 3 + 4 + 4
    assert dead_letters(tmp_path) == {}


def test_webhook_connection_refused_goes_to_dead_letters_never_dropped_and_replays(receiver_factory, tmp_path):
    down = receiver_factory()
    url = down.url
    down.stop()  # nothing listens there any more: connection refused
    sink = webhook(url, tmp_path, max_attempts=3)
    alerts = [alert(i) for i in range(3)]
    report = sink.deliver(alerts, batch_id=1)
    assert not report.delivered and sum(report.dead_lettered.values()) == 3
    letters = dead_letters(tmp_path)
    assert sorted(letters) == sorted(a["match_id"] for a in alerts)
    for key, record in letters.items():
        assert record["attempts"] == 3 and record["idempotency_key"] == key and record["batch_id"] == 1
        assert "refused" in record["error"].lower(), record["error"]
        assert record["alerts"][0]["match_id"] == key and "url" not in record
    # The receiver comes back: replaying the dead letters delivers each once and empties the directory.
    up = receiver_factory()
    replayer = webhook(up.url, tmp_path)
    assert replayer.replay_dead_letters() == (3, 0)
    assert sorted(up.processed) == sorted(letters) and dead_letters(tmp_path) == {}


def test_webhook_every_match_is_delivered_once_or_dead_lettered(receiver_factory, tmp_path):
    """500s, a timeout, then the receiver goes away (connection refused): nothing is lost."""
    receiver = receiver_factory(["500", "timeout", "500"])
    sink = webhook(receiver.url, tmp_path, max_attempts=4)
    first, second = [alert(i) for i in range(3)], [alert(i) for i in range(3, 6)]
    assert sum(sink.deliver(first, batch_id=0).delivered.values()) == 3
    receiver.stop()
    report = sink.deliver(second, batch_id=1)
    assert sum(report.dead_lettered.values()) == 3
    delivered, dead = set(receiver.processed), set(dead_letters(tmp_path))
    assert delivered | dead == {a["match_id"] for a in first + second} and not delivered & dead
    assert Counter(k for k, action in receiver.requests if action == "ok") == Counter({a["match_id"]: 1 for a in first})


def test_webhook_retry_budget_bounds_a_micro_batch(receiver_factory, tmp_path):
    receiver = receiver_factory(["500"] * 1000)
    sink = webhook(receiver.url, tmp_path, max_attempts=1000, backoff=0.01, max_backoff=0.01, retry_budget=0.05)
    alerts = [alert(i) for i in range(5)]
    report = sink.deliver(alerts, batch_id=3)
    assert sum(report.dead_lettered.values()) == 5 and not report.delivered
    assert len(receiver.requests) < 50  # the budget, not max_attempts, ended the retries
    letters = dead_letters(tmp_path)
    assert len(letters) == 5
    assert all("budget" in " ".join(r["errors"]) for r in letters.values())


def test_webhook_waits_are_the_retry_policys_delays(receiver_factory, tmp_path):
    """The webhook backs off by sink_base.RetryPolicy.delay, as the SQL sinks do; Retry-After within max_backoff."""
    down = receiver_factory()
    url = down.url
    down.stop()  # connection refused on every attempt
    policy = RetryPolicy(max_attempts=5, backoff=0.1, max_backoff=0.3, budget=100.0)
    waits: list[float] = []
    sink = WebhookSink(url, dead_letter_dir=str(tmp_path / "dead"), timeout=0.3, retry=policy, sleep=waits.append)
    report = sink.deliver([alert(0)], batch_id=0)
    assert sum(report.dead_lettered.values()) == 1 and report.retries == 4
    assert waits == [policy.delay(n) for n in range(4)] == [0.1, 0.2, 0.3, 0.3]
    # The keyword spelling builds the same policy (the CLI passes max_attempts); defaults as documented.
    assert WebhookSink(url, dead_letter_dir="d").retry == RetryPolicy(
        max_attempts=5, backoff=0.5, max_backoff=30.0, budget=120.0
    )
    assert webhook(url, tmp_path, max_attempts=3).retry == RetryPolicy(
        max_attempts=3, backoff=0.005, max_backoff=0.02, budget=10.0
    )
    with pytest.raises(ValueError, match="webhook retries: a retry policy needs at least one attempt"):
        WebhookSink(url, dead_letter_dir="d", max_attempts=0)
    # A server asking for longer (Retry-After: 1) gets it, capped at the policy's max_backoff.
    throttled = receiver_factory(["429", "ok"])
    waits.clear()
    sink = WebhookSink(
        throttled.url, dead_letter_dir=str(tmp_path / "dead"), timeout=0.3, retry=policy, sleep=waits.append
    )
    assert sum(sink.deliver([alert(1)], batch_id=1).delivered.values()) == 1
    assert waits == [0.3]


def test_webhook_4xx_is_not_retried(receiver_factory, tmp_path):
    receiver = receiver_factory(["400"])
    sink = webhook(receiver.url, tmp_path)
    report = sink.deliver([alert(1), alert(2)], batch_id=0)
    assert sum(report.delivered.values()) == 1 and sum(report.dead_lettered.values()) == 1
    (record,) = dead_letters(tmp_path).values()
    assert record["attempts"] == 1 and "HTTP 400" in record["error"] and "not retried" in record["error"]


def test_webhook_batches_have_deterministic_keys(receiver_factory, tmp_path):
    receiver = receiver_factory(["500"])
    sink = webhook(receiver.url, tmp_path, batch_size=3)
    alerts = [alert(i) for i in (5, 1, 4, 2, 3)]
    sink.deliver(alerts, batch_id=0)
    sink.deliver(list(reversed(alerts)), batch_id=0)  # replayed, in another order
    keys = [k for k, action in receiver.requests if action == "ok"]
    assert len(keys) == 4 and len(set(keys)) == 2 and all(k.startswith("batch-") for k in keys)
    bodies = sorted(receiver.processed.values(), key=lambda b: len(b["alerts"]))
    assert [len(b["alerts"]) for b in bodies] == [2, 3]
    assert sorted(a["match_id"] for b in bodies for a in b["alerts"]) == sorted(a["match_id"] for a in alerts)


# --------------------------------------------------------------------------------------------- SQL


def test_sqlite_upsert_keeps_one_row_per_match(tmp_path):
    path = tmp_path / "alerts.db"
    sink = SQLiteSink(str(path))
    batch = [alert(i) for i in range(3)]
    sink.deliver(batch, batch_id=4)
    # The same micro-batch again (a replay after a crash), emitted later: still one row per match.
    sink.deliver([alert(i, emitted=dt.datetime(2024, 1, 1, 11, 0)) for i in range(3)], batch_id=4)
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT match_id, rule_id, first_event_time, emit_time, measures, batch_id FROM alerts ORDER BY match_id"
        ).fetchall()
    assert [r[0] for r in rows] == sorted(a["match_id"] for a in batch)
    assert rows[0][2] == "2024-01-01 09:30:00" and rows[0][3] == "2024-01-01 11:00:00" and rows[0][5] == 4
    assert json.loads(rows[1][4])["card"] == "c1"


def test_deliver_batch_skips_suppressed_and_raises_after_trying_every_sink(tmp_path):
    good = SQLiteSink(str(tmp_path / "a.db"))
    out = io.StringIO()
    console = ConsoleSink(out)
    alerts = [alert(1), alert(2, suppressed=True), alert(3)]
    reports = deliver_batch(alerts, 0, [good, console])
    assert [sum(r.delivered.values()) for r in reports] == [2, 2]
    assert "ALERT fraud/card_testing  MATCHED  card=c1" in out.getvalue()
    bad = SQLiteSink(str(tmp_path / "missing" / "dir" / "x.db"))
    bad.connect = lambda: (_ for _ in ()).throw(sqlite3.OperationalError("disk I/O error"))  # type: ignore[method-assign]
    with pytest.raises(CepSinkError, match="disk I/O error [(]not retried[)]") as raised:
        deliver_batch(alerts, 1, [bad, good])
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    with sqlite3.connect(tmp_path / "a.db") as db:  # the sink after the failing one still got the batch
        assert db.execute("SELECT COUNT(*) FROM alerts").fetchone()[0] == 2


class FakeClock:
    """A monotonic clock that only the sink's own sleeps move: retry budgets without waiting for them."""

    def __init__(self, on_sleep=None) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))


POLICY = RetryPolicy(max_attempts=10, backoff=0.1, max_backoff=0.4, budget=1.0)  # waits .1 .2 .4 .4: 4 attempts fit


def locked_sqlite(path: Path) -> sqlite3.Connection:
    """Another connection holding SQLite's exclusive lock on ``path`` until it rolls back."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def sqlite_match_ids(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT match_id FROM alerts ORDER BY match_id")]


def test_sqlite_locked_database_is_retried_then_delivered(tmp_path):
    path = tmp_path / "alerts.db"
    holder = locked_sqlite(path)
    clock = FakeClock(on_sleep=lambda n: holder.rollback() if n == 2 else None)  # the lock goes after two retries
    sink = SQLiteSink(str(path), timeout=0.01, retry=POLICY, sleep=clock.sleep, clock=clock)
    report = sink.deliver([alert(i) for i in range(3)], batch_id=2)
    assert sum(report.delivered.values()) == 3 and report.retries == 2 and clock.sleeps == [0.1, 0.2]
    assert sqlite_match_ids(path) == sorted(alert(i)["match_id"] for i in range(3))


def test_sqlite_locked_past_the_retry_budget_stops_naming_the_sink_and_the_replay_delivers_once(tmp_path):
    path = tmp_path / "alerts.db"
    SQLiteSink(str(path)).deliver([alert(0)], batch_id=0)
    holder = locked_sqlite(path)
    clock = FakeClock()
    sink = SQLiteSink(str(path), timeout=0.01, retry=POLICY, sleep=clock.sleep, clock=clock)
    batch = [alert(i) for i in range(1, 4)]
    with pytest.raises(CepSinkError) as raised:
        deliver_batch(batch, 5, [sink])
    message = str(raised.value)
    assert message.startswith(f"sqlite {path}: error[E0470]: OperationalError: database is locked"), message
    assert "after 4 attempts over 0.7s (retry budget 1s)" in message and "micro-batch 5 is kept" in message
    assert clock.sleeps == [0.1, 0.2, 0.4] and raised.value.code == "E0470"
    holder.rollback()  # the lock is gone: the stream restarts and Spark delivers micro-batch 5 again
    assert sqlite_match_ids(path) == [alert(0)["match_id"]]  # nothing of the failed batch was written
    for _ in range(2):  # delivered again after the restart, and once more (a second crash): one row per match
        deliver_batch(batch, 5, [sink])
    assert sqlite_match_ids(path) == sorted(alert(i)["match_id"] for i in range(4))


def test_postgres_locked_table_is_retried_then_stops_naming_the_sink(postgres_url):
    table = "cep_test_locked"
    setup = PostgresSink(postgres_url, table=table).connect()
    with setup.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
    setup.commit()
    PostgresSink(postgres_url, table=table).deliver([alert(0)], batch_id=0)
    holder = PostgresSink(postgres_url, table=table).connect()
    with holder.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")  # held until the holder's transaction ends
    try:
        clock = FakeClock()
        sink = PostgresSink(postgres_url, table=table, lock_timeout=0.05, retry=POLICY, sleep=clock.sleep, clock=clock)
        with pytest.raises(
            CepSinkError,
            match=r"^postgres postgres@127\.0\.0\.1:\d+/postgres: error\[E0470\]: LockNotAvailable.*after 4 attempts",
        ):
            sink.deliver([alert(1)], batch_id=1)
        clock = FakeClock(on_sleep=lambda n: holder.rollback() if n == 1 else None)
        sink = PostgresSink(postgres_url, table=table, lock_timeout=0.05, retry=POLICY, sleep=clock.sleep, clock=clock)
        report = sink.deliver([alert(1)], batch_id=1)
        assert report.retries == 1 and sum(report.delivered.values()) == 1
    finally:
        holder.close()
    connection = sink.connect()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT match_id FROM {table} ORDER BY match_id")
        assert [r[0] for r in cursor.fetchall()] == [alert(0)["match_id"], alert(1)["match_id"]]
    connection.close()


def disk_full_after(monkeypatch, fraction: float = 0.5) -> None:
    """Make the sinks' file writes fail as a full disk does: part of the text lands, then ENOSPC."""
    import errno

    real_open = open

    class FullFile:
        def __init__(self, fh) -> None:
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.fh.close()

        def write(self, text: str) -> int:
            self.fh.write(text[: int(len(text) * fraction)])
            self.fh.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.fh, name)

    def opener(path, mode="r", *args, **kwargs):
        fh = real_open(path, mode, *args, **kwargs)
        return FullFile(fh) if "w" in mode else fh

    monkeypatch.setattr(sink_base, "open", opener, raising=False)


def test_dead_letters_on_a_full_disk_stop_the_batch_and_never_leave_half_a_file(
    receiver_factory, tmp_path, monkeypatch
):
    down = receiver_factory()
    url = down.url
    down.stop()
    sink = webhook(url, tmp_path, max_attempts=1)
    batch = [alert(i) for i in range(3)]
    sink.deliver(batch[:1], batch_id=0)  # one dead letter written while there is space
    (before,) = (tmp_path / "dead").iterdir()
    old_text = before.read_text()
    disk_full_after(monkeypatch)
    with pytest.raises(CepSinkError) as raised:
        deliver_batch(batch[1:], 1, [sink])
    message = str(raised.value)
    assert message.startswith(f"{sink.describe()}: error[E0470]: ") and "No space left on device" in message
    assert url not in message  # the URL is a secret: scheme, host and a hash only
    assert f"could not be written to {tmp_path / 'dead'}" in message and "micro-batch 1 is kept" in message
    # Updating the existing dead letter on the full disk fails too, and leaves the old record whole.
    with pytest.raises(OSError):
        sink.replay_dead_letters()
    assert [p.name for p in (tmp_path / "dead").iterdir()] == [before.name] and before.read_text() == old_text
    monkeypatch.undo()  # space is back: the micro-batch is delivered again (after the restart)
    report = deliver_batch(batch[1:], 1, [sink])[0]
    assert sum(report.dead_lettered.values()) == 2
    letters = dead_letters(tmp_path)  # every file parses: none is half-written
    assert sorted(letters) == sorted(a["match_id"] for a in batch)
    assert sorted(p.name for p in (tmp_path / "dead").iterdir()) == sorted(f"{k}.json" for k in letters)


def test_alert_payload_and_sink_spellings(tmp_path):
    payload = alert_payload({**alert(1), "measures": json.dumps({"x": 1.5})})
    assert payload["partition_key"] == {"card": "c1"} and payload["measures"] == {"x": 1.5}
    assert payload["emit_time"] == "2024-01-01T10:00:00Z"
    assert isinstance(make_sink("console"), ConsoleSink)
    assert isinstance(make_sink("sqlite", str(tmp_path / "x.db")), SQLiteSink)
    with pytest.raises(ValueError, match="needs an argument"):
        make_sink("webhook")
    with pytest.raises(ValueError, match="http"):
        make_sink("webhook", "ftp://x", dead_letter_dir=str(tmp_path))


def _payload_by_parts(alert: dict) -> dict:
    """An alert's payload spelled out: every value through ``jsonable``, the JSON texts parsed by ``json.loads``."""
    out = {}
    for name in ALERT_NAMES:
        value = alert.get(name)
        if name in ("measures", "partition_key") and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        elif name.endswith("_time"):
            value = iso_utc(value)
        out[name] = jsonable(value)
    return out


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
measure_texts = st.dictionaries(st.text(max_size=6), json_values, max_size=4).map(json.dumps) | st.sampled_from(
    ['{"x": 1e400}', '{"x": -1e999, "y": [NaN, Infinity]}', "not json", "", "[1, 2]", '"s"']
)


@settings(max_examples=300, deadline=None)
@given(measure_texts, measure_texts)
def test_an_alert_s_payload_is_every_value_made_json_able(measures, partition_key):
    alert_row = {**alert(1), "measures": measures, "partition_key": partition_key}
    expected = _payload_by_parts(alert_row)
    # compared as JSON text: NaN never reaches a payload (jsonable makes it None), so text equality is value equality
    assert json.dumps(alert_payload(alert_row), sort_keys=True) == json.dumps(expected, sort_keys=True)


# -------------------------------------------------------------------------------------- PostgreSQL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    base = Path("/usr/lib/postgresql")
    if base.is_dir():
        for version in sorted(base.iterdir(), reverse=True):
            candidate = version / "bin" / name
            if candidate.exists():
                return str(candidate)
    return None


@pytest.fixture(scope="module")
def postgres_url():
    """A PostgreSQL server: $CEP_TEST_POSTGRES_URL, or a throwaway one from the installed binaries
    (initdb + pg_ctl, on 127.0.0.1, trust auth, in a temporary directory); else skip, saying why."""
    url = os.environ.get("CEP_TEST_POSTGRES_URL")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        try:
            import psycopg2  # noqa: F401
        except ImportError:
            pytest.skip("PostgreSQL test: no Python driver (pip install 'psycopg[binary]')")
    if url:
        yield url
        return
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL test: no server on this machine (no initdb/pg_ctl; or set CEP_TEST_POSTGRES_URL)")
    import tempfile

    data = Path(tempfile.mkdtemp(prefix="cep-test-pg-"))  # directly under /tmp: the server's user must reach it
    prefix: list[str] = []
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # postgres refuses to run as root
        import pwd

        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("PostgreSQL test: running as root and there is no 'postgres' user to run the server as")
        runuser = shutil.which("runuser")
        if not runuser:
            pytest.skip("PostgreSQL test: running as root without runuser")
        os.chown(data, user.pw_uid, user.pw_gid)
        prefix = [runuser, "-u", "postgres", "--"]
    port = _free_port()
    cluster = data / "cluster"
    run = lambda *cmd: subprocess.run(prefix + list(cmd), capture_output=True, text=True, timeout=120)  # noqa: E731
    made = run(initdb, "-D", str(cluster), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    if made.returncode != 0:
        shutil.rmtree(data, ignore_errors=True)
        pytest.skip(f"PostgreSQL test: initdb failed: {made.stderr.strip()[-300:]}")
    started = run(
        pg_ctl, "-D", str(cluster), "-w", "-l", str(data / "log"), "-o", f"-h 127.0.0.1 -p {port} -k {data}", "start"
    )
    if started.returncode != 0:
        shutil.rmtree(data, ignore_errors=True)
        pytest.skip(f"PostgreSQL test: the server did not start: {started.stderr.strip()[-300:]}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        run(pg_ctl, "-D", str(cluster), "-m", "immediate", "stop")
        shutil.rmtree(data, ignore_errors=True)


def test_postgres_upsert_keeps_one_row_per_match(postgres_url):
    table = "cep_test_alerts"
    sink = PostgresSink(postgres_url, table=table)
    connection = sink.connect()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
    connection.commit()
    connection.close()
    batch = [alert(i) for i in range(3)]
    sink.deliver(batch, batch_id=1)
    sink.deliver([alert(i, emitted=dt.datetime(2024, 1, 1, 11, 0)) for i in range(3)], batch_id=1)
    connection = sink.connect()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT match_id, emit_time, measures->>'card' FROM {table} ORDER BY match_id")
        rows = cursor.fetchall()
    connection.close()
    assert [r[0] for r in rows] == sorted(a["match_id"] for a in batch)
    assert rows[0][1] == dt.datetime(2024, 1, 1, 11, 0) and rows[2][2] == "c2"


def test_postgres_without_a_driver_says_what_to_install(monkeypatch):
    import cep.spark_bridge.sinks.sql as sql_sinks

    monkeypatch.setattr(sql_sinks, "_postgres_driver", lambda: (None, None))
    with pytest.raises(RuntimeError, match="psycopg"):
        PostgresSink("postgresql://localhost/x")


# ---------------------------------------------------------------- lost alerts and leaks


def test_webhook_redirect_is_a_failed_delivery_never_followed(receiver_factory, tmp_path):
    """urllib re-sent a 301/302 as a bodiless GET (with our headers) to wherever it pointed, ftp:// too,
    and called it delivered. A 3xx is a failed attempt: retried, then dead-lettered, naming where it pointed."""
    elsewhere = receiver_factory()
    receiver = receiver_factory([f"302 {elsewhere.url}"] * 3 + ["302 ftp://files.example/upload"] * 3)
    sink = webhook(receiver.url, tmp_path, max_attempts=3, headers={"Authorization": "Bearer s3cret"})
    report = sink.deliver([alert(1), alert(2)], batch_id=0)
    assert not report.delivered and sum(report.dead_lettered.values()) == 2
    assert elsewhere.requests == [] and elsewhere.processed == {}  # nothing went to the other host
    assert [action.split()[0] for _, action in receiver.requests] == ["302"] * 6
    letters = dead_letters(tmp_path)
    errors = sorted(record["error"] for record in letters.values())
    assert "HTTP 302" in errors[0] and "127.0.0.1" in errors[1] + errors[0] and "not followed" in errors[0]
    assert any("ftp://files.example/" in e for e in errors)
    assert all(record["attempts"] == 3 and not record["refused"] for record in letters.values())


class TrickleServer:
    """Answers every request one byte every ``interval`` seconds; records how far it got."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n" + b"x" * 20

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.sent: list[int] = []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                continue
            with connection:
                connection.recv(65536)
                sent = 0
                try:
                    for byte in self.ANSWER:
                        if self.stopped.wait(self.interval):
                            break
                        connection.sendall(bytes([byte]))
                        sent += 1
                except OSError:  # the client shut the connection: the deadline worked
                    pass
                self.sent.append(sent)

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()
        self.thread.join(5)


def test_webhook_timeout_is_a_deadline_for_the_whole_request_against_a_trickling_server(tmp_path):
    """A server sending a byte every 0.1 s never trips a per-read timeout of 0.3 s; the whole answer
    takes 6 s. The deadline ends the request long before, and the alert is dead-lettered."""
    server = TrickleServer(interval=0.1)
    try:
        sink = webhook(server.url, tmp_path, timeout=0.3, max_attempts=2)
        report = sink.deliver([alert(1)], batch_id=0)
    finally:
        server.stop()
    assert sum(report.dead_lettered.values()) == 1 and not report.delivered
    (record,) = dead_letters(tmp_path).values()
    assert "deadline of 0.3s" in record["error"] and record["attempts"] == 2
    assert len(server.sent) == 2 and all(n < len(TrickleServer.ANSWER) for n in server.sent), server.sent


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1/",
        "http://[::1]:99999/x",
        "http:///nohost",
        "http://exa mple.com/",
        "ftp://files.example/",
        "hooks.example.com/x",
        "http://host/\x1b[2J",
    ],
)
def test_a_webhook_url_that_cannot_be_used_is_refused_when_the_sink_is_made(url, tmp_path):
    with pytest.raises(ValueError) as raised:
        make_sink("webhook", url, dead_letter_dir=str(tmp_path))
    message = str(raised.value)
    assert "webhook URL" in message and "\x1b" not in message and "/x" not in message.split("#")[0][-3:]


def test_the_cli_refuses_a_bad_webhook_url_before_starting_spark(tmp_path, capsys):
    from cep.cli import main

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "e.json").write_text('{"ts": "2024-01-01T00:00:00", "v": 1}\n')
    (tmp_path / "r.sql").write_text("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS v > 0)")
    code = main(
        [
            "stream",
            str(tmp_path / "r.sql"),
            "--input",
            str(tmp_path / "in"),
            "--checkpoint",
            str(tmp_path / "ck"),
            "--sink",
            "webhook",
            "http://[::1/",
            "--once",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "not a valid URL" in err and "Invalid IPv6 URL" in err and "Traceback" not in err
    assert not (tmp_path / "ck").exists()  # refused before anything ran


def test_a_webhook_url_is_never_shown_whole(receiver_factory, tmp_path):
    """Slack's URL is its credential: descriptions, errors and dead letters show scheme, host and a hash."""
    down = receiver_factory()
    url = f"http://127.0.0.1:{down.port}/services/T000/B000/XXXXXXXXSECRETXXXXXXXX"
    down.stop()
    sink = make_sink("webhook", url, dead_letter_dir=str(tmp_path / "dead"), max_attempts=1, timeout=0.3)
    assert sink.describe().startswith(f"webhook http://127.0.0.1:{down.port}/…#") and "SECRET" not in sink.describe()
    assert "SECRET" not in sink.key() and sink.key().startswith("webhook-127.0.0.1-")
    report = sink.deliver([alert(1)], batch_id=0)
    (letter,) = (tmp_path / "dead" / sink.key()).glob("*.json")
    assert "SECRET" not in letter.read_text() and "SECRET" not in " ".join(map(str, report.errors))
    assert json.loads(letter.read_text())["sink_label"] == sink.describe()


POSTGRES_FORMS = [
    ("postgresql://cep:hunter2@db.example:5432/alerts", "postgres cep@db.example:5432/alerts", ["hunter2"]),
    (
        "postgresql://cep@db.example/alerts?password=hunter2&sslmode=require",
        "postgres cep@db.example/alerts",
        ["hunter2"],
    ),
    (
        "postgresql://cep:p@ss@w0rd@db.example/alerts",
        "postgres cep@db.example/alerts",
        ["p@ss@w0rd", "ss@w0rd", "w0rd"],
    ),
    (
        "postgresql://cep:p%40ss%2Fw0rd@db.example/alerts",
        "postgres cep@db.example/alerts",
        ["p%40ss%2Fw0rd", "p@ss/w0rd"],
    ),
    ("postgres://cep:hunter2@/alerts?host=/var/run/postgresql", "postgres cep@/var/run/postgresql/alerts", ["hunter2"]),
    (
        "host=db.example port=5433 dbname=alerts user=cep password=hunter2",
        "postgres cep@db.example:5433/alerts",
        ["hunter2"],
    ),
    (
        "host=db.example dbname=alerts user=cep password='hunter 2' sslpassword=keypass",
        "postgres cep@db.example/alerts",
        ["hunter 2", "keypass"],
    ),
]


@pytest.mark.parametrize(
    "conninfo,label,secrets", POSTGRES_FORMS, ids=[f[1] + str(i) for i, f in enumerate(POSTGRES_FORMS)]
)
def test_postgres_credentials_are_never_shown_in_any_libpq_form(conninfo, label, secrets):
    pytest.importorskip("psycopg")
    sink = PostgresSink(conninfo)
    assert sink.describe() == label
    shown = (
        sink.describe() + sink.key() + sink.redact(f"FATAL: could not connect with {conninfo} ({' '.join(secrets)})")
    )
    assert not [s for s in secrets if s in shown], shown


def test_postgres_connection_errors_name_the_sink_without_its_password(tmp_path):
    pytest.importorskip("psycopg")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    sink = PostgresSink(
        f"postgresql://cep:hunter2@127.0.0.1:{port}/alerts?password=hunter2",
        retry=RetryPolicy(max_attempts=1),
        connect_timeout=2,
    )
    with pytest.raises(CepSinkError) as raised:
        sink.deliver([alert(1)], batch_id=3)
    message = str(raised.value)
    assert message.startswith(f"postgres cep@127.0.0.1:{port}/alerts: error[E0470]") and "hunter2" not in message
    with pytest.raises(ValueError, match="cannot be read by libpq") as unreadable:
        PostgresSink("host=db hunter2")
    assert "hunter2" not in str(unreadable.value)


def test_the_stream_command_takes_its_sinks_from_the_one_registry(tmp_path):
    """``cep stream --sink`` accepts exactly the sinks fanout registers, and says what each takes."""
    from cep.cli_io import UsageError
    from cep.spark_bridge.sinks.fanout import FILE_SINKS, SINK_ARGUMENTS
    from cep.stream_cli import parse_sinks

    dead = str(tmp_path / "dead")
    with pytest.raises(UsageError) as raised:
        parse_sinks([["pigeon"]], dead_letter_dir=dead)
    assert all(kind in str(raised.value) for kind in [*SINK_ARGUMENTS, *FILE_SINKS])
    for kind, argument in SINK_ARGUMENTS.items():
        wrong = [kind, "a", "b"] if argument is not None else [kind, "a"]
        said = "needs exactly one " + argument if argument else "takes no argument"
        if kind == "webhook":  # the words after a webhook's URL are its own options (NAME=VALUE)
            said = ".*: 'b' is not an option of the webhook"
        with pytest.raises(UsageError, match=f"--sink {kind} {said}"):
            parse_sinks([wrong], dead_letter_dir=dead)
        if argument is not None:
            with pytest.raises(UsageError, match=f"--sink {kind} needs exactly one {argument}"):
                parse_sinks([[kind]], dead_letter_dir=dead)
    specs = [["CSV"], ["console"], ["SQLite", str(tmp_path / "alerts.db")]]
    file_format, sinks = parse_sinks(specs, dead_letter_dir=dead)
    assert file_format == "csv"
    assert [type(sink) for sink in sinks] == [ConsoleSink, SQLiteSink]
