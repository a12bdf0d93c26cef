"""No code execution from queries: injection attempts are refused with a CepError or are plain data.

Three layers:

* every attempt below either raises a ``CepError`` or runs and gives exactly the value a plain SQL
  reading gives (a string literal is its characters, a dunder name is a column or variable name);
* while the attempts compile and run, ``eval``, ``exec``, ``compile``, ``__import__`` of new modules,
  ``os.system`` and ``subprocess`` are watched: none may be called, and a canary file that several
  attempts try to create must not appear;
* a source scan: no ``eval(``, ``exec(`` or builtin ``compile(`` call (nor ``__import__``) exists in the
  package directories (``re.compile``, ``cep.compile`` and method calls named ``compile`` are fine).
"""

from __future__ import annotations

import builtins
import io
import os
import subprocess
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

import cep
from cep.grammar.errors import CepError, CepSemanticError, CepSyntaxError

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("cep", "grammar", "matcher", "spark_bridge")
CANARY = "/tmp/cep-injection-canary"  # attempts try to create this file

BASE = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {m} AS x PATTERN ({p}) DEFINE {d})"
DATA = [{"id": 1, "v": 0, "__class__": 5, "__dict__": 7, "{0}": 11, "a\\b": 9, "a\x00b": 3, "note": "n"}]
LONG = "q" * 100_000


def measure(expr: str, pattern: str = "A", define: str = "A AS v = 0") -> str:
    return BASE.format(m=expr, p=pattern, d=define)


@dataclass(frozen=True)
class Refused:
    """Must raise a CepError (optionally of this class and code)."""

    kind: type = CepError
    code: str | None = None


@dataclass(frozen=True)
class Plain:
    """Runs and gives [{'x': value}] (its plain reading); with ``may_refuse`` a CepError is fine too."""

    value: object
    may_refuse: bool = False
    key: str = "x"


ATTEMPTS: dict[str, tuple[str, object]] = {
    # --- Python calls
    "__import__ call": (measure("__import__('os')"), Refused(CepSemanticError, "E0230")),
    "__import__ system": (measure(f"__import__('os').system('touch {CANARY}')"), Refused()),
    "__import__ in DEFINE": (measure("1", define=f"A AS __import__('os').system('touch {CANARY}') = 0"), Refused()),
    "eval": (measure("eval('1+1')"), Refused(CepSemanticError, "E0230")),
    "exec": (measure(f'exec(\'open("{CANARY}", "w")\')'), Refused(CepSemanticError, "E0230")),
    "compile": (measure("compile('1', 'f', 'eval')"), Refused(CepSemanticError, "E0230")),
    "getattr": (measure("getattr(v, '__class__')"), Refused(CepSemanticError, "E0230")),
    "open": (measure(f"open('{CANARY}', 'w')"), Refused(CepSemanticError, "E0230")),
    "globals": (measure("globals()"), Refused()),
    "breakpoint": (measure("breakpoint()"), Refused()),
    "lambda": (measure("1", define="A AS (lambda: True)"), Refused(CepSyntaxError)),
    "f-string": (measure("f'{v}'"), Refused(CepSyntaxError)),
    "subscript": (measure("v[0]"), Refused(CepSyntaxError)),
    "CAST to a Python name": (measure("CAST(v AS __import__)"), Refused()),
    "os.system as a qualified call": (measure("os.system('id')"), Refused()),
    # --- attribute access and dunder names: plain identifiers
    "A.__class__ is column __class__ of A": (measure("A.__class__"), Plain(5)),
    "attribute chain": (measure("A.__class__.__mro__"), Refused(CepSyntaxError)),
    "dunder column": (measure("__dict__"), Plain(7)),
    "quoted dunder column": (measure('"__class__"'), Plain(5)),
    "backquoted dunder column": (measure("`__class__`"), Plain(5, may_refuse=True)),
    "dunder qualifier": (measure("__builtins__.v"), Refused(CepSemanticError)),
    "dunder pattern variable": (measure("COUNT(__class__.*)", "__class__", "__class__ AS v = 0"), Plain(1)),
    "dunder measure name": (measure("1").replace("AS x", "AS __class__"), Plain(1, key="__class__")),
    "unknown dunder column": (measure("__globals__"), Refused(CepSemanticError, "E0220")),
    # --- format strings are data
    "{0} literal": (measure("'{0}'"), Plain("{0}")),
    "{0.__class__} literal": (measure("'{0.__class__}'"), Plain("{0.__class__}")),
    "format spec literal": (measure("'{x!r:>{y}}'"), Plain("{x!r:>{y}}")),
    "percent formats": (measure("'%s %(x)s %n %%'"), Plain("%s %(x)s %n %%")),
    "template syntax": (measure("'${jndi:ldap://x} {{7*7}} <%= 7 %>'"), Plain("${jndi:ldap://x} {{7*7}} <%= 7 %>")),
    "{0} as a quoted column": (measure('"{0}"'), Plain(11)),
    "{0} in a concatenation": (measure("CONCAT('{0}', '{1}')"), Plain("{0}{1}")),
    # --- quotes and backslashes (Spark's SQL reads backslash escapes: \b is a backspace, \' a quote)
    "backslash in a string": (measure("'a\\b'"), Plain("a\x08")),
    "escaped backslash in a string": (measure("'a\\\\b'"), Plain("a\\b")),
    "trailing backslash escapes the closing quote": (measure("'a\\'"), Refused(CepSyntaxError)),
    "backslash-escaped quote is an escape, as in Spark": (measure("'\\''"), Plain("'")),
    "backslash in a quoted column": (measure('"a\\b"'), Plain(9)),
    "doubled quote": (measure("'it''s'"), Plain("it's")),
    "SQL injection in a string": (measure("'x''; DROP TABLE t; --'"), Plain("x'; DROP TABLE t; --")),
    "unterminated string": (measure("'abc"), Refused(CepSyntaxError)),
    "unterminated quoted identifier": (measure('"abc'), Refused(CepSyntaxError)),
    "second statement": (measure("1") + "; SELECT 1", Refused(CepSyntaxError)),
    "comment swallowing the rest": (measure("1 -- ) DEFINE"), Refused(CepSyntaxError)),
    "newline and CR in a string": (measure("'a\nb\rc'"), Plain("a\nb\rc")),
    # --- NUL bytes
    "NUL in a string": (measure("'a\x00b'"), Plain("a\x00b", may_refuse=True)),
    "NUL in a quoted column": (measure('"a\x00b"'), Plain(3, may_refuse=True)),
    "NUL between tokens": (measure("1", define="A AS v = 0\x00"), Refused(CepSyntaxError)),
    "NUL in an identifier": (measure("v\x00v"), Refused()),
    # --- very long identifiers
    "100k-character variable": (measure("COUNT(*)", LONG, f"{LONG} AS v = 0"), Plain(1)),
    "100k-character function": (measure(f"{LONG}(v)"), Refused(CepSemanticError, "E0230")),
    "100k-character unknown column": (measure(LONG), Refused(CepSemanticError, "E0220")),
    # --- unicode homoglyphs: look-alikes are different names, never aliases
    "Cyrillic A in PATTERN, Latin A in DEFINE": (measure("1", "\u0410", "A AS v = 0"), Refused(CepSemanticError)),
    "Cyrillic izhitsa for v": (measure("\u0475"), Refused(CepSemanticError, "E0220")),
    "fullwidth variable used consistently": (
        measure("COUNT(\uff21.*)", "\uff21", "\uff21 AS v = 0"),
        Plain(1, may_refuse=True),
    ),
    "zero-width space in a name": (measure("1", "A\u200b", "A AS v = 0"), Refused()),
    "right-to-left override in a string": (measure("'\u202eabc'"), Plain("\u202eabc")),
    "emoji in a string": (measure("'\U0001f600'"), Plain("\U0001f600")),
}


class Watch:
    """Records calls of the functions that execute code or commands; each call also fails."""

    def __init__(self, monkeypatch) -> None:
        self.calls: list[str] = []
        real_import = builtins.__import__
        for name in ("eval", "exec", "compile", "breakpoint"):
            monkeypatch.setattr(builtins, name, self._forbidden(name))
        monkeypatch.setattr(os, "system", self._forbidden("os.system"))
        monkeypatch.setattr(os, "popen", self._forbidden("os.popen"))
        monkeypatch.setattr(subprocess, "Popen", self._forbidden("subprocess.Popen"))
        import sys

        def guarded_import(name, *args, **kwargs):
            if name not in sys.modules:  # importing something new while a query runs
                self.calls.append(f"import {name}")
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", guarded_import)

    def _forbidden(self, name):
        def called(*args, **kwargs):
            self.calls.append(name)
            raise AssertionError(f"{name} called while compiling or running a query")

        return called


def attempt(text: str):
    """Compile and run; returns the output, or the CepError raised."""
    try:
        return cep.compile(text).run([dict(row) for row in DATA])
    except CepError as err:
        return err


@pytest.fixture(scope="module", autouse=True)
def warm_up():
    """Import everything compiling and running can import, so the watch sees only the attempts."""
    for text, _ in ATTEMPTS.values():
        attempt(text)
    cep.compile(measure("1")).run(DATA, dead_letter=[], schema={"v": "BIGINT"}, dedup_key="id", stats={})


@pytest.mark.parametrize("name", sorted(ATTEMPTS))
def test_injection_attempt(name, monkeypatch):
    text, expected = ATTEMPTS[name]
    if os.path.exists(CANARY):
        os.unlink(CANARY)
    watch = Watch(monkeypatch)
    result = attempt(text)
    monkeypatch.undo()
    assert watch.calls == [], f"code would have run: {watch.calls}"
    assert not os.path.exists(CANARY)
    if isinstance(expected, Refused):
        assert isinstance(result, expected.kind), f"expected {expected.kind.__name__}, got {result!r}"
        if expected.code is not None:
            assert result.code == expected.code, result
    elif isinstance(result, CepError):
        assert expected.may_refuse, f"a plain {expected.value!r} was refused: {result}"
    else:
        assert result == [{expected.key: expected.value}]


def test_the_watch_sees_execution(monkeypatch):
    watch = Watch(monkeypatch)
    for run in (
        lambda: eval("1"),
        lambda: exec("x = 1"),
        lambda: os.system("true"),  # noqa: S307
        lambda: __import__("a_module_nobody_imported_yet"),
    ):
        with pytest.raises((AssertionError, ImportError)):
            run()
    monkeypatch.undo()
    assert watch.calls == ["eval", "exec", "os.system", "import a_module_nobody_imported_yet"]


def test_error_messages_show_the_text_and_never_format_it():
    err = attempt(measure('"{0.__class__}%s"'))
    assert isinstance(err, CepSemanticError) and "{0.__class__}%s" in err.message and "{0.__class__}%s" in str(err)
    err = attempt(measure("'{x}'", define="{y} AS v = 0"))
    assert isinstance(err, CepError)


def test_data_that_looks_like_code_is_data(monkeypatch):
    watch = Watch(monkeypatch)
    payload = f"__import__('os').system('touch {CANARY}')"
    q = cep.compile(measure("LAST(A.note)", "A+", "A AS note <> '{0}' AND note LIKE '%import%'"))
    rows = [{"id": i, "v": 0, "note": payload, "__import__('os')": 1, "{0}": "{1}"} for i in range(3)]
    assert q.run(rows) == [{"x": payload}]
    monkeypatch.undo()
    assert watch.calls == [] and not os.path.exists(CANARY)


def test_options_that_look_like_code_are_refused():
    q = cep.compile(measure("1"))
    with pytest.raises(ValueError, match="unknown type"):
        q.run(DATA, dead_letter=[], schema={"v": "__import__('os')"})
    with pytest.raises(CepError):
        q.run(DATA, dead_letter=[], schema="v BIGINT); __import__('os'")
    with pytest.raises(CepSemanticError):
        q.run(DATA, dedup_key="__import__('os')")


# ------------------------------------------------------------------------------------- source scan

EXECUTING = {"eval", "exec", "compile", "__import__"}


def executing_calls(source: str) -> list[tuple[int, str]]:
    """(line, name) of each call of eval/exec/builtin compile/__import__ in Python ``source``.

    A call is NAME '(' where the name is not an attribute (``re.compile(``, ``self.compile(``) and not
    being defined (``def compile(``); ``builtins.eval(`` and ``getattr(builtins, 'eval')`` are caught too.
    Tokens, not text, so comments and strings never count.
    """
    found = []
    tokens = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    ]
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        previous = tokens[index - 1] if index > 0 else None
        if (
            token.type == tokenize.NAME
            and token.string in EXECUTING
            and following is not None
            and following.string == "("
        ):
            attribute = previous is not None and previous.string == "."
            owner = tokens[index - 2].string if attribute and index >= 2 else None
            defined = previous is not None and previous.string == "def"
            if (not attribute or owner in ("builtins", "__builtins__")) and not defined:
                found.append((token.start[0], token.string))
        if token.type == tokenize.NAME and token.string == "__builtins__":
            found.append((token.start[0], "__builtins__"))
        if (
            token.type == tokenize.STRING
            and token.string.strip("'\"") in EXECUTING
            and any(t.string == "getattr" for t in tokens[max(0, index - 4) : index])
        ):
            found.append((token.start[0], f"getattr(..., {token.string})"))
    return found


def package_files() -> list[Path]:
    files = [path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))]
    assert len(files) > 10, files
    return files


def test_no_eval_exec_or_compile_in_the_package():
    offenders = []
    for path in package_files():
        for line, name in executing_calls(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(REPO)}:{line}: {name}(")
    assert offenders == []


@pytest.mark.parametrize(
    "source, names",
    [
        ("x = eval(text)", ["eval"]),
        ("exec (code)", ["exec"]),
        ("code = compile(text, 'q', 'eval')", ["compile"]),
        ("import builtins\nbuiltins.eval(text)", ["eval"]),
        ("f = getattr(builtins, 'exec')", ["getattr(..., 'exec')"]),
        ("m = __import__(name)", ["__import__"]),
        ("x = __builtins__['eval']", ["__builtins__"]),
        ("rx = re.compile(p)\nq = cep.compile(t)\nself.compile(e)", []),
        ("def compile(text):\n    return text", []),
        ("# eval(text)\ns = 'exec(code)'\nevaluate(x)", []),
    ],
)
def test_the_scan_finds_what_it_should(source, names):
    assert [name for _, name in executing_calls(source)] == names
