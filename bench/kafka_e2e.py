"""End to end through Kafka: ticks produced to a topic, matched live, alerts consumed from a topic; cep and Flink.

    .venv/bin/python bench/kafka_e2e.py [--rates 1000,5000,20000,max] [--seconds 45] [--no-flink] [--together]
        [--no-driver-state] [--no-floor] [--no-floor-watermark] [--baseline-python OTHER_CHECKOUT/.venv/bin/python]
    make bench-kafka

A real broker (tests/kafka_broker.py, Kafka 4.4, KRaft). By default the engines run one after another, each
alone with the broker and the producer (as each would run in production, so none pays for another's CPU), each
on a 4-partition topic of its own (``ticks-<engine>``, keyed by symbol) fed the same ticks (the same seeded
walk) at the same rates, and checked against the replay of its own topic; ``--together`` runs them at the same
time on one topic ``ticks`` instead. ``--baseline-python`` adds, alone as well, the ``cep stream`` of another
checkout (its venv's interpreter): an A/B of a change in the same run. The engines:

- ``cep stream`` as a user runs it (a child process, ``local[2]``), watermark 2 s, trigger 1 s (its default), with both
  Kafka sinks at once: ``--sink kafka://.../alerts`` (at least once) and
  ``kafka-exactly-once://.../alerts-eo`` (a transaction per micro-batch, read here ``read_committed``); in both
  state layouts, each named on its command line whatever ``cep stream``'s default, so that runs on record stay
  comparable: group ``cep`` is Spark's keyed state (``--state spark``), group ``driver`` the rules on the driver
  (``--state driver``, alone on a topic of its own after the others; ``--no-driver-state`` leaves it out);
- the peer, when PyFlink (bench/.venv-flink) and Flink's Kafka SQL connector (bench/peers/flink_kafka.py) are
  there: Flink SQL MATCH_RECOGNIZE in streaming mode (bench/peers/flink_kafka_runner.py), parallelism 2,
  watermark 2 s, matches to ``alerts-flink``.

- Spark's floor (bench/kafka_floor.py, a child process, ``local[2]``, the same watermark, trigger and state
  store): read, parse, watermark, ``groupBy(symbol)``, an ``applyInPandasWithState`` that only counts, into
  ``foreachBatch``; its micro-batch time and "latency" (event time to the end of the micro-batch that saw it);
- Spark's floor for output the watermark releases (``kafka_floor.py --hold-until-watermark``, alone on a topic of
  its own after the floor; ``--no-floor-watermark`` leaves it out): the same query holding each tick until
  Spark's watermark passes it, then emitting it; its latency is event time to the end of the micro-batch that
  emitted the tick, the least an alert that waits the watermark can take on Spark.

Both matchers run the same text: bench/run.py's query (a), the V shape, as Flink accepts it (bench/peers/flink.py's
rewrites: the last ``C+`` reluctant, so a match ends at its first rising tick and is final once the
watermark passes that tick). Each tick's event time is the wall clock (milliseconds) when it is produced.

The run: start-up; a warm-up at 200 ticks/s until every engine has sent an alert, then until its alerts are
within 15 s of the newest tick, for 120 s at most (not measured: the first micro-batches plan the query and
start Python workers); then each rate for ``--seconds`` (``max``: as fast
as this Python producer goes, at most ``--max-events``), each followed by a settle phase at 200 ticks/s that
lasts until every engine's alerts have reached the step's last ticks (or ``--settle`` seconds: it fell
behind). Per engine and step:

- **alert latency** (p50, p99, max): when the alert was consumed here minus when the tick that completed
  the match was produced (the alert's last event time: the ticks' event time is their production time);
- **events/s sustained**: ticks the engine had finished during the step (every tick at or before the
  newest last-event-time of its alerts consumed by the step's end), per second of the step; ``lag``: the
  step's end minus that newest event time (a few seconds when it keeps up: the watermark and a micro-batch);
- **events/s steady**: ticks finished from ``STEADY_FROM_S`` into the step to its end, per second of that
  window: the rate at which the engine finishes ticks once the step's rate reaches it, which equals the rate
  sent when it keeps up, whatever its lag (events/s sustained is short of it by the lag at the step's end);
- cep's micro-batches (from its status file: count, rows, median and max duration, and the median of each part
  of Spark's ``durationMs``: where a micro-batch's time goes), the floor's likewise, and the CPU seconds of
  each engine's process tree, the broker and this process (producer and consumers) during the step; the
  load average at its end.

Then the check: ``q.run(..., match_ids=True)`` over every tick produced, on the same text, gives the matches
that are final (last event time at or before the newest tick minus the watermark and a margin); cep's
match ids consumed from each topic (deduplicated by key; the exactly-once topic must have none to remove)
and Flink's (symbol, start, end) must equal them. Numbers to ``--json`` (bench/results-kafka-e2e.json),
which bench/run.py turns into docs/performance.md's Kafka section.
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import software  # noqa: E402
from peers import flink as flink_peer  # noqa: E402
from peers.flink_kafka import CONNECTOR, CONNECTOR_VERSION, connector_jar  # noqa: E402
from procmem import descendants  # noqa: E402
from run import QUERIES  # noqa: E402

from cep.spark_bridge.spark.session import DEFAULT_STATE_STORE, STATE_STORE_ENV  # noqa: E402
from tests.kafka_broker import KafkaBroker  # noqa: E402

QUERY_NAME = "a"
QUERY_TEXT, REWRITES = flink_peer.flink_text(QUERIES[QUERY_NAME][1])
WATERMARK_MS = 2000
# The matching query hands each micro-batch's alerts to the sinks' lanes in its own foreachBatch.
STREAM_LAYOUT = "one query"
# cep stream's own default: the bench measures the stream as it ships (a 500 ms trigger pages about 0.3 s sooner at
# 1k-5k ticks/s for about 40% more CPU there: docs/latency.md, "Trigger interval").
TRIGGER = "1s"
SCHEMA = "symbol STRING, ts TIMESTAMP, price DOUBLE"
SETTLE_RATE = 200  # ticks/s between steps: enough to move the watermark, too few to cost anything
# The steady-state rate is measured from this far into a step: past the lag an engine starts a step with (the
# watermark and a micro-batch or two), so the window holds only ticks of the step's own rate.
STEADY_FROM_S = 10.0
# The warm-up: until every engine has sent an alert (a cold engine's first alert on a loaded machine takes
# minutes), then until they are close to the newest tick, for WARMUP_LIMIT_S at most; past it the steps start
# with whatever lag is left (reported as warmup_lag_s).
FIRST_ALERT_LIMIT_S = 900
WARMUP_LIMIT_S = 120
# The warm-up ends once every engine's alerts are this close to the newest tick: the backlog of its first,
# slow micro-batches is worked off (a lag of a watermark plus a few micro-batches).
WARM_LAG_S = 15
# A match is final once the watermark passes its last tick; the margin covers the settle ticks in flight.
FINAL_MARGIN_MS = 3000
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ENGINES = ("cep", "cep-exactly-once", "flink")
TOPICS = {"cep": "alerts", "cep-exactly-once": "alerts-eo", "flink": "alerts-flink"}


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def iso_ms(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def epoch_ms(text: str) -> int:
    return round(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def tree_cpu_seconds(pid: int | None, *, alone: bool = False) -> float:
    """User + system CPU of ``pid`` and its live descendants (Spark's JVM and Python workers, Flink's JVM), or
    of ``pid`` ``alone`` (this process, whose children are the engines)."""
    if pid is None:
        return 0.0
    total = 0
    for one in [pid] if alone else [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


class AlertReader(threading.Thread):
    """Reads one alert topic as it fills: per key, (first consumed wall ms, last event ms, payload), copies."""

    def __init__(self, bootstrap: str, topic: str, engine: str) -> None:
        super().__init__(daemon=True, name=f"alerts-{engine}")
        from confluent_kafka import Consumer

        self.engine = engine
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{engine}-{os.getpid()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                # the exactly-once sink's aborted transactions must stay invisible
                "isolation.level": "read_committed",
            }
        )
        self.consumer.subscribe([topic])
        self.seen: dict[str, tuple[int, int, dict]] = {}
        self.copies = 0
        self.newest_event_ms = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def key_of(self, msg, value: dict) -> str:
        if self.engine == "flink":  # Flink's sink writes no key: a match is its symbol and first and last tick
            return f"{value['symbol']}|{epoch_ms(value['start_ts'])}|{epoch_ms(value['end_ts'])}"
        return msg.key().decode()

    def last_event_ms(self, value: dict) -> int:
        return epoch_ms(value["end_ts"] if self.engine == "flink" else value["last_event_time"])

    def run(self) -> None:
        while not self.stop.is_set():
            batch = self.consumer.consume(1000, 0.1)
            received = round(time.time() * 1000)
            with self.lock:
                for msg in batch:
                    if msg.error():
                        continue
                    value = json.loads(msg.value())
                    last = self.last_event_ms(value)
                    self.copies += 1
                    self.seen.setdefault(self.key_of(msg, value), (received, last, value))
                    self.newest_event_ms = max(self.newest_event_ms, last)
        self.consumer.close()


@dataclass
class Ticks:
    """Every tick produced, as columns (a million ticks as dicts would cost a GB)."""

    symbol: list[str] = field(default_factory=list)
    ts_ms: list[int] = field(default_factory=list)
    price: list[float] = field(default_factory=list)

    def count_at_or_before(self, ms: int) -> int:
        import bisect

        return bisect.bisect_right(self.ts_ms, ms)  # ts_ms is the production clock: non-decreasing


class Producer:
    """Ticks of ``keys`` symbols, a random walk each, at a given rate; every tick kept in ``ticks``."""

    def __init__(self, bootstrap: str, topic: str, keys: int) -> None:
        from confluent_kafka import Producer as KafkaProducer

        self.producer = KafkaProducer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "acks": "all",
                "enable.idempotence": True,
                "queue.buffering.max.messages": 500_000,
            }
        )
        self.topic = topic
        self.keys = keys
        self.prices = {f"K{i:04d}": 100.0 for i in range(keys)}
        self.last_ms = dict.fromkeys(self.prices, 0)
        self.ticks = Ticks()
        self.random = random.Random(14)

    def send(self) -> None:
        symbol = f"K{len(self.ticks.ts_ms) % self.keys:04d}"
        price = self.prices[symbol] = max(1.0, self.prices[symbol] + self.random.choice((-1.0, -0.5, 0.5, 1.0)))
        now = time.time_ns() // 1_000_000
        if self.ticks.ts_ms and now < self.ticks.ts_ms[-1]:
            now = self.ticks.ts_ms[-1]  # the wall clock stepped back: event time stays in order
        # Two ticks of a symbol in one millisecond would tie on ORDER BY ts, and engines order ties each their
        # own way (SQL leaves it open): a symbol's ticks are 1 ms apart at least (with 1,000 symbols sent in
        # turn, a symbol's ticks are 1,000 ticks apart, so this moves none below a million ticks a second).
        now = max(now, self.last_ms[symbol] + 1)
        self.last_ms[symbol] = now
        value = f'{{"symbol":"{symbol}","ts":"{iso_ms(now)}","price":{price}}}'
        while True:
            try:
                self.producer.produce(self.topic, key=symbol.encode(), value=value.encode())
                break
            except BufferError:
                self.producer.poll(0.05)
        self.ticks.symbol.append(symbol)
        self.ticks.ts_ms.append(now)
        self.ticks.price.append(price)

    def run(
        self, rate: float | None, seconds: float, max_events: int | None = None, until=None
    ) -> tuple[int, float, float]:
        """``rate`` ticks/s (None: as fast as it goes) for ``seconds``, or until ``until()`` is true (checked
        every second); returns (ticks sent, start, end) wall times."""
        started = time.time()
        first = len(self.ticks.ts_ms)
        checked = started
        while True:
            now = time.time()
            sent = len(self.ticks.ts_ms) - first
            if now - started >= seconds or (max_events is not None and sent >= max_events):
                break
            if until is not None and now - checked >= 1.0:
                checked = now
                if until():
                    break
            due = (max_events or 10**12) if rate is None else int((now - started) * rate)
            for _ in range(min(due - sent, 2000)):
                self.send()
            self.producer.poll(0)
            if rate is not None:
                time.sleep(0.002)
        self.producer.flush(60)
        return len(self.ticks.ts_ms) - first, started, time.time()


class StatusWatch(threading.Thread):
    """cep's micro-batches, from the stream's status file (its last micro-batch, read every 0.2 s)."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True, name="cep-status")
        self.path = path
        self.batches: dict[int, dict] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                last = json.loads(self.path.read_text()).get("last_batch") or {}
            except (OSError, ValueError):
                continue
            if "id" in last:
                self.batches.setdefault(int(last["id"]), {**last, "seen_at": time.time()})


@dataclass
class Engine:
    name: str
    process: subprocess.Popen | None = None
    log: Path | None = None
    error: str = ""


def start_cep(
    work: Path,
    boot: str,
    query_file: Path,
    ticks: str,
    topics: dict[str, str],
    python: str = sys.executable,
    state: str = "spark",
    launcher: Sequence[str] = ("-c", "import sys; from cep.cli import main; sys.exit(main())"),
    trigger: str = TRIGGER,
) -> Engine:
    """``cep stream`` as a user runs it, by ``python`` (this checkout's, or a baseline's with its own cep), with
    its rules' state in Spark's keyed state or on the driver (``--state``); ``launcher``: what runs ``cep``'s
    arguments (bench/thread_sampler.py, to sample where its Python goes)."""
    tree = REPO if python == sys.executable else Path(python).absolute().parents[2]  # DIR/.venv/bin/python
    env = dict(os.environ, PYTHONPATH=str(tree), CEP_SPARK_LOG=str(work / "spark.log"), PYSPARK_PYTHON=python)
    log = work / "cep.log"
    process = subprocess.Popen(
        [
            python,
            *launcher,
            "stream",
            str(query_file),
            "--input",
            f"kafka://{boot}/{ticks}",
            "--schema",
            SCHEMA,
            "--checkpoint",
            str(work / "ck"),
            "--watermark",
            f"{WATERMARK_MS}ms",
            "--trigger",
            trigger,
            "--master",
            "local[2]",
            "--sink",
            f"kafka://{boot}/{topics['cep']}",
            "--sink",
            f"kafka-exactly-once://{boot}/{topics['cep-exactly-once']}",
            "--state",  # always named: the default depends on the master and on the checkpoint
            state,
        ],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=tree,
    )
    return Engine("cep", process, log)


def start_flink(work: Path, boot: str, ticks: str, topics: dict[str, str]) -> Engine:
    setup = flink_peer.setup()
    if "ok" not in setup:
        return Engine("flink", error=f"PyFlink not installed: {setup.get('reason')}")
    jar, why = connector_jar()
    if jar is None:
        return Engine("flink", error=why)
    spec = {
        "jar": str(jar),
        "bootstrap": boot,
        "source_topic": ticks,
        "sink_topic": topics["flink"],
        "sql": QUERY_TEXT,
        "watermark_ms": WATERMARK_MS,
        "parallelism": 2,
        "checkpoint_dir": str(work / "flink-ck"),
        "checkpoint_interval": "10s",
    }
    (work / "flink.json").write_text(json.dumps(spec))
    log = work / "flink.log"
    env = dict(os.environ, JVM_ARGS="-Xmx1g")
    process = subprocess.Popen(
        [str(flink_peer.FLINK_PYTHON), str(HERE / "peers" / "flink_kafka_runner.py"), str(work / "flink.json")],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    return Engine("flink", process, log)


# Spark's floor queries (bench/kafka_floor.py), each an engine of that name writing to a folder of that name
FLOORS = ("floor", "floor_watermark")
# The floor's options for the one that holds each tick until the watermark passes it.
FLOOR_OPTIONS = {"floor": [], "floor_watermark": ["--hold-until-watermark"]}


def start_floor(work: Path, boot: str, ticks: str, name: str, trigger: str = TRIGGER) -> Engine:
    env = dict(os.environ, PYTHONPATH=str(REPO), CEP_SPARK_LOG=str(work / f"spark-{name}.log"))
    log = work / f"{name}.log"
    command = [sys.executable, str(HERE / "kafka_floor.py"), boot, ticks, str(work / name), *FLOOR_OPTIONS[name]]
    command += ["--watermark-ms", str(WATERMARK_MS), "--trigger", trigger]
    process = subprocess.Popen(
        command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO
    )
    return Engine(name, process, log)


def floor_numbers(directory: Path, start: float, end: float) -> dict:
    """A floor's micro-batches that ended during [start, end): latency over every row they emitted, and
    their Spark durations (matched to the batch ids)."""
    ended: dict[int, list[int]] = {}
    for line in _lines(directory / "floor.jsonl"):
        if start * 1000 <= line["end_ms"] < end * 1000:
            ended[line["batch"]] = line["latency_ms"]
    latencies = [ms / 1000 for batch in ended.values() for ms in batch]
    progress = [p for p in _lines(directory / "progress.jsonl") if p["batch"] in ended]
    costs = {line["batch"]: line.get("foreach_batch") for line in _lines(directory / "floor.jsonl")}
    return {
        "latency_p50_s": percentile(latencies, 0.5),
        "latency_p99_s": percentile(latencies, 0.99),
        **duration_numbers(
            [
                {"input_rows": p["rows"], "durations_ms": p["duration_ms"], "foreach_batch": costs.get(p["batch"])}
                for p in progress
            ]
        ),
    }


def _lines(path: Path) -> list[dict]:
    try:
        text = path.read_text()
    except OSError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def duration_numbers(batches: list[dict]) -> dict:
    """Count, rows per batch, median and max trigger time, and the median of each part of ``durationMs``."""
    timed = [b for b in batches if (b.get("durations_ms") or {}).get("triggerExecution") is not None]
    totals = [b["durations_ms"]["triggerExecution"] / 1000 for b in timed]
    parts = sorted({part for b in timed for part in b["durations_ms"]} - {"triggerExecution"})
    costs = [b["foreach_batch"] for b in batches if b.get("foreach_batch")]
    steps = sorted({step for cost in costs for step in cost["steps_ms"]})
    return {
        "batches": len(batches),
        "rows_per_batch": round(statistics.mean([b["input_rows"] for b in batches])) if batches else None,
        "batch_p50_s": percentile(totals, 0.5),
        "batch_max_s": max(totals) if totals else None,
        "parts_p50_ms": {part: percentile([b["durations_ms"].get(part, 0) for b in timed], 0.5) for part in parts},
        # inside addBatch: foreachBatch's own steps and the Spark jobs, stages and tasks it started (BatchCost)
        "foreach_batch_p50": {
            "total_ms": percentile([c["total_ms"] for c in costs], 0.5),
            "steps_ms": {step: percentile([c["steps_ms"].get(step, 0) for c in costs], 0.5) for step in steps},
            **{n: percentile([c[n] for c in costs if c.get(n) is not None], 0.5) for n in ("jobs", "stages", "tasks")},
            # the tasks' run time per stage, in the order the stages ran (the first reads Kafka and parses)
            "stage_run_ms": [
                percentile([c["stage_run_ms"][i] for c in costs if len(c.get("stage_run_ms") or []) > i], 0.5)
                for i in range(max(len(c.get("stage_run_ms") or []) for c in costs))
            ],
        }
        if costs
        else None,
    }


def stop_engine(engine: Engine) -> None:
    if engine.process is None or engine.process.poll() is not None:
        return
    engine.process.send_signal(signal.SIGINT if engine.name in ("cep", *FLOORS) else signal.SIGTERM)
    try:
        engine.process.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(engine.process.pid, signal.SIGKILL)
        engine.process.wait(10)


def wait_started(engines: list[Engine], started: float) -> dict[str, float]:
    """Until each engine says it runs (cep: "running;", Flink: "running <job>"); start-up seconds each."""
    marks = {"cep": "running;", "flink": "running "} | {name: "running;" for name in FLOORS}
    ready: dict[str, float] = {}
    while len(ready) < len([e for e in engines if e.process]):
        for engine in engines:
            if engine.process is None or engine.name in ready:
                continue
            text = engine.log.read_text(errors="replace")
            if marks[engine.name] in text:
                ready[engine.name] = round(time.time() - started, 1)
            elif engine.process.poll() is not None:
                raise SystemExit(f"{engine.name} stopped at start-up:\n{text[-3000:]}")
        time.sleep(0.5)
    return ready


def expected_matches(ticks: Ticks, final_ms: int, query_file: Path) -> tuple[set[str], set[str]]:
    """The matches ``q.run`` finds over every tick produced, final by ``final_ms``: (match ids, Flink's keys).
    The query is the stream's rule (``cep.compile_rule``): its match ids hash the rule's id and text."""
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401 - pa.compute

    import cep

    (rule,) = cep.load_rules(str(query_file))
    # A match final by final_ms ends at a tick at or before it, and the ticks after it cannot change it (the
    # last element is reluctant: a match ends at its first rising tick); the rest need not be replayed.
    table = pa.table({"symbol": ticks.symbol, "ts": pa.array(ticks.ts_ms, pa.timestamp("ms")), "price": ticks.price})
    table = table.filter(pa.compute.less_equal(table["ts"], pa.scalar(final_ms, pa.timestamp("ms"))))
    rows = cep.compile_rule(rule).run(table, match_ids=True)
    ids, keys = set(), set()
    for row in rows.to_pylist() if hasattr(rows, "to_pylist") else rows:
        end_ms = round(row["end_ts"].replace(tzinfo=dt.UTC).timestamp() * 1000)
        if end_ms <= final_ms:
            start_ms = round(row["start_ts"].replace(tzinfo=dt.UTC).timestamp() * 1000)
            ids.add(row["match_id"])
            keys.add(f"{row['symbol']}|{start_ms}|{end_ms}")
    return ids, keys


def check(readers: dict[str, AlertReader], ticks: Ticks, final_ms: int, query_file: Path) -> dict:
    ids, keys = expected_matches(ticks, final_ms, query_file)
    out: dict = {
        "final_before": iso_ms(final_ms),
        "ticks_before": ticks.count_at_or_before(final_ms),
        "expected_matches": len(ids),
    }
    for name, reader in readers.items():
        with reader.lock:
            got = {key for key, (_, last, _) in reader.seen.items() if last <= final_ms}
            copies, distinct = reader.copies, len(reader.seen)
        want = keys if name == "flink" else ids
        out[name] = {
            "alerts": len(got),
            "same_matches": got == want,
            "missing": len(want - got),
            "extra": len(got - want),
            "messages": copies,
            "duplicate_messages": copies - distinct,
            "examples": {"missing": sorted(want - got)[:3], "extra": sorted(got - want)[:3]},
        }
    return out


def newest_finished_ms(consumed: list[tuple[int, int]], wall_ms: float) -> int:
    """The newest last-event time among the alerts consumed by ``wall_ms`` (``consumed``: (received, last))."""
    return max((last for received, last in consumed if received <= wall_ms), default=0)


def steady_rate(consumed: list[tuple[int, int]], ticks: Ticks, wall: tuple[float, float]) -> float | None:
    """Ticks finished per second from ``STEADY_FROM_S`` into the step to its end: an engine that keeps up with a
    constant lag finishes ticks as fast as they are sent over any window, whatever that lag. (The step's own
    finished/s counts only ticks produced up to the step's end minus the lag, so an engine that keeps up with
    a 2 s lag reads 93% over 30 s.) None for a step too short to have such a window, or with no alert by its
    start."""
    start, end = wall
    if end - start <= 2 * STEADY_FROM_S:
        return None
    first = newest_finished_ms(consumed, (start + STEADY_FROM_S) * 1000)
    if not first:  # no alert yet by then: nothing to measure the window from
        return None
    last = newest_finished_ms(consumed, end * 1000)
    done = ticks.count_at_or_before(last) - ticks.count_at_or_before(first)
    return round(max(done, 0) / (end - start - STEADY_FROM_S), 1)


def step_numbers(name: str, reader: AlertReader, ticks: Ticks, step: dict) -> dict:
    with reader.lock:
        consumed = [(received, last) for received, last, _ in reader.seen.values()]
    mine = [(received, last) for received, last in consumed if step["start_ms"] <= last < step["end_ms"]]
    latencies = [(received - last) / 1000 for received, last in mine]
    finished_ms = step["newest_at_end"][name]
    done = ticks.count_at_or_before(finished_ms) - ticks.count_at_or_before(step["newest_at_start"][name])
    seconds = (step["end_ms"] - step["start_ms"]) / 1000
    return {
        "alerts": len(mine),
        "latency_p50_s": percentile(latencies, 0.5),
        "latency_p99_s": percentile(latencies, 0.99),
        "latency_max_s": max(latencies) if latencies else None,
        "events_per_s": round(max(done, 0) / seconds, 1),
        "events_per_s_steady": steady_rate(consumed, ticks, step["wall"]),
        "lag_at_end_s": round((step["end_ms"] - finished_ms) / 1000, 2),
        "caught_up_s": step["caught_up_s"].get(name),
    }


def batch_numbers(watch: StatusWatch, start: float, end: float) -> dict:
    batches = [b for b in watch.batches.values() if start <= b["seen_at"] < end and b.get("input_rows")]
    for b in batches:  # a status file without the parts still gives the trigger time
        b.setdefault("durations_ms", {"triggerExecution": b.get("duration_ms")} if b.get("duration_ms") else {})
    return duration_numbers(batches)


@dataclass(frozen=True)
class Group:
    """Engines that run at once, on a topic of their own: ``ticks<suffix>`` in, ``<alert topic><suffix>`` out.
    ``python``: the interpreter of ``cep stream`` (another checkout's, for a baseline)."""

    name: str
    engines: tuple[str, ...]  # among "cep", "floor", "floor_watermark", "flink"
    suffix: str = ""
    python: str = sys.executable
    state: str = "spark"  # cep stream --state: the group "cep" is the keyed layout


# Groups of one ``cep stream`` beside the first group's: another checkout's (``--baseline-python``), and this
# one's with its rules on the driver (on unless ``--no-driver-state``); each reported under its name, beside cep's.
SIDE_GROUPS = ("baseline", "driver")


def groups_of(args) -> list[Group]:
    """One group of every engine asked (``--together``), else one per engine, run one after another."""
    left_out = (args.no_floor, args.no_floor_watermark)
    asked = (["cep"] if args.keyed else []) + [name for name, out in zip(FLOORS, left_out) if not out]
    asked += [] if args.no_flink else ["flink"]
    if args.together:
        return [Group("together", tuple(asked))]
    groups = [Group(name, (name,), f"-{name}") for name in asked]
    if args.driver_state:
        groups.append(Group("driver", ("cep",), "-driver", state="driver"))
    if args.baseline_python:
        groups.append(Group("baseline", ("cep",), "-baseline", args.baseline_python, state=args.baseline_state))
    return groups


def run_group(group: Group, args, broker: KafkaBroker, work: Path) -> dict:
    """Start the group's engines, warm them up, run every rate, stop them, check their alerts against ``q.run``."""
    work.mkdir(parents=True)
    engines: list[Engine] = []
    readers: dict[str, AlertReader] = {}
    watch = StatusWatch(work / "ck" / "status.json")
    ticks_topic = f"ticks{group.suffix}"
    topics = {name: topic + group.suffix for name, topic in TOPICS.items()}
    try:
        broker.create_topics({ticks_topic: 4, **{topic: 1 for topic in topics.values()}})
        boot = broker.bootstrap
        query_file = work / "v_shape.sql"
        query_file.write_text(QUERY_TEXT)
        started = time.time()
        not_here = f"not in this group ({group.name})"
        cep = (
            start_cep(work, boot, query_file, ticks_topic, topics, group.python, group.state, trigger=args.trigger)
            if "cep" in group.engines
            else None
        )
        flink = (
            start_flink(work, boot, ticks_topic, topics)
            if "flink" in group.engines
            else Engine("flink", error=not_here)
        )
        floors = [
            start_floor(work, boot, ticks_topic, name, args.trigger)
            if name in group.engines
            else Engine(name, error=not_here)
            for name in FLOORS
        ]
        engines = [e for e in (cep, flink, *floors) if e is not None]
        startup = wait_started(engines, started)
        live = [name for name in ENGINES if name.split("-")[0] in startup]
        readers = {name: AlertReader(boot, topics[name], name) for name in live}
        for reader in readers.values():
            reader.start()
        if cep is not None:
            watch.start()
        producer = Producer(boot, ticks_topic, args.keys)
        pids = {e.name: e.process.pid for e in engines if e.process} | {
            "broker": broker.process.pid,
            "bench": os.getpid(),
        }

        def check_alive() -> None:
            for engine in engines:
                if engine.process is not None and engine.process.poll() is not None:
                    raise SystemExit(f"{engine.name} stopped:\n{engine.log.read_text(errors='replace')[-3000:]}")

        warm = time.time()
        warmup_lag = warm_up(producer, readers, check_alive, floors)
        warmup_s = round(time.time() - warm, 1)
        steps = [run_step(rate_text, args, producer, readers, pids, check_alive) for rate_text in args.rates.split(",")]
        for step in steps:
            if cep is not None:
                step["cep_batches"] = batch_numbers(watch, step["wall"][0], step["wall"][1])
            for floor in floors:
                if floor.process is not None:
                    step[floor.name] = floor_numbers(work / floor.name, step["wall"][0], step["wall"][1])
        # a few more seconds of ticks so that the last steps' matches are final everywhere
        producer.run(SETTLE_RATE, 5)
        final_ms = producer.ticks.ts_ms[-1] - WATERMARK_MS - FINAL_MARGIN_MS
        reached = lambda: all(r.newest_event_ms >= final_ms + FINAL_MARGIN_MS for r in readers.values())  # noqa: E731
        producer.run(SETTLE_RATE, args.settle, until=reached)
        time.sleep(3)  # the last alerts in flight
        for reader in readers.values():
            reader.stop.set()
            reader.join(10)
        watch.stop.set()
        for engine in engines:  # before the check: the replay needs the CPU
            stop_engine(engine)
        # compared up to where every engine got (one that fell behind is checked on what it finished)
        final_ms = min([final_ms] + [r.newest_event_ms - FINAL_MARGIN_MS for r in readers.values()])
        for step in steps:
            step["engines"] = {
                name: step_numbers(name, reader, producer.ticks, step) for name, reader in readers.items()
            }
            for key in ("start_ms", "end_ms", "newest_at_start", "newest_at_end", "caught_up_s", "wall"):
                step.pop(key)
        keep_for_a_look(work, producer.ticks, readers, final_ms)
        found = {
            "group": group.name,
            "engines": list(group.engines),
            "python": group.python,
            "state": group.state,
            "startup_s": startup,
            "warmup_s": warmup_s,
            "warmup_lag_s": warmup_lag,
            "ticks_total": len(producer.ticks.ts_ms),
            "flink": {"ran": flink.process is not None, "why_not": flink.error},
            **{floor.name: {"ran": floor.process is not None, "why_not": floor.error} for floor in floors},
            "steps": steps,
            # every micro-batch with rows of the whole run (warm-up and settling too): under load a step can be
            # shorter than one of cep's micro-batches, and the parts of a micro-batch are the same throughout
            "all_batches": {
                **({"cep": batch_numbers(watch, 0, time.time())} if cep is not None else {}),
                **{floor.name: floor_numbers(work / floor.name, 0, time.time()) for floor in floors if floor.process},
            },
            "check": {"error": "not done (the run stopped during the check)"},
        }
        if readers:
            try:
                found["check"] = check(readers, producer.ticks, final_ms, query_file)
            except Exception as error:  # noqa: BLE001 - the numbers above are still worth keeping
                found["check"] = {"error": f"{type(error).__name__}: {error}"}
        else:
            found["check"] = {}
        print(f"group {group.name}: check {json.dumps(found['check'])[:600]}", flush=True)
        return found
    finally:
        for reader in readers.values():
            reader.stop.set()
        for engine in engines:
            stop_engine(engine)


def warm_up(producer: Producer, readers: dict[str, AlertReader], check_alive, floors: list[Engine]) -> dict[str, float]:
    """200 ticks/s until every engine has sent an alert (a floor: a micro-batch), then until its alerts are
    close to the newest tick, for WARMUP_LIMIT_S at most; returns the lag left per engine."""
    running = [floor for floor in floors if floor.process is not None]

    def floor_batches(floor: Engine) -> list[dict]:
        return _lines(floor.log.parent / floor.name / "floor.jsonl")

    def first_alerts() -> bool:
        check_alive()
        return all(r.seen for r in readers.values()) and all(floor_batches(floor) for floor in running)

    def warm_enough() -> bool:
        check_alive()
        floor_lag = [percentile(b["latency_ms"], 0.5) or 0 for f in running for b in floor_batches(f)[-1:]]
        return all(time.time() * 1000 - r.newest_event_ms < WARM_LAG_S * 1000 for r in readers.values()) and all(
            lag < WARM_LAG_S * 1000 for lag in floor_lag
        )

    producer.run(SETTLE_RATE, FIRST_ALERT_LIMIT_S, until=first_alerts)
    if not first_alerts():
        raise SystemExit(f"no alert from every engine in {FIRST_ALERT_LIMIT_S} s of warm-up")
    producer.run(SETTLE_RATE, WARMUP_LIMIT_S, until=warm_enough)
    return {name: round(time.time() - r.newest_event_ms / 1000, 1) for name, r in readers.items()}


def run_step(rate_text: str, args, producer: Producer, readers: dict[str, AlertReader], pids: dict, check_alive):
    """One rate for ``--seconds``, then the settle phase: what the engines finished, their CPU, the load."""
    rate = None if rate_text == "max" else float(rate_text)
    cpu0 = {name: tree_cpu_seconds(pid, alone=name == "bench") for name, pid in pids.items()}
    newest_at_start = {name: r.newest_event_ms for name, r in readers.items()}
    first = len(producer.ticks.ts_ms)
    sent, start, end = producer.run(rate, args.seconds, args.max_events if rate is None else None)
    newest_at_end = {name: r.newest_event_ms for name, r in readers.items()}
    cpu1 = {name: tree_cpu_seconds(pid, alone=name == "bench") for name, pid in pids.items()}
    load = os.getloadavg()
    end_ms = producer.ticks.ts_ms[-1]
    caught_up: dict[str, float] = {}
    settle_start = time.time()

    def settled() -> bool:
        check_alive()
        for name, reader in readers.items():
            if name not in caught_up and reader.newest_event_ms >= end_ms:
                caught_up[name] = round(time.time() - end, 1)
        return len(caught_up) == len(readers)

    producer.run(SETTLE_RATE, args.settle if readers else 3.0, until=settled)
    step = {
        "rate_asked": rate_text,
        "events": sent,
        "events_per_s_sent": round(sent / (end - start), 1),
        "seconds": round(end - start, 1),
        "start_ms": producer.ticks.ts_ms[first] if sent else end_ms,
        "end_ms": end_ms,
        "wall": (start, end),
        "newest_at_start": newest_at_start,
        "newest_at_end": newest_at_end,
        "caught_up_s": caught_up,
        "settle_s": round(time.time() - settle_start, 1),
        "load_average": [round(x, 2) for x in load],
        "cpu_s": {name: round(cpu1[name] - cpu0[name], 1) for name in pids},
    }
    print(
        f"step {rate_text}: {sent} ticks at {step['events_per_s_sent']}/s; caught up {caught_up}; "
        f"cpu {step['cpu_s']}; load {load[0]:.1f}",
        flush=True,
    )
    return step


def keep_for_a_look(work: Path, ticks: Ticks, readers: dict[str, AlertReader], final_ms: int) -> None:
    """With $CEP_BENCH_KEEP, what the check reads, to look at it again."""
    if not os.environ.get("CEP_BENCH_KEEP"):
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"symbol": ticks.symbol, "ts_ms": ticks.ts_ms, "price": ticks.price}), work / "ticks.parquet"
    )
    seen = {name: {k: v[:2] for k, v in r.seen.items()} for name, r in readers.items()}
    (work / "alerts.json").write_text(json.dumps({"final_ms": final_ms, **seen}))


def merge_groups(found: list[dict]) -> dict:
    """One report from the groups' runs: the first group's steps (cep's), with every other group's engines, CPU,
    floor and check added at each rate; ``alone``: per group, the load and the broker's and producer's CPU of its
    own steps. A side group (``SIDE_GROUPS``: another checkout's ``cep stream``, or this one's ``--state driver``)
    goes under its name beside them."""
    merged = {key: found[0][key] for key in ("startup_s", "warmup_s", "warmup_lag_s", "ticks_total", "steps")}
    merged["startup_s"], merged["warmup_lag_s"] = dict(merged["startup_s"]), dict(merged["warmup_lag_s"])
    merged["check"] = dict(found[0]["check"])
    merged["state"] = found[0].get("state", "spark")  # the layout of the group "cep" (cep stream --state)
    merged["all_batches"] = dict(found[0]["all_batches"])
    merged["groups"] = {g["group"]: {"engines": g["engines"], "ticks_total": g["ticks_total"]} for g in found}
    for step in merged["steps"]:
        step["alone"] = {}
    for group in found:
        side = group["group"] if group["group"] in SIDE_GROUPS else None
        for step, theirs in zip(merged["steps"], group["steps"]):
            step["alone"][group["group"]] = {
                "load_average": theirs["load_average"],
                "broker_cpu_s": theirs["cpu_s"]["broker"],
                "bench_cpu_s": theirs["cpu_s"]["bench"],
                "events_per_s_sent": theirs["events_per_s_sent"],
            }
            if group is found[0]:
                continue
            if side:
                step[side] = {
                    "engines": theirs["engines"],
                    "cpu_s": theirs["cpu_s"].get("cep"),
                    "cep_batches": theirs.get("cep_batches"),
                }
                continue
            step["engines"].update(theirs["engines"])
            step["cpu_s"].update({k: v for k, v in theirs["cpu_s"].items() if k in group["engines"]})
            step.update({name: theirs[name] for name in FLOORS if name in theirs})
        if group is found[0]:
            continue
        if side:
            merged[side] = {
                "python": group["python"],
                "state": group.get("state", "spark"),
                "check": group["check"],
                "all_batches": group["all_batches"],
                "warmup_lag_s": group["warmup_lag_s"],
            }
            continue
        merged["startup_s"].update(group["startup_s"])
        merged["warmup_lag_s"].update(group["warmup_lag_s"])
        merged["all_batches"].update(group["all_batches"])
        for name, entry in group["check"].items():
            if isinstance(entry, dict):  # each engine checked against the replay of its own ticks
                merged["check"][name] = {**entry, "expected_matches": group["check"].get("expected_matches")}
    return merged


def start_broker(prefix: str) -> tuple[Path, KafkaBroker]:
    """A fresh work folder (``prefix`` + a random name) and a broker started in it, with the environment the
    engines' Spark needs (this interpreter for its Python workers, loopback addresses)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    return work, KafkaBroker(work / "broker").start()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,5000,20000,max", help="ticks/s per step; max: as fast as it goes")
    parser.add_argument("--seconds", type=float, default=45.0, help="seconds per step")
    parser.add_argument("--max-events", type=int, default=2_000_000, help="at most this many ticks in the max step")
    parser.add_argument(
        "--settle", type=float, default=60.0, help="at most this long after a step for engines to catch up"
    )
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--no-flink", action="store_true")
    parser.add_argument("--no-floor", action="store_true", help="leave out Spark's floor query")
    parser.add_argument(
        "--no-floor-watermark",
        action="store_true",
        help="leave out Spark's floor for output the watermark releases (each tick held until it passes)",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="run every engine at the same time on one topic (default: one after another, each alone)",
    )
    parser.add_argument(
        "--baseline-python",
        help="also run, alone, the `cep stream` of another checkout's interpreter (e.g. /work/main/.venv/bin/python)",
    )
    parser.add_argument(
        "--driver-state",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run, alone, this checkout's `cep stream --state driver` (the rules on the driver) beside the "
        "keyed layout's `--state spark` (default: both)",
    )
    parser.add_argument(
        "--keyed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run this checkout's `cep stream --state spark` (the keyed layout; default: yes). Without it the "
        "report's first group is another engine's: read each group's numbers in the JSON's `.groups` file",
    )
    parser.add_argument(
        "--baseline-state",
        choices=("spark", "driver"),
        default="spark",
        help="the layout of --baseline-python's `cep stream` (default: spark, the keyed layout)",
    )
    parser.add_argument(
        "--trigger",
        default=TRIGGER,
        help=f"every query's processing-time trigger (default {TRIGGER}, the run on record's); 0s: as soon as the "
        "micro-batch before has ended",
    )
    parser.add_argument("--json", default=str(HERE / "results-kafka-e2e.json"))
    args = parser.parse_args()
    work, broker = start_broker("cep-kafka-e2e-")
    try:
        found = []
        for group in groups_of(args):
            found.append(run_group(group, args, broker, work / group.name))
            # each group's numbers as they come, should a later group or the merge not end
            Path(f"{args.json}.groups").write_text(json.dumps(found, indent=1) + "\n")
        report = {
            "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "nproc": os.cpu_count(),
            "software": software.versions(),
            "mode": "together" if args.together else "one after another",
            "query": QUERY_NAME,
            "query_text": QUERY_TEXT,
            "rewrites": list(REWRITES),
            "keys": args.keys,
            "watermark": f"{WATERMARK_MS / 1000:g}s",
            "trigger": args.trigger,
            # how cep's alerts reach the sinks: the page's prose follows the run it reports
            "stream_layout": STREAM_LAYOUT,
            "seconds_per_rate": args.seconds,
            "settle_rate": SETTLE_RATE,
            **merge_groups(found),
            "flink": {
                "ran": any(g["flink"]["ran"] for g in found),
                "why_not": "; ".join(sorted({g["flink"]["why_not"] for g in found if "flink" in g["engines"]}))
                or "not asked (--no-flink)",
                "package": flink_peer.FLINK_PACKAGE,
                "connector": f"{CONNECTOR}:{CONNECTOR_VERSION}",
                "parallelism": 2,
                "checkpoint_interval": "10s",
            },
            "floor": {
                "ran": any(g["floor"]["ran"] for g in found),
                "why_not": "" if not args.no_floor else "not asked (--no-floor)",
                "query": "bench/kafka_floor.py",
            },
            "floor_watermark": {
                "ran": any(g["floor_watermark"]["ran"] for g in found),
                "why_not": "" if not args.no_floor_watermark else "not asked (--no-floor-watermark)",
                "query": "bench/kafka_floor.py --hold-until-watermark",
            },
            "state_store": os.environ.get(STATE_STORE_ENV) or DEFAULT_STATE_STORE,
            "command": "make bench-kafka  (.venv/bin/python bench/kafka_e2e.py)",
        }
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        print_table(report)
        print(json.dumps(report["check"], indent=1))
        return 0
    finally:
        broker.stop()
        if os.environ.get("CEP_BENCH_KEEP"):
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def print_table(report: dict) -> None:
    cell = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    print(
        f"{'rate':>6} {'sent/s':>8} {'engine':>17} {'done/s':>8} {'steady/s':>8} {'alerts':>7} {'p50 s':>6} "
        f"{'p99 s':>6} {'max s':>6} {'lag s':>6} {'CPU s':>6}"
    )
    for step in report["steps"]:
        for name, e in step["engines"].items():
            cpu = step["cpu_s"].get(name.split("-")[0])
            print(
                f"{step['rate_asked']:>6} {step['events_per_s_sent']:>8} {name:>17} "
                f"{e['events_per_s']:>8} {e.get('events_per_s_steady', '-'):>8} {e['alerts']:>7} "
                f"{cell(e['latency_p50_s']):>6} {cell(e['latency_p99_s']):>6} {cell(e['latency_max_s']):>6} "
                f"{cell(e['lag_at_end_s']):>6} {cpu:>6}"
            )
        for name, label in zip(FLOORS, ("spark floor", "floor, watermark")):
            if floor := step.get(name):
                print(
                    f"{step['rate_asked']:>6} {step['events_per_s_sent']:>8} {label:>17} {'':>8} {'':>8} {'':>7} "
                    f"{cell(floor['latency_p50_s']):>6} {cell(floor['latency_p99_s']):>6} {'':>6} {'':>6} "
                    f"{step['cpu_s'].get(name):>6}  batch p50 {cell(floor['batch_p50_s'])} s"
                )
        sides = [(side, (step.get(side) or {}).get("cep_batches") or {}) for side in SIDE_GROUPS]
        floors = [(name, step.get(name) or {}) for name in FLOORS]
        for name, numbers in (("cep", step.get("cep_batches") or {}), *floors, *sides):
            if numbers.get("parts_p50_ms"):
                print(f"{'':>6} {name} micro-batch p50 {cell(numbers['batch_p50_s'])} s: {numbers['parts_p50_ms']}")
                print(f"{'':>6} {name} foreachBatch p50: {numbers.get('foreach_batch_p50')}")
        for side in SIDE_GROUPS:
            for name, e in ((step.get(side) or {}).get("engines") or {}).items():
                print(
                    f"{'':>6} {side} {name}: p50 {cell(e['latency_p50_s'])} s, p99 {cell(e['latency_p99_s'])} s, "
                    f"done/s {e['events_per_s']}, alerts {e['alerts']}, CPU s {step[side].get('cpu_s')}"
                )


if __name__ == "__main__":
    sys.exit(main())
