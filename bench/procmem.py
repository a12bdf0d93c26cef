"""Peak memory of this process and everything it started, read from /proc (Linux; psutil is not a dependency).

``TreeMemory`` samples the process tree under a root pid in a background thread and keeps, per role
(``driver`` = a Python process that is not a Spark worker, ``jvm``, ``python_worker``), the largest
``VmHWM`` (the kernel's own peak resident set of one process) it has seen, and the largest sum of
``VmRSS`` over the whole tree at one sample. A process that lives shorter than the sampling interval
can be missed; Spark's Python workers and JVM live for the whole run, so they are not.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

# Often enough to see every Spark worker (they live for the whole query), rarely enough to cost nothing.
SAMPLE_INTERVAL_S = 0.5


def status_kb(pid: int, name: str) -> int | None:
    """A ``kB`` field of /proc/<pid>/status (``VmHWM``, ``VmRSS``); None when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            out.extend(int(c) for c in text)
    except OSError:
        pass
    return out


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user + system) of ``pids`` so far, from /proc/<pid>/stat (a process gone counts nothing)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (children, grandchildren, ...)."""
    found, stack = [], [pid]
    while stack:
        for child in _children(stack.pop()):
            found.append(child)
            stack.append(child)
    return found


def role(pid: int) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "java" in cmdline.split(" ", 1)[0]:
        return "jvm"
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline:
        return "python_worker"
    return "driver" if "python" in cmdline else "other"


@dataclass
class TreeMemory:
    """Sample the tree under ``root`` (default: this process) until ``stop()``; peaks in MB."""

    root: int = field(default_factory=os.getpid)
    root_role: str = "driver"  # what the root process is called in the report (the soak's is its harness)
    interval_s: float = SAMPLE_INTERVAL_S
    peak_hwm_kb: dict = field(default_factory=dict)  # role -> largest VmHWM of one process
    peak_tree_rss_kb: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-memory", daemon=True)

    def start(self) -> TreeMemory:
        self._thread.start()
        return self

    def sample(self) -> None:
        total = 0
        for pid in [self.root] + descendants(self.root):
            kind = self.root_role if pid == self.root else role(pid)
            hwm, rss = status_kb(pid, "VmHWM"), status_kb(pid, "VmRSS")
            if hwm is None or rss is None:
                continue
            total += rss
            self.peak_hwm_kb[kind] = max(self.peak_hwm_kb.get(kind, 0), hwm)
        self.peak_tree_rss_kb = max(self.peak_tree_rss_kb, total)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def stop(self) -> dict:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample()
        return self.report()

    def report(self) -> dict:
        return {
            "peak_process_mb": {k: round(v / 1024, 1) for k, v in sorted(self.peak_hwm_kb.items())},
            "peak_tree_rss_mb": round(self.peak_tree_rss_kb / 1024, 1),
        }
