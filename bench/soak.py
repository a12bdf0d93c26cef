"""Soak: a Spark structured stream for N minutes with bad rows, late rows and a SIGKILLed driver.

    make soak                                       # 10 minutes; writes bench/results-soak.json
    .venv/bin/python bench/soak.py --minutes 2 --kill-every 50     # a short one while developing

What runs (everything under one temporary directory, removed at the end unless --keep):

* a writer thread in this process writes one JSON-lines file every --file-interval seconds into the
  source directory (written under a dot-name, then renamed, so Spark never reads half a file). The
  events are tests/test_streaming.py's (``make_events``: 7 symbols, whole-second times with ties,
  ``make_batches``: rows deferred to later files inside the watermark delay, each file shuffled), each
  with an ``id``; about --bad of the lines are bad (in turn: a NULL event time, a string price, an
  unparseable event time, a line that is not JSON) and about --late are rows far behind the
  watermark (their time is ``LATE_BEHIND`` before the newest event of the files Spark has surely read
  two micro-batches earlier, see ``late_times``);
* a Spark driver process (this file with --driver: local[2], ``q.on_spark`` with the V-shape query,
  watermark ``DELAY_S``, session timeout ``SESSION_S``, a Parquet sink and a checkpoint, trigger
  every micro-batch as soon as the last ends) in its own process group, SIGKILLed (the Python driver,
  its JVM and the Python workers at once) every --kill-every seconds and started again from the
  checkpoint;
* at the end, a last file with one row far ahead (so every session ends), one more kill, and a last
  driver with ``trigger(availableNow=True)`` that reads what is left, fires the timers and dumps the
  output (read through the sink's ``_spark_metadata``: committed files only).

The check: the matches must be exactly ``expected_output`` (tests/test_streaming.py: the batch replay,
``q.run`` session by session) over the good rows that were not sent late; every bad row must come out
as a row with its reason, and every row sent late too, unless Spark's watermark had not passed it yet
(then it is on time and matched: counted as ``late_sent_but_on_time`` and replayed with the good
rows); no ``match_id`` twice. The report: events in, matches out,
dead-lettered by reason, late, lost (expected matches missing: must be 0), unexpected matches,
duplicated match ids (must be 0), rows not accounted for, peak memory (/proc VmHWM of the harness,
the drivers, the JVMs and the Python workers), kills survived.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from procmem import TreeMemory  # noqa: E402

DELAY_S = 20
SESSION_S = 60
SYMBOLS = 7  # make_events names them A..G
# Spark reads at most this many new files per micro-batch, so a file this many places back is surely
# in an earlier micro-batch than the file being read (files are renamed into place in order).
MAX_FILES_PER_TRIGGER = 20
# A file this many places back was read two micro-batches earlier or more. Two, not one: the first
# micro-batch after a restart gets the watermark of the last one before it, not advanced by that
# batch's own rows (Spark restores the watermark from the offset log, not the event times behind it).
LATE_FILES_BACK = 2 * MAX_FILES_PER_TRIGGER
LATE_BEHIND = dt.timedelta(seconds=2 * DELAY_S)
# What each kind of bad line must come out as (cep_late_reason).
BAD_KINDS = {
    "null_time": "null_event_time",
    "wrong_type": "wrong_type",
    "bad_time": "bad_event_time",
    "not_json": "not_json",
}
LATE_REASONS = ("behind_watermark", "behind_forced_release")
# A driver that does not finish its last run (read what is left, fire the timers) in this long is stuck.
DRAIN_TIMEOUT_S = 900
NOT_JSON_PREFIX = "this line is not JSON, id #"


# ------------------------------------------------------------------------------------------ the input


@dataclass
class SoakInput:
    """The files to write, and what the harness knows about every line in them."""

    files: list  # per file, its lines (str)
    good: list  # the good rows sent on time (dicts): the replay's input
    late_rows: dict  # id -> a good row sent behind the watermark
    bad_ids: dict  # id -> bad kind (BAD_KINDS key)
    last: list  # the final file's lines (one row far ahead)
    lines: int = 0


def row_line(row: dict, **override) -> str:
    record = {**row, "ts": None if row["ts"] is None else row["ts"].isoformat(), **override}
    return json.dumps(record)


def late_times(batches: list) -> list:
    """Per file, a time surely at or below the watermark when Spark reads it (None: no such time yet):
    the newest event of the files ``LATE_FILES_BACK`` places back or more, minus twice the delay."""
    newest, out = None, []
    for index in range(len(batches)):
        back = index - LATE_FILES_BACK
        if back >= 0 and batches[back]:
            top = max(e["ts"] for e in batches[back])
            newest = top if newest is None else max(newest, top)
        out.append(None if newest is None else newest - LATE_BEHIND)
    return out


def make_input(seed: int, files: int, rows_per_file: int, bad: float, late: float) -> SoakInput:
    from tests.test_streaming import make_batches, make_events, sentinel

    rnd = random.Random(seed)
    events = make_events(rnd, symbols=SYMBOLS, per_symbol=max(1, files * rows_per_file // SYMBOLS))
    for number, event in enumerate(events):
        event["id"] = number
    batches = make_batches(events, rnd, DELAY_S, files)
    next_id = len(events)
    kinds = list(BAD_KINDS)
    out = SoakInput(files=[], good=[], late_rows={}, bad_ids={}, last=[])
    for batch, floor in zip(batches, late_times(batches)):
        lines = []
        for event in batch:
            if rnd.random() < bad:
                kind = kinds[len(out.bad_ids) % len(kinds)]
                out.bad_ids[next_id] = kind
                lines.append(bad_line(kind, event, next_id))
                next_id += 1
            if floor is not None and rnd.random() < late:
                row = {
                    "symbol": event["symbol"],
                    "ts": floor - dt.timedelta(seconds=rnd.randint(0, DELAY_S)),
                    "price": event["price"],
                    "id": next_id,
                }
                out.late_rows[next_id] = row
                lines.append(row_line(row))
                next_id += 1
            lines.append(row_line(event))
            out.good.append(event)
        rnd.shuffle(lines)
        out.files.append(lines)
    end = sentinel(events, SESSION_S, DELAY_S)
    out.last = [row_line({**end, "id": next_id})]
    out.lines = sum(len(lines) for lines in out.files) + 1
    return out


def bad_line(kind: str, event: dict, number: int) -> str:
    """A line of the given bad kind, built from a real event (so it would match if it were let through)."""
    if kind == "null_time":
        return row_line(event, ts=None, id=number)
    if kind == "wrong_type":
        return row_line(event, price="not a number", id=number)
    if kind == "bad_time":
        return row_line(event, ts="yesterday at noon", id=number)
    return f"{NOT_JSON_PREFIX}{number} {{"


def write_file(directory: Path, index: int, lines: list) -> None:
    """Write under a dot-name (Spark lists no hidden file), then rename into place: never half a file."""
    hidden = directory / f".batch-{index:05d}.json.tmp"
    hidden.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(hidden, directory / f"batch-{index:05d}.json")


class Writer(threading.Thread):
    """Writes the files on a schedule: file ``i`` at ``start + i * interval``."""

    def __init__(self, directory: Path, files: list, interval_s: float) -> None:
        super().__init__(name="soak-writer", daemon=True)
        self.directory, self.files, self.interval_s = directory, files, interval_s
        self.written = 0
        self.stop = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        for index, lines in enumerate(self.files):
            if self.stop.wait(max(0.0, start + index * self.interval_s - time.monotonic())):
                return
            write_file(self.directory, index, lines)
            self.written = index + 1


# ------------------------------------------------------------------------------------------ the driver


def driver(source: str, output: str, checkpoint: str, dump: str | None) -> int:
    """The Spark side: until killed (``dump`` None), or one ``availableNow`` run that dumps the output."""
    from pyspark.sql import types as T

    import cep
    from cep.spark_bridge.spark.session import get_spark
    from tests.test_streaming import QUERIES

    spark = get_spark("local[2]", app_name="cep-soak", shuffle_partitions=2)
    schema = T.StructType(
        [
            T.StructField("symbol", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("price", T.DoubleType()),
            T.StructField("id", T.LongType()),
            # Spark's PERMISSIVE JSON reader puts a line it cannot read (or a value it cannot convert) here.
            T.StructField("_corrupt_record", T.StringType()),
        ]
    )
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", MAX_FILES_PER_TRIGGER).json(source)
    out = cep.compile(QUERIES["vshape"]).on_spark(
        df, watermark=f"{DELAY_S} seconds", session_timeout=f"{SESSION_S} seconds"
    )
    writer = out.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
    if dump is None:
        writer.trigger(processingTime="0 seconds").start().awaitTermination()
        return 0
    writer.trigger(availableNow=True).start().awaitTermination()
    spark.read.parquet(output).toPandas().to_parquet(dump)
    return 0


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


@dataclass
class Driver:
    """One driver process in its own process group (so one SIGKILL takes its JVM and workers too)."""

    work: Path
    dump: Path | None = None
    process: subprocess.Popen | None = field(default=None, init=False)

    def start(self, run: int) -> Driver:
        log = (self.work / f"driver-{run}.log").open("w")
        command = [sys.executable, __file__, "--driver"] + [str(self.work / name) for name in ("in", "out", "ck")]
        if self.dump is not None:
            command.append(str(self.dump))
        env = dict(os.environ, PYTHONPATH=str(REPO), CEP_SPARK_LOG=str(self.work / f"spark-{run}.log"))
        self.process = subprocess.Popen(command, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return self

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait()


# ------------------------------------------------------------------------------------------ the check


def late_row_id(payload: str | None) -> int | None:
    """The ``id`` of a rejected or late row from its ``cep_late_row`` (JSON, or a line that is not JSON)."""
    if payload is None:
        return None
    try:
        value = json.loads(payload).get("id")
        return int(value) if value is not None else None
    except (ValueError, AttributeError):
        found = re.search(r"#(\d+)", payload)
        return int(found.group(1)) if found else None


def check(result, soak: SoakInput) -> dict:
    """Compare the dumped output with the replay of the good, on-time rows; account for every other row."""
    import cep
    from tests.test_streaming import QUERIES, expected_output, matches_of, normalize, without_sentinel

    query = cep.compile(QUERIES["vshape"])
    rows = result[result["cep_late_reason"].notna()]
    reported = {}  # id -> reason
    unidentified = Counter()
    for reason, payload in zip(rows["cep_late_reason"], rows["cep_late_row"]):
        number = late_row_id(payload)
        if number is None:
            unidentified[reason] += 1
        else:
            reported[number] = reason
    # A row sent behind the watermark that Spark's watermark had not passed yet is on time, and matched.
    on_time_late = [row for n, row in soak.late_rows.items() if n not in reported]
    got = without_sentinel(matches_of(result, query))
    expected = normalize(expected_output(query, soak.good + on_time_late, SESSION_S))
    lost = Counter(expected) - Counter(got)
    unexpected = Counter(got) - Counter(expected)
    matched = result[result["cep_late_reason"].isna()]
    ids = Counter(matched["match_id"])
    bad_right = sum(1 for n, kind in soak.bad_ids.items() if reported.get(n) == BAD_KINDS[kind])
    bad_other_reason = Counter(
        f"{kind} -> {reported[n]}"
        for n, kind in soak.bad_ids.items()
        if n in reported and reported[n] != BAD_KINDS[kind]
    )
    late_right = sum(1 for n in soak.late_rows if reported.get(n) in LATE_REASONS)
    good_ids = {e["id"] for e in soak.good}
    reasons = Counter(rows["cep_late_reason"])
    return {
        "matches_expected": len(expected),
        "matches_out": len(got),
        "lost": sum(lost.values()),
        "unexpected": sum(unexpected.values()),
        "duplicated_match_ids": sum(c - 1 for c in ids.values() if c > 1),
        "rows_out_by_reason": dict(sorted(reasons.items())),
        "dead_lettered": sum(c for r, c in reasons.items() if r not in LATE_REASONS),
        "late": sum(c for r, c in reasons.items() if r in LATE_REASONS),
        "bad_sent": len(soak.bad_ids),
        "bad_sent_by_kind": dict(sorted(Counter(soak.bad_ids.values()).items())),
        "bad_out_with_their_reason": bad_right,
        "bad_out_with_another_reason": dict(sorted(bad_other_reason.items())),
        "bad_not_accounted_for": sum(1 for n in soak.bad_ids if n not in reported) - sum(unidentified.values()),
        "rows_out_without_an_id": dict(sorted(unidentified.items())),
        "late_sent": len(soak.late_rows),
        "late_out_as_late": late_right,
        "late_sent_but_on_time": len(on_time_late),
        "good_rows_reported_late_or_bad": sum(1 for n in reported if n in good_ids),
        "lost_examples": [repr(r) for r in list(lost.elements())[:3]],
        "unexpected_examples": [repr(r) for r in list(unexpected.elements())[:3]],
    }


# ------------------------------------------------------------------------------------------ the harness


def soak(args) -> dict:
    import pandas as pd

    work = Path(tempfile.mkdtemp(prefix="cep-soak-"))
    (work / "in").mkdir()
    files = max(1, int(args.minutes * 60 / args.file_interval))
    began = time.perf_counter()
    data = make_input(args.seed, files, args.rows_per_file, args.bad, args.late)
    report: dict = {
        "params": {k: v for k, v in vars(args).items() if k != "driver"},
        "files": files,
        "events_in": data.lines,
        "prepare_s": round(time.perf_counter() - began, 1),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }
    memory = TreeMemory(root_role="harness").start()
    writer = Writer(work / "in", data.files, args.file_interval)
    kills, runs, commits_at_kill, died, commits_at_start = 0, 0, [], [], 0
    current = Driver(work).start(runs)
    started = time.monotonic()
    writer.start()
    end = started + args.minutes * 60
    next_kill = started + args.kill_every
    try:
        while time.monotonic() < end:
            if current.process.poll() is not None:  # it ended by itself: that is a failure worth reporting
                died.append((runs, current.process.returncode))
                runs += 1
                current = Driver(work).start(runs)
            # Kill on schedule, but only a driver that has committed a micro-batch since it started:
            # on a loaded machine a start can take longer than the period, and then nothing would progress.
            if time.monotonic() >= next_kill and committed_batches(work / "ck") > commits_at_start:
                current.kill()
                kills += 1
                commits_at_kill.append(committed_batches(work / "ck"))
                runs += 1
                current = Driver(work).start(runs)
                commits_at_start = commits_at_kill[-1]
                next_kill = time.monotonic() + args.kill_every
            time.sleep(0.5)  # a supervision tick: poll the driver and the kill schedule
        writer.join()
        write_file(work / "in", files, data.last)
        current.kill()
        kills += 1
        commits_at_kill.append(committed_batches(work / "ck"))
        runs += 1
        dump = work / "result.parquet"
        last = Driver(work, dump=dump).start(runs)
        try:
            last.process.wait(timeout=DRAIN_TIMEOUT_S)
        finally:
            last.kill()
        if last.process.returncode != 0 or not dump.exists():
            log = (work / f"driver-{runs}.log").read_text(errors="replace")[-3000:]
            raise SystemExit(f"the last driver failed (exit {last.process.returncode}):\n{log}")
        report["wall_s"] = round(time.monotonic() - started, 1)
        report["micro_batches_committed"] = committed_batches(work / "ck")
        report["kills_survived"] = kills
        report["committed_batches_at_each_kill"] = commits_at_kill
        report["drivers_that_ended_by_themselves"] = died
        report["memory"] = memory.stop()
        report.update(check(pd.read_parquet(dump), data))
    finally:
        writer.stop.set()
        current.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            report["work_dir"] = str(work)
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--kill-every", type=float, default=120, help="seconds between SIGKILLs of the driver")
    parser.add_argument("--file-interval", type=float, default=1.0, help="seconds between input files")
    parser.add_argument("--rows-per-file", type=int, default=40)
    parser.add_argument("--bad", type=float, default=0.01, help="share of bad lines")
    parser.add_argument("--late", type=float, default=0.01, help="share of rows sent behind the watermark")
    parser.add_argument("--seed", type=int, default=20240102)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (input, output, logs)")
    parser.add_argument("--json", help="also write the report to this JSON file")
    parser.add_argument("--driver", nargs="+", help=argparse.SUPPRESS)  # internal: run as the Spark driver
    args = parser.parse_args(argv)
    if args.driver:
        source, output, checkpoint, *dump = args.driver
        return driver(source, output, checkpoint, dump[0] if dump else None)
    report = soak(args)
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    must_be_zero = (
        "lost",
        "unexpected",
        "duplicated_match_ids",
        "bad_not_accounted_for",
        "good_rows_reported_late_or_bad",
    )
    return 0 if all(report.get(k) == 0 for k in must_be_zero) else 1


if __name__ == "__main__":
    sys.exit(main())
