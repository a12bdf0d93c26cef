"""Where a JVM thread's CPU goes, by kind of work, from a Java Flight Recording of ``cep stream``.

    SPARK_SUBMIT_OPTS=-XX:StartFlightRecording=filename=/tmp/rec.jfr,settings=profile,dumponexit=true \\
        .venv/bin/python bench/stream_cpu.py --engines driver --rates 20000 --seconds 10 --drain
    .venv/bin/python bench/jfr_breakdown.py /tmp/rec.jfr [--threads "Executor task"] [--since 14:44:00]

``jfr print`` (the JDK's) lists the recording's execution samples with their stacks; each sample of a thread
whose name holds ``--threads`` is charged to the first kind (``KINDS``) found walking its stack from the
innermost frame out, else to ``other``. The share of samples per kind is the share of that thread's CPU
(the profile settings sample running Java code every 10-20 ms). ``--since``: the samples from that wall clock
time on (HH:MM:SS, as ``jfr print`` writes it), to leave out the start and the warm-up.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter

STACK_DEPTH = 64
# Kinds of work, each by the frames that tell it; the first match from the innermost frame out decides.
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("code generation (per task)", ("codegen.", "CodeGenerator", "janino", "GenerateUnsafeProjection")),
    ("task deserialization", ("ObjectInputStream", "JavaSerializer")),
    ("VARIANT values (strict numbers)", ("VariantGet", "SchemaOfVariant", "variant.")),
    ("timestamp parsing", ("parseTimestampString", "stringToTimestamp", "TimestampFormatter")),
    ("JSON parsing", ("JacksonParser", "JsonToStructs", "jackson")),
    ("regular expressions", ("java.util.regex",)),
    ("UTF-8 checks", ("getIsValid", "makeValid")),
    ("Kafka fetch", ("kafka010", "org.apache.kafka")),
    ("Arrow encoding", ("ArrowWriter", "arrow.vector", "ArrowFieldWriter", "MessageSerializer", "WriteChannel")),
    ("query planning", ("Analyzer", "optimizer", "QueryExecution", "SparkPlanner", "RuleExecutor", "catalyst.trees")),
    ("scheduling", ("scheduler.", "DAGScheduler", "TaskSetManager")),
    ("checkpoint logs", ("HDFSMetadataLog", "CheckpointFileManager", "OffsetSeqLog", "hadoop.fs")),
    ("generated code (the rows' expressions)", ("GeneratedClass",)),
)


def breakdown(text: str, threads: str, since: str | None) -> tuple[int, Counter]:
    """(samples of the chosen threads, samples per kind) from ``jfr print --events jdk.ExecutionSample``."""
    kinds: Counter = Counter()
    samples = 0
    for event in text.split("jdk.ExecutionSample {")[1:]:
        thread = re.search(r'sampledThread = "([^"]*)"', event)
        started = re.search(r"startTime = (\S+)", event)
        if thread is None or threads not in thread.group(1):
            continue
        if since is not None and started is not None and started.group(1) < since:
            continue
        samples += 1
        frames = [line.strip() for line in re.findall(r"^\s{4}(\S.*)$", event, re.M)]
        kind = next(
            (name for frame in frames for name, marks in KINDS if any(mark in frame for mark in marks)), "other"
        )
        kinds[kind] += 1
    return samples, kinds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording")
    parser.add_argument("--threads", default="Executor task", help="the JVM threads whose name holds this")
    parser.add_argument("--since", help="HH:MM:SS: the samples from then on")
    args = parser.parse_args()
    text = subprocess.run(
        ["jfr", "print", "--stack-depth", str(STACK_DEPTH), "--events", "jdk.ExecutionSample", args.recording],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    samples, kinds = breakdown(text, args.threads, args.since)
    print(f"{samples} samples of the threads named '{args.threads}'")
    for kind, count in kinds.most_common():
        print(f"{100 * count / max(samples, 1):5.1f} %  {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
