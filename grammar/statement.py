"""A whole SQL statement with MATCH_RECOGNIZE clauses in it: where the clauses are, and the SQL around them.

    split(text) -> WholeStatement    the clauses (each parsed and checked), their input relations, the
                                     CTEs each can see and the subqueries inside each, positions in ``text``

The SQL around the clauses is not parsed here: an SQL engine (Spark SQL, or DuckDB for the python
engine) runs it. What this module knows of it comes from the token scan (``tokens.scan``): parentheses,
strings, quoted names and words, so that a clause is found wherever a table reference may stand, in a CTE,
a subquery, a join or a union, nested or not. Each clause is parsed with the ``clause`` start symbol of
the grammar, the rest of the text blanked (newlines kept), so every position in an error is a position in
the user's text.

Rendering (``WholeStatement.render``) gives SQL for an engine: the statement (or a part of it) with every
clause and its input relation replaced by the name of a view that holds the clause's output, file paths
in ``FROM 'data/x.parquet'`` replaced by the name of a view of the file, and every quoted identifier
(``"x"`` or ```x```) written in the engine's quotes. Double quotes name identifiers in the whole
statement, as in the SQL standard and inside MATCH_RECOGNIZE (docs/language.md, "Whole statements").
User text reaches the engine only as SQL that the engine parses; generated names are quoted.
``Rendered.position`` maps an offset of the rendered text back to the user's text, for the engine's errors.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from cep.grammar import ast
from cep.grammar.checks import check
from cep.grammar.errors import NO_SPAN, CepError, CepSyntaxError
from cep.grammar.parser import parse_clause
from cep.grammar.tokens import ScanToken, scan, significant, span_of

# A subquery inside a clause becomes a column of the clause's input (scalar and EXISTS subqueries:
# the engine computes them, once per query or micro-batch) or a list of constants (IN subqueries).
# The placeholder that stands for it in the clause is short: it must fit on the first line of the
# subquery's text (`(SELECT` or `EXISTS` at least).
SUBQUERY_COLUMN = "_cq{}"

_SUBQUERY_WORDS = {"SELECT", "WITH", "VALUES"}
# Words that end a relation when scanning back from MATCH_RECOGNIZE (the relation starts after them).
_RELATION_START = {"FROM", "JOIN", "APPLY"}


@dataclass(frozen=True)
class Subquery:
    """What the engine computes for a clause: a subquery inside it, ``(SELECT ...)`` (scalar), ``EXISTS
    (SELECT ...)`` or ``IN (SELECT ...)``, or a window function ``f(...) OVER (...)`` (Snowflake's
    published queries use them in DEFINE: over the clause's partition, in its order when framed)."""

    kind: str  # scalar | exists | in | window
    start: int  # the text replaced in the clause: `(SELECT ...)`, `EXISTS (SELECT ...)`, `f(x) OVER (...)`
    end: int
    body: tuple[int, int]  # the query inside the parentheses; a window function's call
    column: str  # the placeholder name the clause reads
    window: tuple[int, int] | None = None  # inside OVER's parentheses
    partition: tuple[str, ...] = ()  # the clause's PARTITION BY and ORDER BY (name, descending), for a window
    order: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class Clause:
    """One ``<relation> MATCH_RECOGNIZE (...)`` of the statement."""

    index: int  # 1, 2, ... in text order (an inner clause comes before the clause that reads it)
    start: int  # where the input relation begins: [start, end) is replaced by the clause's view
    keyword: int  # where MATCH_RECOGNIZE begins
    end: int  # just after the clause's closing parenthesis
    relation: tuple[int, int]  # the input relation's text (a name, a path, a subquery, ...)
    path: str | None  # FROM 'data/x.parquet' MATCH_RECOGNIZE: the file
    scopes: tuple[tuple[tuple[int, int], ...], ...]  # the CTE definitions it sees, per enclosing WITH, outermost first
    subqueries: tuple[Subquery, ...]
    statement: ast.Statement  # SELECT * FROM <input> MATCH_RECOGNIZE (...), checked


@dataclass(frozen=True)
class Rendered:
    """SQL text for an engine, with where each piece came from in the user's text."""

    text: str
    pieces: tuple[tuple[int, int, int], ...] = ()  # (offset here, offset in the user's text, length copied verbatim)
    anchor: int = 0  # the user's offset for generated text

    def position(self, offset: int) -> int:
        """The user's offset for an offset of this text (generated text maps to ``anchor``)."""
        for here, there, length in self.pieces:
            if here <= offset < here + max(length, 1):
                return there + min(offset - here, max(length - 1, 0))
        return self.anchor


@dataclass(frozen=True)
class Dialect:
    """How an engine quotes a name."""

    name: str
    quote: Callable[[str], str]


SPARK = Dialect("spark", lambda name: "`" + name.replace("`", "``") + "`")
DUCKDB = Dialect("duckdb", lambda name: '"' + name.replace('"', '""') + '"')


@dataclass(frozen=True)
class WholeStatement:
    text: str
    filename: str | None
    clauses: tuple[Clause, ...]
    paths: tuple[tuple[int, int, str], ...]  # FROM/JOIN 'file' anywhere: (start, end, path)
    end: int  # the statement's end (a trailing ';' left out)

    def render(
        self,
        dialect: Dialect,
        views: dict[int, str],
        path_views: dict[str, str],
        start: int = 0,
        end: int | None = None,
    ) -> Rendered:
        """The text in [start, end) as SQL for ``dialect``: clauses (whose index is in ``views``) replaced
        by their view, file paths by ``path_views[path]``, quoted names in the dialect's quotes."""
        end = self.end if end is None else end
        replacements: list[tuple[int, int, str]] = []
        covered = -1
        for clause in sorted(self.clauses, key=lambda c: (c.start, -c.end)):  # outermost regions first
            if start <= clause.start and clause.end <= end and clause.start >= covered and clause.index in views:
                replacements.append((clause.start, clause.end, dialect.quote(views[clause.index])))
                covered = clause.end
        for path_start, path_end, path in self.paths:
            if start <= path_start and path_end <= end and path in path_views and not _inside(replacements, path_start):
                replacements.append((path_start, path_end, dialect.quote(path_views[path])))
        for token in scan(self.text[start:end]):
            if token.kind == "quoted" and not _inside(replacements, start + token.start):
                name = token.text[1:-1].replace(token.text[0] * 2, token.text[0])
                replacements.append((start + token.start, start + token.end, dialect.quote(name)))
        replacements.sort()
        out, pieces, position = [], [], start
        length = 0
        for rep_start, rep_end, text in replacements:
            pieces.append((length, position, rep_start - position))
            out.append(self.text[position:rep_start])
            length += rep_start - position
            pieces.append((length, rep_start, 0))
            out.append(text)
            length += len(text)
            position = rep_end
        pieces.append((length, position, end - position))
        out.append(self.text[position:end])
        return Rendered("".join(out), tuple(pieces), start)

    def input_sql(
        self,
        clause: Clause,
        dialect: Dialect,
        views: dict[int, str],
        path_views: dict[str, str],
        columns: dict[str, str] | None = None,
    ) -> Rendered:
        """SELECT * FROM <the clause's input relation>, with the CTEs it sees, plus ``columns`` (name -> SQL
        text already rendered) computed in the same scope (the scalar subqueries of the clause)."""
        relation = self.render(dialect, views, path_views, *clause.relation)
        extra = "".join(f", {sql} AS {dialect.quote(name)}" for name, sql in (columns or {}).items())
        return self._in_scope(clause, dialect, views, path_views, f"SELECT *{extra} FROM ", relation, "")

    def subquery_sql(
        self, clause: Clause, subquery: Subquery, dialect: Dialect, views: dict[int, str], path_views: dict[str, str]
    ) -> Rendered:
        """The query of an IN subquery, runnable alone (with the CTEs the clause sees)."""
        body = self.render(dialect, views, path_views, *subquery.body)
        return self._in_scope(
            clause, dialect, views, path_views, "SELECT * FROM (", body, f"\n) AS {dialect.quote('_cep_in')}"
        )

    def subquery_text(
        self, subquery: Subquery, dialect: Dialect, views: dict[int, str], path_views: dict[str, str]
    ) -> str:
        """A scalar or EXISTS subquery, or a window function, as an expression of the clause's input query."""
        body = self.render(dialect, views, path_views, *subquery.body).text
        if subquery.kind == "window":
            spec = self.render(dialect, views, path_views, *subquery.window).text
            head = []
            if subquery.partition and not re.search(r"\bPARTITION\s+BY\b", spec, re.I):
                head.append("PARTITION BY " + ", ".join(dialect.quote(c) for c in subquery.partition))
            if (
                subquery.order
                and re.search(r"\b(ROWS|RANGE)\b", spec, re.I)
                and not re.search(r"\bORDER\s+BY\b", spec, re.I)
            ):
                head.append(
                    "ORDER BY " + ", ".join(dialect.quote(c) + (" DESC" if desc else "") for c, desc in subquery.order)
                )
            return f"{body} OVER ({' '.join(head)} {spec}\n)"
        if subquery.kind == "exists":
            return f"EXISTS (\n{body}\n)"
        return f"(\n{body}\n)"

    def _in_scope(
        self, clause: Clause, dialect: Dialect, views, path_views, head: str, middle: Rendered, tail: str
    ) -> Rendered:
        parts: list[str | Rendered] = [head, middle, tail]
        for scope in reversed(clause.scopes):  # innermost first
            definitions: list[str | Rendered] = ["WITH "]
            for number, (def_start, def_end) in enumerate(scope):
                if number:
                    definitions.append(",\n")
                definitions.append(self.render(dialect, views, path_views, def_start, def_end))
            if isinstance(parts[0], str) and parts[0].startswith("SELECT") and len(parts) == 3:
                parts = definitions + ["\n"] + parts
            else:
                parts = definitions + ["\nSELECT * FROM (\n"] + parts + [f"\n) AS {dialect.quote('_cep_scope')}"]
        return _join(parts, anchor=clause.relation[0])


def _join(parts: list, anchor: int) -> Rendered:
    text, pieces = [], []
    length = 0
    for part in parts:
        if isinstance(part, Rendered):
            pieces.extend((length + here, there, size) for here, there, size in part.pieces)
            text.append(part.text)
            length += len(part.text)
        else:
            text.append(part)
            length += len(part)
    return Rendered("".join(text), tuple(pieces), anchor)


def _inside(replacements: list[tuple[int, int, str]], offset: int) -> bool:
    return any(start <= offset < end for start, end, _ in replacements)


# ------------------------------------------------------------------------------------------- scanning


@dataclass
class _Tokens:
    """The significant tokens of a statement, with each parenthesis's partner and each token's depth."""

    text: str
    items: list[ScanToken]
    partner: dict[int, int]
    depth: list[int]

    @classmethod
    def of(cls, text: str) -> _Tokens:
        items = significant(scan(text))
        partner: dict[int, int] = {}
        depth: list[int] = []
        stack: list[int] = []
        for index, token in enumerate(items):
            if token.kind == "close" and token.text == ")":
                if not stack:
                    raise CepSyntaxError(
                        "this ')' closes nothing", code="E0124", span=span_of(text, token.start, token.end)
                    )
                opening = stack.pop()
                partner[opening], partner[index] = index, opening
            depth.append(len(stack))
            if token.kind == "open" and token.text == "(":
                stack.append(index)
        if stack:
            token = items[stack[-1]]
            raise CepSyntaxError("this '(' is never closed", code="E0124", span=span_of(text, token.start, token.end))
        return cls(text, items, partner, depth)

    def word(self, index: int) -> str:
        token = self.items[index] if 0 <= index < len(self.items) else None
        return token.text.upper() if token is not None and token.kind == "word" else ""

    def is_open(self, index: int) -> bool:
        return 0 <= index < len(self.items) and self.items[index].kind == "open" and self.items[index].text == "("

    def in_query(self, index: int) -> bool:
        """Whether token ``index`` is a word of a query (the statement's own, or a subquery's), not of a call's
        arguments: the FROM of ``trim(BOTH 'a' FROM s)`` or ``extract(YEAR FROM '2020-01-02')`` names no file."""
        opening = self.enclosing_open(index)
        return opening is None or self.word(opening + 1) in ("SELECT", "WITH")

    def enclosing_open(self, index: int) -> int | None:
        """The '(' whose group holds token ``index`` (None at the top level)."""
        level = self.depth[index]
        for back in range(index - 1, -1, -1):
            if self.is_open(back) and self.depth[back] == level - 1:
                return back
        return None


def _error(text: str, start: int, end: int, message: str, code: str, hint: str | None = None) -> CepSyntaxError:
    return CepSyntaxError(message, code=code, span=span_of(text, start, max(end, start + 1)), hint=hint)


def _relation_start(tokens: _Tokens, keyword: int) -> int:
    """The first token of the relation MATCH_RECOGNIZE reads: after the nearest FROM, JOIN or ',' at the
    same depth (a subquery's parentheses are skipped whole)."""
    index = keyword - 1
    level = tokens.depth[keyword]
    while index >= 0:
        token = tokens.items[index]
        if token.kind == "close" and token.text == ")" and index in tokens.partner:
            index = tokens.partner[index] - 1
            continue
        if tokens.depth[index] < level or (token.kind == "open"):
            break
        if tokens.word(index) in _RELATION_START or (token.kind == "other" and token.text == ","):
            break
        index -= 1
    first = index + 1
    if first >= keyword:
        token = tokens.items[keyword]
        raise _error(
            tokens.text,
            token.start,
            token.end,
            "MATCH_RECOGNIZE needs a table to read before it",
            "E0132",
            hint="write FROM <table or (subquery)> MATCH_RECOGNIZE (...)",
        )
    return first


def _scopes(tokens: _Tokens, keyword: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The CTE definitions that the clause at token ``keyword`` sees, per enclosing WITH, outermost first."""
    levels = []
    position: int | None = keyword
    while position is not None:
        opening = tokens.enclosing_open(position)
        first = 0 if opening is None else opening + 1
        if tokens.word(first) == "WITH":
            visible = _visible_ctes(tokens, first, tokens.items[keyword].start)
            if visible:
                levels.append(visible)
        position = opening
    return tuple(reversed(levels))


def _visible_ctes(tokens: _Tokens, with_index: int, offset: int) -> tuple[tuple[int, int], ...]:
    """The definitions ``name [(cols)] AS (...)`` of the WITH at ``with_index`` seen from ``offset``: those
    before the one that holds it (all of them from the main query)."""
    index = with_index + 1
    if tokens.word(index) == "RECURSIVE":
        index += 1
    definitions = []
    while index < len(tokens.items):
        name = tokens.items[index]
        index += 1
        if tokens.is_open(index):  # a column list
            index = tokens.partner[index] + 1
        if tokens.word(index) != "AS":
            break
        index += 1
        while tokens.word(index) in ("NOT", "MATERIALIZED"):
            index += 1
        if not tokens.is_open(index):
            break
        close = tokens.partner[index]
        body_start, body_end = tokens.items[index].start, tokens.items[close].end
        if body_start <= offset < body_end:
            break  # the clause is in this definition: it sees the ones before
        definitions.append((name.start, body_end))
        index = close + 1
        if index >= len(tokens.items) or tokens.items[index].text != ",":
            break  # the main query begins
        index += 1
    return tuple(definitions)


def _subqueries(tokens: _Tokens, open_index: int, close_index: int, number: int) -> list[Subquery]:
    found: list[Subquery] = []
    index = open_index + 1
    while index < close_index:
        if tokens.word(index) == "OVER" and tokens.is_open(index + 1) and tokens.items[index - 1].text == ")":
            call_open = tokens.partner[index - 1]
            if tokens.items[call_open - 1].kind == "word":
                close = tokens.partner[index + 1]
                window = (tokens.items[index + 1].end, tokens.items[close].start)
                begin = tokens.items[call_open - 1].start
                found = [sub for sub in found if sub.start < begin]  # a subquery inside the call goes with it
                found.append(
                    Subquery(
                        "window",
                        begin,
                        tokens.items[close].end,
                        (begin, tokens.items[index - 1].end),
                        SUBQUERY_COLUMN.format(number + len(found)),
                        window,
                    )
                )
                index = close + 1
                continue
        if tokens.is_open(index) and tokens.word(index + 1) in _SUBQUERY_WORDS:
            close = tokens.partner[index]
            body = (tokens.items[index + 1].start, tokens.items[close - 1].end)
            before = tokens.word(index - 1)
            column = SUBQUERY_COLUMN.format(number + len(found))
            if before == "EXISTS":
                found.append(Subquery("exists", tokens.items[index - 1].start, tokens.items[close].end, body, column))
            elif before == "IN":
                found.append(Subquery("in", tokens.items[index].start, tokens.items[close].end, body, column))
            else:
                found.append(Subquery("scalar", tokens.items[index].start, tokens.items[close].end, body, column))
            index = close + 1
            continue
        index += 1
    return found


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _clause_text(text: str, keyword: int, end: int, subqueries: list[Subquery]) -> str:
    """The statement with everything but ``MATCH_RECOGNIZE (...)`` blanked, each subquery replaced by its
    placeholder (``(name)`` after IN): same length, same lines, so positions stay the user's."""
    pieces = [_blank(text[:keyword])]
    position = keyword
    for sub in subqueries:
        pieces.append(text[position : sub.start])
        stand_in = f"({sub.column})" if sub.kind == "in" else sub.column
        blanked = _blank(text[sub.start : sub.end])
        room = re.search(" {%d}" % len(stand_in), blanked)
        if room is None:
            raise _error(text, sub.start, sub.end, "this subquery is too short to stand in for", "E0131")
        pieces.append(blanked[: room.start()] + stand_in + blanked[room.end() :])
        position = sub.end
    pieces.append(text[position:end])
    pieces.append(_blank(text[end:]))
    return "".join(pieces)


def _statement_end(tokens: _Tokens) -> int:
    semis = [i for i, t in enumerate(tokens.items) if t.kind == "semi"]
    if semis and semis[0] != len(tokens.items) - 1:
        token = tokens.items[semis[0] + 1]
        raise _error(
            tokens.text,
            token.start,
            token.end,
            "only one statement is expected here, but another follows the ';'",
            "E0116",
            hint="run the statements one by one",
        )
    return tokens.items[semis[0]].start if semis else len(tokens.text)


def split(text: str, *, filename: str | None = None) -> WholeStatement:
    """Find, parse and check every MATCH_RECOGNIZE clause of a whole SQL statement; raise CepError."""
    try:
        return _split(text, filename)
    except CepError as error:
        raise error.with_source(text, filename) from None


def _split(text: str, filename: str | None) -> WholeStatement:
    try:
        tokens = _Tokens.of(text)
    except CepSyntaxError:
        # Unbalanced parentheses: the clause parser says better where (it knows PATTERN (A B DEFINE ...).
        for found in re.finditer(r"\bMATCH_RECOGNIZE\b", text, re.I):
            parse_clause(_blank(text[: found.start()]) + text[found.start() :], filename=filename)
        raise
    if not tokens.items:
        raise CepSyntaxError("the query is empty", code="E0114", span=span_of(text, 0, min(1, len(text))))
    end = _statement_end(tokens)
    paths = tuple(
        (token.start, token.end, token.text[1:-1].replace("''", "'"))
        for index, token in enumerate(tokens.items)
        if token.kind == "string" and tokens.word(index - 1) in ("FROM", "JOIN") and tokens.in_query(index - 1)
    )
    keywords = [i for i, t in enumerate(tokens.items) if t.kind == "word" and t.text.upper() == "MATCH_RECOGNIZE"]
    clauses: list[Clause] = []
    placeholders = 0
    for number, keyword in enumerate(keywords, start=1):
        token = tokens.items[keyword]
        if not tokens.is_open(keyword + 1):
            raise _error(text, token.start, token.end, "MATCH_RECOGNIZE must be followed by '('", "E0124")
        close = tokens.partner[keyword + 1]
        for outer in clauses:
            if outer.keyword < token.start < outer.end:
                raise _error(
                    text,
                    token.start,
                    token.end,
                    "MATCH_RECOGNIZE inside a subquery of MEASURES or DEFINE is not supported",
                    "E0131",
                    hint="compute it in a WITH clause and join its result instead",
                )
        first = _relation_start(tokens, keyword)
        relation = (tokens.items[first].start, tokens.items[keyword - 1].end)
        only = tokens.items[first] if first == keyword - 1 else None
        path = only.text[1:-1].replace("''", "'") if only is not None and only.kind == "string" else None
        subqueries = _subqueries(tokens, keyword + 1, close, placeholders + 1)
        placeholders += len(subqueries)
        clause_end = tokens.items[close].end
        match = parse_clause(_clause_text(text, token.start, clause_end, subqueries), filename=filename)
        names = tuple(ref.column.name for ref in match.partition_by)
        order = tuple(
            (key.expr.column.name, key.descending) for key in match.order_by if isinstance(key.expr, ast.ColumnRef)
        )
        subqueries = [
            dataclasses.replace(sub, partition=names, order=order) if sub.kind == "window" else sub
            for sub in subqueries
        ]
        statement = ast.Statement(
            match.span,
            (ast.SelectItem(NO_SPAN, ast.Star(NO_SPAN)),),
            ast.Relation(
                NO_SPAN, path if path is not None else text[relation[0] : relation[1]], is_path=path is not None
            ),
            match,
        )
        check(statement, source=text, filename=filename)
        clauses.append(
            Clause(
                number,
                relation[0],
                token.start,
                clause_end,
                relation,
                path,
                _scopes(tokens, keyword),
                tuple(subqueries),
                statement,
            )
        )
    if not clauses:
        raise CepSyntaxError(
            "the statement has no MATCH_RECOGNIZE clause",
            code="E0133",
            span=span_of(text, tokens.items[0].start, tokens.items[0].end),
            hint="cep runs statements that match row patterns: FROM t MATCH_RECOGNIZE (...)",
        )
    return WholeStatement(text, filename, tuple(clauses), paths, end)
