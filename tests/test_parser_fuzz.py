"""Robustness: whatever the text, parse() returns a Statement or raises a CepError, quickly.

Never an AttributeError, IndexError, RecursionError or a Lark exception, and never a runaway: each input
gets a bound on the Python calls its parse makes, linear in its length (tests/work_budget.py: the same count on
every machine and under any load, where a CPU-time bound failed on a busy CI worker; hypothesis's deadline is
off for the same reason), and hostile shapes (deep nesting, long operator chains, huge quantifiers) are tried
explicitly.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep.grammar.checks import check
from cep.grammar.errors import CepError, CepSemanticError
from cep.grammar.parser import parse, parse_all, scan, split_statements

try:  # `tests` is a package only when the repository root is on sys.path
    from tests.strategies_ast import KEYWORDS, corpus_queries, statements, uses_subquery
    from tests.work_budget import python_calls
except ModuleNotFoundError:
    from strategies_ast import KEYWORDS, corpus_queries, statements, uses_subquery
    from work_budget import python_calls

SEEDS = [q for _, q, _ in corpus_queries() if not uses_subquery(q)] or [
    "SELECT m.id FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES LAST(B.v) AS v ALL ROWS PER MATCH "
    "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+? {- C -} PERMUTE(D, E)) SUBSET U = (A, B) "
    "DEFINE B AS B.v < PREV(B.v, 1) AND COUNT(*) > 2) AS m WHERE m.id > 0 LIMIT 5"
]


def _warm_up() -> None:
    """A process's first syntax errors build Lark's tables and replay the known mistakes' examples once
    (grammar/syntax_errors.py, about 500,000 calls): do both before any test counts calls."""
    for text in ("SELECT", "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B+ +))"):
        try:
            parse(text)
        except CepError:
            pass


_warm_up()
# A parse makes about 13 Python calls a character of a fuzzed query and at most 11 on the hostile shapes
# below (measured): ten times that, plus a fixed allowance for a short text's error message, leaves room for
# the grammar to grow and still fails anything that grows faster than the text.
CALLS_PER_CHARACTER = 150
CALLS_FIXED = 20_000
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces to insert: every keyword, the punctuation of the language, names, numbers and strings.
VOCABULARY = sorted(KEYWORDS) + [
    "(",
    ")",
    "[",
    "]",
    ",",
    ".",
    ";",
    "|",
    "!",
    "{-",
    "-}",
    "^",
    "$",
    "?",
    "*",
    "+",
    "-",
    "/",
    "%",
    "||",
    "=",
    "<>",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "{2,3}",
    "{,}",
    "{",
    "}",
    "A",
    "B",
    "x",
    '"q"',
    "`b`",
    "1",
    "1.5",
    "'s'",
    "--",
    "/*",
    "*/",
    "'",
    '"',
    "PREV(",
    "LAST(",
    "COUNT(*)",
    "CLASSIFIER()",
    "INTERVAL '1' HOUR",
]


def parses_or_raises_cep_error(text: str) -> None:
    def parse_and_render() -> None:
        try:
            parse(text)
        except CepError as error:
            str(error)  # rendering must work too

    _, calls = python_calls(parse_and_render)
    assert calls <= CALLS_FIXED + CALLS_PER_CHARACTER * len(text), calls


@FUZZ
@given(st.text(max_size=200))
def test_arbitrary_text(text: str) -> None:
    parses_or_raises_cep_error(text)


@FUZZ
@given(st.lists(st.sampled_from(VOCABULARY), max_size=40).map(" ".join))
def test_arbitrary_token_soup(text: str) -> None:
    parses_or_raises_cep_error(text)


@st.composite
def mutated_queries(draw) -> str:
    """A valid query with a few random token deletions, insertions, swaps and duplications."""
    query = draw(st.sampled_from(SEEDS))
    tokens = [t.text for t in scan(query)]
    for _ in range(draw(st.integers(1, 4))):
        if not tokens:
            break
        index = draw(st.integers(0, len(tokens) - 1))
        action = draw(st.sampled_from(["delete", "insert", "swap", "duplicate"]))
        if action == "delete":
            del tokens[index]
        elif action == "insert":
            tokens.insert(index, " " + draw(st.sampled_from(VOCABULARY)) + " ")
        elif action == "swap":
            other = draw(st.integers(0, len(tokens) - 1))
            tokens[index], tokens[other] = tokens[other], tokens[index]
        else:
            tokens.insert(index, tokens[index])
    return "".join(tokens)


@FUZZ
@given(mutated_queries())
def test_mutated_queries(text: str) -> None:
    parses_or_raises_cep_error(text)


@FUZZ
@given(st.lists(st.sampled_from(SEEDS[:20]) | mutated_queries(), min_size=1, max_size=3).map(";\n".join))
def test_parse_all_on_mutated_files(text: str) -> None:
    """A file parses as its statements parse one by one: the same statements when each parses alone, else
    the error of the first that does not, at a position inside that statement."""
    try:
        pieces = list(split_statements(text))
    except CepError as scan_error:  # e.g. an unterminated string: the whole file is refused alike
        with pytest.raises(CepError) as raised:
            parse_all(text)
        assert raised.value.code == scan_error.code
        return
    alone = [_parsed_alone(text, start, end) for start, end, _ in pieces]
    first_bad = next((index for index, parsed in enumerate(alone) if isinstance(parsed, CepError)), None)
    try:
        statements = parse_all(text)
    except CepError as error:
        str(error)
        assert first_bad is not None, f"parse_all refused a file whose statements all parse: {error}"
        start, end, _ = pieces[first_bad]
        assert text.count("\n", 0, start) + 1 <= error.line <= text.count("\n", 0, end) + 1
        assert error.code == alone[first_bad].code
        return
    assert first_bad is None, f"parse_all accepted a file whose statement {first_bad + 1} fails alone"
    assert statements == [dataclasses.replace(parsed, name=name) for parsed, (_, _, name) in zip(alone, pieces)]


def _parsed_alone(text: str, start: int, end: int):
    """The statement ``text[start:end]`` parses to on its own, or the CepError it raises."""
    try:
        return parse(text[start:end])
    except CepError as error:
        return error


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statements())
def test_checks_accept_any_ast(statement) -> None:
    """The checker only reports problems (CepSemanticError); it never crashes, schema or not."""
    for schema in (None, {"x": "VARCHAR", "A": "BIGINT", "ts": "TIMESTAMP", "xs": "ARRAY<INT>"}):
        try:
            check(statement, schema=schema)
        except CepSemanticError as error:
            assert error.errors and str(error)


def test_every_prefix_of_a_query_is_handled() -> None:
    query = SEEDS[0]
    for end in range(len(query)):
        parses_or_raises_cep_error(query[:end])


@pytest.mark.parametrize(
    "prefix",
    [
        "SELECT",
        "SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP TO FIRST",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A",
        "SELECT * FROM t MATCH_RECOGNIZE (",
    ],
)
def test_truncated_input_is_an_unexpected_end(prefix: str) -> None:
    with pytest.raises(CepError) as raised:
        parse(prefix)
    assert raised.value.code == "E0102" and "unexpected end of query" in raised.value.message


SHELL = "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS {})"


@pytest.mark.parametrize(
    "name, text, code",
    [
        ("parentheses", SHELL.format("(" * 5000 + "1" + ")" * 5000), "E0302"),
        ("unclosed parentheses", SHELL.format("(" * 10_000), "E0302"),
        ("NOT chain", SHELL.format("NOT " * 15_000 + "x"), "E0302"),
        ("minus chain", SHELL.format("- " * 15_000 + "1"), "E0302"),
        ("plus chain", SHELL.format(" + ".join(["x"] * 9_000) + " > 0"), "E0302"),
        ("AND chain", SHELL.format(" AND ".join(["x"] * 5_000)), "E0302"),
        ("too many tokens", SHELL.format(" + ".join(["x"] * 20_000) + " > 0"), "E0307"),
        ("CASE nesting", SHELL.format("CASE WHEN " * 300 + "x" + " THEN 1 END" * 300), "E0302"),
        (
            "exclusions",
            "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (" + "{- " * 3000 + "A" + " -}" * 3000 + "))",
            "E0302",
        ),
        ("quantifiers", "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A" + "{1,2}" * 300 + "))", "E0101"),
        ("huge bound", "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A{99999999999999999999}))", "E0303"),
        ("long sequence", "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (" + "A " * 120_000 + "))", "E0307"),
        ("long text", SHELL.format("x = 1" + " /* padding */" * 20_000), "E0301"),
        (
            "many variables",
            "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (" + " ".join(f"V{i}" for i in range(5000)) + "))",
            "E0305",
        ),
    ],
)
def test_hostile_shapes_fail_fast_with_a_limit(name: str, text: str, code: str) -> None:
    def refused() -> CepError:
        with pytest.raises(CepError) as raised:
            parse(text)
        str(raised.value)
        return raised.value

    error, calls = python_calls(refused)
    assert error.code == code, str(error)[:300]
    assert calls <= CALLS_FIXED + CALLS_PER_CHARACTER * len(text), (name, calls)
