"""End to end through Kafka: events produced to a topic, ``cep stream`` matching them, alerts consumed from a topic.

    .venv/bin/python bench/kafka_e2e.py [--rates 200,1000,3000] [--seconds 40] [--keys 100] [--json FILE]

A real broker (tests/kafka_broker.py) and ``cep stream`` as a user runs it (a child process, ``local[2]``):
the V-shape rule over ``kafka://.../ticks`` (4 partitions, keyed by symbol), alerts to ``kafka://.../alerts``
(the at-least-once sink), watermark 2 s, trigger 500 ms. A producer sends ticks at each rate in turn for
``--seconds``, each tick's event time being the wall clock when it is sent; a consumer thread reads the
alert topic as it fills. Per rate:

- **events/s sustained**: the rate the producer achieved, and whether the stream kept up with it: the
  time from the end of the step until the last alert of the step's events arrived (``drain_s``; a stream
  that falls behind drains for longer and longer, and its latency grows during the step);
- **alert latency** (p50, p99, max): when the alert was consumed minus when the match's last event was
  produced (its ``last_event_time``). It includes, by design, the watermark delay (a match is final only
  once the watermark passes its last event, and a V ends only at the next tick of its symbol), the
  micro-batch interval and the two queries of ``cep stream`` (matching, then delivery of the committed
  alerts).

Prints a table and writes the numbers as JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.kafka_broker import KafkaBroker  # noqa: E402

QUERY = REPO / "patterns" / "v_shape.sql"
WATERMARK = "2s"
TRIGGER = "500ms"


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class AlertReader(threading.Thread):
    """Reads the alert topic as it fills: (received wall time, last event time) per alert."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{os.getpid()}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.consumer.subscribe([topic])
        self.seen: dict[str, tuple[float, float]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for msg in self.consumer.consume(500, 0.2):
                if msg.error():
                    continue
                received = time.time()
                alert = json.loads(msg.value())
                last = dt.datetime.fromisoformat(alert["last_event_time"].replace("Z", "+00:00")).timestamp()
                self.seen.setdefault(alert["match_id"], (received, last))
        self.consumer.close()


def produce_step(producer, topic: str, rate: int, seconds: float, keys: int, prices: dict) -> tuple[int, float, float]:
    """Ticks at ``rate`` a second for ``seconds``; returns (sent, started, ended) wall times."""
    started = time.time()
    sent = 0
    while True:
        now = time.time()
        if now - started >= seconds:
            break
        due = int((now - started) * rate)
        while sent < due:
            symbol = f"K{sent % keys:04d}"
            prices[symbol] = max(1.0, prices[symbol] + random.choice([-1.0, -0.5, 0.5, 1.0]))
            value = json.dumps({"symbol": symbol, "ts": dt.datetime.now(dt.timezone.utc).isoformat(), "price": prices[symbol]})
            try:
                producer.produce(topic, key=symbol.encode(), value=value.encode())
            except BufferError:
                producer.poll(0.05)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(30)
    return sent, started, time.time()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="200,1000,3000")
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--json", default=str(REPO / "bench" / "results-kafka-e2e.json"))
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    from confluent_kafka import Producer

    work = Path(tempfile.mkdtemp(prefix="cep-kafka-e2e-"))
    broker = KafkaBroker(work / "broker").start()
    stream = None
    try:
        broker.create_topics({"ticks": 4, "alerts": 1})
        boot = broker.bootstrap
        env = dict(os.environ, PYTHONPATH=str(REPO), CEP_SPARK_LOG=str(work / "spark.log"))
        log = (work / "stream.log").open("w")
        t0 = time.monotonic()
        stream = subprocess.Popen(
            [sys.executable, "-c", "import sys; from cep.cli import main; sys.exit(main())", "stream", str(QUERY),
             "--input", f"kafka://{boot}/ticks", "--schema", "symbol STRING, ts TIMESTAMP, price DOUBLE",
             "--checkpoint", str(work / "ck"), "--watermark", WATERMARK, "--trigger", TRIGGER, "--master", "local[2]",
             "--sink", f"kafka://{boot}/alerts"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)
        while "running;" not in (work / "stream.log").read_text():
            if stream.poll() is not None:
                raise SystemExit((work / "stream.log").read_text())
            time.sleep(0.5)
        startup_s = time.monotonic() - t0
        reader = AlertReader(boot, "alerts")
        reader.start()
        producer = Producer({"bootstrap.servers": boot, "linger.ms": 5, "acks": "all", "queue.buffering.max.messages": 200000})
        prices = {f"K{i:04d}": 100.0 for i in range(args.keys)}
        # Warm-up, not measured: the first micro-batches of a query (planning, the state store, the Python
        # workers) are slow; the steps start once alerts flow.
        warm = time.time()
        while not reader.seen:
            produce_step(producer, "ticks", 50, 5, args.keys, prices)
            if time.time() - warm > 900:
                raise SystemExit("no alert in 15 minutes of warm-up:\n" + (work / "stream.log").read_text()[-3000:])
        warmup_s = time.time() - warm
        reader.seen.clear()
        steps = [(rate, *produce_step(producer, "ticks", rate, args.seconds, args.keys, prices)) for rate in rates]
        last_end = steps[-1][3]
        idle_since, count = time.time(), 0
        # until no alert came for 20 s once one of the last step's events has come out (at most 10 minutes)
        while time.time() - last_end < 600:
            time.sleep(1)
            if len(reader.seen) != count:
                count, idle_since = len(reader.seen), time.time()
            caught_up = any(last >= steps[-1][2] for _, last in reader.seen.values())
            if caught_up and time.time() - idle_since > 20:
                break
        reader.stop.set()
        reader.join(10)
        results = []
        for rate, sent, started, ended in steps:
            mine = [(recv, last) for recv, last in reader.seen.values() if started <= last < ended]
            latencies = [recv - last for recv, last in mine]
            results.append({
                "rate_asked": rate, "events": sent, "events_per_s": round(sent / (ended - started), 1),
                "alerts": len(mine), "latency_p50_s": percentile(latencies, 0.5), "latency_p99_s": percentile(latencies, 0.99),
                "latency_max_s": max(latencies) if latencies else None,
                "drain_s": (max(recv for recv, _ in mine) - ended) if mine else None,
            })
        report = {"when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "keys": args.keys,
                  "seconds_per_rate": args.seconds, "watermark": WATERMARK, "trigger": TRIGGER,
                  "stream_startup_s": round(startup_s, 1), "warmup_s": round(warmup_s, 1),
                  "load_average": os.getloadavg(), "steps": results}
        Path(args.json).write_text(json.dumps(report, indent=1))
        print(f"cep stream start-up (JVM, connector, first query): {startup_s:.1f} s; load average {os.getloadavg()}")
        print(f"{'rate asked':>10} {'events/s':>9} {'alerts':>7} {'p50 s':>7} {'p99 s':>7} {'max s':>7} {'drain s':>8}")
        for r in results:
            fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
            print(f"{r['rate_asked']:>10} {r['events_per_s']:>9} {r['alerts']:>7} {fmt(r['latency_p50_s']):>7} "
                  f"{fmt(r['latency_p99_s']):>7} {fmt(r['latency_max_s']):>7} {fmt(r['drain_s']):>8}")
        return 0
    finally:
        if stream is not None and stream.poll() is None:
            stream.send_signal(signal.SIGINT)
            try:
                stream.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(stream.pid, signal.SIGKILL)
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
