"""The LALR driver (``grammar/lalr.py``) against Lark's own parser and transform: on every query of the
repository (the conformance corpus, patterns/, the docs' SQL blocks, the queries written in tests/) and on
generated and mutated statements, placed anywhere in a file, the driver gives Lark's nodes with Lark's
positions, or leaves the statement to Lark (None, or an error of its own); it never answers where Lark fails."""

from __future__ import annotations

import ast as python_ast
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies_ast import corpus_queries, statements
from test_rule_loading import positions

from cep.grammar import parser
from cep.grammar.errors import CepError
from cep.grammar.format import format_statement
from cep.grammar.parser import driver_nodes, lark_nodes, split_statements
from cep.grammar.tokens import lark_parser

REPO = Path(__file__).resolve().parent.parent
# What may precede a statement in its file: nothing, other statements, comments, a statement on the same line.
PREFIXES = ("", "-- rules\n", "SELECT 1;\n\n  -- name: x\n", "/* a\nb */ x; ", "\n\n\t  ")


def repository_queries() -> list[str]:
    """Every query text of the repository: the corpus, patterns/*.sql, the docs' SQL blocks, and the string
    constants of tests/*.py that hold a MATCH_RECOGNIZE (broken ones included: they test the error side)."""
    texts = [query for _id, query, _case in corpus_queries()]
    texts += [path.read_text(encoding="utf-8") for path in sorted((REPO / "patterns").rglob("*.sql"))]
    for page in sorted((REPO / "docs").glob("*.md")):
        texts += re.findall(r"```sql\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    for module in sorted((REPO / "tests").glob("*.py")):
        for node in python_ast.walk(python_ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, python_ast.Constant) and isinstance(node.value, str):
                if "MATCH_RECOGNIZE" in node.value.upper():
                    texts.append(node.value)
    queries = []
    for text in dict.fromkeys(texts):
        queries += [text[start:end] for start, end, _name in split_statements(text)]
    return list(dict.fromkeys(queries))


def compare(query: str, prefix: str) -> bool:
    """Assert the driver's answer for ``query`` after ``prefix`` is Lark's; True when Lark parsed it."""
    text = prefix + query
    start = len(prefix)
    line = prefix.count("\n") + 1
    line_start = prefix.rfind("\n") + 1
    try:
        expected = lark_nodes(lark_parser(), re.sub(r"[^\n]", " ", prefix) + query)
    except Exception:  # noqa: BLE001 - Lark refused it: any refusal of the driver's will do
        expected = None
    try:
        got = driver_nodes(text, start, len(text), line, line_start)
    except Exception:  # noqa: BLE001 - a rule's function refused the statement (Lark then refuses it too)
        got = None
    if expected is None:
        assert got is None, query
        return False
    assert got is not None, query  # the driver follows every statement Lark parses
    assert positions(got) == positions(expected), query
    return True


def test_every_query_of_the_repository_parses_as_lark_parses_it() -> None:
    queries = repository_queries()
    assert len(queries) > 500
    parsed = sum(compare(query, prefix) for query in queries for prefix in PREFIXES[:2])
    assert parsed > 400 * 2  # most parse; the others are refused by both
    for query in queries[::7]:
        for prefix in PREFIXES[2:]:
            compare(query, prefix)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statements(), st.sampled_from(PREFIXES))
def test_generated_statements_parse_as_lark_parses_them(statement, prefix) -> None:
    assert compare(format_statement(statement), prefix)


# What a mutation puts into a statement: tokens of the grammar, a token it lacks, characters of no token.
PIECES = ("(", ")", ",", "+", "*", "AS", "DEFINE", "PATTERN", "'", '"', "--", "/*", "\n", "?", "{2,}", "A", "1.5e")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statements(), st.sampled_from(PREFIXES), st.data())
def test_mutated_statements_are_answered_as_lark_answers_them(statement, prefix, data) -> None:
    query = format_statement(statement)
    at = data.draw(st.integers(0, len(query)))
    cut = data.draw(st.integers(0, 6))
    piece = data.draw(st.sampled_from(PIECES + ("",)))
    compare(query[:at] + piece + query[at + cut :], prefix)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN () DEFINE A AS a > 1)",  # a node without positions
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (( (A) )) DEFINE A AS (((a))) > 1)",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS a > 1) LIMIT 10 LIMIT 3",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) WITHIN INTERVAL '5' FORTNIGHT DEFINE A AS 1=1)",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS a > 1) ### trailing",
        "select *\nfrom t match_recognize (\n  order by ts\n  pattern (a b+)\n  define b as b.x > prev(b.x)\n)",
    ],
)
def test_edge_statements_parse_as_lark_parses_them(query) -> None:
    for prefix in PREFIXES:
        compare(query, prefix)


def test_one_statement_parses_by_the_driver_as_lark_parses_it(monkeypatch) -> None:
    """``parse_unchecked`` (``cep.compile``'s parse) takes the driver's nodes: Lark's, positions and all,
    wherever the statement stands in its text."""
    texts = [t for q in repository_queries()[::3] for t in (q, "\n  " + q + "  -- trailing\n")]
    answers = [_answer(text) for text in texts]
    monkeypatch.setattr(parser, "driver_nodes", lambda *_args: None)  # every statement to Lark's own path
    assert [_answer(text) for text in texts] == answers
    assert sum(answer[0] == "parsed" for answer in answers) > 100


def _answer(text: str) -> tuple:
    try:
        return "parsed", positions(parser.parse_unchecked(text))
    except CepError as error:
        return "refused", error.code, str(error)
