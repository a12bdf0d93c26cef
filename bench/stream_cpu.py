"""Where ``cep stream`` spends its CPU at a steady rate: per process and per thread, beside Spark's floor.

    .venv/bin/python bench/stream_cpu.py [--engines driver,spark,floor] [--rate 1000] [--seconds 30]
        [--submit-args '--conf spark.x=y'] [--python OTHER_CHECKOUT/.venv/bin/python]
        [--query RULE.sql] [--json FILE]

A real broker (tests/kafka_broker.py); per engine, one after another, alone with the broker and the producer: a
4-partition topic of its own, the engine started as bench/kafka_e2e.py starts it (``cep stream`` of the V shape,
``local[2]``, watermark 2 s, trigger 500 ms, both Kafka sinks; ``--state driver`` for ``driver``; the floor:
bench/kafka_floor.py), a warm-up at 200 ticks/s until its first micro-batch with rows and then ``WARMUP_S``
more, then ``--rate`` ticks/s for ``--seconds``. Over that step, from /proc: the CPU seconds (user + system) of
each process of the engine's tree by role (the Python driver, the JVM, the Python workers), and of each thread
of the JVM and of the driver by name (the JVM names its threads; the driver's Python threads are named by
``py-spy dump`` when py-spy is installed, else by their native id), with the load average at the end.

``--submit-args`` goes to the engine's ``$PYSPARK_SUBMIT_ARGS`` (``--conf KEY=VALUE`` for a setting the session
does not set itself): how a setting was tried before it was made the service's own.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from kafka_e2e import (  # noqa: E402
    QUERY_TEXT,
    SETTLE_RATE,
    TOPICS,
    Producer,
    StatusWatch,
    _lines,
    start_broker,
    start_cep,
    start_floor,
    stop_engine,
    wait_started,
)
from procmem import descendants, role  # noqa: E402

from tests.kafka_broker import KafkaBroker  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# After the first micro-batch with rows: the Python workers started, the first plans made, the JIT's first wave
# compiled (its compiler threads are the busiest of a cold JVM).
WARMUP_S = 60
FIRST_BATCH_LIMIT_S = 600  # a cold start under load takes minutes
TOP_THREADS = 12
SAMPLED_STACKS = 60
DRAIN_TAIL_S = 3.0


def thread_cpu(root: int) -> dict[tuple[int, int], tuple[str, str, float]]:
    """(pid, tid) -> (process role, thread name, CPU seconds so far) for every thread under ``root``."""
    found = {}
    for pid in [root, *descendants(root)]:
        kind = "driver" if pid == root else role(pid)
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                name = (task / "comm").read_text().strip()
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            found[(pid, int(task.name))] = (kind, name, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return found


def commits(checkpoint: Path) -> int:
    """Micro-batches the query has committed (the files of its checkpoint's commit log)."""
    try:
        return sum(1 for name in os.listdir(checkpoint / "commits") if name.isdigit())
    except OSError:
        return 0


def committed_offsets(checkpoint: Path) -> int:
    """The Kafka offsets summed over partitions up to which the query has committed its micro-batches: the
    input rows it has finished (its offset log's entry of the newest committed micro-batch)."""
    try:
        done = max(int(name) for name in os.listdir(checkpoint / "commits") if name.isdigit())
        lines = (checkpoint / "offsets" / str(done)).read_text().splitlines()
    except (OSError, ValueError):
        return 0
    return sum(sum(partitions.values()) for partitions in json.loads(lines[-1]).values())


def python_thread_names(pid: int) -> dict[int, str]:
    """Native thread id -> Python thread name of ``pid``, from ``py-spy dump`` (empty without py-spy)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return {}
    try:
        text = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names = {}
    for line in text.splitlines():
        m = re.match(r'Thread (\S+) \(([^)]*)\): "([^"]+)"', line.strip())
        if m:
            tid = m.group(1)
            names[int(tid, 16) if tid.startswith("0x") else int(tid)] = m.group(3)
    return names


def by_thread(before: dict, after: dict, python_names: dict[int, str]) -> tuple[dict, list]:
    """CPU seconds per role, and the busiest thread groups (JVM thread names with their numbers folded)."""
    roles: Counter = Counter()
    threads: Counter = Counter()
    for key, (kind, name, cpu) in after.items():
        spent = cpu - (before.get(key, (kind, name, 0.0))[2])
        roles[kind] += spent
        label = python_names.get(key[1], name) if kind == "driver" else name
        threads[f"{kind}: {re.sub(r'[0-9]+', '#', label)}"] += spent
    top = [(name, round(cpu, 1)) for name, cpu in threads.most_common(TOP_THREADS) if cpu >= 0.05]
    return {kind: round(cpu, 1) for kind, cpu in sorted(roles.items())}, top


def _launch(launcher) -> dict:
    return {} if launcher is None else {"launcher": launcher}


def _samples(work: Path) -> dict:
    """bench/thread_sampler.py's running totals (empty without ``--sample``)."""
    try:
        return json.loads((work / "samples.json").read_text())
    except (OSError, ValueError):
        return {}


def _sampled(before: dict, after: dict) -> tuple[dict, list]:
    """CPU seconds per Python thread of the driver over the step, and the stacks that spent the most."""
    threads = {
        name: round(cpu - before.get("threads", {}).get(name, 0.0), 2) for name, cpu in after.get("threads", {}).items()
    }
    stacks = Counter(
        {stack: cpu - before.get("stacks", {}).get(stack, 0.0) for stack, cpu in after.get("stacks", {}).items()}
    )
    return (
        dict(sorted(threads.items(), key=lambda item: -item[1])),
        [(stack, round(cpu, 2)) for stack, cpu in stacks.most_common(SAMPLED_STACKS)],
    )


def _drained(checkpoint: Path, produced: int, engine) -> float:
    """Wait until the query has committed every tick produced (then ``DRAIN_TAIL_S`` more, for the lanes to
    deliver the last micro-batch); the time it got there. A loaded machine makes this minutes."""
    while committed_offsets(checkpoint) < produced:
        if engine.process.poll() is not None:
            raise SystemExit("cep stopped while draining")
        time.sleep(0.5)
    reached = time.time()
    time.sleep(DRAIN_TAIL_S)
    return reached


def run_engine(name: str, args, broker: KafkaBroker, work: Path) -> dict:
    work.mkdir(parents=True)
    ticks = f"ticks-{name}"
    topics = {engine: f"{topic}-{name}" for engine, topic in TOPICS.items()}
    broker.create_topics({ticks: 4, **{topic: 1 for topic in topics.values()}})
    env_before = os.environ.get("PYSPARK_SUBMIT_ARGS")
    if args.submit_args:
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"{args.submit_args} pyspark-shell"
    try:
        if name == "floor":
            engine = start_floor(work, broker.bootstrap, ticks)
        else:
            query_file = work / "v_shape.sql"
            query_file.write_text(args.query.read_text() if args.query else QUERY_TEXT)
            launcher = (str(HERE / "thread_sampler.py"), str(work / "samples.json")) if args.sample else None
            engine = start_cep(
                work, broker.bootstrap, query_file, ticks, topics, args.python, state=name, **_launch(launcher)
            )
    finally:
        if env_before is None:
            os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
        else:
            os.environ["PYSPARK_SUBMIT_ARGS"] = env_before
    try:
        startup = wait_started([engine], time.time())
        producer = Producer(broker.bootstrap, ticks, args.keys)
        watch = StatusWatch(work / "ck" / "status.json")
        watch.start()

        def first_batch() -> bool:
            if engine.process.poll() is not None:
                raise SystemExit(f"{name} stopped:\n{engine.log.read_text(errors='replace')[-3000:]}")
            if name == "floor":
                return bool(_lines(work / "floor" / "floor.jsonl"))
            return any(int(b.get("input_rows") or 0) for b in watch.batches.values())

        producer.run(SETTLE_RATE, FIRST_BATCH_LIMIT_S, until=first_batch)
        producer.run(SETTLE_RATE, args.warmup)
        checkpoint = work / "floor" / "ck" if name == "floor" else work / "ck" / "match"
        committed, offsets = commits(checkpoint), committed_offsets(checkpoint)
        names = python_thread_names(engine.process.pid) if name != "floor" else {}
        before, samples_before = thread_cpu(engine.process.pid), _samples(work)
        sent, start, end = producer.run(args.rate, args.seconds)
        last = end
        if args.drain and name != "floor":
            last = _drained(checkpoint, len(producer.ticks.ts_ms), engine)
        after, samples_after = thread_cpu(engine.process.pid), _samples(work)
        committed, offsets = commits(checkpoint) - committed, committed_offsets(checkpoint) - offsets
        load = os.getloadavg()
        names |= python_thread_names(engine.process.pid) if name != "floor" else {}
        roles, top = by_thread(before, after, names)
        watch.stop.set()
        batches = [b for b in watch.batches.values() if start <= b["seen_at"] <= last and int(b.get("input_rows") or 0)]
        found = {
            "engine": name,
            "startup_s": startup,
            "ticks": sent,
            "rate": round(sent / (end - start), 1),
            "seconds": round(end - start, 1),
            "drained_s": round(last - start, 1) if args.drain else None,
            "cpu_s": round(sum(roles.values()), 1),
            "cpu_s_by_role": roles,
            "busiest_threads": top,
            "load_average": [round(x, 2) for x in load],
            "batches": committed,
            "rows_finished": offsets,
            "rows_per_cpu_s": round(offsets / sum(roles.values())) if roles else None,
            "cpu_s_per_batch": round(sum(roles.values()) / committed, 3) if committed else None,
            "batches_with_rows_seen": len(batches),
            "submit_args": args.submit_args,
            "python": args.python,
            "query": str(args.query or "the V shape"),
        }
        if args.sample:
            found["python_threads"], found["python_stacks"] = _sampled(samples_before, samples_after)
        print(json.dumps(found), flush=True)
        return found
    finally:
        stop_engine(engine)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="driver,spark,floor", help="driver, spark (cep stream's layouts), floor")
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--warmup", type=float, default=WARMUP_S, help="seconds at 200 ticks/s before the step")
    parser.add_argument("--submit-args", default="", help="the engines' $PYSPARK_SUBMIT_ARGS, e.g. '--conf k=v'")
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter of cep stream: another checkout's, for an A/B"
    )
    parser.add_argument(
        "--query", type=Path, help="cep stream's rule (default: the Kafka bench's V shape), e.g. one that never fires"
    )
    parser.add_argument("--json", help="append the results, one JSON line per engine")
    parser.add_argument(
        "--drain",
        action="store_true",
        help="after the step, wait until cep has committed every tick: CPU per tick of a stream that fell behind",
    )
    parser.add_argument(
        "--sample", action="store_true", help="run cep under bench/thread_sampler.py: its Python CPU by thread, stack"
    )
    args = parser.parse_args()
    work, broker = start_broker("cep-stream-cpu-")
    try:
        for name in args.engines.split(","):
            found = run_engine(name, args, broker, work / name)
            if args.json:
                with open(args.json, "a", encoding="utf-8") as out:
                    out.write(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **found}) + "\n")
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
