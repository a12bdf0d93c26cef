"""Bounds on work that do not depend on the machine: Python calls or lines, counted by the interpreter's hooks.

A test that says "this took under a second" measures the machine as much as the code: on a loaded CI worker a
parse that built Lark's tables lazily took 1.03 CPU-seconds and failed such a test. What those tests mean is
that the work grows with the input linearly, not exponentially; the number of Python calls (or lines) says
that, and it is the same number on every machine and under any load. Calls are cheap to count (a profile
hook) and suit code that calls per step, as Lark's parser does per token; lines cost more to count (a trace
hook) and also see a loop inside one function, such as the Pike VM's over its threads. Work inside C (a
regular expression) is not counted: a runaway there hangs, and pytest-timeout fails the test.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def python_calls(action: Callable[[], T]) -> tuple[T, int]:
    """Run ``action`` and return its result with the number of Python function calls it made."""
    return _counted(action, "call", sys.getprofile, sys.setprofile)


def python_lines(action: Callable[[], T]) -> tuple[T, int]:
    """Run ``action`` and return its result with the number of Python lines it executed."""
    return _counted(action, "line", sys.gettrace, sys.settrace)


def _counted(action: Callable[[], T], counted_event: str, get_hook, set_hook) -> tuple[T, int]:
    events = 0

    def hook(frame, event, arg):  # noqa: ARG001 (the interpreter's hook signature)
        nonlocal events
        if event == counted_event:
            events += 1
        return hook  # a trace hook returns itself to see the frame's lines; a profile hook's result is ignored

    previous = get_hook()
    set_hook(hook)
    try:
        result = action()
    finally:
        set_hook(previous)
    return result, events
