"""The Lark parser and a light token scan of the raw text (used before and around parsing).

The scan finds comments, strings and parentheses without parsing, so limits (nesting depth, token
count) are checked before Lark runs and error messages can point at the right token.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from lark import Lark, TextSlice, Token, Tree
from lark.lexer import LexerState, LexerThread, LineCounter

from cep.grammar.errors import Span


@functools.lru_cache(maxsize=1)
def lark_parser() -> Lark:
    """The LALR parser of a statement, built once per process. ``cache=True`` keeps the tables in the
    temp directory, which cuts the build from about 1.4 s to 0.1 s."""
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
        cache=True,
        start=start,
    )


def parse_in_place(parser: Lark, text: str, start: int, end: int, line: int, line_start: int) -> Tree:
    """Lark's parse of ``text[start:end]`` with the file's positions (``line``: the file's line at ``start``,
    which begins at ``line_start``), the text neither copied nor counted from its beginning: Lark's own
    ``TextSlice`` counts the lines before ``start``, which makes a file of many statements quadratic. The
    lexer matches with ``endpos=end``, so a token never sees past the statement, and no terminal of
    cep.lark looks behind its start (the character before ``start`` is a ';', a newline or nothing)."""
    counter = LineCounter("\n")
    counter.char_pos, counter.line, counter.line_start_pos = start, line, line_start
    counter.column = start - line_start + 1
    frontend = parser.parser
    thread = LexerThread(frontend.lexer, LexerState(TextSlice(text, start, end), counter))
    return frontend.parser.parse(thread, frontend.parser_conf.start[0])


class ScanToken(NamedTuple):
    kind: str  # space, comment, block, string, quoted, word, number, open, close, semi, other
    text: str
    start: int
    end: int


_SCAN = re.compile(
    r"""(?P<space>\s+) | (?P<comment>--[^\n]*) | (?P<block>/\*[\s\S]*?(?:\*/|\Z))
      | (?P<string>'(?:[^']|'')*(?:'|\Z)) | (?P<quoted>"(?:[^"]|"")*(?:"|\Z)|`(?:[^`]|``)*(?:`|\Z))
      | (?P<word>[^\W\d]\w*) | (?P<number>\d[\w.]*) | (?P<open>[(\[]) | (?P<close>[)\]]) | (?P<semi>;)
      | (?P<other>.)""",
    re.VERBOSE,
)
TRIVIA = frozenset({"space", "comment", "block"})


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
