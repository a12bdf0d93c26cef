"""Jinja2 templates whose work is bounded: a rule's ``-- summary:`` line and ``--webhook-template``.

A template is written by whoever writes rules, and rendered in the delivery lane for every alert, so a
template must not be able to stop the service. Jinja2's own ``SandboxedEnvironment`` blocks Python's
internals, but not work: ``{{ 3 ** (10**9) }}`` is one multiplication of numbers with a billion bits,
which Jinja2's optimizer even folds at compile time (rule load), holding the GIL, and nested loops over
``range(100000)`` run for hours. ``compile_template`` closes each way in:

* **No folding at load.** The environment is built with ``optimized=False``, and the operators that can
  blow up (``**``, ``*``, ``%``, ``+``) are intercepted, which Jinja2 never folds either: they run at
  render time, through ``BoundedEnvironment.call_binop``, which refuses a result past the limits below
  before computing it (an integer's bits, a string's characters, a list's items, a ``%`` format's width).
* **Counted steps.** Every call (a function, a method, a macro, a filter) and every loop iteration costs
  one step (loops are rewritten to go through ``_cep_iterate``), and a render may take ``MAX_STEPS``;
  each step also checks the render's deadline. A string or list a call or filter is given, or stores in
  a ``namespace()``, is refused past the limits, and widths (``center``, ``truncate``) past ``MAX_TEXT``.
* **Bounded output.** What a render writes is counted as it is written and stopped past its size budget.
* **Read-only data.** The template gets a deep copy of what it renders, and
  ``ImmutableSandboxedEnvironment`` refuses the methods that change a dict, list or set
  (``key.update(...)``): a template can change neither the alert a sink sends nor the copy it renders.

Everything is checked in Python between bytecodes, so a render never holds the GIL for long: the metrics
and health endpoints keep answering while a lane renders, and a stopped render is this alert's failure
(``TemplateBudgetError``), never the lane's.
"""

from __future__ import annotations

import copy
import functools
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

# Imported inside functions: jinja2 (optional, the "service" extra: only templates need it).

__all__ = [
    "MAX_STEPS",
    "MAX_TEXT",
    "MAX_ITEMS",
    "MAX_INT_BITS",
    "RENDER_SECONDS",
    "TemplateBudgetError",
    "BoundedTemplate",
    "compile_template",
]

# A summary line or a webhook body needs a few dozen steps per alert: a hundred thousand leaves room for
# loops over a request's alerts and their measures, and at well under a microsecond each it ends in time.
MAX_STEPS = 100_000
# Characters of one string a template builds, and of what one render writes: more than any receiver takes
# in one request (Slack's message, PagerDuty's summary), far below what slows a lane.
MAX_TEXT = 1_000_000
MAX_ITEMS = 100_000  # items of a list a template builds (Jinja2's own bound on range())
MAX_INT_BITS = 4_096  # bits of an integer a template computes: any real measure fits, 3 ** (10**9) does not
# Wall-clock time of one render: one alert's template may delay the alerts behind it in its lane by this
# much, never more; the steps bound ends an honest template long before.
RENDER_SECONDS = 0.25

_ITERATE = "_cep_iterate"
_WIDTH = re.compile(r"%[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
_AMPLIFYING_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
_WIDTH_FILTERS = frozenset({"center", "indent"})  # filters whose number argument is a width: output grows with it


class TemplateBudgetError(RuntimeError):
    """A render went past one of the template limits (the message names which)."""


class _Budget:
    __slots__ = ("steps", "deadline")

    def __init__(self, steps: int, seconds: float) -> None:
        self.steps = steps
        self.deadline = time.monotonic() + seconds


_active = threading.local()  # the running render's _Budget, per thread (each lane renders in its own)


def _charge() -> None:
    budget: _Budget | None = getattr(_active, "budget", None)
    if budget is None:
        return
    budget.steps -= 1
    if budget.steps < 0:
        raise TemplateBudgetError(f"the template took more than {MAX_STEPS:,} steps (calls and loop iterations)")
    if time.monotonic() > budget.deadline:
        raise TemplateBudgetError(f"the template took longer than {RENDER_SECONDS} s")


def _check_size(value: Any, what: str) -> None:
    if isinstance(value, str) and len(value) > MAX_TEXT:
        raise TemplateBudgetError(f"{what} is a string of {len(value):,} characters (the limit is {MAX_TEXT:,})")
    if isinstance(value, (list, tuple, dict, set)) and len(value) > MAX_ITEMS:
        raise TemplateBudgetError(f"{what} has {len(value):,} items (the limit is {MAX_ITEMS:,})")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise TemplateBudgetError(
            f"{what} is an integer of {value.bit_length():,} bits (the limit is {MAX_INT_BITS:,})"
        )


def _check_arguments(args: tuple, kwargs: Mapping[str, Any], what: str) -> None:
    for value in (*args, *kwargs.values()):
        _check_size(value, what)


def _check_width(value: Any, what: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_TEXT:
        raise TemplateBudgetError(f"{what}: a width or count of {value:,} (the limit is {MAX_TEXT:,})")


def _text_length(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(str(value))


def _check_replace(text: Any, old: Any, new: Any, what: str) -> None:
    """``text.replace(old, new)`` would be longer than allowed (``replace('', s)`` multiplies)."""
    if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
        return
    count = text.count(old) if old else len(text) + 1
    if len(text) + count * (len(new) - len(old)) > MAX_TEXT:
        raise TemplateBudgetError(f"{what} would build a string longer than {MAX_TEXT:,} characters")


def _check_join(separator: Any, items: Any, what: str) -> None:
    if isinstance(items, (list, tuple)) and isinstance(separator, str):
        size = sum(_text_length(item) for item in items) + len(separator) * max(len(items) - 1, 0)
        if size > MAX_TEXT:
            raise TemplateBudgetError(f"{what} would build a string longer than {MAX_TEXT:,} characters")


def _check_format(text: str, what: str) -> None:
    for match in _WIDTH.finditer(text):
        for number in match.groups():
            if number == "*" or (number is not None and int(number) > MAX_TEXT):
                raise TemplateBudgetError(
                    f"{what}: a % format whose width or precision is {number} "
                    f"(the limit is {MAX_TEXT:,}, and '*' is not allowed)"
                )


def _binop(operator: str, left: Any, right: Any) -> None:
    """Refuse ``left OPERATOR right`` before computing it when its result would pass a limit."""
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right))
    if operator == "**" and numbers and right > 0 and abs(left) > 1 and right * math.log2(abs(left)) > MAX_INT_BITS:
        raise TemplateBudgetError(f"{left} ** {right} is an integer of more than {MAX_INT_BITS:,} bits")
    if operator == "*":
        if numbers and left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise TemplateBudgetError(f"a product of more than {MAX_INT_BITS:,} bits")
        for sequence, count in ((left, right), (right, left)):
            if isinstance(sequence, (str, list, tuple)) and isinstance(count, int):
                limit = MAX_TEXT if isinstance(sequence, str) else MAX_ITEMS
                if len(sequence) * count > limit:
                    raise TemplateBudgetError(
                        f"repeating {len(sequence):,} items {count:,} times passes the limit of {limit:,}"
                    )
    if operator == "%" and isinstance(left, str):
        _check_format(left, "the % operator")


def _check_method(function: Any, args: tuple) -> None:
    """The string methods whose result can be far longer than their arguments, checked before they run."""
    name = getattr(function, "__name__", "")
    owner = getattr(getattr(function, "__wrapped__", function), "__self__", None)
    if not isinstance(owner, str):
        return
    if name == "replace" and len(args) >= 2:
        _check_replace(owner, args[0], args[1], "str.replace")
    elif name == "join" and args:
        _check_join(owner, args[0], "str.join")
    elif name in ("format", "format_map"):
        for field in _FORMAT_FIELD.findall(owner):
            if any(int(n) > MAX_TEXT for n in re.findall(r"\d+", field)):
                raise TemplateBudgetError(
                    f"str.format: the field {field[:40]} asks for more than {MAX_TEXT:,} characters"
                )


def _bounded_filter(name: str, function: Callable) -> Callable:
    @functools.wraps(function)  # keeps Jinja2's pass_context / pass_environment mark
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _charge()
        values = [a for a in args if not _is_jinja_context(a)]
        if name in _WIDTH_FILTERS:
            for extra in (*values[1:], *kwargs.values()):
                _check_width(extra, f"the {name} filter")
        if name == "replace" and len(values) >= 3:
            _check_replace(values[0], values[1], values[2], "the replace filter")
        if name == "join" and values:
            items = list(values[0]) if not isinstance(values[0], (list, tuple)) else values[0]
            _check_join(values[1] if len(values) > 1 else kwargs.get("d", ""), items, "the join filter")
            args = tuple(items if a is values[0] else a for a in args)
        if name == "format" and values and isinstance(values[0], str):
            _check_format(values[0], "the format filter")
        result = function(*args, **kwargs)
        _check_size(result, f"what the {name} filter gives")
        return result

    return bounded


def _is_jinja_context(value: Any) -> bool:
    from jinja2 import Environment
    from jinja2.nodes import EvalContext
    from jinja2.runtime import Context

    return isinstance(value, (Context, EvalContext, Environment))


def _iterate(iterable: Any):
    for item in iterable:
        _charge()
        yield item


@functools.cache
def _environment_class():
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace

    class BoundedNamespace(Namespace):
        def __setitem__(self, name: str, value: Any) -> None:
            _charge()
            _check_size(value, f"namespace attribute {name!r}")
            super().__setitem__(name, value)

    def namespace(*args: Any, **kwargs: Any) -> BoundedNamespace:
        _check_arguments(args, kwargs, "namespace()")
        return BoundedNamespace(*args, **kwargs)

    class BoundedEnvironment(ImmutableSandboxedEnvironment):
        """Jinja2's immutable sandbox with every step counted (see the module's docstring)."""

        intercepted_binops = frozenset({"**", "*", "%", "+"})

        def __init__(self, **options: Any) -> None:
            super().__init__(optimized=False, **options)
            self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
            self.globals.update({"namespace": namespace, _ITERATE: _iterate})
            del self.globals["lipsum"]  # lorem ipsum of any length in one call: no use in an alert

        def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
            _charge()
            _binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
            if isinstance(obj, str) and attr in _AMPLIFYING_METHODS:
                return False  # the filters (center, ...) do the same within the limits
            return super().is_safe_attribute(obj, attr, value)

        def call(__self, __context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - Jinja2's names
            _charge()
            if __obj is not _iterate:  # a loop's items are counted one by one instead
                _check_arguments(args, kwargs, "a call's argument")
                _check_method(__obj, args)
            result = super().call(__context, __obj, *args, **kwargs)
            _check_size(result, "a call's result")
            return result

    return BoundedEnvironment


class BoundedTemplate:
    """A compiled template; ``render`` runs it within the limits on a copy of its data."""

    def __init__(self, template: Any, max_text: int) -> None:
        self._template = template
        self._max_text = max_text

    def render(self, data: Mapping[str, Any]) -> str:
        budget = _Budget(MAX_STEPS, RENDER_SECONDS)
        outer = getattr(_active, "budget", None)
        _active.budget = budget
        try:
            parts: list[str] = []
            size = 0
            for part in self._template.generate(copy.deepcopy(dict(data))):
                size += len(part)
                if size > self._max_text:
                    raise TemplateBudgetError(f"the template wrote more than {self._max_text:,} characters")
                parts.append(part)
                if time.monotonic() > budget.deadline:
                    raise TemplateBudgetError(f"the template took longer than {RENDER_SECONDS} s")
            return "".join(parts)
        finally:
            _active.budget = outer


def compile_template(
    text: str, *, finalize: Callable[[Any], Any] | None = None, max_text: int = MAX_TEXT, **options: Any
) -> BoundedTemplate:
    """``text`` compiled in the bounded environment (``StrictUndefined``: a name the data lacks is an
    error); raises ``ImportError`` without Jinja2 and Jinja2's ``TemplateSyntaxError`` for bad syntax.
    Nothing is computed here: compiling is linear in the text."""
    from jinja2 import StrictUndefined, nodes

    environment = _environment_class()(undefined=StrictUndefined, autoescape=False, finalize=finalize, **options)
    tree = environment.parse(text)
    for loop in tree.find_all(nodes.For):
        loop.iter = nodes.Call(nodes.Name(_ITERATE, "load"), [loop.iter], [], None, None)
    return BoundedTemplate(environment.from_string(tree), max_text)
