"""The webhook sink's connections and batches, against a real HTTP/1.1 receiver on 127.0.0.1 that counts the
TCP connections it accepts and the requests on each.

* One persistent connection per sink: a micro-batch of alerts, one request each, uses one connection, and
  no request asks the server to close it.
* A receiver that closes a connection after a few requests (politely with ``Connection: close``, or by
  dropping an idle one without a word): every alert is still delivered once, on new connections, and a
  dropped idle connection costs no attempt (``max_attempts=1`` still delivers).
* An outage (the receiver stopped, then started on the same port): the alerts of the outage are dead
  letters, redelivered once it is back, on a new connection.
* Batches: Alertmanager gets lists of 64 alerts by default (its API takes a list); a generic webhook only
  when asked (``batch_size``). A batch that fails is dead-lettered and redelivered whole, as one request
  with its own key; each alert in it keeps its match id.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal
from cep.spark_bridge.sinks.payloads import ALERTMANAGER_BATCH, BodyFormat
from cep.spark_bridge.sinks.webhook import WebhookSink
from tests.test_sinks import alert


class CountingReceiver:
    """An HTTP/1.1 receiver: ``connections`` lists, per accepted connection, the requests it carried as
    (idempotency key, body). ``close_after``: answer the Nth request of a connection with
    ``Connection: close``; ``drop_after``: close the Nth request's connection silently after answering it
    (an idle timeout on the server). ``fail``: answer 500 to requests while it is set."""

    def __init__(self, port: int = 0, *, close_after: int | None = None, drop_after: int | None = None) -> None:
        self.connections: list[list[tuple[str, object]]] = []
        self.sockets: list[socket.socket] = []
        self.hung_up = threading.Semaphore(0)  # released once per connection the client closed
        self.lock = threading.Lock()
        self.fail = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Its status line and headers, then its body, go out in two writes: with Nagle's algorithm on, the
            # second waits for the client's delayed ACK (40 ms on Linux) on a kept connection. Receivers built for
            # keep-alive set TCP_NODELAY (Go's net/http, which Alertmanager uses, does by default).
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def setup(self):
                super().setup()
                with receiver.lock:
                    receiver.connections.append([])
                    receiver.sockets.append(self.connection)
                    self.mine = receiver.connections[-1]

            def finish(self):
                super().finish()
                receiver.hung_up.release()

            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    self.mine.append((self.headers.get("Idempotency-Key"), body, self.headers.get("Connection")))
                    count = len(self.mine)
                status = 500 if receiver.fail.is_set() else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                if close_after is not None and count >= close_after:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(b"{}")
                self.wfile.flush()
                if drop_after is not None and count >= drop_after:  # gone while the client thinks it is kept
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def requests(self) -> list[tuple[str, object, str | None]]:
        with self.lock:
            return [r for connection in self.connections for r in connection]

    def stop(self) -> None:
        """Stop as a process that dies does: the port closed, and the open connections with it."""
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for sock in self.sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.thread.join(5)


@pytest.fixture()
def receivers():
    started: list[CountingReceiver] = []

    def make(**options) -> CountingReceiver:
        receiver = CountingReceiver(**options)
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        receiver.stop()


def sink(url: str, tmp_path: Path, **options) -> WebhookSink:
    defaults = {"timeout": 5.0, "max_attempts": 3, "backoff": 0.01, "max_backoff": 0.02, "retry_budget": 10.0}
    return WebhookSink(url, dead_letter_dir=str(tmp_path / "dead"), **{**defaults, **options})


def sample_alerts(n: int) -> list[dict]:
    return [alert(i) for i in range(n)]


def delivered_ids(receiver: CountingReceiver) -> list[str]:
    """The match ids the receiver got (json format: {"alerts": [...]}), one per alert in each request."""
    return [alert["match_id"] for _, body, _ in receiver.requests() for alert in body["alerts"]]


def test_one_connection_carries_every_request_of_a_sink(receivers, tmp_path):
    receiver = receivers()
    webhook = sink(receiver.url, tmp_path)
    alerts = sample_alerts(40)
    for batch_id, start in enumerate(range(0, 40, 10)):
        report = webhook.deliver(alerts[start : start + 10], batch_id)
        assert sum(report.delivered.values()) == 10 and not report.errors
    assert [len(c) for c in receiver.connections] == [40]
    assert sorted(delivered_ids(receiver)) == sorted(a["match_id"] for a in alerts)
    assert {connection for _, _, connection in receiver.requests()} == {None}  # never "Connection: close"
    assert webhook.connection.opened == 1


def test_stopping_the_lanes_closes_the_kept_connection(receivers, tmp_path):
    """The stream's stop gives the receiver its connection back: the server sees the client hang up, not a
    connection left open until the process exits."""
    receiver = receivers()
    webhook = sink(receiver.url, tmp_path)
    lanes = DeliveryLanes([webhook], str(tmp_path / "outbox"), Journal(str(tmp_path / "journal"))).start()
    try:
        lanes.spool(0, sample_alerts(5))
        assert lanes.drain(timeout=30) == []
        assert sorted(delivered_ids(receiver)) == sorted(a["match_id"] for a in sample_alerts(5))
        assert not receiver.hung_up.acquire(timeout=0.5)  # kept alive between micro-batches
    finally:
        lanes.stop(5)
    assert receiver.hung_up.acquire(timeout=10)
    assert webhook.connection.connection is None


@pytest.mark.parametrize("how", ["close_after", "drop_after"])
def test_a_receiver_closing_connections_gets_every_alert_once_on_new_ones(receivers, tmp_path, how):
    receiver = receivers(**{how: 7})
    webhook = sink(receiver.url, tmp_path, max_attempts=1)  # a dropped idle connection costs no attempt
    alerts = sample_alerts(30)
    for i, one in enumerate(alerts):
        report = webhook.deliver([one], i)
        assert not report.errors and not webhook.dead_letters.letters()
    assert sorted(delivered_ids(receiver)) == sorted(a["match_id"] for a in alerts)  # each exactly once
    assert [len(c) for c in receiver.connections if c] == [7, 7, 7, 7, 2]
    assert webhook.connection.opened == len(receiver.connections)


def test_an_outage_dead_letters_then_redelivers_on_a_new_connection(receivers, tmp_path):
    receiver = receivers()
    port = receiver.port
    webhook = sink(receiver.url, tmp_path, max_attempts=2)
    alerts = sample_alerts(12)
    assert not webhook.deliver(alerts[:4], 0).errors
    receiver.stop()
    report = webhook.deliver(alerts[4:], 1)  # the kept connection is dead, and so is the port
    assert sum(report.dead_lettered.values()) == 8 and len(webhook.dead_letters.letters()) == 8
    back = receivers(port=port)
    assert webhook.replay_dead_letters() == (8, 0)
    assert sorted(delivered_ids(receiver) + delivered_ids(back)) == sorted(a["match_id"] for a in alerts)
    assert [len(c) for c in back.connections] == [8]  # one new connection for the whole redelivery


def test_alertmanager_gets_lists_and_a_generic_webhook_only_when_asked(receivers, tmp_path):
    receiver = receivers()
    manager = sink(receiver.url, tmp_path / "am", body_format=BodyFormat("alertmanager"))
    alerts = sample_alerts(150)
    assert sum(manager.deliver(alerts, 0).delivered.values()) == 150
    bodies = [body for _, body, _ in receiver.requests()]
    assert [len(b) for b in bodies] == [ALERTMANAGER_BATCH, ALERTMANAGER_BATCH, 150 - 2 * ALERTMANAGER_BATCH]
    assert sorted(a["labels"]["match_id"] for b in bodies for a in b) == sorted(a["match_id"] for a in alerts)

    generic = receivers()
    assert sum(sink(generic.url, tmp_path / "one").deliver(alerts[:5], 0).delivered.values()) == 5
    assert [len(body["alerts"]) for _, body, _ in generic.requests()] == [1] * 5
    batched = receivers()
    assert sum(sink(batched.url, tmp_path / "many", batch_size=50).deliver(alerts, 0).delivered.values()) == 150
    assert [len(body["alerts"]) for _, body, _ in batched.requests()] == [50, 50, 50]
    assert [len(c) for c in batched.connections] == [3]


def test_a_failed_batch_is_dead_lettered_and_redelivered_whole(receivers, tmp_path):
    receiver = receivers()
    receiver.fail.set()
    webhook = sink(receiver.url, tmp_path, batch_size=10, max_attempts=2)
    alerts = sample_alerts(25)
    report = webhook.deliver(alerts, 0)
    assert sum(report.dead_lettered.values()) == 25
    letters = webhook.dead_letters.letters()
    assert sorted(len(letter.alerts) for letter in letters) == [5, 10, 10]
    keys = sorted(letter.key for letter in letters)
    assert all(key.startswith("batch-") for key in keys)
    receiver.fail.clear()
    failed = len(receiver.requests())
    assert webhook.replay_dead_letters() == (3, 0)
    again = receiver.requests()[failed:]
    assert sorted(key for key, _, _ in again) == keys  # the same keys: a receiver dedups the whole batch
    assert sorted(a["match_id"] for _, body, _ in again for a in body["alerts"]) == sorted(
        a["match_id"] for a in alerts
    )


def test_a_deadline_closes_the_kept_connection_and_the_next_request_opens_another(receivers, tmp_path):
    """A receiver that accepts and never answers: the deadline ends the request, and the sink does not
    reuse that connection (its answer might still come and be read as the next request's)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        webhook = sink(f"http://127.0.0.1:{silent.getsockname()[1]}/hook", tmp_path, timeout=0.3, max_attempts=2)
        report = webhook.deliver(sample_alerts(1), 0)
        # timed out by the socket's timeout or by the deadline, whichever fires first under load
        assert sum(report.dead_lettered.values()) == 1 and "0.3s" in report.errors[0].message
        assert webhook.connection.opened == 2 and webhook.connection.connection is None
    finally:
        silent.close()


def test_a_proxy_the_environment_names_carries_the_requests(receivers, tmp_path, monkeypatch):
    """``HTTP_PROXY`` is honoured as urllib honoured it: the request goes to the proxy, with the absolute URL
    and the proxy's credentials; ``NO_PROXY`` sends it direct."""
    receiver = receivers()
    seen: list[tuple[str, str | None]] = []

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args):  # quiet
            pass

        def do_POST(self):  # noqa: N802 - http.server's name
            seen.append((self.path, self.headers.get("Proxy-Authorization")))
            body = self.rfile.read(int(self.headers["Content-Length"]))
            forwarded = {k: v for k, v in self.headers.items() if k.lower() != "proxy-authorization"}
            upstream = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=5)
            upstream.request("POST", urllib.parse.urlsplit(self.path).path, body=body, headers=forwarded)
            answer = upstream.getresponse()
            data = answer.read()
            upstream.close()
            self.send_response(answer.status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    proxy.daemon_threads = True
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://ops:s3cret@127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        proxied = sink(receiver.url, tmp_path / "proxied")
        assert sum(proxied.deliver(sample_alerts(3), 0).delivered.values()) == 3
        assert [path for path, _ in seen] == [receiver.url] * 3
        assert {auth for _, auth in seen} == {"Basic " + base64.b64encode(b"ops:s3cret").decode()}
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        direct = sink(receiver.url, tmp_path / "direct")
        assert sum(direct.deliver(sample_alerts(2), 1).delivered.values()) == 2
        assert len(seen) == 3 and len(delivered_ids(receiver)) == 5
    finally:
        proxy.shutdown()
        proxy.server_close()
