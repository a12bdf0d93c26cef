"""A slow, plain, independent reference implementation of SQL:2016 MATCH_RECOGNIZE.

This module exists only to check the real engine (``matcher/``) in property tests. It shares no
code with it: it walks the typed AST of ``grammar.ast`` directly and finds matches by recursive
backtracking, the way the standard describes them, with no automaton, no thread merging and no
cleverness. It may take exponential time; it is meant for inputs of a dozen rows.

    reference_run(stmt, rows) -> list[dict]           the query's result rows (name -> value)
    reference_run_table(stmt, rows) -> (names, rows)   the same, as column names + value lists
                                                       (keeps duplicate column names, e.g. SELECT *
                                                       with ``ORDER BY id ASC, id DESC``)

Semantics implemented (see docs/semantics.md and tests/conformance_corpus/README.md):

* Rows are split by PARTITION BY (None is a partition value of its own) and each partition is
  sorted stably by ORDER BY (NULLS LAST for ASC, FIRST for DESC, unless written).
* Matching is tried at each row of the partition in order. At a start row, the candidate
  matches are enumerated in preference order (greedy: one more iteration first; reluctant: one
  fewer first; alternation: left first; PERMUTE: permutations in lexicographic order); a row's
  DEFINE condition is evaluated at the moment the row is labelled, seeing only the rows labelled
  so far in that candidate. The first candidate that reaches the end of the pattern is the match.
* An iteration of a quantified term that consumes no row ends the loop (once the minimum count
  is reached), so ``()*`` and ``(A?)*`` terminate. The exit happens at that iteration's own place
  in preference order (PCRE's rule): ``(() | A)*`` and ``(A??)*`` prefer the empty match, and
  give rows to A only when the rest of the pattern needs them. (A Pike VM that merely drops a
  thread coming back to the loop head at the same row prefers ``AAA`` there instead.)
* Navigation: PREV/NEXT move physically within the partition; FIRST/LAST move among the rows of
  their variable(s) up to the current row (RUNNING, the default) or in the whole match (FINAL);
  see ``TRINO_RUNNING_FIRST`` for Trino's variant. In DEFINE and in RUNNING measures, rows after the
  current one have no label yet (``NEXT(CLASSIFIER())`` is NULL); a row reached through FINAL has one.
  MATCH_NUMBER() in DEFINE (Trino allows it) is the number the match would get.
* AFTER MATCH SKIP as in the standard; skipping to a variable with no row, or to the first row of
  the match, raises ``ReferenceSkipError``. After an empty match, matching resumes at the next
  row whatever the SKIP mode (as Trino does).
* Output: ONE ROW PER MATCH (partition columns, measures), ALL ROWS PER MATCH (partition
  columns, ORDER BY columns, measures, the other input columns), SHOW/OMIT EMPTY MATCHES, WITH
  UNMATCHED ROWS; then the outer SELECT / WHERE / ORDER BY / LIMIT.

Errors: ``ReferenceSkipError`` (the runtime error of the standard), ``ReferenceEvalError``
(division by zero, type errors), ``ReferenceUnsupported`` (a construct this reference does not
implement; tests should skip), ``ReferenceBudgetExceeded`` (the backtracking took too many steps;
property tests should ``assume()`` it away). All derive from ``ReferenceMatcherError``.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cep.grammar import ast as A

__all__ = [
    "ReferenceMatcherError",
    "ReferenceSkipError",
    "ReferenceEvalError",
    "ReferenceUnsupported",
    "ReferenceBudgetExceeded",
    "reference_run",
    "reference_run_table",
    "reference_matches",
    "DEFAULT_BUDGET",
    "WITHIN_INCLUSIVE",
    "TRINO_RUNNING_FIRST",
]

DEFAULT_BUDGET = 200_000
"""Backtracking steps allowed per start row before ``ReferenceBudgetExceeded``."""

WITHIN_INCLUSIVE = False
"""WITHIN (our Flink-style extension): a match is kept when last - first < interval, our spec and
Flink's measured runtime behaviour. Set True for the corpus case
``flink-docs-match_recognize-time_constraint-1``, a documentation example that keeps a match exactly one
interval long (a documented deviation, docs/semantics.md)."""


TRINO_RUNNING_FIRST = False  # the engine follows the standard (docs/semantics.md)
"""Standard RUNNING semantics: FIRST(x, n) in MEASURES sees only the match rows up to the current
row, so an offset past the current row gives NULL. Trino's LogicalIndexNavigation instead searches
FIRST forward through the whole match (LAST is bounded by the current row in both); set this to
True to reproduce Trino (corpus case trino-TestRowPatternMatching-testNavigationFunctions-9)."""


class ReferenceMatcherError(Exception):
    """Base of every error this module raises on purpose."""


class ReferenceSkipError(ReferenceMatcherError):
    """AFTER MATCH SKIP TO a variable with no row in the match, or to the match's first row."""


class ReferenceEvalError(ReferenceMatcherError):
    """A runtime error in an expression: division by zero, incompatible types, ..."""


class ReferenceUnsupported(ReferenceMatcherError):
    """A construct the reference does not implement (the test should be skipped)."""


class ReferenceBudgetExceeded(ReferenceMatcherError):
    """Backtracking took more than the step budget (the input is too large for the reference)."""


# ============================================================================ small helpers


def _col(ident: A.Identifier) -> str:
    """Column names are matched case-insensitively against the input."""
    return ident.name.casefold()


def _check_bool(v: Any, what: str) -> Any:
    if v is None or isinstance(v, bool):
        return v
    raise ReferenceEvalError(f"{what} is not a boolean: {v!r}")


# ============================================================================ the match state


@dataclass
class _Match:
    """One (possibly partial) match: rows ``start .. start+len(labels)-1`` of ``part``."""

    part: list[dict]  # the sorted partition, rows keyed by casefolded column name
    start: int
    labels: list[str]  # one pattern-variable key per row of the match
    match_number: int | None
    status: str = "MATCHED"  # MATCH_STATUS(): TIMEOUT for a partial match that WITHIN expired

    @property
    def end(self) -> int:
        """Index of the last row of the match, or start-1 when empty."""
        return self.start + len(self.labels) - 1

    def label_at(self, r: int) -> str | None:
        if self.start <= r <= self.end:
            return self.labels[r - self.start]
        return None


@dataclass
class _Ctx:
    """Where an expression inside MATCH_RECOGNIZE is evaluated.

    ``cur`` is the current row (None in an empty match). RUNNING semantics see the match rows up
    to ``cur``; FINAL sees the whole match (only allowed in MEASURES). ``pinned`` is set while
    evaluating the operand of a navigation or an aggregate: every column reference and CLASSIFIER()
    then reads that one row.
    """

    m: _Match
    cur: int | None
    in_define: bool
    pinned: int | None = None  # the row every reference reads, while navigating / aggregating
    final: bool = False  # the pinned row was found with FINAL semantics: the whole match is labelled

    def with_pinned(self, row: int | None, final: bool = False) -> _Ctx:
        return _Ctx(self.m, self.cur, self.in_define, row, final)


# ============================================================================ the query analysis


@dataclass
class _Query:
    mr: A.MatchRecognize
    variables: set[str]  # pattern variable keys
    subsets: dict[str, frozenset[str]]
    defines: dict[str, A.Expr]
    within: _dt.timedelta | None


def _pattern_vars(p: A.Pattern, out: set[str]) -> None:
    if isinstance(p, A.PatternVar):
        out.add(p.name.key)
    elif isinstance(p, A.Concat):
        for x in p.items:
            _pattern_vars(x, out)
    elif isinstance(p, A.Alternation):
        for x in p.alternatives:
            _pattern_vars(x, out)
    elif isinstance(p, A.Permute):
        for x in p.items:
            _pattern_vars(x, out)
    elif isinstance(p, A.Quantified):
        _pattern_vars(p.term, out)
    elif isinstance(p, A.Exclusion):
        _pattern_vars(p.pattern, out)
    elif isinstance(p, A.Absence):
        out.add(p.variable.key)  # the rows inside `!B` are labelled B here (B's name reads them)


def _interval(lit: A.IntervalLiteral) -> _dt.timedelta:
    units = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400, "WEEK": 7 * 86400}
    unit = lit.unit.upper()
    if unit.endswith("S") and unit[:-1] in units:
        unit = unit[:-1]
    if unit in ("MILLISECOND", "MILLISECONDS"):
        seconds = float(lit.text) / 1000
    elif unit in units:
        seconds = float(lit.text) * units[unit]
    else:
        raise ReferenceUnsupported(f"interval unit {lit.unit}")
    td = _dt.timedelta(seconds=seconds)
    return -td if lit.negative else td


def _analyse(mr: A.MatchRecognize) -> _Query:
    variables: set[str] = set()
    _pattern_vars(mr.pattern, variables)
    subsets = {s.name.key: frozenset(v.key for v in s.variables) for s in mr.subsets}
    defines = {d.variable.key: d.condition for d in mr.defines}
    within = _interval(mr.within) if mr.within is not None else None
    return _Query(mr, variables, subsets, defines, within)


# ============================================================================ expression evaluation


_AGGREGATES = {
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "ARRAY_AGG",
    "BOOL_OR",
    "BOOL_AND",
    "EVERY",
    "ARBITRARY",
    "ANY_VALUE",
    "MAX_BY",
    "MIN_BY",
    "MAP_AGG",
    "MULTIMAP_AGG",
    "MAP_UNION",
}


def _num(v: Any) -> bool:
    return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)


def _coerce_pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Decimal mixed with float becomes float (Python refuses the mix)."""
    if isinstance(a, decimal.Decimal) and isinstance(b, float):
        return float(a), b
    if isinstance(a, float) and isinstance(b, decimal.Decimal):
        return a, float(b)
    return a, b


def _widen_date(a: Any, b: Any) -> tuple[Any, Any]:
    """A DATE compared with a TIMESTAMP is that day's midnight (Spark casts the DATE to TIMESTAMP)."""

    def midnight(day: _dt.date, like: _dt.datetime) -> _dt.datetime:
        return _dt.datetime(day.year, day.month, day.day, tzinfo=like.tzinfo)

    day_a = isinstance(a, _dt.date) and not isinstance(a, _dt.datetime)
    day_b = isinstance(b, _dt.date) and not isinstance(b, _dt.datetime)
    if day_a and isinstance(b, _dt.datetime):
        return midnight(a, b), b
    if day_b and isinstance(a, _dt.datetime):
        return a, midnight(b, a)
    return a, b


def _arith(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    a, b = _coerce_pair(a, b)
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op in ("/", "%") and b == 0:
            return None  # Spark without ANSI mode, as docs/language.md states: division by zero is NULL
        if op == "/":
            if isinstance(a, int) and isinstance(b, int):
                return float(a) / float(b)  # Spark: integers divide as DOUBLE (Trino, PostgreSQL truncate)
            return a / b
        if isinstance(a, int) and isinstance(b, int):
            q = abs(a) // abs(b)  # the remainder takes the dividend's sign
            return a - b * (-q if (a < 0) != (b < 0) else q)
        return math.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else a % b
    except TypeError as exc:
        raise ReferenceEvalError(f"cannot apply {op} to {a!r} and {b!r}") from exc
    raise ReferenceUnsupported(f"operator {op}")


def _compare(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    a, b = _widen_date(*_coerce_pair(a, b))
    if isinstance(a, bool) != isinstance(b, bool) or _num(a) != _num(b):
        raise ReferenceEvalError(f"cannot compare {a!r} with {b!r}")
    if isinstance(a, list) or isinstance(b, list):
        if op == "=":
            return a == b
        if op == "<>":
            return a != b
        raise ReferenceUnsupported("ordering comparison of arrays")
    try:
        if op == "=":
            return a == b
        if op == "<>":
            return a != b
        if op == "<":
            return a < b
        if op == "<=":
            return a <= b
        if op == ">":
            return a > b
        if op == ">=":
            return a >= b
    except TypeError as exc:
        raise ReferenceEvalError(f"cannot compare {a!r} with {b!r}") from exc
    raise ReferenceUnsupported(f"comparison {op}")


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, _dt.datetime):
        return v.isoformat(sep=" ")
    return str(v)


def _like(value: str, pattern: str, escape: str | None) -> bool:
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
        i += 1
    return re.fullmatch("".join(out), value, flags=re.DOTALL) is not None


def _round_half_up(x: Any, digits: int) -> Any:
    if isinstance(x, int) and not isinstance(x, bool):
        if digits >= 0:
            return x
        q = decimal.Decimal(x).quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP)
        return int(q)
    d = x if isinstance(x, decimal.Decimal) else decimal.Decimal(repr(x))
    q = d.quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP)
    return q if isinstance(x, decimal.Decimal) else float(q)


def _cast(v: Any, t: A.TypeName) -> Any:
    if v is None:
        return None
    name = t.name.upper()
    try:
        if name in ("INTEGER", "INT", "BIGINT", "SMALLINT", "TINYINT"):
            if isinstance(v, str):
                return int(v.strip())
            if isinstance(v, bool):
                return int(v)
            return int(_round_half_up(v, 0))
        if name in ("DOUBLE", "REAL", "FLOAT"):
            return float(v)
        if name in ("DECIMAL", "NUMERIC"):
            scale = t.params[1] if len(t.params) > 1 else 0
            d = decimal.Decimal(v) if not isinstance(v, float) else decimal.Decimal(repr(v))
            return d.quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
        if name in ("VARCHAR", "CHAR", "STRING", "TEXT"):
            s = _text(v)
            return s[: t.params[0]] if t.params else s
        if name == "BOOLEAN":
            if isinstance(v, str):
                return {"true": True, "false": False}[v.strip().lower()]
            return bool(v)
        if name == "TIMESTAMP":
            return v if isinstance(v, _dt.datetime) else _dt.datetime.fromisoformat(str(v))
    except (ValueError, KeyError, decimal.InvalidOperation) as exc:
        raise ReferenceEvalError(f"cannot cast {v!r} to {name}") from exc
    raise ReferenceUnsupported(f"CAST to {name}")


class _Evaluator:
    """Evaluates expressions inside MATCH_RECOGNIZE (DEFINE and MEASURES)."""

    def __init__(self, q: _Query) -> None:
        self.q = q

    # ---------------------------------------------------------------- label sets

    def varset(self, ident: A.Identifier) -> frozenset[str]:
        key = ident.key
        if key in self.q.subsets:
            return self.q.subsets[key]
        if key in self.q.variables:
            return frozenset([key])
        raise ReferenceUnsupported(f"{ident.name} is neither a pattern variable nor a subset")

    def target_vars(self, e: Any) -> tuple[bool, frozenset[str] | None]:
        """Which rows an aggregate / FIRST / LAST ranges over: (found, set or None = all rows).

        ``found`` is False when the expression reads no row at all (e.g. MATCH_NUMBER()).
        Mixing a qualified and an unqualified reference, or two different label sets, is
        refused (the standard forbids it)."""
        found: list[frozenset[str] | None] = []

        def walk(x: Any) -> None:
            if isinstance(x, A.ColumnRef):
                found.append(self.varset(x.qualifier) if x.qualifier is not None else None)
            elif isinstance(x, A.Star):
                found.append(self.varset(x.qualifier) if x.qualifier is not None else None)
            elif isinstance(x, A.Classifier):
                found.append(self.varset(x.variable) if x.variable is not None else None)
            elif isinstance(x, (A.Aggregate,)):
                raise ReferenceUnsupported("nested aggregate")
            elif isinstance(x, A.Navigation) and x.kind in ("FIRST", "LAST"):
                raise ReferenceUnsupported("FIRST/LAST nested in FIRST/LAST or an aggregate")
            else:
                for child in _children(x):
                    walk(child)

        walk(e)
        if not found:
            return False, None
        distinct = set(found)
        if len(distinct) > 1:
            raise ReferenceUnsupported("one navigation or aggregate reads several label sets")
        return True, found[0]

    def rows_of(self, ctx: _Ctx, vars_: frozenset[str] | None, semantics: str | None) -> list[int]:
        """The match rows labelled with one of ``vars_`` (None: every row), in order, up to the
        current row (RUNNING) or to the end of the match (FINAL)."""
        m = ctx.m
        if ctx.cur is None:
            return []
        if semantics == "FINAL":
            if ctx.in_define:
                raise ReferenceUnsupported("FINAL in DEFINE")
            last = m.end
        else:
            last = ctx.cur
        return [r for r in range(m.start, last + 1) if vars_ is None or m.labels[r - m.start] in vars_]

    # ---------------------------------------------------------------- reading one row

    def column(self, ctx: _Ctx, row: Any, name: str) -> Any:
        if row is None:
            return None
        values = ctx.m.part[row]
        if name not in values:
            raise ReferenceUnsupported(f"unknown column {name}")
        return values[name]

    def default_row(self, ctx: _Ctx, vars_: frozenset[str] | None, semantics: str | None = None) -> int | None:
        """The row a reference reads when not navigated: the current row, or the last row of vars_."""
        if ctx.pinned is not None:
            return ctx.pinned
        if vars_ is None:
            return ctx.cur
        rows = self.rows_of(ctx, vars_, semantics)
        return rows[-1] if rows else None

    # ---------------------------------------------------------------- the evaluator

    def eval(self, e: Any, ctx: _Ctx) -> Any:
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise ReferenceUnsupported(f"expression {type(e).__name__}")
        return method(e, ctx)

    def e_Literal(self, e: A.Literal, ctx: _Ctx) -> Any:
        return e.value

    def e_IntervalLiteral(self, e: A.IntervalLiteral, ctx: _Ctx) -> Any:
        return _interval(e)

    def e_ArrayLiteral(self, e: A.ArrayLiteral, ctx: _Ctx) -> Any:
        return [self.eval(x, ctx) for x in e.items]

    def e_ColumnRef(self, e: A.ColumnRef, ctx: _Ctx) -> Any:
        vars_ = self.varset(e.qualifier) if e.qualifier is not None else None
        return self.column(ctx, self.default_row(ctx, vars_), _col(e.column))

    def e_Classifier(self, e: A.Classifier, ctx: _Ctx) -> Any:
        vars_ = self.varset(e.variable) if e.variable is not None else None
        row = self.default_row(ctx, vars_)
        if row is None:
            return None
        label = ctx.m.label_at(row)
        if label is not None and not ctx.final and ctx.cur is not None and row > ctx.cur:
            # Not labelled yet: in DEFINE, and in RUNNING measures, which see the match as if it ended
            # at the current row (SQL:2016 running semantics); only FINAL sees the rest of the match.
            return None
        return label

    def e_MatchNumber(self, e: A.MatchNumber, ctx: _Ctx) -> Any:
        return ctx.m.match_number

    def e_MatchStatus(self, e: A.MatchStatus, ctx: _Ctx) -> Any:
        return ctx.m.status

    def e_Unary(self, e: A.Unary, ctx: _Ctx) -> Any:
        v = self.eval(e.operand, ctx)
        if e.op == "NOT":
            v = _check_bool(v, "NOT operand")
            return None if v is None else not v
        if v is None:
            return None
        if not _num(v) and not isinstance(v, _dt.timedelta):
            raise ReferenceEvalError(f"cannot negate {v!r}")
        return -v if e.op == "-" else v

    def e_Binary(self, e: A.Binary, ctx: _Ctx) -> Any:
        op = e.op
        if op in ("AND", "OR"):
            return self.logic(op, e.left, e.right, ctx)
        a = self.eval(e.left, ctx)
        b = self.eval(e.right, ctx)
        if op in ("=", "<>", "<", "<=", ">", ">="):
            return _compare(op, a, b)
        if op == "||":
            if a is None or b is None:
                return None
            if isinstance(a, list) and isinstance(b, list):
                return a + b
            return _text(a) + _text(b)
        return _arith(op, a, b)

    def logic(self, op: str, left: Any, right: Any, ctx: _Ctx) -> Any:
        """SQL AND/OR. The order of evaluation is not defined by SQL: a side that fails is
        forgiven when the other side alone decides the result (FALSE for AND, TRUE for OR)."""
        decisive = op == "OR"  # the value that decides the result on its own
        try:
            a = _check_bool(self.eval(left, ctx), op + " operand")
        except ReferenceEvalError:
            b = _check_bool(self.eval(right, ctx), op + " operand")
            if b is decisive:
                return b
            raise
        if a is decisive:
            return a
        b = _check_bool(self.eval(right, ctx), op + " operand")
        if b is decisive:
            return b
        if a is None or b is None:
            return None
        return not decisive

    def e_IsNull(self, e: A.IsNull, ctx: _Ctx) -> Any:
        v = self.eval(e.operand, ctx)
        return (v is not None) if e.negated else (v is None)

    def e_Between(self, e: A.Between, ctx: _Ctx) -> Any:
        v = self.eval(e.operand, ctx)
        lo = _compare(">=", v, self.eval(e.low, ctx))
        hi = _compare("<=", v, self.eval(e.high, ctx))
        if lo is False or hi is False:
            r = False
        elif lo is None or hi is None:
            r = None
        else:
            r = True
        return (None if r is None else not r) if e.negated else r

    def e_InList(self, e: A.InList, ctx: _Ctx) -> Any:
        v = self.eval(e.operand, ctx)
        r: Any = False
        if v is None:
            r = None
        else:
            for item in e.items:
                c = _compare("=", v, self.eval(item, ctx))
                if c is True:
                    r = True
                    break
                if c is None:
                    r = None
        return (None if r is None else not r) if e.negated else r

    def e_Like(self, e: A.Like, ctx: _Ctx) -> Any:
        v = self.eval(e.operand, ctx)
        p = self.eval(e.pattern, ctx)
        esc = self.eval(e.escape, ctx) if e.escape is not None else None
        if v is None or p is None or (e.escape is not None and esc is None):
            return None
        r = _like(_text(v), _text(p), esc)
        return not r if e.negated else r

    def e_Case(self, e: A.Case, ctx: _Ctx) -> Any:
        if e.operand is not None:
            base = self.eval(e.operand, ctx)
            for w in e.whens:
                if _compare("=", base, self.eval(w.condition, ctx)) is True:
                    return self.eval(w.result, ctx)
        else:
            for w in e.whens:
                if _check_bool(self.eval(w.condition, ctx), "WHEN condition") is True:
                    return self.eval(w.result, ctx)
        return self.eval(e.default, ctx) if e.default is not None else None

    def e_Cast(self, e: A.Cast, ctx: _Ctx) -> Any:
        return _cast(self.eval(e.operand, ctx), e.type)

    def e_FunctionCall(self, e: A.FunctionCall, ctx: _Ctx) -> Any:
        name = e.name.upper()
        if name in _AGGREGATES:
            return self.aggregate(name, e.args, False, getattr(e, "semantics", None), ctx)
        if name == "IF":
            cond = _check_bool(self.eval(e.args[0], ctx), "IF condition")
            if cond is True:
                return self.eval(e.args[1], ctx)
            return self.eval(e.args[2], ctx) if len(e.args) > 2 else None
        if name == "COALESCE":
            for a in e.args:
                v = self.eval(a, ctx)
                if v is not None:
                    return v
            return None
        args = [self.eval(a, ctx) for a in e.args]
        return _scalar(name, args)

    def e_Aggregate(self, e: A.Aggregate, ctx: _Ctx) -> Any:
        return self.aggregate(e.name.upper(), e.args, e.distinct, e.semantics, ctx)

    # ---------------------------------------------------------------- navigation

    def offset(self, e: A.Navigation, ctx: _Ctx) -> int:
        if e.offset is None:
            return 1 if e.kind in ("PREV", "NEXT") else 0
        n = self.eval(e.offset, ctx.with_pinned(None))
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ReferenceEvalError(f"navigation offset must be a non-negative integer, got {n!r}")
        return n

    def logical_row(self, e: A.Navigation, ctx: _Ctx) -> Any:
        """The row FIRST(x, n) / LAST(x, n) points at (None when out of range)."""
        if ctx.pinned is not None:
            raise ReferenceUnsupported("FIRST/LAST inside PREV/NEXT operand or aggregate argument")
        _, vars_ = self.target_vars(e.operand)
        semantics = e.semantics
        if TRINO_RUNNING_FIRST and e.kind.upper() == "FIRST" and not ctx.in_define:
            semantics = "FINAL"
        rows = self.rows_of(ctx, vars_, semantics)
        n = self.offset(e, ctx)
        if n >= len(rows):
            return None
        return rows[n] if e.kind == "FIRST" else rows[len(rows) - 1 - n]

    def e_Navigation(self, e: A.Navigation, ctx: _Ctx) -> Any:
        kind = e.kind.upper()
        if kind in ("FIRST", "LAST"):
            row = self.logical_row(e, ctx)
            return None if row is None else self.eval(e.operand, ctx.with_pinned(row, e.semantics == "FINAL"))
        if kind not in ("PREV", "NEXT"):
            raise ReferenceUnsupported(f"navigation {e.kind}")
        operand = e.operand
        final = False
        if isinstance(operand, A.Navigation) and operand.kind.upper() in ("FIRST", "LAST"):
            base = self.logical_row(operand, ctx)
            final = operand.semantics == "FINAL"
            operand = operand.operand
        elif isinstance(operand, A.Navigation):
            raise ReferenceUnsupported("PREV/NEXT nested in PREV/NEXT")
        else:
            _, vars_ = self.target_vars(operand)
            base = self.default_row(ctx, vars_)
        if base is None:
            return None
        n = self.offset(e, ctx)
        target = base - n if kind == "PREV" else base + n
        if not 0 <= target < len(ctx.m.part):
            return None
        return self.eval(operand, ctx.with_pinned(target, final))

    # ---------------------------------------------------------------- aggregates

    def aggregate(self, name: str, args: tuple, distinct: bool, semantics: str | None, ctx: _Ctx) -> Any:
        if ctx.pinned is not None:
            raise ReferenceUnsupported("aggregate inside a navigation or another aggregate")
        if name == "COUNT" and (not args or isinstance(args[0], A.Star)):
            star = args[0] if args else A.Star(A.Span())
            vars_ = self.varset(star.qualifier) if star.qualifier is not None else None
            return len(self.rows_of(ctx, vars_, semantics))
        _, vars_ = self.target_vars(args)
        rows = self.rows_of(ctx, vars_, semantics)
        per_row = [[self.eval(a, ctx.with_pinned(r, semantics == "FINAL")) for a in args] for r in rows]
        if name == "ARRAY_AGG":
            values = [v[0] for v in per_row]
            if distinct:
                values = _distinct(values)
            return values if rows else None
        if name in ("MAX_BY", "MIN_BY"):
            return _by(name, per_row)
        if name in ("MAP_AGG", "MULTIMAP_AGG", "MAP_UNION"):
            return _map_aggregate(name, per_row) if rows else None
        if name in ("MIN", "MAX") and len(args) == 2:
            vals = sorted((v[0] for v in per_row if v[0] is not None), reverse=name == "MAX")
            n = per_row[0][1] if per_row else None
            return vals[:n] if per_row and n is not None else None
        values = [v[0] for v in per_row if v[0] is not None]
        if distinct:
            values = _distinct(values)
        if name == "COUNT":
            return len(values)
        if not values:
            return None
        if name == "SUM":
            return _sum(values)
        if name == "AVG":
            total = _sum(values)
            if isinstance(total, decimal.Decimal):
                return total / len(values)
            return total / len(values) if isinstance(total, float) else float(total) / len(values)
        if name == "MIN":
            return min(values)
        if name == "MAX":
            return max(values)
        if name == "BOOL_OR":
            return any(values)
        if name in ("BOOL_AND", "EVERY"):
            return all(values)
        if name in ("ARBITRARY", "ANY_VALUE"):
            return values[0]
        raise ReferenceUnsupported(f"aggregate {name}")


def _distinct(values: list) -> list:
    out: list = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _sum(values: list) -> Any:
    total = values[0]
    for v in values[1:]:
        total = _arith("+", total, v)
    return total


def _by(name: str, per_row: list[list]) -> Any:
    pairs = [(v[0], v[1]) for v in per_row if v[1] is not None]
    if len(per_row) and len(per_row[0]) > 2:
        n = per_row[0][2]
        ordered = sorted(pairs, key=lambda p: p[1], reverse=name == "MAX_BY")
        return [p[0] for p in ordered[:n]] if per_row else None
    if not pairs:
        return None
    best = pairs[0]
    for p in pairs[1:]:
        if (p[1] > best[1]) if name == "MAX_BY" else (p[1] < best[1]):
            best = p
    return best[0]


def _map_aggregate(name: str, per_row: list[list]) -> dict:
    """Trino's map aggregates (used by a few corpus cases); maps are Python dicts."""
    out: dict = {}
    for values in per_row:
        if name == "MAP_UNION":
            if values[0] is not None:
                for k, v in values[0].items():
                    out.setdefault(k, v)
        elif values[0] is not None:
            if name == "MAP_AGG":
                out.setdefault(values[0], values[1])
            else:
                out.setdefault(values[0], []).append(values[1])
    return out


def _scalar(name: str, args: list) -> Any:
    """Plain scalar functions; NULL in gives NULL out unless the function says otherwise."""
    if name == "CONCAT":
        if any(a is None for a in args):
            return None
        return "".join(_text(a) for a in args)
    if name == "CONCAT_WS":
        if not args or args[0] is None:
            return None
        parts: list[str] = []
        for a in args[1:]:
            if isinstance(a, list):
                parts.extend(_text(x) for x in a if x is not None)
            elif a is not None:
                parts.append(_text(a))
        return args[0].join(parts)
    if name == "ARRAY_JOIN":
        if args[0] is None or args[1] is None:
            return None
        repl = args[2] if len(args) > 2 else None
        return args[1].join(_text(x) if x is not None else repl for x in args[0] if x is not None or repl is not None)
    if name == "NULLIF":
        return None if _compare("=", args[0], args[1]) is True else args[0]
    if name in ("GREATEST", "LEAST"):  # Spark skips NULL arguments; NULL only when all are
        present = [a for a in args if a is not None]
        if not present:
            return None
        return max(present) if name == "GREATEST" else min(present)
    if name == "MAP":
        if any(a is None for a in args):
            return None
        if len(args[0]) != len(args[1]):
            raise ReferenceEvalError("MAP: key and value arrays differ in length")
        return dict(zip(args[0], args[1]))
    if name == "ELEMENT_AT":
        if args[0] is None or args[1] is None:
            return None
        if isinstance(args[0], dict):
            return args[0].get(args[1])
        index = args[1]
        if index == 0:
            raise ReferenceEvalError("ELEMENT_AT: SQL array indices start at 1")
        if abs(index) > len(args[0]):
            return None
        return args[0][index - 1] if index > 0 else args[0][index]
    if any(a is None for a in args):
        return None
    if name == "ABS":
        return abs(args[0])
    if name == "ROUND":
        return _round_half_up(args[0], args[1] if len(args) > 1 else 0)
    if name == "LOWER":
        return _text(args[0]).lower()
    if name == "UPPER":
        return _text(args[0]).upper()
    if name in ("LENGTH", "CHAR_LENGTH"):
        return len(args[0])
    if name == "MOD":
        return _arith("%", args[0], args[1])
    if name in ("ARRAY_MAX", "ARRAY_MIN"):
        vals = args[0]
        if any(v is None for v in vals) or not vals:
            return None
        return max(vals) if name == "ARRAY_MAX" else min(vals)
    if name == "CARDINALITY":
        return len(args[0])
    raise ReferenceUnsupported(f"function {name}")


def _children(x: Any) -> list:
    """Direct sub-expressions of an AST node (for analyses that walk expressions)."""
    if isinstance(x, (list, tuple)):
        return list(x)
    out = []
    for field in getattr(x, "__dataclass_fields__", {}):
        if field == "span":
            continue
        v = getattr(x, field)
        if isinstance(v, tuple):
            out.extend(v)
        elif hasattr(v, "__dataclass_fields__") and not isinstance(v, (A.Identifier, A.TypeName)):
            out.append(v)
    return out


# ============================================================================ the backtracking matcher


class _Matcher:
    def __init__(
        self,
        q: _Query,
        ev: _Evaluator,
        part: list[dict],
        order_key: Callable[[int], Any] | None,
        budget: int,
        clock: Any = None,
    ):
        self.q = q
        self.ev = ev
        self.part = part
        self.n = len(part)
        self.order_key = order_key
        self.budget = budget
        self.clock = clock
        self.steps = 0
        self.timed_out: tuple | None = None

    def find(self, start: int, match_number: int) -> list[tuple[str, bool]] | None:
        """The preferred match at ``start``: a list of (label, excluded) per row, or None.

        With WITHIN, ``timed_out`` is then the labels of the first partial match, in preference order,
        that was still waiting for a row when time reached its first row + the interval (a row at or
        past that time, or the end of the rows with ``clock`` past it), or None."""
        self.steps = 0
        self.start = start
        self.match_number = match_number
        self.timed_out = None
        try:
            return self.m(self.q.mr.pattern, start, (), False, lambda pos, labels: list(labels))
        except RecursionError as exc:
            raise ReferenceBudgetExceeded("recursion too deep") from exc

    def expired(self, pos: int) -> bool:
        """Has time reached the WITHIN limit of the current start before row ``pos`` (or at the end)?"""
        if self.q.within is None or self.order_key is None:
            return False
        now = self.order_key(pos) if pos < self.n else self.clock
        if now is None:
            return False
        gap = now - self.order_key(self.start)
        return gap > self.q.within or (gap == self.q.within and not WITHIN_INCLUSIVE)

    def waiting(self, pos: int, labels: tuple) -> None:
        """A partial match wants row ``pos``: remember it as the start's timeout if time is up there."""
        if self.timed_out is None and self.expired(pos):
            self.timed_out = labels

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise ReferenceBudgetExceeded(f"more than {self.budget} backtracking steps")

    def accepts(self, var: str, pos: int, labels: tuple) -> bool:
        """Is row ``pos`` allowed to take label ``var``, given the labels before it?"""
        if self.q.within is not None and self.order_key is not None:
            gap = self.order_key(pos) - self.order_key(self.start)
            if gap > self.q.within or (gap == self.q.within and not WITHIN_INCLUSIVE):
                return False
        cond = self.q.defines.get(var)
        if cond is None:
            return True
        m = _Match(self.part, self.start, [lab for lab, _ in labels] + [var], self.match_number)
        v = self.ev.eval(cond, _Ctx(m, pos, in_define=True))
        return _check_bool(v, f"DEFINE condition of {var}") is True

    def m(self, p: Any, pos: int, labels: tuple, excl: bool, k: Callable) -> Any:
        """Match ``p`` at ``pos``, then call ``k(pos, labels)``; return the first result of k that
        is not None, trying the ways p can match in preference order."""
        self.tick()
        if isinstance(p, A.PatternVar):
            var = p.name.key
            self.waiting(pos, labels)
            if pos >= self.n:
                return None
            new = labels + ((var, excl),)
            if not self.accepts(var, pos, labels):
                return None
            return k(pos + 1, new)
        if isinstance(p, A.Empty):
            return k(pos, labels)
        if isinstance(p, A.Anchor):
            ok = pos == 0 if p.kind == "start" else pos == self.n
            return k(pos, labels) if ok else None
        if isinstance(p, A.Concat):
            return self.seq(list(p.items), pos, labels, excl, k)
        if isinstance(p, A.Alternation):
            for alt in p.alternatives:
                r = self.m(alt, pos, labels, excl, k)
                if r is not None:
                    return r
            return None
        if isinstance(p, A.Permute):
            for order in itertools.permutations(range(len(p.items))):
                r = self.seq([p.items[i] for i in order], pos, labels, excl, k)
                if r is not None:
                    return r
            return None
        if isinstance(p, A.Exclusion):
            return self.m(p.pattern, pos, labels, True, k)
        if isinstance(p, A.Quantified):
            return self.rep(p, 0, pos, labels, excl, k)
        raise ReferenceUnsupported(f"pattern element {type(p).__name__}")

    def seq(self, items: list, pos: int, labels: tuple, excl: bool, k: Callable) -> Any:
        if not items:
            return k(pos, labels)
        head, rest = items[0], items[1:]
        if isinstance(head, A.Absence):  # only a term of the top-level sequence (the front end checks)
            return self.absence(
                head.variable.key, pos, labels, excl, not rest, lambda p2, l2: self.seq(rest, p2, l2, excl, k)
            )
        return self.m(head, pos, labels, excl, lambda p2, l2: self.seq(rest, p2, l2, excl, k))

    def absence(self, var: str, pos: int, labels: tuple, excl: bool, trailing: bool, k: Callable) -> Any:
        """``!B`` (our extension): rows none of which satisfies B's condition (NULL does not), then the
        next term, taking as few such rows as it allows; at the end of the pattern, every row until
        time reaches the first row + WITHIN (a row at or past that time, or the clock at the end of the
        rows), which completes the match; a B row before then, or no such time, is no match."""
        while True:
            self.tick()
            if trailing and self.expired(pos):
                return k(pos, labels)
            if not trailing:
                r = k(pos, labels)
                if r is not None:
                    return r
                self.waiting(pos, labels)
            if pos >= self.n or self.expired(pos) or self.accepts(var, pos, labels):
                return None
            pos, labels = pos + 1, labels + ((var, excl),)

    def rep(self, p: A.Quantified, count: int, pos: int, labels: tuple, excl: bool, k: Callable) -> Any:
        """``count`` iterations of p.term done; try more or stop, in preference order."""
        self.tick()
        can_stop = count >= p.min
        can_go = p.max is None or count < p.max

        def after_iteration(p2: int, l2: tuple) -> Any:
            if p2 == pos and count + 1 >= p.min:
                return k(p2, l2)  # an empty iteration ends the loop
            return self.rep(p, count + 1, p2, l2, excl, k)

        if p.greedy:
            if can_go:
                r = self.m(p.term, pos, labels, excl, after_iteration)
                if r is not None:
                    return r
            return k(pos, labels) if can_stop else None
        if can_stop:
            r = k(pos, labels)
            if r is not None:
                return r
        return self.m(p.term, pos, labels, excl, after_iteration) if can_go else None


# ============================================================================ running the query


def _sort_rows(rows: list[dict], keys: tuple[A.SortKey, ...], value_of: Callable[[A.Expr, dict], Any]) -> list[dict]:
    """Stable multi-key sort with SQL NULL placement."""
    out = list(rows)
    for key in reversed(keys):
        nulls_first = key.nulls_first if key.nulls_first is not None else key.descending
        vals = [(value_of(key.expr, r), r) for r in out]
        nulls = [r for v, r in vals if v is None]
        rest = [(v, r) for v, r in vals if v is not None]
        try:
            rest.sort(key=lambda vr: vr[0], reverse=key.descending)
        except TypeError as exc:
            raise ReferenceEvalError("ORDER BY keys of different types") from exc
        ordered = [r for _, r in rest]
        out = nulls + ordered if nulls_first else ordered + nulls
    return out


def _row_scope_value(e: A.Expr, row: dict) -> Any:
    """Evaluate a PARTITION BY / ORDER BY key over one input row."""
    if isinstance(e, A.ColumnRef):
        name = _col(e.column)
        if name not in row:
            raise ReferenceUnsupported(f"unknown column {e.column.name}")
        return row[name]
    if isinstance(e, A.ProcTime):
        raise ReferenceUnsupported("PROCTIME() ordering")
    return _OuterEval({}).eval(e, _OuterRow(row))


@dataclass
class _OuterRow:
    values: dict  # casefolded name -> value


class _OuterEval(_Evaluator):
    """Evaluates the outer SELECT / WHERE / ORDER BY over MATCH_RECOGNIZE output rows."""

    def __init__(self, aliases: dict[str, Any], mr_alias: str | None = None) -> None:
        self.aliases = aliases
        self.mr_alias = mr_alias
        self.q = _Query(None, set(), {}, {}, None)  # type: ignore[arg-type]

    def e_ColumnRef(self, e: A.ColumnRef, ctx: Any) -> Any:
        if e.qualifier is not None and self.mr_alias is not None:
            if e.qualifier.name.casefold() != self.mr_alias.casefold():
                raise ReferenceUnsupported(f"unknown qualifier {e.qualifier.name}")
        name = _col(e.column)
        if name in ctx.values:
            return ctx.values[name]
        raise ReferenceUnsupported(f"unknown column {e.column.name}")

    def e_Aggregate(self, e: Any, ctx: Any) -> Any:
        raise ReferenceUnsupported("aggregate in the outer query")

    def e_Navigation(self, e: Any, ctx: Any) -> Any:
        raise ReferenceUnsupported("navigation outside MATCH_RECOGNIZE")

    def e_Classifier(self, e: Any, ctx: Any) -> Any:
        raise ReferenceUnsupported("CLASSIFIER outside MATCH_RECOGNIZE")

    def e_MatchNumber(self, e: Any, ctx: Any) -> Any:
        raise ReferenceUnsupported("MATCH_NUMBER outside MATCH_RECOGNIZE")

    def e_FunctionCall(self, e: A.FunctionCall, ctx: Any) -> Any:
        if e.name.upper() in _AGGREGATES:
            raise ReferenceUnsupported("aggregate in the outer query")
        return super().e_FunctionCall(e, ctx)


def _input_columns(rows: list[dict]) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    for r in rows:
        for k in r:
            if k.casefold() not in seen:
                seen.add(k.casefold())
                names.append(k)
    return names


def reference_matches(
    stmt: A.Statement, rows: list[dict], budget: int = DEFAULT_BUDGET, clock: Any = None
) -> list[dict]:
    """The matches themselves, for debugging and for tests of the matcher alone.

    One dict per match found, in partition/start order: ``partition`` (tuple of key values),
    ``start`` (index in the sorted partition), ``labels`` (one label per row), ``excluded`` (one
    bool per row), ``match_number``, ``rows`` (the casefolded input rows of the match)."""
    out: list[dict] = []
    for item in _run_partitions(stmt, rows, budget, clock):
        if item[0] == "match":
            _, key, part, start, labels, mn = item
            out.append(
                {
                    "partition": key,
                    "start": start,
                    "labels": [lab for lab, _ in labels],
                    "excluded": [ex for _, ex in labels],
                    "match_number": mn,
                    "rows": part[start : start + len(labels)],
                }
            )
    return out


def _partitions(stmt: A.Statement, rows: list[dict]) -> list[tuple[tuple, list[dict]]]:
    mr = stmt.match
    folded = [{k.casefold(): v for k, v in r.items()} for r in rows]
    groups: dict[tuple, list[dict]] = {}
    for r in folded:
        key = tuple(_row_scope_value(c, r) for c in mr.partition_by)
        hkey = tuple((type(v).__name__ if isinstance(v, bool) else "", v) for v in key)
        groups.setdefault(hkey, []).append(r)
    out = []
    for hkey, members in groups.items():
        out.append((tuple(v for _, v in hkey), _sort_rows(members, mr.order_by, _row_scope_value)))
    return out


def _run_partitions(stmt: A.Statement, rows: list[dict], budget: int, clock: Any = None):
    """Yield ('match', key, part, start, labels, mn), ('timeout', key, part, start, labels) and
    ('unmatched', key, part, row) events.

    SHOW TIMEOUT MATCHES (our extension): a start row with no match whose preferred partial match was
    still waiting for a row when WITHIN ran out is a timeout; the search goes on at the next row (a
    timeout is not a match: no AFTER MATCH SKIP). ``clock``: the time at the end of the rows (default:
    the largest event time of the input, as a replay has it)."""
    mr = stmt.match
    q = _analyse(mr)
    ev = _Evaluator(q)
    skip = mr.after_match or A.SkipTo(A.Span(), "PAST_LAST_ROW")
    show_timeout = mr.rows_per_match is not None and mr.rows_per_match.show_timeout
    partitions = _partitions(stmt, rows)
    if q.within is not None and clock is None:
        if not mr.order_by:
            raise ReferenceUnsupported("WITHIN without ORDER BY")
        times = [_row_scope_value(mr.order_by[0].expr, r) for _, part in partitions for r in part]
        clock = max((t for t in times if t is not None), default=None)
    for key, part in partitions:
        order_key = None
        if q.within is not None:
            if not mr.order_by:
                raise ReferenceUnsupported("WITHIN without ORDER BY")
            first = mr.order_by[0].expr
            order_key = lambda i, part=part, first=first: _row_scope_value(first, part[i])  # noqa: E731
        matcher = _Matcher(q, ev, part, order_key, budget, clock)
        pos = 0
        match_number = 1
        last_matched = -1  # last row that belonged to a non-empty match
        while pos < len(part):
            labels = matcher.find(pos, match_number)
            if labels is None and show_timeout and matcher.timed_out is not None:
                yield ("timeout", key, part, pos, list(matcher.timed_out))
            if labels is None:
                if pos > last_matched:
                    yield ("unmatched", key, part, pos)
                pos += 1
                continue
            yield ("match", key, part, pos, labels, match_number)
            match_number += 1
            if not labels:
                pos += 1
                continue
            end = pos + len(labels) - 1
            last_matched = max(last_matched, end)
            if skip.mode == "PAST_LAST_ROW":
                pos = end + 1
            elif skip.mode == "TO_NEXT_ROW":
                pos += 1
            elif skip.mode in ("TO_FIRST", "TO_LAST"):
                vars_ = ev.varset(skip.variable)
                hits = [pos + i for i, (lab, _) in enumerate(labels) if lab in vars_]
                if not hits:
                    raise ReferenceSkipError(
                        f"AFTER MATCH SKIP failed: {skip.variable.name} is not present in the match"
                    )
                target = hits[0] if skip.mode == "TO_FIRST" else hits[-1]
                if target == pos:
                    raise ReferenceSkipError("AFTER MATCH SKIP failed: cannot skip to the first row of the match")
                pos = target
            else:
                raise ReferenceUnsupported(f"AFTER MATCH SKIP {skip.mode}")


def _mr_output(stmt: A.Statement, rows: list[dict], budget: int, clock: Any = None) -> tuple[list[str], list[list]]:
    """The rows MATCH_RECOGNIZE itself produces (what ``SELECT *`` shows)."""
    mr = stmt.match
    q = _analyse(mr)
    ev = _Evaluator(q)
    mode = mr.rows_per_match.mode if mr.rows_per_match is not None else "ONE"
    one_row = mode == "ONE"
    part_cols = [c.column.name for c in mr.partition_by]
    part_keys = [_col(c.column) for c in mr.partition_by]
    order_cols = [k.expr for k in mr.order_by if isinstance(k.expr, A.ColumnRef)]
    order_names = [c.column.name for c in order_cols]
    order_keys = [_col(c.column) for c in order_cols]
    measure_names = [ms.name.name for ms in mr.measures]
    input_names = _input_columns(rows)
    used = set(part_keys) | set(order_keys)
    rest_names = [n for n in input_names if n.casefold() not in used]

    if one_row:
        names = part_cols + measure_names
    else:
        names = part_cols + order_names + measure_names + rest_names
    out: list[list] = []
    terms = mr.pattern.items if isinstance(mr.pattern, A.Concat) else (mr.pattern,)
    status = "ABSENCE" if isinstance(terms[-1], A.Absence) else "MATCHED"  # a match that ends at its deadline

    def layout(row: dict, measures: list) -> list:
        if one_row:
            return [row.get(k) for k in part_keys] + measures
        return (
            [row.get(k) for k in part_keys]
            + [row.get(k) for k in order_keys]
            + measures
            + [row.get(n.casefold()) for n in rest_names]
        )

    for event in _run_partitions(stmt, rows, budget, clock):
        if event[0] == "unmatched":
            _, key, part, r = event
            if mode == "ALL_WITH_UNMATCHED":
                out.append(layout(part[r], [None] * len(mr.measures)))
            continue
        if event[0] == "timeout":  # ONE ROW PER MATCH only: measures over the rows matched so far
            _, key, part, start, labels = event
            m = _Match(part, start, [lab for lab, _ in labels], None, "TIMEOUT")
            ctx = _Ctx(m, m.end, in_define=False)
            out.append(layout(part[max(m.end, start)], [ev.eval(ms.expr, ctx) for ms in mr.measures]))
            continue
        _, key, part, start, labels, mn = event
        m = _Match(part, start, [lab for lab, _ in labels], mn, status)
        if not labels:
            if mode == "ALL_OMIT_EMPTY":
                continue
            ctx = _Ctx(m, None, in_define=False)
            out.append(layout(part[start], [ev.eval(ms.expr, ctx) for ms in mr.measures]))
            continue
        if one_row:
            ctx = _Ctx(m, m.end, in_define=False)
            out.append(layout(part[m.end], [ev.eval(ms.expr, ctx) for ms in mr.measures]))
            continue
        for i, (_, excluded) in enumerate(labels):
            if excluded:
                continue
            ctx = _Ctx(m, start + i, in_define=False)
            out.append(layout(part[start + i], [ev.eval(ms.expr, ctx) for ms in mr.measures]))
    return names, out


def reference_run_table(
    stmt: A.Statement, rows: list[dict], budget: int = DEFAULT_BUDGET, clock: Any = None
) -> tuple[list[str], list[list]]:
    """Run the whole statement: (output column names, output rows as lists, in a fixed order).
    ``clock``: the event time at the end of the rows, for SHOW TIMEOUT MATCHES (default: the largest)."""
    names, table = _mr_output(stmt, rows, budget, clock)
    mr_alias = stmt.alias.key if stmt.alias is not None else None
    outer = _OuterEval({}, mr_alias)

    def scope(values: list) -> _OuterRow:
        d: dict = {}
        for n, v in zip(names, values):
            d.setdefault(n.casefold(), v)
        return _OuterRow(d)

    scoped = [(scope(r), r) for r in table]
    if stmt.where is not None:
        scoped = [(s, r) for s, r in scoped if _check_bool(outer.eval(stmt.where, s), "WHERE") is True]

    out_names: list[str] = []
    getters: list[Callable[[_OuterRow, list], Any]] = []
    for i, item in enumerate(stmt.select):
        if isinstance(item.expr, A.Star):
            for j, n in enumerate(names):
                out_names.append(n)
                getters.append(lambda s, r, j=j: r[j])
            continue
        if item.alias is not None:
            out_names.append(item.alias.name)
        elif isinstance(item.expr, A.ColumnRef):
            out_names.append(item.expr.column.name)
        else:
            out_names.append(f"_col{i}")
        getters.append(lambda s, r, e=item.expr: outer.eval(e, s))

    result = []
    for s, r in scoped:
        vals = [g(s, r) for g in getters]
        sort_scope = dict(s.values)
        for n, v in zip(out_names, vals):
            sort_scope[n.casefold()] = v
        result.append((sort_scope, vals))
    if stmt.order_by:
        result = _sort_rows(result, stmt.order_by, lambda e, sr: outer.eval(e, _OuterRow(sr[0])))
    rows_out = [vals for _, vals in result]
    if stmt.limit is not None:
        rows_out = rows_out[: stmt.limit]
    return out_names, rows_out


def reference_run(stmt: A.Statement, rows: list[dict], budget: int = DEFAULT_BUDGET, clock: Any = None) -> list[dict]:
    """Run the statement over ``rows`` (dicts of column -> value); one dict per output row.

    Column names are the output names (alias, column name, or ``_colN``). When a name occurs
    twice (``SELECT *`` with a repeated ORDER BY column), the dict keeps the last value; use
    ``reference_run_table`` to see every column."""
    names, table = reference_run_table(stmt, rows, budget, clock)
    return [dict(zip(names, r)) for r in table]
