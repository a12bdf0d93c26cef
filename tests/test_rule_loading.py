"""A statement of a file is parsed where it stands (``parse_part``): every node, every position and every
error must be what parsing it apart from its file gives (the statement alone, what comes before it on its
line blanked, then moved by its line and offset), on the conformance corpus, the shipped patterns and
generated statements, in whatever company the file gives them."""

from __future__ import annotations

import dataclasses
import json
import os
import runpy
import stat
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies_ast import corpus_queries, statements

from cep.grammar import ast
from cep.grammar.errors import CepError, Span
from cep.grammar.format import format_statement
from cep.grammar.parser import parse, parse_part, split_statements
from cep.spark_bridge.alerting.rules import load_rules

REPO = Path(__file__).resolve().parent.parent
# What may stand between two statements of a file: the statement then starts on a line of its own, or on the
# line of the ';' before it, after a comment, after blank lines, or after a comment block naming it.
SEPARATORS = (";\n", "; ", ";\n\n  ", ";\n-- name: x\n-- summary: s\n", "; /* a\nb */ ", ";\t\n\n")


def positions(node: object) -> list:
    """Every node type, field value and span under ``node``, in order (AST equality ignores spans)."""
    out: list = []
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, tuple):
            pending.extend(reversed(item))
        elif isinstance(item, Span):
            out.append(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            out.append(type(item).__name__)
            pending.extend(reversed([getattr(item, f.name) for f in dataclasses.fields(item)]))
        else:
            out.append(repr(item))
    return out


def apart(text: str, start: int, end: int) -> ast.Statement | CepError:
    """The statement ``text[start:end]`` parsed as a query of its own, positions then moved to the file's."""
    line = text.count("\n", 0, start) + 1
    newline = text.find("\n", start, end)
    if newline >= 0 and not text[start:newline].strip():
        start, line = newline + 1, line + 1
    line_start = text.rfind("\n", 0, start) + 1
    try:
        statement = parse(" " * (start - line_start) + text[start:end], filename="f.sql")
    except CepError as error:
        return error.moved(line - 1, line_start).with_source(text, "f.sql")
    return ast.moved(statement, line - 1, line_start)


def in_place(text: str, start: int, end: int) -> ast.Statement | CepError:
    try:
        return parse_part(text, start, end, filename="f.sql")
    except CepError as error:
        return error.with_source(text, "f.sql")


def assert_same_everywhere(queries: list[str], separators: tuple[str, ...] = SEPARATORS) -> int:
    """Each query as the first, a middle and the last statement of a file: the same nodes and positions, or
    the same error text (message, code, line, column, caret) as when parsed apart. Returns how many loaded."""
    loaded = 0
    for index, separator in enumerate(separators):
        text = "-- rules\n" + separator.join(q.rstrip().rstrip(";") for q in queries)
        if index % 2:
            text += ";\n"
        for start, end, _name in split_statements(text):
            expected, got = apart(text, start, end), in_place(text, start, end)
            if isinstance(expected, CepError):
                assert isinstance(got, CepError), text[start:end]
                assert (got.code, str(got), got.span) == (expected.code, str(expected), expected.span)
            else:
                assert not isinstance(got, CepError), str(got)
                assert positions(got) == positions(expected), text[start:end]
                loaded += 1
    return loaded


def test_corpus_and_patterns_parse_in_place_as_apart() -> None:
    queries = [query for _id, query, _case in corpus_queries()]
    queries += [path.read_text(encoding="utf-8") for path in sorted((REPO / "patterns").glob("*.sql"))]
    assert assert_same_everywhere(queries) > len(SEPARATORS) * 150  # most load; the others fail alike


def test_errors_and_their_positions_are_those_of_the_statement_apart() -> None:
    broken = [
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) DEFINE A AS a > 1, C AS c > 1)",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A+ DEFINE A AS a > 1)",
        "SELECT * FROM (SELECT 1) MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS a > 1)",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) WITHIN INTERVAL '5' FORTNIGHT DEFINE A AS 1=1)",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS " + "(" * 300 + "1" + ")" * 300 + ")",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS a > 1) ### trailing",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS a > 1) LIMIT 10 LIMIT 3",
    ]
    unclosed = [  # each runs to the end of the file
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS a > 'x)",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts /* never closed",
    ]
    good = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS a > 1)"
    assert assert_same_everywhere([good, *broken, good]) == 2 * len(SEPARATORS)
    for text in unclosed:
        assert assert_same_everywhere([good, text]) == len(SEPARATORS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statements(), min_size=1, max_size=3), st.sampled_from(SEPARATORS))
def test_generated_statements_parse_in_place_as_apart(generated, separator) -> None:
    assert_same_everywhere([format_statement(statement) for statement in generated], (separator,))


# Statements the grammar parses but the pre-scan refuses (or must look at closely): a statement parsed in
# place skips the pre-scan only when its characters show there is nothing of the kind.
PRESCAN_CASES = (
    "(select)",  # a column named select, in parentheses: a subquery to the pre-scan
    "(SELECT) + (with)",
    "(/* c */ select)",
    "(\u0131) + (wıth)",  # the dotless i: WITH once upper-cased
    "(" * 201 + "a" + ")" * 201,  # deeper than the limit
    "(" * 200 + "a" + ")" * 200,
    "[" * 120 + "a" + "]" * 120,
    "a /* never closed",
    "a /* closed */",
    "'(select)' = a",
    "a -- over\n",
    "over",
)


def test_statements_the_prescan_refuses_parse_in_place_as_apart() -> None:
    template = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS {} > 1)"
    assert_same_everywhere([template.format(case) for case in PRESCAN_CASES])


PARSE_ONE = (
    "import cep.grammar.parser as p; "
    "p.parse('SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS a > 1)')"
)


def run_parse_one(cache: Path, temp: Path) -> None:
    env = {**os.environ, "CEP_CACHE": str(cache), "TMPDIR": str(temp)}
    subprocess.run([sys.executable, "-c", PARSE_ONE], env=env, check=True, timeout=600)


def test_the_parser_tables_are_kept_only_where_no_one_else_can_write(tmp_path) -> None:
    """Lark unpickles its tables file: never one of a predictable name in the shared temp folder (another
    local user could plant it), only in a 0700 folder of this user's; a folder others may write is not used."""
    cache, temp = tmp_path / "cache", tmp_path / "tmp"
    temp.mkdir()
    run_parse_one(cache, temp)
    folder = cache / "grammar"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert [p.suffix for p in folder.iterdir()] == [".tables"]
    assert list(temp.iterdir()) == []  # nothing in the temp folder
    run_parse_one(cache, temp)  # the second process reads them: still one file
    assert len(list(folder.iterdir())) == 1

    shared = tmp_path / "shared"
    (shared / "grammar").mkdir(parents=True)
    os.chmod(shared / "grammar", 0o777)
    run_parse_one(shared, temp)
    assert list((shared / "grammar").iterdir()) == [] and list(temp.iterdir()) == []


def test_loading_again_parses_only_what_changed(tmp_path) -> None:
    """The rule watcher loads the whole set again when one file changes: the statements that did not change
    are those of the last load (the same objects: not parsed again); the changed one is parsed anew, at its
    new place."""
    rule = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts PATTERN (A B) DEFINE A AS a > {n}, B AS b < 1)"
    for n in range(3):
        (tmp_path / f"r{n}.sql").write_text(rule.format(n=n) + ";\n", encoding="utf-8")
    first = load_rules(str(tmp_path))
    (tmp_path / "r1.sql").write_text("-- moved down a line\n\n" + rule.format(n=1) + ";\n", encoding="utf-8")
    second = load_rules(str(tmp_path))
    assert not first.errors and not second.errors
    assert second["r0"].statement.match is first["r0"].statement.match
    assert second["r2"].statement.match is first["r2"].statement.match
    assert second["r1"].statement.match is not first["r1"].statement.match
    assert second["r1"].statement.match == first["r1"].statement.match  # the same meaning, elsewhere
    assert (first["r1"].line, second["r1"].line) == (1, 3)
    where = second["r1"].statement.match.span
    assert (where.line, where.column, where.start) == (3, 17, len("-- moved down a line\n\n") + 16)


def test_the_performance_page_shows_the_last_rule_loading_run() -> None:
    """docs/performance.md's rule-loading section is what bench/rule_loading.py words from its last run
    (bench/results-rule-loading.json), the aims' verdicts included: no figure typed by hand."""
    bench = runpy.run_path(str(REPO / "bench" / "rule_loading.py"), run_name="rule_loading_bench")
    results = json.loads(bench["RESULTS"].read_text(encoding="utf-8"))
    section = [line for line in bench["report"](results) if line]
    page = (REPO / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()
    assert section and all(line in page for line in section)
    assert {run["kind"] for run in results["runs"]} == {"one_file", "files"}
