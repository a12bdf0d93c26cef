"""What cep leaves on a shared machine: temp files another local user cannot plant or read, logs that never
follow a link, bookkeeping readable by the stream's user only, and HTTP endpoints on loopback unless a host
is given, with timeouts, a bounded pool and no tracebacks for peers that hang up."""

from __future__ import annotations

import os
import stat
import tempfile

import pytest

from cep.spark_bridge.spark import session


@pytest.fixture()
def fresh_temp(tmp_path, monkeypatch):
    """An empty temp folder and a process that has made none of its private files yet."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("CEP_SPARK_LOG", raising=False)
    monkeypatch.setattr(session, "_PRIVATE", {})
    return tmp_path


def test_the_log4j2_file_is_made_fresh_and_private_never_a_planted_one(fresh_temp):
    planted = fresh_temp / f"cep-log4j2-{os.getuid()}.properties"
    planted.write_text(session._LOG4J2)  # the text cep writes, planted by someone else beforehand
    path = session._log4j2_file()
    assert os.path.dirname(path) != str(fresh_temp) and path != str(planted)
    folder, made = os.stat(os.path.dirname(path)), os.stat(path)
    assert stat.S_IMODE(folder.st_mode) == 0o700 and stat.S_IMODE(made.st_mode) == 0o600
    assert made.st_uid == os.getuid() and open(path).read() == session._LOG4J2
    assert session._log4j2_file() == path  # one per process


def test_the_log_never_follows_a_planted_link(fresh_temp):
    victim = fresh_temp / "victim.txt"
    victim.write_text("precious\n")
    link = fresh_temp / f"cep-spark-{os.getuid()}.log"
    link.symlink_to(victim)
    path = session.spark_log_path()
    assert path != str(link) and os.path.dirname(path) != str(fresh_temp)
    descriptor = session._open_log(path)
    os.write(descriptor, b"jvm output\n")
    os.close(descriptor)
    assert victim.read_text() == "precious\n" and open(path).read() == "jvm output\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_link_planted_after_the_look_is_refused_too(fresh_temp):
    path = session.spark_log_path()
    assert path == str(fresh_temp / f"cep-spark-{os.getuid()}.log")  # free: the shared per-user name
    victim = fresh_temp / "victim.txt"
    victim.write_text("precious\n")
    os.symlink(victim, path)  # planted between the look and the open
    descriptor = session._open_log(path)
    os.write(descriptor, b"jvm output\n")
    os.close(descriptor)
    assert victim.read_text() == "precious\n" and session.spark_log_path() != path
    assert open(session.spark_log_path()).read() == "jvm output\n"


# ------------------------------------------------------------------------------------ the HTTP endpoints


def test_a_port_alone_binds_loopback_and_a_host_is_taken_as_given():
    from cep.stream_cli import parse_address

    assert parse_address("9108", "--metrics-port") == ("127.0.0.1", 9108)
    assert parse_address("0.0.0.0:9108", "--metrics-port") == ("0.0.0.0", 9108)
    assert parse_address("[::1]:8080", "--health-port") == ("::1", 8080)


class _Alive:
    def alive(self):
        return True, "alive"

    def ready(self):
        return True, "ready"


def _get(port: int, path: str = "/healthz") -> tuple[int, bytes]:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_idle_peers_hold_a_bounded_pool_for_a_bounded_time_and_probes_answer_after(monkeypatch):
    import socket
    import threading
    import time

    from cep.spark_bridge.alerting import metrics

    monkeypatch.setattr(metrics, "REQUEST_TIMEOUT_S", 0.5)
    server = metrics.ServiceServer("127.0.0.1", 0, health=_Alive())
    peers = []
    try:
        assert server.httpd.server_address[0] == "127.0.0.1"
        before = threading.active_count()
        # Twice as many peers that connect and say nothing as the server holds (its workers and queue): the rest are
        # closed at once. Not more: whenever the listen backlog is full, a connect waits for the kernel's SYN
        # retry, 1 s; 300 peers spent about 40 s there.
        for _ in range(2 * (metrics.SERVICE_WORKERS + metrics.SERVICE_QUEUE)):
            peers.append(socket.create_connection(("127.0.0.1", server.port)))
        time.sleep(0.3)  # let the server accept them: a count of threads, not a timing assertion
        assert threading.active_count() - before <= metrics.SERVICE_WORKERS
        deadline = time.monotonic() + 30
        while True:  # the idle ones are dropped after their timeout; a probe then answers
            try:
                if _get(server.port) == (200, b"alive\n"):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the probe never answered"
            time.sleep(0.1)  # a probe refused at once (every slot held) comes again, as a supervisor's would
    finally:
        for peer in peers:
            peer.close()
        server.stop()


def test_a_peer_that_hangs_up_early_prints_no_traceback(capfd):
    import socket
    import struct

    from cep.spark_bridge.alerting import metrics

    server = metrics.ServiceServer("127.0.0.1", 0, health=_Alive())
    try:
        for request in (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /heal", b"\x16\x03\x01garbage\r\n\r\n"):
            peer = socket.create_connection(("127.0.0.1", server.port))
            peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
            peer.sendall(request)
            peer.close()
        assert _get(server.port) == (200, b"alive\n")
    finally:
        server.stop()
    assert "Traceback" not in capfd.readouterr().err


# ------------------------------------------------------------------------------------ what a statement reads


def test_a_python_engine_statement_reads_the_file_it_names_and_no_other_way(tmp_path):
    """docs/sql-statements.md, "What a statement may read": `FROM 'path'` reads a file the user may read;
    DuckDB's own file functions are refused."""
    import cep
    from cep.grammar.errors import CepError

    ticks = tmp_path / "ticks.csv"
    ticks.write_text("symbol,ts,price\nX,2024-01-01T00:00:00,5\nX,2024-01-01T00:00:01,4\n")
    clause = (
        "MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES LAST(B.price) AS low PATTERN (A B) "
        "DEFINE B AS B.price < PREV(B.price))"
    )
    found = cep.compile_sql(f"SELECT low FROM '{ticks}' {clause} m").run({})
    assert found.to_pylist() == [{"low": 4}]  # an Arrow table: what the file reader gave
    secret = tmp_path / "secret.csv"
    secret.write_text("x\n1\n")
    with pytest.raises(CepError):
        cep.compile_sql(f"SELECT * FROM read_csv('{secret}') JOIN (SELECT * FROM '{ticks}' {clause} m) ON true").run({})
