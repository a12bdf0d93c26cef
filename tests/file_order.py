"""The order in which ``make test``'s two workers get the test files: the longest first, by a recorded table.

``--dist loadfile`` hands a worker one whole file at a time, in the order of the collected items (the Makefile
turns off xdist's own reordering). The suite's wall time is the busier worker's: with the longest files first
and the short ones last, whichever worker is free takes the next file, and the two finish within about one
short file of each other (longest-processing-time-first scheduling). A file's length is its seconds in
tests/durations.json, the sum of its tests' setup, call and teardown times in a whole run of the suite on the
2-core machine; ``--record-durations`` writes that table (docs/testing.md says when to run it).
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DURATIONS = REPO / "tests" / "durations.json"

# A file the table does not know yet: a `long` one (minutes of killed and restarted JVMs) goes first of all;
# any other is guessed at this many seconds per test, which places it among files of its size until the next
# `make test-durations` (pure-Python files run far faster per test, files that use Spark slower).
UNRECORDED_SECONDS_PER_TEST = 1.0


def relative(path: Path) -> str:
    """A file's key in the table: its path from the repository's root, with forward slashes."""
    return Path(path).resolve().relative_to(REPO).as_posix()


def recorded_durations() -> dict[str, float]:
    if not DURATIONS.exists():
        return {}
    return {name: float(seconds) for name, seconds in json.loads(DURATIONS.read_text(encoding="utf-8")).items()}


def file_order(files: dict[Path, list[pytest.Item]], recorded: dict[str, float]) -> list[Path]:
    """The files, longest first: by recorded seconds; an unrecorded `long` file first of all, any other
    unrecorded file by its test count. Ties keep the collection's order."""

    def seconds(path: Path) -> float:
        known = recorded.get(relative(path))
        if known is not None:
            return known
        if any(item.get_closest_marker("long") for item in files[path]):
            return float("inf")
        return len(files[path]) * UNRECORDED_SECONDS_PER_TEST

    return sorted(files, key=lambda path: -seconds(path))


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class DurationRecorder:
    """``--record-durations``: each file's seconds (its tests' setup + call + teardown) into DURATIONS.

    Runs where the reports arrive from every worker (xdist's controller, or the only process); files not run
    keep their recorded seconds, files that no longer exist leave the table. Whole files only: a run that
    selects tests within files (-k, -m, a test's node id) would record part of a file as the whole, and a
    file whose tests did not all finish (a run stopped with Ctrl-C, a worker lost) is left as it was."""

    def __init__(self, config: pytest.Config) -> None:
        if config.option.keyword or config.option.markexpr or any("::" in arg for arg in config.args):
            raise pytest.UsageError("--record-durations records whole files: run without -k, -m or test ids")
        self.seconds: dict[str, float] = defaultdict(float)
        self.collected: Counter[str] = Counter()
        self.finished: Counter[str] = Counter()

    def pytest_collection_finish(self, session: pytest.Session) -> None:  # one process: it collects
        self.collected = Counter(file_of(item.nodeid) for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:  # noqa: ARG002 - xdist's
        self.collected = Counter(file_of(nodeid) for nodeid in ids)  # every worker collects the same tests

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[file_of(report.nodeid)] += report.duration
        if report.when == "teardown":  # a test's last report, whether it passed, failed or was skipped
            self.finished[file_of(report.nodeid)] += 1

    def pytest_terminal_summary(self, terminalreporter) -> None:
        total = sum(self.seconds.values())
        terminalreporter.write_line(
            f"recorded {round(total):,} test-seconds in {len(self.seconds)} files into {DURATIONS.name}; "
            f"the machine's reference workload took {reference_seconds():.2f} s (compare runs by both)"
        )

    def pytest_sessionfinish(self) -> None:
        table = {name: seconds for name, seconds in recorded_durations().items() if (REPO / name).exists()}
        whole = {name for name, count in self.collected.items() if self.finished[name] == count}
        table.update({name: round(seconds) for name, seconds in self.seconds.items() if name in whole})
        ordered = dict(sorted(table.items(), key=lambda entry: (-entry[1], entry[0])))
        DURATIONS.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")


def reference_seconds(repeats: int = 5) -> float:
    """The best of ``repeats`` runs of a fixed pure-Python workload, on one core: how fast this machine is at
    the end of a recording. Two recordings of the same code on the same 2-core machine differed by 1.7x in
    test-seconds from one day to the next; a recording's figures mean something only beside this one."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        checksum = 0
        for number in range(3_000_000):
            checksum = (checksum * 31 + number) % 1_000_003
        best = min(best, time.perf_counter() - start)
    return best
