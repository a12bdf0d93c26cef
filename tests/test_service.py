"""``cep stream`` run as an on-call team runs it: its own process group, a real webhook receiver that goes
down and comes back, SQLite beside it, ``/metrics`` scraped, ``/readyz`` while the JVM is frozen,
``kill -9`` and ``cep status``, SIGTERM to the process group (what systemd sends), restarts.

One test, two processes (each Spark start costs 15-60 s on a loaded 2-core machine): the first is killed with
``kill -9``, the second restarts from its checkpoint, drains the rest and is stopped with SIGTERM. The
assertions are about what was delivered and what the endpoints and the status say, never about time.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import cep
from cep.cli import main
from cep.spark_bridge.alerting.status import rule_rows
from cep.spark_bridge.sinks.safe_text import url_key
from tests.test_sinks import Receiver

ROOT = Path(__file__).resolve().parents[1]
CEP = [sys.executable, "-m", "cep.cli"]
HIGH = """-- severity: critical
-- summary: {{ symbol }} at {{ p }}
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES X.price AS p PATTERN (X) DEFINE X AS price > 100)"""  # noqa: E501 (test data: the rule's SQL kept as written)
T0 = dt.datetime(2024, 1, 1)
SENTINEL = "zzz"
# /readyz fails when Spark's last trigger ended longer ago than --ready-after. Spark reports an idle trigger
# only every 10 s by default (this setting), so a window under that would fail /readyz on an idle stream;
# with a report every second, a window of 5 s passes on an idle stream and fails within about 5 s of the
# JVM's freeze (step 3), where 15 s had to pass.
IDLE_PROGRESS = "spark.sql.streaming.noDataProgressEventInterval"
IDLE_PROGRESS_MS = 1000
READY_AFTER_S = 5


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def until(predicate, seconds: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)  # polling a condition, with a deadline


def events(start: int, count: int) -> list[dict]:
    """Prices for three symbols; every fifth one above 100 (an alert)."""
    return [
        {
            "symbol": "abc"[i % 3],
            "ts": (T0 + dt.timedelta(seconds=start + i)).isoformat(),
            "price": 150.0 + i if i % 5 == 0 else 50.0,
        }
        for i in range(count)
    ]


def write_file(directory: Path, index: int, rows: list[dict]) -> None:
    tmp = directory / f".f{index}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.rename(directory / f"events-{index:03d}.json")  # whole files only, in order


class Service:
    """``cep stream`` in its own process group."""

    def __init__(self, tmp: Path, receiver_url: str, port: int, *extra: str) -> None:
        self.log = tmp / f"stream-{time.monotonic_ns()}.log"
        args = [
            *CEP,
            "stream",
            "--rules",
            str(tmp / "rules"),
            "--input",
            str(tmp / "in"),
            "--checkpoint",
            str(tmp / "ck"),
            "--sink",
            "webhook",
            receiver_url,
            "--sink",
            "sqlite",
            str(tmp / "alerts.db"),
            "--webhook-timeout",
            "2",
            "--webhook-attempts",
            "2",
            "--watermark",
            "2s",
            "--trigger",
            "1s",
            "--max-future-skew",
            "off",
            "--master",
            "local[2]",
            *extra,
        ]
        if "--once" not in extra:
            args += [
                "--metrics-port",
                f"127.0.0.1:{port}",
                "--health-port",
                f"127.0.0.1:{port}",
                "--ready-after",
                f"{READY_AFTER_S}s",
            ]
        self.spark_log = tmp / f"spark-{time.monotonic_ns()}.log"
        env = dict(
            os.environ,
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=str(ROOT),
            CEP_SPARK_LOG=str(self.spark_log),
            # A Spark setting as a user gives one (docs/operations.md): an idle trigger's progress every second
            PYSPARK_SUBMIT_ARGS=f"--conf {IDLE_PROGRESS}={IDLE_PROGRESS_MS} pyspark-shell",
        )
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                args, cwd=str(tmp), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.port = port

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def metrics(self) -> dict[tuple, float]:
        from prometheus_client.parser import text_string_to_metric_families

        code, text = self.get("/metrics")
        if code != 200:
            return {}
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def jvm(self) -> int:
        out = subprocess.run(
            ["pgrep", "-g", str(self.process.pid), "-f", "java"], capture_output=True, text=True
        ).stdout
        return int(out.split()[0])

    def signal_group(self, signum: int) -> None:
        os.killpg(self.process.pid, signum)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(30)


def status(tmp: Path, capsys: pytest.CaptureFixture) -> tuple[int, str]:
    """``cep status`` of the checkpoint, run in this process (it reads the checkpoint's files and looks for the
    stream's process: no Spark, and no process boundary under test): its exit code and what it printed."""
    capsys.readouterr()
    code = main(["status", "--checkpoint", str(tmp / "ck")])
    printed = capsys.readouterr()
    return code, printed.out + printed.err


@pytest.mark.long
@pytest.mark.spark
def test_the_stream_as_a_service_outage_metrics_readiness_kill_9_and_sigterm(tmp_path, capsys):
    pytest.importorskip("prometheus_client")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "high.sql").write_text(HIGH)
    source = tmp_path / "in"
    source.mkdir()
    batches = [events(0, 30), events(40, 30), events(80, 30), events(120, 30)]
    write_file(source, 0, batches[0])
    port = _free_port()
    receiver = Receiver()
    webhook = receiver.url
    services: list[Service] = []
    try:
        # 1. Running: every alert reaches the receiver and SQLite; the metrics count them; ready.
        first = Service(tmp_path, webhook, port)
        services.append(first)
        until(lambda: len(receiver.processed) >= 4, 300, "the first alerts at the receiver")
        until(
            lambda: (
                first.metrics().get(("cep_sink_delivered_total", (("sink", _key(webhook)),))) == len(receiver.processed)
            ),
            60,
            "/metrics to count the webhook's deliveries",
        )
        # Early release sends the first alerts from micro-batch 0, whose watermark has not moved yet: the lag
        # gauge is served from the no-data micro-batch Spark runs after it.
        until(
            lambda: any(name == "cep_watermark_lag_seconds" for name, _ in first.metrics()),
            120,
            "the watermark's first move",
        )
        scraped = first.metrics()
        with sqlite3.connect(tmp_path / "alerts.db") as db:
            in_sqlite = db.execute("SELECT COUNT(*) FROM alerts").fetchone()[0]
        alerts = sum(v for (name, labels), v in scraped.items() if name == "cep_alerts_total")
        assert alerts == in_sqlite == len(receiver.processed) and scraped[("cep_rules", (("state", "active"),))] == 1
        served = {name for name, _ in scraped} | {name[:-6] for name, _ in scraped if name.endswith("_total")}
        documented = set(re.findall(r"\b(cep_[a-z_]+)", _alert_rules()))
        assert documented and not {n for n in documented if n not in served and n + "_bucket" not in served}, (
            documented - served
        )
        assert scraped[("cep_bad_rows_total", (("reason", "not_json"),))] == 0
        assert until(lambda: first.get("/readyz")[0] == 200, 60, "ready") and first.get("/healthz")[0] == 200

        # 2. The receiver goes down: the alerts of the next file become dead letters; it comes back:
        #    they are redelivered by themselves, each once.
        port_of_receiver = receiver.port
        receiver.stop()
        before = set(receiver.processed)
        write_file(source, 1, batches[1])
        until(
            lambda: first.metrics().get(("cep_sink_dead_letters", (("sink", _key(webhook)),)), 0) >= 1,
            180,
            "dead letters while the receiver is down",
        )
        receiver = Receiver(port=port_of_receiver)
        until(
            lambda: first.metrics().get(("cep_sink_dead_letters", (("sink", _key(webhook)),))) == 0,
            180,
            "the dead letters redelivered",
        )
        assert len(receiver.processed) >= 4 and not set(receiver.processed) & before
        assert "redelivered" in first.text() and "dead-lettered" in first.text()

        # 3. The JVM freezes: batches stop and /readyz says so; it thaws: ready again. /healthz stays up.
        jvm = first.jvm()
        os.kill(jvm, signal.SIGSTOP)
        try:
            code, why = until(
                lambda: (lambda r: r if r[0] == 503 else None)(first.get("/readyz")), 120, "/readyz to fail"
            )
            assert "trigger" in why or "control loop" in why
        finally:
            os.kill(jvm, signal.SIGCONT)
        until(lambda: first.get("/readyz")[0] == 200, 120, "/readyz back")

        # 4. kill -9 of the whole group: cep status says dead and exits 1.
        first.signal_group(signal.SIGKILL)
        first.process.wait(30)
        code, shown = status(tmp_path, capsys)
        assert code == 1 and shown.startswith("stream: dead") and "is gone" in shown, shown

        # 5. The same command again, from the checkpoint the kill left: the rest of the input (up to a row that moves
        #    the watermark past all) is matched and delivered; nothing lost, nothing twice.
        second = Service(tmp_path, webhook, port)
        services.append(second)
        write_file(source, 2, batches[2])
        write_file(
            source, 3, batches[3] + [{"symbol": SENTINEL, "ts": (T0 + dt.timedelta(days=1)).isoformat(), "price": 1.0}]
        )
        until(lambda: "running;" in second.text(), 300, "the restart")
        expected = _expected(batches)
        until(lambda: len(_committed(tmp_path, partial=True)) == len(expected), 300, "every alert in the file sink")
        until(
            lambda: sorted({*before, *receiver.processed}) == sorted(_committed(tmp_path, partial=True)),
            300,
            "every alert at the receiver",
        )

        # 6. SIGTERM to the process group (systemd's stop): exit 0, status stopped, nothing half-done.
        second.signal_group(signal.SIGTERM)
        assert second.process.wait(120) == 0, second.text()[-3000:]
        code, shown = status(tmp_path, capsys)
        assert code == 3 and shown.startswith("stream: stopped"), shown
        assert "Traceback" not in second.text() and "stopped cleanly" in second.text()
        assert f"Spark's own log: {second.spark_log}" in second.text()
        assert "FutureWarning" not in second.spark_log.read_text(errors="replace")  # silenced in the workers
    finally:
        for service in services:
            service.stop()
        receiver.stop()

    committed = _committed(tmp_path)
    assert (
        sorted((json.loads(a["measures"])["symbol"], json.loads(a["measures"])["p"]) for a in committed.values())
        == expected
    )
    # every alert at a receiver (the first one, before its outage, or the second), once per key
    assert sorted([*before, *receiver.processed]) == sorted(committed)
    with sqlite3.connect(tmp_path / "alerts.db") as db:
        assert sorted(r[0] for r in db.execute("SELECT match_id FROM alerts")) == sorted(committed)
    state = json.loads((tmp_path / "ck" / "status.json").read_text())
    assert state["state"] == "stopped" and not list((tmp_path / "ck" / "journal").glob("*.json"))
    assert state["sinks"][_key(webhook)]["delivered"] >= len(committed)  # a batch redone after kill -9 is resent
    (high,) = rule_rows(state)
    assert high["matches"] == len(committed) and high["delivered"][_key(webhook)] >= len(committed)


def _expected(batches: list[list[dict]]) -> list[tuple]:
    """(symbol, price) of each alert of the rule, by the batch replay of every event."""
    rows = [dict(e, ts=dt.datetime.fromisoformat(e["ts"])) for b in batches for e in b]
    return sorted((r["symbol"], r["p"]) for r in cep.compile(HIGH).run(rows))


def _committed(tmp: Path, *, partial: bool = False) -> dict[str, dict]:
    """The alerts in the file sink, by match id; with ``partial``, while the stream runs, the whole lines only
    (Spark writes a part file in place)."""
    written = []
    for path in sorted((tmp / "ck" / "matches").glob("part-*.json")):
        for line in path.read_text().splitlines():
            try:
                written.append(json.loads(line))
            except ValueError:
                if not partial:
                    raise
    # (the file sink's log decides what is committed; a killed batch's orphan file would show as a duplicate id)
    return {a["match_id"]: a for a in written}


def _key(url: str) -> str:
    return url_key("webhook", url)


def _alert_rules() -> str:
    """The example Prometheus alert rules of docs/operations.md."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    return next(block for block in re.findall(r"```yaml\n(.*?)```", text, re.S) if "alert: CepNoBatch" in block)


# ------------------------------------------------------------------------------ without Spark


def test_liveness_says_dead_when_the_process_is_gone_or_silent_and_running_otherwise():
    from cep.status_cli import liveness

    now = float(int(time.time()))  # a whole second: the ISO text round-trips exactly, so the ages are exact
    beat = dt.datetime.fromtimestamp(now - 5, dt.UTC).isoformat()
    here = socket.gethostname()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)  # a process that has exited
    running = {
        "state": "running",
        "pid": os.getpid(),
        "host": here,
        "heartbeat_at": beat,
        "last_progress_at": beat,
        "started_at": beat,
    }
    assert liveness(running, stale_after=60, max_batch_age=600, now=now) == ("running", "")
    state, why = liveness({**running, "pid": dead_pid}, stale_after=60, max_batch_age=600, now=now)
    assert state == "dead" and f"process {dead_pid} is gone" in why
    state, why = liveness(running, stale_after=60, max_batch_age=600, now=now + 120)
    assert state == "dead" and "no heartbeat for 125s" in why
    elsewhere = {**running, "host": "another-machine", "pid": dead_pid}  # cannot look: the heartbeat decides
    assert liveness(elsewhere, stale_after=60, max_batch_age=600, now=now)[0] == "running"
    stuck = {**running, "last_progress_at": dt.datetime.fromtimestamp(now - 900, dt.UTC).isoformat()}
    assert liveness(stuck, stale_after=60, max_batch_age=600, now=now)[0] == "dead"
    assert liveness(stuck, stale_after=60, max_batch_age=None, now=now)[0] == "running"
    assert liveness({"state": "stopped"}, stale_after=60, max_batch_age=600) == ("stopped", "")


def test_a_stream_idle_on_a_quiet_topic_is_running_and_a_stuck_one_is_dead():
    """Liveness from the driver's heartbeat and Spark's query status, not from the age of the last micro-batch."""
    from cep.status_cli import liveness

    now = float(int(time.time()))

    def iso(seconds_ago: float) -> str:
        return dt.datetime.fromtimestamp(now - seconds_ago, dt.UTC).isoformat()

    idle = {
        "state": "running",
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "heartbeat_at": iso(1),
        "last_progress_at": iso(616),
        "started_at": iso(3600),
        "spark_query": {"active": True, "trigger_active": False, "trigger_since": None, "waiting_for_data": True},
    }
    assert liveness(idle, stale_after=60, max_batch_age=600, now=now) == (
        "running",
        "idle: no new input since the micro-batch 616s ago",
    )
    stuck = {
        **idle,
        "spark_query": {"active": True, "trigger_active": True, "trigger_since": iso(900), "waiting_for_data": False},
    }
    state, why = liveness(stuck, stale_after=60, max_batch_age=600, now=now)
    assert state == "dead" and "a micro-batch has been running for 900s" in why
    assert liveness({**idle, "spark_query": {"active": False}}, stale_after=60, max_batch_age=600, now=now)[0] == "dead"
    assert liveness({**idle, "heartbeat_at": iso(61)}, stale_after=60, max_batch_age=600, now=now)[0] == "dead"


def test_readiness_and_liveness_of_the_probes():
    from cep.spark_bridge.alerting.metrics import HealthCheck

    class Stream:
        status = {"state": "running"}
        health = {"loop_at": 1000.0, "query_active": True, "last_progress_at": 995.0, "stopping": False}

    stream = Stream()
    clock = [1001.0]
    check = HealthCheck(stream, ready_window=60.0, clock=lambda: clock[0])
    assert check.ready() == (True, "ready") and check.alive()[0]
    clock[0] = 1070.0  # no trigger for 75 s, the loop still current? no: it last went round 70 s ago
    assert check.ready()[0] is False and "control loop" in check.ready()[1] and check.alive()[0]
    stream.health["loop_at"] = 1069.0
    assert check.ready() == (False, "Spark's last trigger was 75s ago (more than 60s)")
    clock[0] = 1400.0
    assert check.alive() == (False, "the control loop has not gone round for 331s")
    stream.status = {"state": "failed"}
    assert check.alive()[0] is False and HealthCheck(None).alive() == (True, "starting")
    assert HealthCheck(None).ready() == (False, "starting")
