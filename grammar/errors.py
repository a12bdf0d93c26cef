"""The errors a user of cep can see, and how they render.

    CepError                      every error cep raises on purpose (code, message, line, column)
     +-- CepSyntaxError           the text is not a query (E01xx)
     +-- CepSemanticError         the query parses but means nothing (E02xx), or breaks a limit (E03xx)
     +-- CepRuntimeError          the query is fine but the data makes it fail (E04xx)

Every error carries a stable ``code`` so tests and users can rely on it, a plain-sentence ``message``,
and, when it comes from query text, the 1-based ``line``/``column`` and the source to draw a caret under.
Several semantic errors of one query are raised together as one ``CepSemanticError`` whose
``errors`` lists them all, sorted by position.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """Where a node came from in the query text: 1-based line/column, 0-based character offsets.

    A plain value: two spans are equal when they cover the same text. AST nodes leave their span out
    of their own equality (``grammar/ast.py``), so that two ASTs parsed from differently formatted
    text are equal when they mean the same thing.
    """

    line: int = 0
    column: int = 0
    end_line: int = 0
    end_column: int = 0
    start: int = 0
    end: int = 0


NO_SPAN = Span()


def moved_span(span: Span, lines: int, offset: int) -> Span:
    """``span`` of a text that starts ``lines`` lines and ``offset`` characters further into a file (columns
    unchanged: the text starts at the beginning of a line); no position stays none."""
    if span.line <= 0:
        return span
    return dataclasses.replace(
        span,
        line=span.line + lines,
        end_line=span.end_line + lines if span.end_line > 0 else 0,
        start=span.start + offset,
        end=span.end + offset,
    )


@dataclass(frozen=True)
class Diagnostic:
    """One problem in a query: what, where, and optionally a hint on how to fix it."""

    code: str
    message: str
    span: Span = NO_SPAN
    hint: str | None = None


class CepError(Exception):
    """Base of every error cep raises on purpose."""

    code: str = "E0000"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        span: Span | None = None,
        source: str | None = None,
        filename: str | None = None,
        hint: str | None = None,
        errors: list[Diagnostic] | None = None,
    ) -> None:
        self.code = code or type(self).code
        self.message = message
        self.span = span or NO_SPAN
        self.source = source
        self.filename = filename
        self.hint = hint
        self.errors: list[Diagnostic] = errors or [Diagnostic(self.code, message, self.span, hint)]
        super().__init__(self.render())

    @property
    def line(self) -> int:
        return self.span.line

    @property
    def column(self) -> int:
        return self.span.column

    def locate(self, span: Span | None = None, where: str | None = None) -> CepError:
        """The same error, pointing at ``span`` if it had no position yet, and saying ``where`` it happened
        (the partition and row of a run-time error) if it did not yet say so."""
        if span is not None and span.line > 0 and self.span.line <= 0:
            self.span = span
        if where and where not in self.message:
            self.message = f"{self.message} ({where})"
        if len(self.errors) == 1:
            self.errors = [Diagnostic(self.code, self.message, self.span, self.hint)]
        self.args = (self.render(),)
        return self

    def moved(self, lines: int, offset: int) -> CepError:
        """The same error, its positions ``moved_span`` (a statement parsed apart from its file)."""
        self.span = moved_span(self.span, lines, offset)
        self.errors = [dataclasses.replace(d, span=moved_span(d.span, lines, offset)) for d in self.errors]
        self.args = (self.render(),)
        return self

    def with_source(self, source: str | None, filename: str | None = None) -> CepError:
        """The same error, re-rendered against ``source`` (used when a file name becomes known)."""
        self.source = source if source is not None else self.source
        self.filename = filename or self.filename
        self.args = (self.render(),)
        return self

    def render(self) -> str:
        return "\n".join(render_diagnostic(d, self.source, self.filename) for d in self.errors)

    def __str__(self) -> str:
        return self.render()


class CepSyntaxError(CepError):
    code = "E0100"


class CepSemanticError(CepError):
    code = "E0200"


class CepRuntimeError(CepError):
    code = "E0400"


def render_diagnostic(diag: Diagnostic, source: str | None, filename: str | None) -> str:
    """``file:line:col: error[CODE]: message`` followed by the source line and a caret underline."""
    where = filename or "query"
    span = diag.span
    if span.line <= 0:
        head = f"{where}: error[{diag.code}]: {diag.message}"
        return head + (f"\n  hint: {diag.hint}" if diag.hint else "")
    head = f"{where}:{span.line}:{span.column}: error[{diag.code}]: {diag.message}"
    lines = [head]
    if source is not None:
        source_lines = source.splitlines() or [""]
        if 1 <= span.line <= len(source_lines):
            text = source_lines[span.line - 1].expandtabs(1)
            gutter = f"{span.line:>4} | "
            lines.append(gutter + text)
            if span.end_line == span.line and span.end_column > span.column:
                width = span.end_column - span.column
            else:
                width = max(1, len(text) - span.column + 1)
            width = max(1, min(width, max(1, len(text) - span.column + 1)))
            lines.append(" " * (len(gutter) - 2) + "| " + " " * (span.column - 1) + "^" * width)
    if diag.hint:
        lines.append(f"  hint: {diag.hint}")
    return "\n".join(lines)


# ------------------------------------------------------------------------ across a process boundary

# An error raised in a Spark worker reaches the driver only as the text of its traceback. The worker adds
# this line (a note, printed after the message) so that the driver can raise the very error again: its
# class, code, sentence, hint and span, then rendered against the user's file as the python engine renders
# it (``error_from_text``), rather than a sentence recovered from text without its line and caret.
WIRE_PREFIX = "cep error, as data: "
_SPAN_FIELDS = ("line", "column", "end_line", "end_column", "start", "end")
# The query's text travels too, so that the error raised again renders its line and caret by itself; a text
# longer than this stays behind (the driver's caller, cep run, renders against its file anyway).
WIRE_SOURCE_LIMIT = 20_000


def error_wire_note(error: CepError) -> str:
    """The one line that carries ``error`` (``WIRE_PREFIX`` and JSON) through a traceback's text."""

    def diagnostic(d: Diagnostic) -> dict:
        return {
            "code": d.code,
            "message": d.message,
            "hint": d.hint,
            "span": [getattr(d.span, f) for f in _SPAN_FIELDS],
        }

    payload = {
        "class": type(error).__name__,
        **diagnostic(Diagnostic(error.code, error.message, error.span, error.hint)),
    }
    payload["errors"] = [diagnostic(d) for d in error.errors]
    payload["filename"] = error.filename
    payload["source"] = error.source if error.source is not None and len(error.source) <= WIRE_SOURCE_LIMIT else None
    return WIRE_PREFIX + json.dumps(payload, ensure_ascii=True, separators=(",", ":"))


def error_from_text(text: str) -> CepError | None:
    """The CepError whose ``error_wire_note`` line is in ``text`` (the last, the innermost cause), or None."""
    found = [line for line in text.splitlines() if line.startswith(WIRE_PREFIX)]
    if not found:
        return None
    try:
        payload = json.loads(found[-1][len(WIRE_PREFIX) :])
        classes = {cls.__name__: cls for cls in (CepError, CepSyntaxError, CepSemanticError, CepRuntimeError)}
        errors = [Diagnostic(d["code"], d["message"], Span(*d["span"]), d["hint"]) for d in payload.get("errors") or ()]
        return classes.get(payload["class"], CepError)(
            payload["message"],
            code=payload["code"],
            span=Span(*payload["span"]),
            hint=payload["hint"],
            errors=errors or None,
            source=payload.get("source"),
            filename=payload.get("filename"),
        )
    except (ValueError, KeyError, TypeError):  # a line cut short by a length limit on the way
        return None
