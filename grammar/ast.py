"""The typed syntax tree of a cep query: small frozen dataclasses, each with a source span.

No Lark type appears here. Every node's first field is its ``span``, left out of the node's equality
and hash (``field(compare=False)``, as miniwdl and sqlglot do), so ``parse(format(ast)) == ast`` holds
whenever two texts mean the same query, while spans themselves compare as the values they are.

Identifiers: an unquoted identifier is kept as written in ``name`` and compared case-insensitively
through ``key`` (upper case, as SQL folds them); a quoted identifier ("x" or `x`) keeps its exact
spelling and is compared as is. Pattern variables, subset names and column names all follow this rule.

``expanded_size`` counts a pattern's terms as the compiler lays them out (what the checker bounds).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import get_args

from cep.grammar.errors import Span, moved_span


@dataclass(frozen=True)
class Identifier:
    span: Span = field(compare=False)  # where it was written; not part of what it means
    name: str
    quoted: bool = False

    @property
    def key(self) -> str:
        """The name used for lookups: folded to upper case unless quoted."""
        return self.name if self.quoted else self.name.upper()


# ----------------------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Literal:
    """A constant. ``kind`` is one of: integer, decimal, string, boolean, null, timestamp, date.

    ``value`` is the Python value (int, decimal.Decimal, str, bool, None, datetime, date); ``text`` is
    the spelling, kept so the formatter can print decimals and timestamps exactly as written.
    """

    span: Span = field(compare=False)
    kind: str
    value: object
    text: str


@dataclass(frozen=True)
class IntervalLiteral:
    """``INTERVAL '10' MINUTE``; ``unit`` is upper case singular (SECOND, MINUTE, HOUR, DAY, ...)."""

    span: Span = field(compare=False)
    text: str
    unit: str
    negative: bool = False


@dataclass(frozen=True)
class ColumnRef:
    """``price`` or ``B.price`` (qualifier is a pattern variable, a subset, or the MATCH_RECOGNIZE alias)."""

    span: Span = field(compare=False)
    qualifier: Identifier | None
    column: Identifier


@dataclass(frozen=True)
class Star:
    """``*`` or ``B.*``: only as the argument of COUNT (and in ``SELECT *``)."""

    span: Span = field(compare=False)
    qualifier: Identifier | None = None


@dataclass(frozen=True)
class Unary:
    """``op`` is one of: NOT, -, +."""

    span: Span = field(compare=False)
    op: str
    operand: Expr


@dataclass(frozen=True)
class Binary:
    """``op`` is one of: OR, AND, =, <>, <, <=, >, >=, IS DISTINCT FROM, IS NOT DISTINCT FROM, +, -, *, /,
    DIV, %, ||.  ``!=`` is parsed as ``<>`` and ``<=>`` as ``IS NOT DISTINCT FROM``."""

    span: Span = field(compare=False)
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class IsNull:
    span: Span = field(compare=False)
    operand: Expr
    negated: bool = False


@dataclass(frozen=True)
class Between:
    span: Span = field(compare=False)
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True)
class InList:
    span: Span = field(compare=False)
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True)
class Like:
    """``x [NOT] LIKE p [ESCAPE e]``; ``case_insensitive`` for ``ILIKE``."""

    span: Span = field(compare=False)
    operand: Expr
    pattern: Expr
    escape: Expr | None = None
    negated: bool = False
    case_insensitive: bool = False


@dataclass(frozen=True)
class WhenClause:
    span: Span = field(compare=False)
    condition: Expr
    result: Expr


@dataclass(frozen=True)
class Case:
    """``CASE [operand] WHEN .. THEN .. [ELSE ..] END``; ``operand`` is None for the searched form."""

    span: Span = field(compare=False)
    operand: Expr | None
    whens: tuple[WhenClause, ...]
    default: Expr | None = None


@dataclass(frozen=True)
class TypeName:
    """A SQL type as written in CAST: ``name`` upper case (INTEGER, DOUBLE, DECIMAL, VARCHAR, ...)."""

    span: Span = field(compare=False)
    name: str
    params: tuple[int, ...] = ()


@dataclass(frozen=True)
class Cast:
    """``CAST(x AS t)`` and ``x::t``; ``safe`` for ``TRY_CAST`` (NULL where the value does not convert)."""

    span: Span = field(compare=False)
    operand: Expr
    type: TypeName
    safe: bool = False


@dataclass(frozen=True)
class ArrayLiteral:
    """``ARRAY[a, b, ...]``."""

    span: Span = field(compare=False)
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class FunctionCall:
    """A scalar function: COALESCE, ABS, ROUND, LOWER, UPPER, CONCAT, ... ``name`` is upper case.

    ``semantics`` (added by the front end) holds a RUNNING/FINAL written before a call that cannot
    take it (``RUNNING lower(x)``, ``FINAL CLASSIFIER()``), so that the checker can report it.
    """

    span: Span = field(compare=False)
    name: str
    args: tuple[Expr, ...]
    semantics: str | None = None


@dataclass(frozen=True)
class Aggregate:
    """COUNT, SUM, AVG, MIN, MAX, ARRAY_AGG, ... over the rows of a match.

    ``semantics`` is RUNNING, FINAL, or None when not written (running is the default).
    ``args`` may hold a ``Star`` for ``COUNT(*)`` and ``COUNT(B.*)``. ``order_by`` holds the keys of
    ``WITHIN GROUP (ORDER BY ...)`` (LISTAGG, PERCENTILE_CONT).
    """

    span: Span = field(compare=False)
    name: str
    args: tuple[Expr, ...]
    distinct: bool = False
    semantics: str | None = None
    order_by: tuple[SortKey, ...] = ()


@dataclass(frozen=True)
class Navigation:
    """PREV/NEXT (physical offset) or FIRST/LAST (logical offset among rows of a variable).

    LAG/LEAD (Snowflake) are PREV/NEXT in DEFINE (the parser writes them so) and, in MEASURES, physical
    moves confined to the rows of the match.

    ``offset`` is None when not written (PREV/NEXT default to 1, FIRST/LAST to 0).
    ``semantics`` is RUNNING, FINAL or None; only FIRST/LAST take it.
    """

    span: Span = field(compare=False)
    kind: str
    operand: Expr
    offset: Expr | None = None
    semantics: str | None = None


@dataclass(frozen=True)
class Classifier:
    """``CLASSIFIER()`` or ``CLASSIFIER(v)`` where v is a pattern variable or subset."""

    span: Span = field(compare=False)
    variable: Identifier | None = None


@dataclass(frozen=True)
class MatchNumber:
    span: Span = field(compare=False)


@dataclass(frozen=True)
class MatchStatus:
    """``MATCH_STATUS()``: our extension, 'MATCHED', 'TIMEOUT' or 'ABSENCE'."""

    span: Span = field(compare=False)


@dataclass(frozen=True)
class ProcTime:
    """``PROCTIME()`` in ORDER BY: processing-time ordering (our extension, Flink's spelling)."""

    span: Span = field(compare=False)


Expr = (
    Literal
    | IntervalLiteral
    | ColumnRef
    | Star
    | Unary
    | Binary
    | IsNull
    | Between
    | InList
    | Like
    | Case
    | Cast
    | ArrayLiteral
    | FunctionCall
    | Aggregate
    | Navigation
    | Classifier
    | MatchNumber
    | MatchStatus
    | ProcTime
)


# --------------------------------------------------------------------------------------------- pattern


@dataclass(frozen=True)
class PatternVar:
    span: Span = field(compare=False)
    name: Identifier


@dataclass(frozen=True)
class Empty:
    """``()``: matches zero rows."""

    span: Span = field(compare=False)


@dataclass(frozen=True)
class Anchor:
    """``^`` (kind 'start', before the partition's first row) or ``$`` (kind 'end', after its last)."""

    span: Span = field(compare=False)
    kind: str


@dataclass(frozen=True)
class Concat:
    span: Span = field(compare=False)
    items: tuple[Pattern, ...]


@dataclass(frozen=True)
class Alternation:
    span: Span = field(compare=False)
    alternatives: tuple[Pattern, ...]


@dataclass(frozen=True)
class Quantified:
    """``term{min,max}``; ``max`` None means unbounded; ``greedy`` False for the reluctant ``?`` form.

    ``text`` is the quantifier as written (``*``, ``+``, ``?``, ``{2,}``, ...) minus the reluctant ``?``,
    so that the formatter prints what the analyst wrote.
    """

    span: Span = field(compare=False)
    term: Pattern
    min: int
    max: int | None
    greedy: bool = True
    text: str = ""


@dataclass(frozen=True)
class Exclusion:
    """``{- pattern -}``: rows matched inside are left out of ALL ROWS PER MATCH output only."""

    span: Span = field(compare=False)
    pattern: Pattern


@dataclass(frozen=True)
class Permute:
    """``PERMUTE(a, b, c)``: any order, preferring the lexicographic order of the listed positions."""

    span: Span = field(compare=False)
    items: tuple[Pattern, ...]


@dataclass(frozen=True)
class Absence:
    """``!B``: our extension. Rows none of which satisfy B (until the next term, or until WITHIN ends)."""

    span: Span = field(compare=False)
    variable: Identifier


Pattern = PatternVar | Empty | Anchor | Concat | Alternation | Quantified | Exclusion | Permute | Absence


# ---------------------------------------------------------------------------------------------- clauses


@dataclass(frozen=True)
class SortKey:
    """One ORDER BY key; ``nulls_first`` None means the default (NULLS LAST for ASC, FIRST for DESC)."""

    span: Span = field(compare=False)
    expr: Expr
    descending: bool = False
    nulls_first: bool | None = None


@dataclass(frozen=True)
class Measure:
    span: Span = field(compare=False)
    expr: Expr
    name: Identifier


@dataclass(frozen=True)
class Subset:
    span: Span = field(compare=False)
    name: Identifier
    variables: tuple[Identifier, ...]


@dataclass(frozen=True)
class Define:
    span: Span = field(compare=False)
    variable: Identifier
    condition: Expr


@dataclass(frozen=True)
class SkipTo:
    """AFTER MATCH SKIP: ``mode`` is PAST_LAST_ROW, TO_NEXT_ROW, TO_FIRST or TO_LAST.

    ``SKIP TO v`` is parsed as TO_LAST with ``plain=True`` so it formats back the way it was written.
    """

    span: Span = field(compare=False)
    mode: str
    variable: Identifier | None = None
    plain: bool = False


@dataclass(frozen=True)
class RowsPerMatch:
    """``mode``: ONE, ALL_SHOW_EMPTY (the ALL ROWS default), ALL_OMIT_EMPTY, ALL_WITH_UNMATCHED.

    ``show_timeout`` is our extension (``ONE ROW PER MATCH SHOW TIMEOUT MATCHES``).
    ``explicit_show`` records that SHOW EMPTY MATCHES was written, for the formatter.
    """

    span: Span = field(compare=False)
    mode: str = "ONE"
    show_timeout: bool = False
    explicit: bool = False


@dataclass(frozen=True)
class MatchRecognize:
    span: Span = field(compare=False)
    partition_by: tuple[ColumnRef, ...]
    order_by: tuple[SortKey, ...]
    measures: tuple[Measure, ...]
    rows_per_match: RowsPerMatch
    after_match: SkipTo | None
    pattern: Pattern
    within: IntervalLiteral | None = None
    subsets: tuple[Subset, ...] = ()
    defines: tuple[Define, ...] = ()
    seek: bool = False
    explicit_initial: bool = False


@dataclass(frozen=True)
class SelectItem:
    """One item of the outer select list; ``expr`` is a ``Star`` for ``*`` and ``m.*``."""

    span: Span = field(compare=False)
    expr: Expr
    alias: Identifier | None = None


@dataclass(frozen=True)
class Relation:
    """``FROM ticks`` (a name) or ``FROM 'data/ticks.parquet'`` (a quoted path, ``is_path=True``)."""

    span: Span = field(compare=False)
    name: str
    is_path: bool = False


@dataclass(frozen=True)
class Statement:
    span: Span = field(compare=False)
    select: tuple[SelectItem, ...]
    relation: Relation
    match: MatchRecognize
    alias: Identifier | None = None
    where: Expr | None = None
    order_by: tuple[SortKey, ...] = ()
    limit: int | None = None
    name: str | None = None


def matches_one_way(pattern: Pattern) -> bool:
    """Can ``pattern`` match a given stretch of rows in one way only (no alternation, no quantifier with
    a choice, no PERMUTE of several items)? Factoring such a prefix out of an alternation keeps the
    preference order: ``X P | X Q`` is ``X (P | Q)`` exactly when X has no second way to match."""
    stack = [pattern]
    while stack:
        node = stack.pop()
        if isinstance(node, (PatternVar, Anchor, Empty)):
            continue
        if isinstance(node, Concat):
            stack.extend(node.items)
        elif isinstance(node, Exclusion):
            stack.append(node.pattern)
        elif isinstance(node, Quantified) and node.min == node.max:
            stack.append(node.term)
        elif isinstance(node, Permute) and len(node.items) == 1:
            stack.append(node.items[0])
        else:
            return False
    return True


# ------------------------------------------------------------------------------------------------ walks
# The one way to visit a tree (the checker, the parser's depth bound, the compiler, the fast path and the
# command all use it): every dataclass field but the span, in declaration order, identifiers included.

_EXPRESSION_TYPES = get_args(Expr)
_PATTERN_TYPES = get_args(Pattern)


def is_expression(node: object) -> bool:
    return isinstance(node, _EXPRESSION_TYPES)


def is_pattern(node: object) -> bool:
    return isinstance(node, _PATTERN_TYPES)


@functools.cache
def field_names(node_type: type) -> tuple[str, ...]:
    """The fields of a node type but its span, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(node_type) if f.name != "span")


def children(node: object) -> Iterator[object]:
    """The nodes directly inside ``node`` (identifiers and WHEN clauses included), in field order."""
    for name in field_names(type(node)):
        value = getattr(node, name)
        if isinstance(value, tuple):
            yield from (item for item in value if hasattr(type(item), _DATACLASS_FIELDS))
        elif hasattr(type(value), _DATACLASS_FIELDS) and not isinstance(value, Span):
            yield value


# What ``dataclasses.is_dataclass`` asks of an instance's type, asked directly: walks run for every rule loaded.
_DATACLASS_FIELDS = "__dataclass_fields__"


def walk(node: object) -> Iterator[object]:
    """Every node under ``node`` (itself included), pre-order, without recursion."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))


def moved(node: object, lines: int, offset: int) -> object:
    """``node`` with every span in it ``moved_span`` (a statement parsed apart from the rest of its file)."""
    if isinstance(node, tuple):
        return tuple(moved(item, lines, offset) for item in node)
    if isinstance(node, Span):
        return moved_span(node, lines, offset)
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return node
    changes = {f.name: moved(getattr(node, f.name), lines, offset) for f in dataclasses.fields(node)}
    return dataclasses.replace(node, **changes)


def expanded_size(pattern: Pattern, cap: int) -> int:
    """Number of terms once `{n,m}` is unrolled (n + (m-n) copies, n + 1 when unbounded) and
    PERMUTE is expanded into its tree of orders; saturates at ``cap`` to keep the numbers small."""
    if isinstance(pattern, (PatternVar, Absence, Anchor, Empty)):
        return 1
    if isinstance(pattern, Exclusion):
        return expanded_size(pattern.pattern, cap)
    if isinstance(pattern, Quantified):
        copies = (pattern.max if pattern.max is not None else pattern.min + 1) or 1
        return min(cap, copies * expanded_size(pattern.term, cap))
    if isinstance(pattern, Permute):
        return _permute_size(
            [expanded_size(item, cap) for item in pattern.items],
            [matches_one_way(item) for item in pattern.items],
            cap,
        )
    items = pattern.items if isinstance(pattern, Concat) else pattern.alternatives
    return min(cap, sum(expanded_size(item, cap) for item in items))


def _permute_size(sizes: list[int], one_way: list[bool], cap: int) -> int:
    """Terms of PERMUTE as the compiler lays it out (program/compiler.py): an item that matches one way
    starts a prefix tree over the rest; any other item starts (n-1)! orders written out in full."""
    if len(sizes) <= 1:
        return min(cap, sum(sizes))
    total = 0
    for i, size in enumerate(sizes):
        rest, rest_one_way = sizes[:i] + sizes[i + 1 :], one_way[:i] + one_way[i + 1 :]
        if one_way[i]:
            total += size + _permute_size(rest, rest_one_way, cap)
        else:
            total += math.factorial(len(rest)) * (size + sum(rest))
        if total >= cap:
            return cap
    return total
