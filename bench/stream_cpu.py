"""Where ``cep stream`` spends its CPU at a steady rate: per process and per thread, beside Spark's floor; and
the driver JVM's settings side by side.

    .venv/bin/python bench/stream_cpu.py [--engines driver,spark,floor] [--rates 1000[,5000,...]] [--seconds 30]
        [--jvm NAME=FLAGS ...] [--rounds N] [--first-round K]
        [--submit-args '--conf spark.x=y'] [--python OTHER_CHECKOUT/.venv/bin/python]
        [--query RULE.sql] [--json FILE]

A real broker (tests/kafka_broker.py); per engine, one after another, alone with the broker and the producer: a
4-partition topic of its own, the engine started as bench/kafka_e2e.py starts it (``cep stream`` of the V shape,
``local[2]``, watermark 2 s, trigger 500 ms, both Kafka sinks; ``--state driver`` for ``driver``; the floor:
bench/kafka_floor.py), a warm-up at 200 ticks/s until its first micro-batch with rows and then ``WARMUP_S``
more, then each of ``--rates`` ticks/s for ``--seconds`` in turn, each step followed by 200 ticks/s until the
engine has committed every tick of it (``caught_up_s``) or ``CATCH_UP_LIMIT_S``. Over each step, from /proc:
the CPU seconds (user + system) of each process of the engine's tree by role (the Python driver, the JVM, the
Python workers), and of each thread of the JVM and of the driver by name (the JVM names its threads; the
driver's Python threads are named by ``py-spy dump`` when py-spy is installed, else by their native id), with
the load average at the end; the micro-batches committed and their median time, the input rows finished; from
the JVM, its JIT's compilations (``jcmd PerfCounter.print``) and the classes Spark generated and loaded
(``-Xlog:class+load``, one ``GeneratedClass`` per compilation of generated code) per micro-batch.

``--jvm NAME=FLAGS`` (repeated): one fresh engine per setting, its flags in the engine's ``$SPARK_SUBMIT_OPTS``
(after ``session.STREAM_JVM_OPTIONS`` on the JVM's command line, so they win), the settings of one engine back
to back and in turned order every other round (``--rounds``), so that a drift in the machine's load falls on
each alike. With ``--json bench/results-jvm-ab.jsonl`` the runs reach docs/performance.md (``report``, through
bench/run.py --report-only).

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
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from kafka_e2e import (  # noqa: E402
    QUERY_TEXT,
    SETTLE_RATE,
    TOPICS,
    TRIGGER,
    Producer,
    StatusWatch,
    batch_numbers,
    floor_numbers,
    start_broker,
    start_cep,
    start_floor,
    stop_engine,
    wait_started,
)
from procmem import descendants, role  # noqa: E402

from cep.spark_bridge.spark.session import SUBMIT_OPTS_ENV  # noqa: E402
from tests.kafka_broker import KafkaBroker  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# After the first micro-batch with rows: the Python workers started, the first plans made, the JIT's first wave
# compiled (its compiler threads are the busiest of a cold JVM).
WARMUP_S = 60
FIRST_BATCH_LIMIT_S = 600  # a cold start under load takes minutes
TOP_THREADS = 12
# After a step, how long the bench waits at 200 ticks/s for the engine to commit every tick of it: a stream
# that has not caught up by then fell behind at that rate.
CATCH_UP_LIMIT_S = 60
SAMPLED_STACKS = 60
DRAIN_TAIL_S = 3.0  # after the last tick is committed, for the lanes to deliver the last micro-batch


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


@dataclass(frozen=True)
class JvmSetting:
    """A name for the report and the driver JVM flags it puts in the engine's ``$SPARK_SUBMIT_OPTS`` (they come
    after ``session.STREAM_JVM_OPTIONS`` on the JVM's command line, so they win)."""

    name: str
    flags: str


def jvm_settings(texts: list[str]) -> list[JvmSetting]:
    """``NAME=FLAGS`` each (``c2=-XX:TieredStopAtLevel=4``); none: the engine's own options alone."""
    found = [JvmSetting(*text.split("=", 1)) for text in texts]
    return found or [JvmSetting("default", "")]


def perf_counters(pid: int) -> dict[str, int]:
    """The JIT's and the class loader's counters of JVM ``pid`` (``jcmd PerfCounter.print``; empty without jcmd)."""
    try:
        text = subprocess.run(
            ["jcmd", str(pid), "PerfCounter.print"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    wanted = {"sun.ci.totalCompiles", "sun.ci.standardTime", "sun.ci.osrTime", "sun.os.hrt.frequency"}
    wanted.add("java.cls.loadedClasses")
    return {
        name: int(value)
        for name, value in (line.split("=", 1) for line in text.splitlines() if "=" in line)
        if name in wanted and value.strip().lstrip("-").isdigit()
    }


def generated_classes(log: Path) -> int:
    """Spark's generated classes the JVM has loaded so far: one per compilation of whole-stage or expression
    code (Janino's ``GeneratedClass``; the nested classes of one compilation are not counted again)."""
    try:
        with log.open(errors="replace") as lines:
            return sum(1 for line in lines if "expressions.GeneratedClass " in line)
    except OSError:
        return 0


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


def jvm_pid(root: int) -> int | None:
    return next((pid for pid in descendants(root) if role(pid) == "jvm"), None)


@dataclass
class Running:
    """One engine started with one JVM setting, and what the steps read from it."""

    name: str
    setting: JvmSetting
    engine: object
    checkpoint: Path
    watch: StatusWatch
    class_log: Path
    producer: Producer
    work: Path
    python_names: dict = field(default_factory=dict)
    first_batch_s: float = 0.0

    def sample(self) -> dict:
        pid = jvm_pid(self.engine.process.pid)
        return {
            "threads": thread_cpu(self.engine.process.pid),
            "commits": commits(self.checkpoint),
            "offsets": committed_offsets(self.checkpoint),
            "perf": perf_counters(pid) if pid else {},
            "generated": generated_classes(self.class_log),
            "samples": _samples(self.work),
        }


def start_engine(name: str, setting: JvmSetting, args, broker: KafkaBroker, work: Path) -> Running:
    """The engine started, its first micro-batch with rows seen, and the warm-up at 200 ticks/s done."""
    work.mkdir(parents=True)
    ticks = f"ticks-{work.name}"
    topics = {engine: f"{topic}-{work.name}" for engine, topic in TOPICS.items()}
    broker.create_topics({ticks: 4, **{topic: 1 for topic in topics.values()}})
    class_log = work / "classes.log"
    env_before = {key: os.environ.get(key) for key in ("PYSPARK_SUBMIT_ARGS", SUBMIT_OPTS_ENV)}
    if args.submit_args:
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"{args.submit_args} pyspark-shell"
    # every class the JVM loads, to count Spark's compilations; the same flag for every setting
    os.environ[SUBMIT_OPTS_ENV] = f"{setting.flags} -Xlog:class+load=info:file={class_log}".strip()
    started = time.time()
    try:
        if name == "floor":
            engine = start_floor(work, broker.bootstrap, ticks, trigger=args.trigger)
        else:
            query_file = work / "v_shape.sql"
            query_file.write_text(args.query.read_text() if args.query else QUERY_TEXT)
            sampler = {"launcher": (str(HERE / "thread_sampler.py"), str(work / "samples.json"))} if args.sample else {}
            engine = start_cep(
                work,
                broker.bootstrap,
                query_file,
                ticks,
                topics,
                args.python,
                state=name,
                trigger=args.trigger,
                **sampler,
            )
    finally:
        for key, value in env_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    checkpoint = work / "floor" / "ck" if name == "floor" else work / "ck" / "match"
    watch = StatusWatch(work / "ck" / "status.json")
    producer = Producer(broker.bootstrap, ticks, args.keys)
    running = Running(name, setting, engine, checkpoint, watch, class_log, producer, work)
    try:
        wait_started([engine], started)
        watch.start()

        def first_batch() -> bool:
            if engine.process.poll() is not None:
                raise SystemExit(f"{name} stopped:\n{engine.log.read_text(errors='replace')[-3000:]}")
            return commits(checkpoint) > 0 and committed_offsets(checkpoint) > 0

        running.producer.run(SETTLE_RATE, FIRST_BATCH_LIMIT_S, until=first_batch)
        running.first_batch_s = round(time.time() - started, 1)
        running.producer.run(SETTLE_RATE, args.warmup)
    except BaseException:
        stop_engine(engine)
        raise
    return running


def run_step(running: Running, rate: float, args) -> dict:
    """``rate`` ticks/s for ``args.seconds``, then 200 ticks/s until the engine has committed every tick of the
    step (caught up) or ``CATCH_UP_LIMIT_S``: CPU by role and thread, micro-batches, JIT and codegen counts."""
    name, engine = running.name, running.engine
    if name != "floor" and not running.python_names:
        running.python_names = python_thread_names(engine.process.pid)
    before = running.sample()
    sent, start, end = running.producer.run(rate, args.seconds)
    produced = len(running.producer.ticks.ts_ms)

    def caught_up() -> bool:
        return committed_offsets(running.checkpoint) >= produced

    if args.drain:  # no more ticks; the CPU counted until every tick of the step is committed
        while not caught_up():
            if engine.process.poll() is not None:
                raise SystemExit(f"{name} stopped while draining")
            time.sleep(0.5)
        caught = round(time.time() - end, 1)
        time.sleep(DRAIN_TAIL_S)
    after = running.sample()
    load = os.getloadavg()
    if not args.drain:
        settle_start = time.time()
        running.producer.run(SETTLE_RATE, CATCH_UP_LIMIT_S, until=caught_up)
        caught = round(time.time() - settle_start, 1) if caught_up() else None
    roles, top = by_thread(before["threads"], after["threads"], running.python_names)
    batches = after["commits"] - before["commits"]
    rows = after["offsets"] - before["offsets"]
    cpu = sum(roles.values())
    perf = {key: after["perf"].get(key, 0) - before["perf"].get(key, 0) for key in after["perf"]}
    frequency = after["perf"].get("sun.os.hrt.frequency") or 1
    if name == "floor":
        timing = floor_numbers(running.work / "floor", start, end)
    else:
        timing = batch_numbers(running.watch, start, end)
    found = {
        "rate_asked": rate,
        "rate": round(sent / (end - start), 1),
        "seconds": round(end - start, 1),
        "cpu_s": round(cpu, 1),
        "cpu_s_by_role": roles,
        "busiest_threads": top,
        "jit_compiler_cpu_s": round(sum(cpu for label, cpu in top if "CompilerThre" in label), 1),
        "load_average": [round(x, 2) for x in load],
        "batches": batches,
        "rows_finished": rows,
        "rows_finished_per_s": round(rows / (end - start)),
        "rows_per_cpu_s": round(rows / cpu) if cpu else None,
        "cpu_s_per_batch": round(cpu / batches, 3) if batches else None,
        "batch_p50_s": timing.get("batch_p50_s"),
        "caught_up_s": caught,
        "jit_compiles_per_batch": round(perf.get("sun.ci.totalCompiles", 0) / batches, 1) if batches else None,
        "jit_time_s": round((perf.get("sun.ci.standardTime", 0) + perf.get("sun.ci.osrTime", 0)) / frequency, 2),
        "classes_loaded_per_batch": round(perf.get("java.cls.loadedClasses", 0) / batches, 1) if batches else None,
        "codegen_per_batch": round((after["generated"] - before["generated"]) / batches, 2) if batches else None,
        "drained": args.drain,
    }
    if args.sample:
        found["python_threads"], found["python_stacks"] = _sampled(before["samples"], after["samples"])
    return found


def run_engine(name: str, setting: JvmSetting, args, broker: KafkaBroker, work: Path) -> dict:
    """One engine with one JVM setting: start, warm up, then each of ``--rates`` in turn."""
    running = start_engine(name, setting, args, broker, work)
    try:
        steps = []
        for rate in args.rates:
            steps.append(run_step(running, rate, args))
            print(json.dumps({"engine": name, "jvm": setting.name, **steps[-1]}), flush=True)
        return {
            "engine": name,
            "jvm": setting.name,
            "jvm_flags": setting.flags,
            "first_batch_s": running.first_batch_s,
            "warmup_s": args.warmup,
            "steps": steps,
            "submit_args": args.submit_args,
            "python": args.python,
            "query": str(args.query or "the V shape"),
            "trigger": args.trigger,
        }
    finally:
        running.watch.stop.set()
        stop_engine(running.engine)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="driver,spark,floor", help="driver, spark (cep stream's layouts), floor")
    parser.add_argument("--rates", default="1000", help="ticks/s of each step, in turn on one running engine")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--warmup", type=float, default=WARMUP_S, help="seconds at 200 ticks/s before the steps")
    parser.add_argument(
        "--jvm",
        action="append",
        default=[],
        help="NAME=FLAGS, a driver JVM setting to try (repeat it: the settings run one after another per engine)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="times over every engine and setting, ABAB...")
    parser.add_argument("--first-round", type=int, default=0, help="the first round's number: to go on with a run")
    parser.add_argument("--submit-args", default="", help="the engines' $PYSPARK_SUBMIT_ARGS, e.g. '--conf k=v'")
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter of cep stream: another checkout's, for an A/B"
    )
    parser.add_argument(
        "--query", type=Path, help="cep stream's rule (default: the Kafka bench's V shape), e.g. one that never fires"
    )
    parser.add_argument("--trigger", default=TRIGGER, help=f"the engines' processing-time trigger (default {TRIGGER})")
    parser.add_argument("--json", help="append the results, one JSON line per engine and setting")
    parser.add_argument(
        "--drain",
        action="store_true",
        help="after a step, no more ticks: CPU counted until cep has committed every tick (a stream that fell behind)",
    )
    parser.add_argument(
        "--sample", action="store_true", help="run cep under bench/thread_sampler.py: its Python CPU by thread, stack"
    )
    args = parser.parse_args()
    args.rates = [float(rate) for rate in args.rates.split(",")]
    settings = jvm_settings(args.jvm)
    work, broker = start_broker("cep-stream-cpu-")
    try:
        for round_number in range(args.first_round, args.first_round + args.rounds):
            # the settings back to back per engine, their order turned every other round: drift in the
            # machine's load falls on each setting alike
            order = settings if round_number % 2 == 0 else settings[::-1]
            for name in args.engines.split(","):
                for setting in order:
                    run_dir = work / f"{name}-{setting.name}-{round_number}"
                    found = run_engine(name, setting, args, broker, run_dir)
                    found = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "round": round_number, **found}
                    print(json.dumps(found), flush=True)
                    if args.json:
                        with open(args.json, "a", encoding="utf-8") as out:
                            out.write(json.dumps(found) + "\n")
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


RESULTS = HERE / "results-jvm-ab.jsonl"


def _cell(value, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def report(path: Path = RESULTS) -> list[str]:
    """docs/performance.md's section on cep stream's driver JVM settings, from the runs in ``path``."""
    try:
        runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return []
    runs = [run for run in runs if run.get("jvm") and run.get("steps")]
    if not runs:
        return []
    settings = {run["jvm"]: run["jvm_flags"] for run in runs}
    layouts = {"driver": "driver (`--state driver`)", "spark": "keyed (`--state spark`)", "floor": "Spark's floor"}
    first, last = min(run["when"] for run in runs), max(run["when"] for run in runs)
    rates = " then ".join(f"{rate:,.0f}" for rate in [step["rate_asked"] for step in runs[0]["steps"]])
    lines = [
        "",
        "## cep stream's driver JVM: C1 against C2 (bench/stream_cpu.py --jvm)",
        "",
        "`cep stream` of the Kafka bench's V shape (`local[2]`, watermark 2 s, trigger 500 ms, both Kafka sinks, "
        "1,000 keys) on a real broker, one JVM setting at a time, each a fresh stream: started, its first "
        f"micro-batch with rows, {runs[0].get('warmup_s', WARMUP_S):.0f} s at 200 ticks/s, then {rates} ticks/s "
        f"for {runs[0]['steps'][0]['seconds']:.0f} s each, each step followed by 200 ticks/s until the stream "
        "has committed every tick of it "
        f"(*caught up after*, blank when not within {CATCH_UP_LIMIT_S} s). The settings of one layout run back "
        "to back, in turned order every other round, on this 2-core machine shared with other engineers' work "
        "(the load average at the step's end is given: figures from runs at different loads do not compare). "
        "CPU seconds of the stream's whole process tree (user + system, /proc) during the step; *finished/s*: "
        "Kafka offsets the stream committed during the step per second; *JIT CPU s*: the JVM's compiler "
        "threads; *JIT compiles* (the JVM's counter) and *Spark compilations* (generated classes the JVM "
        f"loaded, `-Xlog:class+load`) per micro-batch. A step without micro-batches: the stream was still on "
        f"the backlog of the step before, in one long micro-batch. Runs {first} to {last}. Reproduce:",
        "",
        "    .venv/bin/python bench/stream_cpu.py --engines driver,spark --rates 1000,5000,20000,1000 \\",
        "        " + " ".join(f"--jvm '{name}={flags}'" for name, flags in settings.items()) + " \\",
        "        --json bench/results-jvm-ab.jsonl",
        "",
        "Settings: " + "; ".join(f"*{name}*: `{flags or 'none'}`" for name, flags in settings.items()) + ".",
        "",
        "| layout | step (ticks/s) | JVM | round | finished/s | micro-batches | CPU s per micro-batch | micro-batch "
        "p50 s | caught up after s | JIT CPU s | JIT compiles per micro-batch | Spark compilations per micro-batch "
        "| start to first micro-batch s | load |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = []
    for run in runs:
        for index, step in enumerate(run["steps"]):
            again = step["rate_asked"] in [s["rate_asked"] for s in run["steps"][:index]]
            label = f"{step['rate_asked']:,.0f}" + (" again" if again else "")
            rows.append(((run["engine"], index, run["jvm"], run["round"]), label, run, step))
    for (engine, _, jvm, round_number), label, run, step in sorted(rows, key=lambda row: row[0]):
        lines.append(
            f"| {layouts.get(engine, engine)} | {label} | {jvm} | {round_number + 1} "
            f"| {step['rows_finished_per_s']:,} | {step['batches']} | {_cell(step['cpu_s_per_batch'], '{:.2f}')} "
            f"| {_cell(step['batch_p50_s'], '{:.1f}')} | {_cell(step['caught_up_s'], '{:.0f}')} "
            f"| {step['jit_compiler_cpu_s']:.1f} | {_cell(step['jit_compiles_per_batch'], '{:.0f}')} "
            f"| {_cell(step['codegen_per_batch'], '{:.1f}')} | {run['first_batch_s']:.0f} "
            f"| {step['load_average'][0]:.0f} |"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
