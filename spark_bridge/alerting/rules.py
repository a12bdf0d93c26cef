"""A rule set: the named MATCH_RECOGNIZE statements of a directory of ``*.sql`` files.

    load_rules(path, *, check=None) -> RuleSet     a directory of *.sql files, or one .sql file
    load_file(path, *, check=None) -> (rules, errors)

* **Rule id**: the file's stem, then ``/`` and the statement's name (the ``-- name: xyz`` comment before
  it): ``fraud.sql`` holding ``-- name: card_testing`` gives ``fraud/card_testing``. A file's only
  statement, when unnamed, is just the stem (``fraud``); several unnamed statements of one file are
  ``fraud/1``, ``fraud/2``, ... by position (name them: a position changes when a statement is added
  above it, and a changed id is a new rule). Ids are stable across restarts: they depend on the file
  name and the statement name only.
* **Version**: the first 16 hex digits of the SHA-256 of the statement's canonical text
  (``grammar.format.format_statement``), so reformatting, re-indenting or editing comments is not a
  change, and any change of meaning is.
* **Options**: ``-- key: value`` comment lines right before a statement (with its ``-- name:``) are the
  rule's options, e.g. ``-- suppress: 10m`` (``cep.spark_bridge.alerting.stream`` reads it),
  ``-- severity: critical`` (critical, error, warning or info) and ``-- summary: Card {{ card_id }} ...``
  (a Jinja2 text template: ``sinks/payloads.py``); a severity or summary that cannot be used is an error
  at its line (E0607).
* **Safe ids**: a rule id is made of ASCII letters, digits, ``_``, ``-`` and ``.`` (and the ``/``
  between file and name). A file or ``-- name:`` with another character (a space, a newline that
  would forge a log line, a ``/``) is refused (E0606), its name shown with escapes.
* **Files outside the directory**: a ``*.sql`` entry that is a symbolic link resolving outside the
  rules directory is not read (E0605), and nothing of its content is shown. Links inside it (how a
  Kubernetes ConfigMap is mounted) are read.
* **Errors**: a statement that does not parse or check is reported as ``file:line:col: error[CODE]:
  message`` with the source line and a caret (``RuleError``), and skipped; every other statement of the
  same file and of the other files still loads. ``check(rule)`` may add checks of its own (raise a
  ``CepError``, ideally with the span of the offending node): the alerting layer refuses there what a
  stream cannot run.

Nothing here imports pyspark, and query text is only ever parsed, never evaluated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cep.grammar import ast
from cep.grammar.errors import CepError, Span
from cep.grammar.format import format_statement
from cep.grammar.parser import parse_part, split_statements
from cep.spark_bridge.sinks.payloads import SEVERITIES, check_summary_template
from cep.spark_bridge.sinks.safe_text import visible

__all__ = [
    "Rule",
    "RuleChanges",
    "RuleError",
    "RuleSet",
    "load_file",
    "load_rules",
    "rule_version",
]

VERSION_DIGITS = 16
_OPTION_LINE = re.compile(r"^\s*--\s*([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$")
# What a rule id may hold (per part: the file's stem, the statement's name). It reaches log lines,
# file names, metric labels and SQL rows: no space, no control character, no path separator.
SAFE_ID_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class Rule:
    """One statement of a rules file, parsed and checked."""

    rule_id: str
    version: str
    path: str
    name: str | None
    statement: ast.Statement = field(repr=False, compare=False)
    text: str = field(repr=False)  # the statement as written (its span of the file)
    canonical: str = field(repr=False)  # format_statement(statement): what the version hashes
    line: int = 0  # where the statement starts in its file (1-based)
    options: dict = field(default_factory=dict, compare=False)

    @property
    def placed_text(self) -> str:
        """The statement as written, at its line and column of its file: parsed or rendered against, its
        positions (and so a caret's line) are the file's."""
        return at_place(self.text, self.line or 1, self.statement.span.column or 1)


def at_place(text: str, line: int, column: int) -> str:
    """``text`` preceded by the blank lines and spaces that put its first character at ``line``:``column``."""
    return "\n" * (line - 1) + " " * (column - 1) + text


@dataclass(frozen=True)
class RuleError:
    """A statement (or a file) that could not be loaded; ``str()`` is the rendered message."""

    path: str
    line: int
    column: int
    code: str
    message: str
    rendered: str
    rule_id: str | None = None

    def __str__(self) -> str:
        return self.rendered

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RuleChanges:
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def describe(self) -> str:
        parts = []
        for label, ids in (("added", self.added), ("changed", self.changed), ("removed", self.removed)):
            if ids:
                parts.append(f"{label}: {', '.join(ids)}")
        return "; ".join(parts) or "no change"


@dataclass
class RuleSet:
    """Rules by id, in a stable order (file name, then position in the file), and the load errors."""

    rules: dict[str, Rule] = field(default_factory=dict)
    errors: list[RuleError] = field(default_factory=list)

    def __iter__(self):
        return iter(self.rules.values())

    def __len__(self) -> int:
        return len(self.rules)

    def __contains__(self, rule_id: object) -> bool:
        return rule_id in self.rules

    def __getitem__(self, rule_id: str) -> Rule:
        return self.rules[rule_id]

    def versions(self) -> dict[str, str]:
        return {rule_id: rule.version for rule_id, rule in self.rules.items()}

    def diff(self, newer: RuleSet) -> RuleChanges:
        """What changed from this set to ``newer``."""
        old, new = self.versions(), newer.versions()
        return RuleChanges(
            added=tuple(r for r in new if r not in old),
            changed=tuple(r for r in new if r in old and old[r] != new[r]),
            removed=tuple(r for r in old if r not in new),
            unchanged=tuple(r for r in new if r in old and old[r] == new[r]),
        )


def rule_version(statement: ast.Statement) -> str:
    """The version of a statement: a hash of its canonical text (formatting and comments do not count)."""
    return hashlib.sha256(format_statement(statement).encode("utf-8")).hexdigest()[:VERSION_DIGITS]


def _error(path: str, err: CepError, source: str | None, rule_id: str | None) -> RuleError:
    err.with_source(source, path)
    first = err.errors[0] if err.errors else None
    span = first.span if first is not None else err.span
    return RuleError(
        path=path,
        line=span.line,
        column=span.column,
        code=first.code if first is not None else err.code,
        message=first.message if first is not None else err.message,
        rendered=str(err),
        rule_id=rule_id,
    )


def _plain_error(
    path: str, code: str, message: str, line: int = 0, column: int = 0, rule_id: str | None = None
) -> RuleError:
    shown = visible(path)
    where = f"{shown}:{line}:{column}" if line else shown
    return RuleError(path, line, column, code, message, f"{where}: error[{code}]: {message}", rule_id)


def _unsafe(part: str) -> bool:
    return SAFE_ID_PART.match(part) is None


def _option_errors(path: str, head: str, head_line: int, options: dict[str, str], rule_id: str) -> list[RuleError]:
    """A ``-- severity:`` or ``-- summary:`` that cannot be used, at its line."""

    def line_of(key: str) -> int:
        for offset, line in enumerate(head.splitlines()):
            match = _OPTION_LINE.match(line)
            if match and match.group(1).lower().replace("-", "_") == key:
                return head_line + offset
        return head_line

    errors = []
    severity = options.get("severity")
    if severity is not None and severity.strip().lower() not in SEVERITIES:
        errors.append(
            _plain_error(
                path,
                "E0607",
                f"severity {visible(severity)!r} is not one of {', '.join(SEVERITIES)}",
                line_of("severity"),
                1,
                rule_id,
            )
        )
    summary = options.get("summary")
    if summary is not None:
        try:
            check_summary_template(summary)
        except ValueError as exc:
            errors.append(_plain_error(path, "E0607", str(exc), line_of("summary"), 1, rule_id))
    return errors


def _options(head: str) -> dict[str, str]:
    """``-- key: value`` lines of the comment block right before a statement (``name`` excluded)."""
    options: dict[str, str] = {}
    for line in head.splitlines():
        if not line.strip():
            continue
        match = _OPTION_LINE.match(line)
        if match is None:
            if line.lstrip().startswith("--"):
                continue  # a plain comment
            break  # code: the statement has begun
        key = match.group(1).lower().replace("-", "_")
        if key != "name":
            options[key] = match.group(2)
    return options


def load_file(
    path: str, *, check: Callable[[Rule], None] | None = None, text: str | None = None
) -> tuple[list[Rule], list[RuleError]]:
    """The rules of one file, and the errors of the statements that could not be loaded."""
    stem = os.path.splitext(os.path.basename(path))[0]
    if _unsafe(stem):
        return [], [
            _plain_error(
                path,
                "E0606",
                f"the file name {visible(repr(os.path.basename(path)))} cannot be a rule id: "
                "use ASCII letters, digits, '_', '-' and '.' (the file is not read)",
            )
        ]
    if text is None:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            return [], [_plain_error(path, "E0001", f"cannot read the rules file: {exc}")]
    try:
        pieces = list(split_statements(text))
    except CepError as err:
        return [], [_error(path, err, text, None)]
    if not pieces:
        return [], []
    unnamed = sum(1 for _, _, name in pieces if not name)
    rules: list[Rule] = []
    errors: list[RuleError] = []
    seen: dict[str, int] = {}
    counted, line_at = 0, 1  # the line at offset `counted`, advanced statement by statement: loading is linear
    for position, (start, end, name) in enumerate(pieces, start=1):
        line_at += text.count("\n", counted, start)
        counted = start
        if name:
            rule_id = f"{stem}/{name}"
        elif unnamed == 1 and len(pieces) == 1:
            rule_id = stem
        else:
            rule_id = f"{stem}/{position}"
        piece = text[start:end]
        first_line = line_at + piece.count("\n", 0, len(piece) - len(piece.lstrip()))
        if name and _unsafe(name):
            errors.append(
                _plain_error(
                    path,
                    "E0606",
                    f"the name {visible(repr(name))} cannot be part of a rule id: use ASCII "
                    "letters, digits, '_', '-' and '.'",
                    first_line,
                    1,
                    None,
                )
            )
            continue
        if rule_id in seen:
            errors.append(
                _plain_error(
                    path,
                    "E0601",
                    f"rule {rule_id!r} is defined twice (first at line {seen[rule_id]}); "
                    "give each statement its own '-- name:'",
                    first_line,
                    1,
                    rule_id,
                )
            )
            continue
        seen[rule_id] = first_line
        try:
            statement = parse_part(text, start, end, filename=path, line=line_at)
        except CepError as err:
            errors.append(_error(path, err, text, rule_id))
            continue
        statement = dataclasses.replace(statement, name=name)
        span: Span = statement.span
        own = text[span.start : span.end] if 0 <= span.start < span.end <= len(text) else text[start:end].strip()
        canonical = format_statement(statement)
        head = text[start : span.start] if span.start > start else ""
        options = _options(head)
        bad_options = _option_errors(path, head, line_at, options, rule_id)
        if bad_options:
            errors.extend(bad_options)
            continue
        rule = Rule(
            rule_id=rule_id,
            version=hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:VERSION_DIGITS],
            path=path,
            name=name,
            statement=statement,
            text=own,
            canonical=canonical,
            line=span.line or first_line,
            options=options,
        )
        if check is not None:
            try:
                check(rule)
            except CepError as err:
                errors.append(_error(path, err, text, rule_id))
                continue
        rules.append(rule)
    return rules, errors


def rule_files(path: str) -> list[str]:
    """The ``*.sql`` files a rules path stands for: the file itself, or a directory's (not recursive).
    Raises ``OSError`` when the directory cannot be listed."""
    if os.path.isdir(path):
        return sorted(
            os.path.join(path, name)
            for name in os.listdir(path)
            if name.lower().endswith(".sql")
            and not name.startswith((".", "_"))
            and os.path.isfile(os.path.join(path, name))
        )
    return [path]


def outside(directory: str, path: str) -> bool:
    """Does ``path`` (a file of ``directory``) resolve, through symbolic links, outside the directory?"""
    root = os.path.realpath(directory)
    return os.path.commonpath([root, os.path.realpath(path)]) != root


def load_rules(
    path: str, *, check: Callable[[Rule], None] | None = None, files: Iterable[str] | None = None
) -> RuleSet:
    """Every rule of a rules directory (its ``*.sql`` files, not recursive; names starting with ``.``
    or ``_`` are skipped, so an editor's temporary file is not loaded) or of one ``.sql`` file."""
    result = RuleSet()
    if not os.path.exists(path):
        result.errors.append(_plain_error(path, "E0001", "no such rules file or directory"))
        return result
    try:
        chosen = list(files) if files is not None else rule_files(path)
    except OSError as exc:
        result.errors.append(_plain_error(path, "E0001", f"cannot list the rules directory: {exc.strerror or exc}"))
        return result
    for file_path in chosen:
        if os.path.isdir(path) and outside(path, file_path):
            result.errors.append(
                _plain_error(
                    file_path,
                    "E0605",
                    "a link to a file outside the rules directory: not read (copy the file into the directory)",
                )
            )
            continue
        rules, errors = load_file(file_path, check=check)
        result.errors.extend(errors)
        for rule in rules:
            if rule.rule_id in result.rules:  # two files with the same stem cannot happen in one directory
                other = result.rules[rule.rule_id]
                result.errors.append(
                    _plain_error(
                        file_path,
                        "E0601",
                        f"rule {rule.rule_id!r} is also defined in {other.path}",
                        rule.line,
                        1,
                        rule.rule_id,
                    )
                )
                continue
            result.rules[rule.rule_id] = rule
    return result
