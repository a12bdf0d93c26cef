"""How fast a sink's lane delivers the driver layout's micro-batches at 20,000 ticks/s, and where its CPU goes.

    .venv/bin/python bench/lane_cost.py [--batches 6] [--broker] [--busy] [--python A,B --rounds N]

The alerts are real: the Kafka bench's V shape (bench/kafka_e2e.py's rule) run by ``DriverState.run_frame`` over
micro-batches of 32,000 ticks of 1,000 symbols (bench/driver_rules.py's random walks, a micro-batch at 20,000
ticks/s: about 6,400 alerts), written as ``foreachBatch`` hands them over (``rows_to_alerts``, the JSON output's
``as_stored``).

- Without ``--broker``: each step of a lane's work on one micro-batch, one after another on this thread, timed by
  its CPU clock: the outbox entry made (``entry_text``, on the ``foreachBatch`` thread) and written, then a lane's
  read of it (the file, the JSON parse, the times revived), each alert's Kafka message (``alert_message``), the
  micro-batch's messages at once (``batch_messages``, where the checkout has it), and the bookkeeping (the journal
  record, the entry removed).
- With ``--broker``: a real broker (tests/kafka_broker.py) and the stream's own ``DeliveryLanes`` with both Kafka
  sinks (at least once and exactly once, as ``cep stream`` in the Kafka bench runs them); the micro-batches are
  handed over (``stage``, ``seal``) one after another at the pace the query makes them (``--interval``, 1.41 s:
  37,500 ticks at 20,000 ticks/s); per lane, the alerts per second from the first hand-over until the lane has
  delivered the last, each lane thread's CPU (``/proc``) and its split (the lane's read, the messages, the
  produce calls, the rest of the delivery: flush, transaction, polls), and how long after its hand-over each
  micro-batch was delivered. ``--busy`` runs a Python thread that computes as long as the hand-overs go on
  (the ``foreachBatch`` thread's rules, holding the interpreter's lock): how much of the lock the lanes get
  against it.
- ``--python A,B``: the run alternated between interpreters (each its own checkout of cep), ABAB, ``--rounds``
  times.

Results: bench/results-lane-cost.json (the last run of each mode).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results-lane-cost.json"
TICKS_PER_BATCH = 32_000
# 37,500 ticks a micro-batch at 20,000 ticks/s in the live stream's last runs: one every 1.41 s
BATCH_INTERVAL_S = 1.41
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def alert_batches(count: int, rows: int = TICKS_PER_BATCH, keys: int = 1000, warmup: int = 3) -> list[list[dict]]:
    """``count`` micro-batches' alerts as ``foreachBatch`` hands them to the lanes (``DriverRows._write_alerts``)."""
    sys.path.insert(0, str(HERE))
    import driver_rules
    import kafka_e2e

    from cep.spark_bridge.alerting.driver_state import DriverRows, DriverState
    from cep.spark_bridge.alerting.rule_set import build_rule_set
    from cep.spark_bridge.alerting.store import RuleStore
    from cep.spark_bridge.sinks.alerts import rows_to_alerts
    from cep.spark_bridge.sinks.file import FileSink

    work = Path(tempfile.mkdtemp(prefix="cep-lane-cost-"))
    (work / "rules").mkdir()
    (work / "rules" / "v_shape.sql").write_text(kafka_e2e.QUERY_TEXT)
    payload, ruleset = build_rule_set(str(work / "rules"), input_types=driver_rules.TYPES, time_column="ts")
    assert not ruleset.errors, [str(e) for e in ruleset.errors]
    store = RuleStore(str(work / "store"))
    store.publish(payload)
    driver = DriverState(
        str(work / "ck"), store.directory, columns=list(driver_rules.TYPES), delay_ms=kafka_e2e.WATERMARK_MS,
        housekeeping_us=3_600_000_000,
    )  # fmt: skip
    output = FileSink(str(work / "out"), format="json")
    out = []
    for batch_id, frame in enumerate(driver_rules.frames(rows, keys, warmup + count)):
        rows_out = DriverRows.of(driver.run_frame(frame, batch_id))
        if batch_id >= warmup:
            out.append(output.as_stored(rows_to_alerts(rows_out.alerts)))
    return out


def _cpu(step: dict, name: str):
    class Timed:
        def __enter__(self):
            self.began = time.thread_time()

        def __exit__(self, *exc):
            step[name] = step.get(name, 0.0) + time.thread_time() - self.began

    return Timed()


def steps(batches: list[list[dict]]) -> dict:
    """Each step of a lane's work, one micro-batch after another, on this thread."""
    import gc

    from cep.spark_bridge.sinks import lanes
    from cep.spark_bridge.sinks.base import atomic_write

    entries, messages = _modules()
    work = Path(tempfile.mkdtemp(prefix="cep-lane-steps-"))
    outbox = entries.Outbox(str(work / "outbox"))
    journal = lanes.Journal(str(work / "journal"))
    batch_messages = getattr(messages, "batch_messages", None)
    per_batch = []
    for batch_id, alerts in enumerate(batches):
        gc.collect()
        step: dict[str, float] = {}
        with _cpu(step, "entry_text (foreachBatch)"):
            text = entries.entry_text(batch_id, alerts)
        with _cpu(step, "entry_write (foreachBatch)"):
            os.makedirs(work / "outbox" / "s", exist_ok=True)
            atomic_write(str(work / "outbox" / "s" / f"{batch_id:012d}.{len(alerts)}.json"), text)
            outbox.seal("s", batch_id)
        name = next(iter(outbox._names("s", batch_id)))
        with _cpu(step, "lane_read_file"):
            with open(work / "outbox" / "s" / name, "rb") as fh:
                data = fh.read()
        with _cpu(step, "lane_parse_json"):
            records = json.loads(data.decode("utf-8"))["alerts"]
        with _cpu(step, "lane_revive_times"):
            loaded = [entries._from_json(a) for a in records]
        with _cpu(step, "encode_per_alert"):
            per_alert = [messages.alert_message(a) for a in loaded]
        if batch_messages is not None:
            with _cpu(step, "encode_batch"):
                whole = batch_messages(loaded)
            assert whole == per_alert, "batch_messages differs from alert_message"
        with _cpu(step, "journal_and_remove"):
            journal.write(f"deliver.s.{batch_id:012d}", {"kind": "deliver", "batch": batch_id})
            outbox.remove("s", batch_id)
        step["alerts"] = len(alerts)
        per_batch.append(step)
    names = [k for k in per_batch[0] if k != "alerts"]
    alerts = statistics.mean(s["alerts"] for s in per_batch)
    return {
        "alerts_per_batch": round(alerts),
        "cpu_ms_per_batch_p50": {k: round(statistics.median(s[k] for s in per_batch) * 1000, 2) for k in names},
        "us_per_alert_p50": {k: round(statistics.median(s[k] for s in per_batch) / alerts * 1e6, 2) for k in names},
    }


def _modules():
    """(the module of the outbox's entries, the module of the Kafka messages) in this checkout."""
    import importlib

    from cep.spark_bridge.sinks import kafka, lanes

    try:
        return importlib.import_module("cep.spark_bridge.sinks.outbox"), importlib.import_module(
            "cep.spark_bridge.sinks.kafka_messages"
        )
    except ImportError:  # before they had modules of their own
        return lanes, kafka


def _thread_cpu_s(native_id: int) -> float:
    try:
        fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wrap_lane_steps(spent: dict[str, dict[str, float]]) -> None:
    """Charge each lane step's thread CPU to ``spent[thread name][step]`` (outermost call of each only)."""
    from cep.spark_bridge.sinks import kafka, lanes

    entries, messages = _modules()
    targets = {
        "lane_read": (entries.Outbox, "load"),
        "messages": (messages, "alert_message"),
        "messages_batch": (messages, "batch_messages"),
        "produce": (kafka.KafkaSink, "_send"),
        "produce_batch": (kafka.KafkaSink, "_send_all"),
        "deliver_total": (kafka.KafkaSink, "deliver"),
        "deliver_total_eo": (kafka.KafkaExactlyOnceSink, "deliver"),
        "journal_write": (lanes.Journal, "write"),
        "outbox_remove": (entries.Outbox, "remove"),
    }
    depth = threading.local()
    for name, (holder, attribute) in targets.items():
        original = getattr(holder, attribute, None)
        if original is None:
            continue
        if name == "deliver_total_eo":
            name = "deliver_total"

        def timed(*args, __original=original, __name=name, **kwargs):
            inside = getattr(depth, __name, 0)
            setattr(depth, __name, inside + 1)
            began = time.thread_time()
            try:
                return __original(*args, **kwargs)
            finally:
                setattr(depth, __name, inside)
                if not inside:
                    mine = spent.setdefault(threading.current_thread().name, {})
                    mine[__name] = mine.get(__name, 0.0) + time.thread_time() - began

        setattr(holder, attribute, timed)  # a module's function: SharedMessages calls the module's global


def burn(stop: threading.Event, done: list[float]) -> None:
    """A Python thread that computes (the rules of the next micro-batch), holding the interpreter's lock."""
    began = time.thread_time()
    while not stop.is_set():
        sum(i * i for i in range(20_000))
    done.append(time.thread_time() - began)


def through_broker(batches: list[list[dict]], interval: float, busy: bool) -> dict:
    """The stream's ``DeliveryLanes`` with both Kafka sinks, against a real broker."""
    sys.path.insert(0, str(HERE.parent))
    from cep.spark_bridge.sinks.kafka import KafkaExactlyOnceSink, KafkaSink
    from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal
    from tests.kafka_broker import KafkaBroker

    spent: dict[str, dict[str, float]] = {}
    wrap_lane_steps(spent)
    work = Path(tempfile.mkdtemp(prefix="cep-lane-broker-"))
    with KafkaBroker(work / "broker") as broker:
        broker.create_topics({"alerts": 1, "alerts-eo": 1})
        sinks = [
            KafkaSink(f"kafka://{broker.bootstrap}/alerts"),
            KafkaExactlyOnceSink(f"kafka-exactly-once://{broker.bootstrap}/alerts-eo", state_dir=str(work / "sinks")),
        ]
        # a first micro-batch, not timed: the producers connect, the transactions start
        warm = DeliveryLanes(sinks, str(work / "outbox-warm"), Journal(str(work / "journal-warm"))).start()
        warm.spool(0, batches[0][:100])
        warm.drain()
        warm.stopping.set()
        for lane in warm.lanes.values():
            lane.wake.set()
            lane.join()
        spent.clear()
        delivery = DeliveryLanes(sinks, str(work / "outbox"), Journal(str(work / "journal"))).start()
        handed: dict[int, float] = {}
        delivered: dict[str, dict[int, float]] = {key: {} for key in delivery.lanes}
        for lane in delivery.lanes.values():  # when each micro-batch's journal record is written
            original = lane._succeeded

            def succeeded(batch_id, report, __original=original, __key=lane.key):
                delivered[__key][batch_id] = time.monotonic()
                return __original(batch_id, report)

            lane._succeeded = succeeded
        cpu_before = {key: _thread_cpu_s(lane.native_id) for key, lane in delivery.lanes.items()}
        stop, burned = threading.Event(), []
        burner = threading.Thread(target=burn, args=(stop, burned), name="busy-foreachBatch")
        if busy:
            burner.start()
        hand_cpu = 0.0
        began = time.monotonic()
        for index, alerts in enumerate(batches, start=1):
            due = began + (index - 1) * interval
            time.sleep(max(0.0, due - time.monotonic()))
            cpu = time.thread_time()
            delivery.seal(delivery.stage(index, alerts))
            hand_cpu += time.thread_time() - cpu
            handed[index] = time.monotonic()
        stop.set()
        delivery.drain()
        ended = time.monotonic()
        if busy:
            burner.join()
        cpu_after = {key: _thread_cpu_s(lane.native_id) for key, lane in delivery.lanes.items()}
        delivery.stop()
        total = sum(len(a) for a in batches)
        lanes_out = {}
        for key, lane in delivery.lanes.items():
            last = max(delivered[key].values())
            lags = [delivered[key][b] - handed[b] for b in handed]
            lanes_out[lane.sink.describe().split("://")[0]] = {
                "alerts_per_s_handover_to_last": round(total / (last - began)),
                "cpu_s": round(cpu_after[key] - cpu_before[key], 3),
                "alerts_per_lane_cpu_s": round(total / max(1e-9, cpu_after[key] - cpu_before[key])),
                "delivered_after_handover_s": [round(v, 2) for v in lags],
                "split_cpu_s": {k: round(v, 3) for k, v in sorted(spent.get(lane.name, {}).items())},
            }
    return {
        "alerts": total,
        "micro_batches": len(batches),
        "interval_s": interval,
        "handover_cpu_s_foreachBatch": round(hand_cpu, 3),
        "busy_thread_cpu_s": round(burned[0], 3) if burned else None,
        "wall_s": round(ended - began, 2),
        "lanes": lanes_out,
    }


def one(args) -> dict:
    import cep

    repo = Path(cep.__file__).resolve().parent.parent
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    batches = alert_batches(args.batches)
    result = {"checkout": f"{repo}@{head.stdout.strip()}", "load_average": round(os.getloadavg()[0], 1)}
    if args.broker:
        result["broker"] = through_broker(batches, args.interval, args.busy)
    else:
        result["steps"] = steps(batches)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=6, help="micro-batches of 32,000 ticks")
    parser.add_argument("--broker", action="store_true", help="through the lanes to a real broker")
    parser.add_argument("--busy", action="store_true", help="with a Python thread computing beside the lanes")
    parser.add_argument("--interval", type=float, default=BATCH_INTERVAL_S, help="seconds between hand-overs")
    parser.add_argument("--python", help="interpreters to alternate, comma-separated (default: this one)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args()
    if args.child:  # the interpreter's own checkout of cep (its editable install), imported before bench/'s modules
        print(json.dumps(one(args)))
        return 0
    pythons = args.python.split(",") if args.python else [sys.executable]
    runs = []
    for _ in range(args.rounds):
        for python in pythons:
            command = [python, __file__, "--child", "--batches", str(args.batches), "--interval", str(args.interval)]
            command += (["--broker"] if args.broker else []) + (["--busy"] if args.busy else [])
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return done.returncode
            run = json.loads(done.stdout.strip().splitlines()[-1])
            runs.append(run)
            print(json.dumps(run), flush=True)
    mode = ("broker-busy" if args.busy else "broker") if args.broker else "steps"
    saved = json.loads(Path(args.json).read_text()) if Path(args.json).exists() else {}
    saved[mode] = {"command": " ".join(sys.argv[1:]), "runs": runs}
    Path(args.json).write_text(json.dumps(saved, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
