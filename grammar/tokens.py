"""The Lark parser and a light token scan of the raw text (used before and around parsing).

The scan finds comments, strings and parentheses without parsing, so limits (nesting depth, token
count) are checked before Lark runs and error messages can point at the right token.
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

from cep.grammar.errors import Span


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
