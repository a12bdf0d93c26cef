"""The order make test's workers get the files in (tests/file_order.py), and the table it reads.

Expected orders are written by hand from the rule: recorded seconds, longest first; an unrecorded file with a
``long`` test before every recorded one; any other unrecorded file at UNRECORDED_SECONDS_PER_TEST a test.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import file_order
from tests.file_order import REPO, DurationRecorder
from tests.file_order import file_order as order_of


class Item:
    """What file_order reads of a collected test: its markers."""

    def __init__(self, *markers: str) -> None:
        self.markers = markers

    def get_closest_marker(self, name: str):
        return name if name in self.markers else None


def files(**tests: list[Item]) -> dict[Path, list[Item]]:
    return {REPO / "tests" / f"{name}.py": items for name, items in tests.items()}


def names(order: list[Path]) -> list[str]:
    return [path.stem for path in order]


def test_recorded_files_go_longest_first_whatever_their_test_count():
    collected = files(many=[Item()] * 300, slow=[Item()] * 3, middle=[Item()] * 20)
    recorded = {"tests/many.py": 40.0, "tests/slow.py": 400.0, "tests/middle.py": 90.0}
    assert names(order_of(collected, recorded)) == ["slow", "middle", "many"]


def test_an_unrecorded_long_file_goes_first_and_another_by_its_test_count():
    collected = files(
        known=[Item()] * 2, new_long=[Item("long")], new_big=[Item()] * 50, new_small=[Item()] * 5, tiny=[Item()]
    )
    recorded = {"tests/known.py": 30.0, "tests/tiny.py": 2.0}
    # new_big: 50 tests at 1 s = 50 s, before known's 30 s; new_small: 5 s, between known and tiny.
    assert file_order.UNRECORDED_SECONDS_PER_TEST == 1.0
    assert names(order_of(collected, recorded)) == ["new_long", "new_big", "known", "new_small", "tiny"]


def report(nodeid: str, when: str, duration: float) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, when=when, duration=duration)


def config(*args: str, keyword: str = "", markexpr: str = "") -> SimpleNamespace:
    return SimpleNamespace(option=SimpleNamespace(keyword=keyword, markexpr=markexpr), args=list(args))


def test_the_recorder_sums_each_whole_files_phases_and_keeps_the_files_it_did_not_finish(tmp_path, monkeypatch):
    table = tmp_path / "durations.json"
    table.write_text(json.dumps({"tests/test_parser.py": 7, "tests/test_vm_labels.py": 5, "tests/gone.py": 99}))
    monkeypatch.setattr(file_order, "DURATIONS", table)
    recorder = DurationRecorder(config())
    collected = ["tests/test_dot.py::test_a", "tests/test_dot.py::test_b[x]", "tests/test_format.py::test_c"]
    recorder.pytest_xdist_node_collection_finished(node=None, ids=[*collected, "tests/test_vm_labels.py::test_d"])
    for nodeid, when, seconds in [
        ("tests/test_dot.py::test_a", "setup", 10.2),  # a module fixture
        ("tests/test_dot.py::test_a", "call", 1.4),
        ("tests/test_dot.py::test_a", "teardown", 0.0),
        ("tests/test_dot.py::test_b[x]", "setup", 0.6),  # skipped at setup: no call report
        ("tests/test_dot.py::test_b[x]", "teardown", 0.0),
        ("tests/test_format.py::test_c", "setup", 0.1),
        ("tests/test_format.py::test_c", "call", 0.2),
        ("tests/test_format.py::test_c", "teardown", 0.1),
        ("tests/test_vm_labels.py::test_d", "setup", 3.0),  # the run stopped before its teardown
    ]:
        recorder.pytest_runtest_logreport(report(nodeid, when, seconds))
    recorder.pytest_sessionfinish()
    # test_dot: 10.2 + 1.4 + 0.6 = 12.2 -> 12; test_format: 0.4 -> 0; test_vm_labels unfinished: its 5 kept;
    # test_parser not run: kept; a file no longer in the repository: dropped. Longest first.
    assert list(json.loads(table.read_text()).items()) == [
        ("tests/test_dot.py", 12),
        ("tests/test_parser.py", 7),
        ("tests/test_vm_labels.py", 5),
        ("tests/test_format.py", 0),
    ]


@pytest.mark.parametrize(
    "given", [config(keyword="parser"), config(markexpr="not spark"), config("tests/test_dot.py::test_a")]
)
def test_the_recorder_refuses_a_run_that_takes_part_of_a_file(given):
    with pytest.raises(pytest.UsageError, match="whole files"):
        DurationRecorder(given)


def test_the_checked_in_table_names_files_that_exist_with_whole_seconds():
    table = json.loads(file_order.DURATIONS.read_text(encoding="utf-8"))
    assert table, "tests/durations.json is empty: make test-durations"
    assert all((REPO / name).is_file() and name.startswith("tests/") for name in table)
    assert all(isinstance(seconds, int) and seconds >= 0 for seconds in table.values())
