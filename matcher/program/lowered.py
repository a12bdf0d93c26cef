"""The row pattern lowered once, for every engine: variables as label ids, the absence terms placed.

The parser's pattern (``ast.Pattern``) speaks of names, spans and the surface syntax. Every engine compiles
the same lowered form instead, the way Go compiles its one-pass matcher from the ``Prog`` its NFA runs:

- the Pike VM's program (``compiler.compile_program``);
- the regex fast path's expression over one byte per row (``vector/pattern_regex.py``);
- the sequence engine's items (``vector/sequence_plan.py``), which the streaming chooser also reads.

So a construct is resolved in one place: which label a variable (or ``!B``'s rows) is, and whether an
absence ends the pattern (then it waits for WITHIN's deadline). The lowering is one-to-one: no rewrite
that an engine would have to undo, so each engine's own simplifications stay its own.

    Label(label)                            one row of a variable
    Sequence(items)                         items in a row
    Choice(options)                         alternation, in preference order
    AnyOrder(items, one_way)                PERMUTE: every order, lexicographic in the listed positions
    Repeat(body, low, high, greedy)         a quantifier (high None: no bound)
    Excluded(body)                          {- body -}: matched, hidden from ALL ROWS PER MATCH
    Edge(at_start)                          ^ or $
    Nothing()                               ()
    Absent(label, trailing)                 !B: rows where B does not hold (label: the rows' own, ``!B``);
                                            trailing: it ends the pattern, so it lasts until WITHIN's deadline
"""

from __future__ import annotations

from dataclasses import dataclass

from cep.grammar import ast


def absence_label(name: str) -> str:
    """The internal label of the rows inside an absence ``!B``."""
    return "!" + name


@dataclass(frozen=True)
class Label:
    label: int


@dataclass(frozen=True)
class Sequence:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Choice:
    options: tuple[Node, ...]


@dataclass(frozen=True)
class AnyOrder:
    items: tuple[Node, ...]
    one_way: tuple[bool, ...]  # per item: it can match a stretch of rows in one way only (``ast.matches_one_way``)


@dataclass(frozen=True)
class Repeat:
    body: Node
    low: int
    high: int | None
    greedy: bool


@dataclass(frozen=True)
class Excluded:
    body: Node


@dataclass(frozen=True)
class Edge:
    at_start: bool


@dataclass(frozen=True)
class Nothing:
    pass


@dataclass(frozen=True)
class Absent:
    label: int
    trailing: bool


Node = Label | Sequence | Choice | AnyOrder | Repeat | Excluded | Edge | Nothing | Absent


def lower(pattern: ast.Pattern, labels: tuple[str, ...]) -> Node:
    """``pattern`` with its variables and absence terms as ids in ``labels`` (``machine.pattern_labels``)."""
    ids = {name: index for index, name in enumerate(labels)}
    last = pattern.items[-1] if isinstance(pattern, ast.Concat) else pattern
    # The checker admits an absence only as a term of the top-level sequence (E0226): the last one ends it.
    return _Lowering(ids, last if isinstance(last, ast.Absence) else None).node(pattern)


@dataclass(frozen=True)
class _Lowering:
    ids: dict[str, int]
    trailing: ast.Absence | None

    def node(self, node: ast.Pattern) -> Node:
        if isinstance(node, ast.PatternVar):
            return Label(self.ids[node.name.key])
        if isinstance(node, ast.Concat):
            return Sequence(tuple(self.node(item) for item in node.items))
        if isinstance(node, ast.Alternation):
            return Choice(tuple(self.node(option) for option in node.alternatives))
        if isinstance(node, ast.Permute):
            return AnyOrder(
                tuple(self.node(item) for item in node.items), tuple(ast.matches_one_way(item) for item in node.items)
            )
        if isinstance(node, ast.Quantified):
            return Repeat(self.node(node.term), node.min, node.max, node.greedy)
        if isinstance(node, ast.Exclusion):
            return Excluded(self.node(node.pattern))
        if isinstance(node, ast.Anchor):
            return Edge(node.kind == "start")
        if isinstance(node, ast.Empty):
            return Nothing()
        if isinstance(node, ast.Absence):
            return Absent(self.ids[absence_label(node.variable.key)], node is self.trailing)
        raise TypeError(f"unknown pattern node {node!r}")  # pragma: no cover - the AST is closed
