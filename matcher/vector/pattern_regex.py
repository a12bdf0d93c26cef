"""The machine's lowered pattern (``program/lowered.py``) compiled for the fast path (``fastpath.py``):
written as a regex over one byte per row.

Each row is one byte whose bit v says "variable v's condition holds"; a variable (or an alternation of
single-row pieces) becomes a character class of the bytes with its bits; loops, concatenation,
alternation, unrolled bounded quantifiers, anchors and exclusions map onto ``re`` syntax, with a capture
group per class so that each row's variable can be read off a match.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from cep.matcher.program import lowered

# PERMUTE(n items) expands to n! alternatives; the VM's limit is its program size, ours is smaller.
MAX_PERMUTE_ITEMS = 5
# How deeply the lowered pattern may nest. A bounded quantifier over a group is unrolled as nested
# optionals (``(A?){1,500}`` nests 499 deep), and both the walks below and ``re``'s own parser recurse
# once per level: past this depth the pattern goes to the VM, whose compiler unrolls with a loop, so
# no recursion depth depends on a quantifier's bound.
MAX_NESTING = 64


class NotEligible(Exception):
    """Why a query cannot take the fast path (a static property of the query)."""


# --------------------------------------------------------------------------------------- pattern IR
#
# The pattern, as the regex engine needs it. Single-row pieces (a variable, or an alternation of
# single-row pieces) are *classes*: ("class", prio) where prio lists label ids in preference order;
# a row consumed by the class is labelled with the first of them whose condition holds on it.
#   ("class", prio)                    one row
#   ("loop", prio, min, max, greedy)   a class repeated (max None: unbounded)
#   ("seq", items) / ("alt", items)    concatenation / alternation in preference order
#   ("opt", item, greedy)              item or nothing (unrolled bounded quantifiers)
#   ("anchor", "start" | "end")        ^ / $
#   ("empty",)                         ()
#   ("excl", item)                     {- item -}


def _seq(items: list) -> tuple:
    flat = []
    for item in items:
        if item[0] == "seq":
            flat.extend(item[1])
        elif item[0] != "empty":
            flat.append(item)
    if not flat:
        return ("empty",)
    return flat[0] if len(flat) == 1 else ("seq", tuple(flat))


def lower(node: lowered.Node) -> tuple:
    """The regex IR of the machine's lowered pattern (``Machine.pattern``); ``NotEligible`` where ``re``
    cannot give SQL's answer in bounded time."""
    if isinstance(node, lowered.Label):
        return ("class", (node.label,))
    if isinstance(node, lowered.Nothing):
        return ("empty",)
    if isinstance(node, lowered.Edge):
        return ("anchor", "start" if node.at_start else "end")
    if isinstance(node, lowered.Sequence):
        return _seq([lower(item) for item in node.items])
    if isinstance(node, lowered.Choice):
        items = [lower(item) for item in node.options]
        if all(item[0] == "class" for item in items):
            # One row whichever branch: a row takes the first branch whose condition holds, and every
            # branch leads to the same place, so preference among them is decided by the row alone.
            return ("class", tuple(dict.fromkeys(label for item in items for label in item[1])))
        return ("alt", tuple(items))
    if isinstance(node, lowered.AnyOrder):
        if len(node.items) > MAX_PERMUTE_ITEMS:
            raise NotEligible(f"PERMUTE of more than {MAX_PERMUTE_ITEMS} items")
        items = [lower(item) for item in node.items]
        orders = itertools.permutations(range(len(items)))  # lexicographic, as the compiler expands it
        return ("alt", tuple(_seq([items[i] for i in order]) for order in orders))
    if isinstance(node, lowered.Excluded):
        return ("excl", lower(node.body))
    if isinstance(node, lowered.Repeat):
        body = lower(node.body)
        if node.high == 0:
            return ("empty",)
        if body[0] == "class":
            if node.low == node.high == 1:
                return body
            return ("loop", body[1], node.low, node.high, node.greedy)
        if node.high is None:
            raise NotEligible("an unbounded quantifier over a group that can span several rows")
        tail = None
        for _ in range(node.high - node.low):
            tail = ("opt", body if tail is None else _seq([body, tail]), node.greedy)
        return _seq([body] * node.low + ([tail] if tail is not None else []))
    if isinstance(node, lowered.Absent):
        raise NotEligible("an absence term (!B)")
    raise NotEligible(f"pattern node {type(node).__name__}")


@dataclass
class Regex:
    """The regex text, and what its capture groups mean."""

    pattern: bytes
    label_groups: list[tuple[int, tuple[int, ...]]]  # (group number, prio)
    excl_groups: list[int]
    loops: list[tuple[int, tuple]]  # (class bits, alternation choices on the path to the loop)
    classes: int = 0
    uncaptured: list[int] = field(default_factory=list)  # one-row groups left out of a separated regex


def _class_bytes(bits: int, width: int) -> bytes:
    members = [m for m in range(1 << width) if m & bits]
    return b"[" + b"".join(b"\\x%02x" % m for m in members) + b"]"


def _quantifier(low: int, high: int | None, greedy: bool) -> bytes:
    if (low, high) == (0, None):
        text = b"*"
    elif (low, high) == (1, None):
        text = b"+"
    elif (low, high) == (0, 1):
        text = b"?"
    elif high is None:
        text = b"{%d,}" % low
    elif low == high:
        text = b"{%d}" % low
    else:
        text = b"{%d,%d}" % (low, high)
    return text if greedy else text + b"?"


def emit(ir: tuple, width: int, separated: bool = False) -> Regex:
    """The regex for ``ir``. ``separated``: for a buffer of many partitions, each followed by the byte
    ``SEPARATOR``; then ^ and $ are "after a separator or at the start" and "before one or at the end",
    and a one-row class at the top level is not captured (its group always spans exactly one row, so
    its place follows from its neighbours'; a capture would only cost time): ``uncaptured`` lists them."""
    out = Regex(b"", [], [], [])
    counter = itertools.count(1)
    alt_ids = itertools.count()

    def bits_of(prio) -> int:
        bits = 0
        for label in prio:
            bits |= 1 << label
        return bits

    def visit(node, path: tuple, top: bool = False) -> bytes:
        kind = node[0]
        if kind == "class":
            out.classes += 1
            group = next(counter)
            out.label_groups.append((group, node[1]))
            if separated and top:
                out.uncaptured.append(group)
                return _class_bytes(bits_of(node[1]), width)
            return b"(" + _class_bytes(bits_of(node[1]), width) + b")"
        if kind == "loop":
            out.classes += 1
            _, prio, low, high, greedy = node
            out.label_groups.append((next(counter), prio))
            out.loops.append((bits_of(prio), path))
            return b"(" + _class_bytes(bits_of(prio), width) + _quantifier(low, high, greedy) + b")"
        if kind == "seq":
            return b"".join(visit(item, path, top) for item in node[1])
        if kind == "alt":
            uid = next(alt_ids)
            return b"(?:" + b"|".join(visit(item, path + ((uid, i),)) for i, item in enumerate(node[1])) + b")"
        if kind == "opt":
            return b"(?:" + visit(node[1], path) + b")" + (b"?" if node[2] else b"??")
        if kind == "anchor":
            if separated:
                return b"(?<![^\\xff])" if node[1] == "start" else b"(?![^\\xff])"
            return b"\\A" if node[1] == "start" else b"\\Z"
        if kind == "empty":
            return b""
        if kind == "excl":
            group = next(counter)
            out.excl_groups.append(group)
            return b"(" + visit(node[1], path) + b")"
        raise AssertionError(node)

    out.pattern = visit(ir, (), True)
    return out


def nesting(node: tuple) -> int:
    """How deeply ``node`` nests (1 for a leaf), walked with a stack: it may nest deeper than Python recurses."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        kind = node[0]
        if kind in ("seq", "alt"):
            stack.extend((item, depth + 1) for item in node[1])
        elif kind in ("opt", "excl"):
            stack.append((node[1], depth + 1))
    return deepest


def min_rows(node: tuple) -> int:
    """The fewest rows a match of ``node`` can take."""
    kind = node[0]
    if kind == "class":
        return 1
    if kind == "loop":
        return node[2]
    if kind == "seq":
        return sum(min_rows(item) for item in node[1])
    if kind == "alt":
        return min(min_rows(item) for item in node[1])
    if kind == "excl":
        return min_rows(node[1])
    return 0  # opt, anchor, empty


def exclusive(path_a: tuple, path_b: tuple) -> bool:
    """Two loops are on different branches of some alternation (never on one path)."""
    choices = dict(path_a)
    return any(uid in choices and choices[uid] != branch for uid, branch in path_b)
