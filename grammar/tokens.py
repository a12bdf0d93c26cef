"""The Lark parser and a light token scan of the raw text (used before and around parsing).

The scan finds comments, strings and parentheses without parsing, so limits (nesting depth, token
count) are checked before Lark runs (``prescan``; ``prescan_passes`` tells from a statement's characters
alone when there is nothing to check) and error messages can point at the right token.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import os
import re
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import lark
from lark import Lark, Token

from cep.grammar import limits
from cep.grammar.errors import CepSemanticError, CepSyntaxError, Span


@functools.lru_cache(maxsize=1)
def lark_parser() -> Lark:
    """The LALR parser of a statement, built once per process (its tables come from ``_tables_file``)."""
    return _build("start")


@functools.lru_cache(maxsize=1)
def clause_parser() -> Lark:
    """The same grammar started at ``clause``: one MATCH_RECOGNIZE (...) of a whole SQL statement."""
    return _build("clause")


def _build(start: str) -> Lark:
    grammar = Path(__file__).with_name("cep.lark").read_text(encoding="utf-8")
    return Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
        cache=_tables_file(start, grammar),
        start=start,
    )


def _tables_file(start: str, grammar: str) -> str | bool:
    """Where Lark keeps the parser's tables between processes (building them takes over a second; loading
    them, a tenth), or False: build them at each start. Lark's own default (``cache=True``) is a file of a
    predictable name in the shared temp directory, which Lark unpickles: another local user could create it
    first and have cep run their code. So the file is kept only in a folder that this user owns and no one
    else may write (``$CEP_CACHE`` or ``~/.cache/cep``, then ``grammar/``, made 0700), else nowhere. The name
    holds the grammar's hash, so two versions of cep.lark never overwrite each other's tables."""
    base = os.environ.get("CEP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cep")
    folder = os.path.join(base, "grammar")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        folder_stat = os.lstat(folder)
    except OSError:
        return False
    owner = getattr(os, "getuid", lambda: None)()
    if not stat.S_ISDIR(folder_stat.st_mode) or folder_stat.st_uid != owner or folder_stat.st_mode & 0o077:
        return False
    python = "%d.%d" % sys.version_info[:2]
    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()[:16]
    return os.path.join(folder, f"lark-{start}-{digest}-{lark.__version__}-py{python}.tables")


class ScanToken(NamedTuple):
    kind: str  # space, comment, block, string, quoted, word, number, open, close, semi, other
    text: str
    start: int
    end: int


_SCAN = re.compile(
    r"""(?P<space>\s+) | (?P<comment>--[^\n]*) | (?P<block>/\*[\s\S]*?(?:\*/|\Z))
      | (?P<string>'(?:[^'\\]|''|\\[\s\S])*(?:'|\Z)) | (?P<quoted>"(?:[^"]|"")*(?:"|\Z)|`(?:[^`]|``)*(?:`|\Z))
      | (?P<word>[^\W\d]\w*) | (?P<number>\d[\w.]*) | (?P<open>[(\[]) | (?P<close>[)\]]) | (?P<semi>;)
      | (?P<other>.)""",
    re.VERBOSE,
)
TRIVIA = frozenset({"space", "comment", "block"})

# Spark's parser reads a backslash in a string literal as an escape (spark.sql.parser.escapedStringLiterals is
# false by default): `'\\'` is one backslash, `'\n'` a newline, `'\101'` the octal A, `'\u0041'` A, `'\%'` and
# `'\_'` keep their backslash (LIKE's escapes), any other character stands for itself (`'\q'` is q). Checked
# against Spark in tests/test_sql_regex.py, so that a literal in DEFINE or MEASURES is the same text as outside.
_SPARK_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[0-3][0-7]{2}|[\s\S])")
_SPARK_ESCAPED = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}


def spark_unescaped(text: str) -> str:
    """The text of a string literal (between its quotes) as Spark's parser reads it: its backslash escapes."""

    def one(found: re.Match) -> str:
        escaped = found.group(1)
        if len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        if len(escaped) == 3:
            return chr(int(escaped, 8))
        return _SPARK_ESCAPED.get(escaped, escaped)

    return _SPARK_ESCAPE.sub(one, text) if "\\" in text else text


def scan(text: str) -> list[ScanToken]:
    """A forgiving tokenisation of any text (it never fails): enough to find words, parentheses
    and statement boundaries outside strings, quoted names and comments."""
    return list(scan_lazily(text))


def scan_lazily(text: str) -> Iterator[ScanToken]:
    """``scan`` one token at a time: a file of many statements is split without holding all its tokens."""
    return (ScanToken(m.lastgroup, m.group(), m.start(), m.end()) for m in _SCAN.finditer(text))


def significant(tokens: list[ScanToken]) -> list[ScanToken]:
    return [t for t in tokens if t.kind not in TRIVIA]


def span_of(text: str, start: int, end: int) -> Span:
    """The Span of text[start:end] (1-based line and column, like Lark's)."""
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    end_line = line + text.count("\n", start, end)
    end_column = end - (text.rfind("\n", 0, end) + 1) + 1
    return Span(line, column, end_line, end_column, start, end)


def token_span(token: Token) -> Span:
    return Span(token.line, token.column, token.end_line, token.end_column, token.start_pos, token.end_pos)


_NAME_COMMENT = re.compile(r"--\s*name\s*:\s*(\S+)", re.IGNORECASE)


def split_statements(text: str, tokens: list[ScanToken] | None = None) -> Iterator[tuple[int, int, str | None]]:
    """(start, end, name) of each statement of a file: split at ';' outside strings and comments;
    a `-- name: xyz` comment before a statement names it."""
    start, name, seen_code = 0, None, False
    # The scan's matches themselves when no tokens are given: a file of many rules is split without making a
    # token of each match.
    found = ((m.lastgroup, m) for m in _SCAN.finditer(text)) if tokens is None else ((t.kind, t) for t in tokens)
    for kind, token in found:
        if kind == "comment" and not seen_code:
            match = _NAME_COMMENT.match(token.group() if tokens is None else token.text)
            name = match.group(1) if match else name
        elif kind == "semi":
            end = token.end() if tokens is None else token.end
            if seen_code:
                yield start, end, name
            start, name, seen_code = end, None, False
        elif kind not in TRIVIA:
            seen_code = True
    if seen_code:
        yield start, len(text), name


class ParsedStatements:
    """Statements that loaded, by their text and place in their file (``parser.parse_part``), the least
    recently used forgotten first: a rule set is loaded again whole when one of its files changes (the rule
    watcher), and every statement that did not change is then not parsed again. The answer is the same: the
    key is all that parsing reads, and a statement is immutable. Bounded by its statements' characters
    (``limits.PARSED_STATEMENTS_CHARACTERS``); failures are not kept (their messages name the file)."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.characters = capacity, 0
        self.entries: collections.OrderedDict[tuple[str, int, int, int], object] = collections.OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[str, int, int, int]) -> object | None:
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
            return found

    def put(self, key: tuple[str, int, int, int], statement: object) -> None:
        with self.lock:
            if key not in self.entries:
                self.characters += len(key[0])
            self.entries[key] = statement
            while self.characters > self.capacity and self.entries:
                old, _ = self.entries.popitem(last=False)
                self.characters -= len(old[0])


# ------------------------------------------------------------------------------------- pre-scan


def prescan(text: str, all_tokens: list[ScanToken]) -> None:
    """Reject what the parser must not see: nesting beyond the limit, subqueries, CTEs, and an
    unterminated comment (which Lark would read as '/' and '*')."""
    for token in all_tokens:
        if token.kind == "block" and (len(token.text) < 4 or not token.text.endswith("*/")):
            raise CepSyntaxError(
                "unterminated comment: the closing */ is missing",
                code="E0106",
                span=span_of(text, token.start, token.start + 2),
            )
    tokens = significant(all_tokens)
    if len(tokens) > limits.MAX_QUERY_TOKENS:
        extra = tokens[limits.MAX_QUERY_TOKENS]
        raise CepSemanticError(
            f"the query has {len(tokens)} tokens; the limit is {limits.MAX_QUERY_TOKENS}",
            code="E0307",
            span=span_of(text, extra.start, extra.end),
        )
    if tokens and tokens[0].text.upper() == "WITH":
        raise CepSyntaxError(
            "WITH clauses (common table expressions) are not supported: subqueries are not supported",
            code="E0107",
            span=span_of(text, tokens[0].start, tokens[0].end),
            hint="a whole statement (WITH, subqueries, joins) runs with cep.sql(spark, text), "
            "cep.compile_sql(text).run(tables) or `cep run`",
        )
    _refuse_window_functions(text, tokens)
    depth = 0
    for index, token in enumerate(tokens):
        if token.kind == "close":
            depth = max(0, depth - 1)
        elif token.kind == "open":
            depth += 1
            if depth > limits.MAX_NESTING_DEPTH:
                raise CepSemanticError(
                    f"parentheses nest deeper than the limit of {limits.MAX_NESTING_DEPTH} levels",
                    code="E0302",
                    span=span_of(text, token.start, token.end),
                )
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if following and following.kind == "word" and following.text.upper() in ("SELECT", "WITH"):
                raise CepSyntaxError(
                    "subqueries are not supported",
                    code="E0107",
                    span=span_of(text, token.start, _matching_close(tokens, index, len(text))),
                    hint="a whole statement with subqueries runs with cep.sql(spark, text), "
                    "cep.compile_sql(text).run(tables) or `cep run`",
                )


def prescan_passes(piece: str) -> bool:
    """True when ``prescan`` cannot refuse ``piece`` and it holds at most one statement, seen without a scan
    (a rule file's usual statement; False only means "scan it"): ASCII text (no case folding beyond ASCII's),
    too short for too many tokens, too few parentheses to nest too deep, no comment block, no word WITH
    or OVER anywhere, SELECT at most once (a subquery's SELECT would then not be the statement's first word,
    which the grammar refuses), and no ';' but the last character."""
    semicolons = piece.count(";")
    return (
        piece.isascii()
        and len(piece) <= limits.MAX_QUERY_TOKENS
        and piece.count("(") + piece.count("[") <= limits.MAX_NESTING_DEPTH
        and (semicolons == 0 or (semicolons == 1 and piece.endswith(";")))
        and _MAY_BE_REFUSED.search(piece) is None
        and len(_SELECT_WORD.findall(piece)) <= 1
    )


_MAY_BE_REFUSED = re.compile(r"/\*|\bwith\b|\bover\b", re.IGNORECASE)
_SELECT_WORD = re.compile(r"\bselect\b", re.IGNORECASE)


def _refuse_window_functions(text: str, tokens: list[ScanToken]) -> None:
    """``f(x) OVER (...)``: a window function. Refused with what to write instead: inside DEFINE a value over
    the whole partition is unknown to a live stream until the partition ends (it never does), so it cannot
    be exact there; computed before matching, it is an ordinary column."""
    for index in range(1, len(tokens) - 1):
        token = tokens[index]
        if not (
            token.kind == "word"
            and token.text.upper() == "OVER"
            and tokens[index - 1].kind == "close"
            and tokens[index + 1].kind == "open"
        ):
            continue
        clause = next(
            (
                t.text.upper()
                for t in reversed(tokens[:index])
                if t.kind == "word" and t.text.upper() in ("DEFINE", "MEASURES", "SELECT", "WHERE", "ORDER")
            ),
            "",
        )
        where = {"DEFINE": "in DEFINE", "MEASURES": "in MEASURES"}.get(clause, "here")
        span = span_of(text, token.start, _matching_close(tokens, index + 1, len(text)))
        if where == "here":  # SQL around the clause: a whole statement runs it, one clause alone does not
            raise CepSyntaxError(
                "window functions (... OVER (...)) are not allowed in a query of one MATCH_RECOGNIZE clause",
                code="E0244",
                span=span,
                hint="outside the clause this is SQL around it, which a whole statement runs: cep.compile_sql(text) "
                "in Python (cep run, trace, report and explain read files that way)",
            )
        raise CepSyntaxError(
            f"window functions (... OVER (...)) are not allowed {where}",
            code="E0244",
            span=span,
            hint="a stream never sees the whole partition, so a partition-wide value cannot be known while matching: "
            "compute it before matching and compare with the column, e.g. WITH t AS (SELECT *, AVG(price) OVER "
            "(PARTITION BY symbol) AS avg_price FROM ticks) ... DEFINE A AS price > avg_price (with cep.sql), or use "
            "an aggregate over the match's rows so far: DEFINE A AS price > AVG(price)",
        )


def _matching_close(tokens: list[ScanToken], open_index: int, default: int) -> int:
    depth = 0
    for token in tokens[open_index:]:
        depth += {"open": 1, "close": -1}.get(token.kind, 0)
        if depth == 0:
            return token.end
    return default
