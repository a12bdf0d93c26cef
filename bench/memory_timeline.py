"""Where a Spark stream's memory is, over time: the resident set of each process under this one, and the JVM's
own account of its native memory (Native Memory Tracking, ``jcmd <pid> VM.native_memory summary``).

The JVM's resident set is the heap, the JVM's own native memory (classes, threads, compiled code, the
collector, ``Other``: direct buffers and ``Unsafe`` allocations such as Arrow's), and what native libraries
allocate with ``malloc`` behind the JVM's back, which Native Memory Tracking cannot see: RocksDB's block cache,
memtables and iterators. So ``rss - nmt_committed`` is an upper bound of RocksDB's share (and the C library's
unreturned free memory). Native Memory Tracking is on only when the JVM was started with
``-XX:NativeMemoryTracking=summary`` (``JVM_TRACKING_OPTION``); without it the timeline has the resident sets only.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass, field

from procmem import descendants, role, status_kb

JVM_TRACKING_OPTION = "-XX:NativeMemoryTracking=summary"
# A jcmd call starts a JVM of its own (about half a second of CPU): every 15 s is enough to follow a run of
# minutes without loading two shared cores.
SAMPLE_INTERVAL_S = 15.0
# NMT categories smaller than this are left out of a sample (a JVM has about 25, most of a few hundred KB).
MIN_CATEGORY_KB = 1024
_CATEGORY = re.compile(r"^-\s+(?P<name>[A-Za-z ]+?) \(reserved=\d+KB, committed=(?P<committed>\d+)KB\)", re.M)
_TOTAL = re.compile(r"^Total: reserved=\d+KB, committed=(?P<committed>\d+)KB", re.M)
_HISTOGRAM_ROW = re.compile(r"^\s*\d+:\s+(?P<instances>\d+)\s+(?P<bytes>\d+)\s+(?P<name>\S+)", re.M)
_HISTOGRAM_TOTAL = re.compile(r"^Total\s+(?P<instances>\d+)\s+(?P<bytes>\d+)", re.M)
# The classes of a heap histogram kept: what holds a heap that grows with the keys is among the largest few.
HISTOGRAM_CLASSES = 25


def native_memory_mb(pid: int) -> dict[str, float]:
    """The JVM's committed native memory by category (MB), empty when tracking is off or jcmd fails."""
    try:
        done = subprocess.run(
            ["jcmd", str(pid), "VM.native_memory", "summary"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    total = _TOTAL.search(done.stdout)
    if not total:
        return {}
    out = {"nmt_committed": round(int(total["committed"]) / 1024, 1)}
    for found in _CATEGORY.finditer(done.stdout):
        if int(found["committed"]) >= MIN_CATEGORY_KB:
            out[found["name"].lower().replace(" ", "_")] = round(int(found["committed"]) / 1024, 1)
    return out


def class_histogram(pid: int, top: int = HISTOGRAM_CLASSES) -> dict:
    """The JVM's live heap by class (``jcmd <pid> GC.class_histogram``, which runs a full collection first, so the
    total is what the heap really holds, not what the collector let it grow to): the total and the ``top``
    classes by bytes, in MB; empty when jcmd fails."""
    try:
        done = subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    total = _HISTOGRAM_TOTAL.search(done.stdout)
    if not total:
        return {}
    rows = sorted(_HISTOGRAM_ROW.finditer(done.stdout), key=lambda row: -int(row["bytes"]))[:top]
    return {
        "live_heap_mb": round(int(total["bytes"]) / 2**20, 1),
        "instances": int(total["instances"]),
        "classes": [
            {"class": row["name"], "instances": int(row["instances"]), "mb": round(int(row["bytes"]) / 2**20, 2)}
            for row in rows
        ],
    }


def largest_jvm(root: int) -> int | None:
    """The pid of the JVM with the largest resident set under ``root`` (Spark's driver JVM in local mode)."""
    found = [(status_kb(pid, "VmRSS") or 0, pid) for pid in descendants(root) if role(pid) == "jvm"]
    return max(found)[1] if found else None


@dataclass
class MemoryTimeline:
    """Sample every ``interval_s`` until ``stop()``: per role, the largest current RSS of one process (MB), and the
    JVM's native memory; ``mark(name)`` puts a named point in time (a phase's start) in the same list."""

    root: int
    interval_s: float = SAMPLE_INTERVAL_S
    samples: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="memory-timeline", daemon=True)

    def start(self) -> MemoryTimeline:
        self._thread.start()
        return self

    def sample(self, mark: str | None = None) -> dict:
        rss: dict[str, float] = {}
        jvm_pid = None
        for pid in descendants(self.root):
            kind = role(pid)
            now = status_kb(pid, "VmRSS")
            if now is None or kind in ("gone", "other"):
                continue
            if kind == "jvm" and (jvm_pid is None or now / 1024 > rss.get("jvm", 0)):
                jvm_pid = pid
            rss[kind] = max(rss.get(kind, 0.0), round(now / 1024, 1))
        row: dict = {"t_s": round(time.monotonic() - self._started, 1), "rss_mb": rss}
        if mark:
            row["mark"] = mark
        if jvm_pid is not None:
            native = native_memory_mb(jvm_pid)
            if native:
                native["untracked"] = round(rss["jvm"] - native["nmt_committed"], 1)
                row["jvm_native_mb"] = native
        self.samples.append(row)
        return row

    def mark(self, name: str) -> dict:
        return self.sample(mark=name)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def stop(self) -> list[dict]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample(mark="end")
        return self.samples


def largest(samples: list[dict], *path: str) -> float | None:
    """The largest value at ``path`` (e.g. "rss_mb", "jvm") over the samples that have it."""
    found = []
    for row in samples:
        value = row
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        if isinstance(value, int | float):
            found.append(value)
    return max(found) if found else None
