"""Turning Lark's parse errors into plain sentences with codes, positions and hints.

Lark's exceptions name grammar terminals (`_RPAR`, `IDENT`) and parser states; users get plain
sentences instead. Known mistakes get their own codes: some through Lark's match_examples (labelled bad
inputs), the others from the expected-token set and the words around the error.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from cep.grammar.errors import CepSyntaxError, Span
from cep.grammar.tokens import ScanToken, lark_parser, scan, significant, span_of
from cep.grammar.tokens import token_span as _token_span

# --------------------------------------------------------------------------------- syntax errors
# Lark's exceptions name grammar terminals (`_RPAR`, `IDENT`) and parser states; users get plain
# sentences instead. Known mistakes get their own codes: some through Lark's match_examples
# (labelled bad inputs), the others from the expected-token set and the words around the error.

_PUNCTUATION = {
    "_LPAR": "'('",
    "_RPAR": "')'",
    "_LBRACKET": "'['",
    "_RBRACKET": "']'",
    "_COMMA": "','",
    "_DOT": "'.'",
    "_SEMI": "';'",
    "_PIPE": "'|'",
    "_BANG": "'!'",
    "_EXCLUSION_OPEN": "'{-'",
    "_EXCLUSION_CLOSE": "'-}'",
    "CARET": "'^'",
    "DOLLAR": "'$'",
    "QMARK": "'?'",
    "STAR": "'*'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "CONCAT": "'||'",
    "EQ": "'='",
    "NE": "'<>'",
    "LT": "'<'",
    "LE": "'<='",
    "GT": "'>'",
    "GE": "'>='",
    "NSEQ": "'<=>'",
    "_DCOLON": "'::'",
    "RANGE": "a quantifier",
    "STRING": "a string",
    "INT": "an integer",
    "DECIMAL": "a number",
    "$END": "the end of the query",
    "<END-OF-FILE>": "the end of the query",
}
_NAME_TOKENS = frozenset({"IDENT", "QUOTED_IDENT", "BACKTICK_IDENT"})
_EXPRESSION_STARTS = _NAME_TOKENS | {
    "INT",
    "DECIMAL",
    "STRING",
    "_LPAR",
    "NOT",
    "MINUS",
    "PLUS",
    "_CASE",
    "CAST",
    "TRY_CAST",
    "_ARRAY",
    "TRUE",
    "FALSE",
    "NULL",
    "_INTERVAL",
    "TIMESTAMP",
    "DATE",
    "RUNNING",
    "FINAL",
}
_PATTERN_STARTS = _NAME_TOKENS | {"_LPAR", "CARET", "DOLLAR", "_EXCLUSION_OPEN", "_PERMUTE", "_BANG"}
_OPERATORS = frozenset(
    {
        "EQ",
        "NE",
        "LT",
        "LE",
        "GT",
        "GE",
        "PLUS",
        "MINUS",
        "STAR",
        "SLASH",
        "PERCENT",
        "CONCAT",
        "AND",
        "OR",
        "_IS",
        "NOT",
        "_BETWEEN",
        "_IN",
        "LIKE",
        "ILIKE",
        "RLIKE",
        "REGEXP",
        "DIV",
        "NSEQ",
        "_DOT",
        "_ESCAPE",
    }
)
# Words that open a clause: to say where an error is ("in DEFINE") and to spot clauses out of order.
_CLAUSE_CONTEXT = {
    "SELECT": "in the select list",
    "FROM": "after FROM",
    "MATCH_RECOGNIZE": "in MATCH_RECOGNIZE",
    "PARTITION": "in PARTITION BY",
    "ORDER": "in ORDER BY",
    "MEASURES": "in MEASURES",
    "ONE": "in ONE ROW PER MATCH",
    "ALL": "in ALL ROWS PER MATCH",
    "AFTER": "in AFTER MATCH SKIP",
    "PATTERN": "in the pattern",
    "WITHIN": "in WITHIN",
    "SUBSET": "in SUBSET",
    "DEFINE": "in DEFINE",
    "WHERE": "in WHERE",
    "LIMIT": "after LIMIT",
}
_CLAUSE_RANK = {
    "PARTITION": 1,
    "ORDER": 2,
    "MEASURES": 3,
    "ONE": 4,
    "ALL": 4,
    "AFTER": 5,
    "INITIAL": 6,
    "SEEK": 6,
    "PATTERN": 7,
    "WITHIN": 8,
    "SUBSET": 9,
    "DEFINE": 10,
}
_CLAUSE_TITLE = {
    "PARTITION": "PARTITION BY",
    "ORDER": "ORDER BY",
    "ONE": "ONE ROW PER MATCH",
    "ALL": "ALL ROWS PER MATCH",
    "AFTER": "AFTER MATCH SKIP",
}
_LIST_ITEMS = {
    "SELECT": "select items",
    "PARTITION": "PARTITION BY columns",
    "ORDER": "ORDER BY keys",
    "MEASURES": "measures",
    "SUBSET": "SUBSET items",
    "DEFINE": "DEFINE items",
}


class _Mistake(NamedTuple):
    code: str
    message: str
    hint: str
    span: Span | None = None  # where to point, when not at the unexpected token


def _examples(*clauses: str) -> list[str]:
    return [f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts {clause} )" for clause in clauses]


_ENDINGS = ("1", "x", "A.x", "'a'", "TRUE", "NULL", "x IS NULL", "f(x)", "(x)", "PREV(A.x)", "1.5")
# Labelled bad inputs for Lark's match_examples; each fails in the parser state of its mistake.
_MISTAKE_EXAMPLES: list[tuple[_Mistake, list[str]]] = [
    (
        _Mistake("E0125", "write ALL ROWS PER MATCH (ROWS, plural)", "the clause is ALL ROWS PER MATCH"),
        _examples("ALL ROW PER MATCH PATTERN (A)", "MEASURES x AS y ALL ROW PER MATCH PATTERN (A)"),
    ),
    (
        _Mistake("E0125", "write ONE ROW PER MATCH (ROW, singular)", "the clause is ONE ROW PER MATCH"),
        _examples("ONE ROWS PER MATCH PATTERN (A)"),
    ),
    (
        _Mistake("E0121", "expected AS after the variable name in DEFINE, found '='", "write `A AS A.price > 10`"),
        _examples("PATTERN (A) DEFINE A = x > 1", "PATTERN (A B) DEFINE A AS x, B = x"),
    ),
    (
        _Mistake(
            "E0120", "missing ',' between DEFINE items", "separate the conditions with commas: `A AS ..., B AS ...`"
        ),
        _examples(
            *(f"PATTERN (A B C) DEFINE A AS {end} B AS x" for end in _ENDINGS),
            *(f"PATTERN (A B C) DEFINE C AS y, A AS {end} B AS x" for end in _ENDINGS),
        ),
    ),
]


class _SameLalrState:
    """Equal to any Lark parser state in the same LALR state. Lark's own equality also compares the
    stack depth, so an example would only match queries nested exactly like it (one optional
    clause more or less before the mistake, and it would no longer match)."""

    def __init__(self, state) -> None:
        self.position = state.position

    def __eq__(self, other: object) -> bool:
        return getattr(other, "position", None) == self.position


@functools.lru_cache(maxsize=1)
def _example_errors() -> dict[str, UnexpectedInput]:
    """Each example's parse error, computed once per process."""
    errors = {}
    for _mistake, examples in _MISTAKE_EXAMPLES:
        for example in examples:
            try:
                lark_parser().parse(example)
            except UnexpectedInput as error:
                errors[example] = error
    return errors


def _replay_example(example: str) -> None:
    """The parse function handed to match_examples: replays the example's (cached) error."""
    if example in _example_errors():
        raise _example_errors()[example]


def _match_known_mistake(error: UnexpectedInput) -> _Mistake | None:
    if not isinstance(error, UnexpectedToken) or getattr(error, "state", None) is None:
        return None
    real_state, error.state = error.state, _SameLalrState(error.state)
    try:
        mistake = error.match_examples(
            _replay_example, _MISTAKE_EXAMPLES, token_type_match_fallback=True, use_accepts=False
        )
    finally:
        error.state = real_state
    if mistake is None:
        return None
    examples = next(e for m, e in _MISTAKE_EXAMPLES if m == mistake)
    token_types = {_example_errors()[e].token.type for e in examples if e in _example_errors()}
    return mistake if error.token.type in token_types else None  # same state is not enough


def _acceptable_terminals(error: UnexpectedInput) -> set[str]:
    """What the parser could have accepted instead. LALR merges states, so the error's own
    ``expected`` can list terminals that fail a few reductions later (a ',' after a table alias);
    the interactive parser's accepts() tries each one and is exact."""
    interactive = getattr(error, "interactive_parser", None)
    if interactive is not None:
        try:
            return set(interactive.accepts())
        except Exception:  # noqa: BLE001 - a nicer message is optional; fall back to Lark's set
            pass
    return set(getattr(error, "expected", None) or ())


def _describe_expected(expected: set[str]) -> list[str]:
    """Terminal names -> plain descriptions ("an expression", "')'", "'DEFINE'")."""
    names, parts = set(expected), []
    if {"IDENT", "INT", "STRING"} <= names:
        parts.append("an expression")
        names -= _EXPRESSION_STARTS
    elif "CARET" in names:
        parts.append("a pattern variable")
        names -= _PATTERN_STARTS
    if names & _NAME_TOKENS:
        parts.append("a name")
        names -= _NAME_TOKENS
    if "RANGE" in names:  # quantifiers are optional: listing them only adds noise
        names -= {"STAR", "PLUS", "QMARK", "RANGE"}
    operators = names & _OPERATORS
    names -= _OPERATORS
    parts += sorted(_PUNCTUATION[n] for n in names if n in _PUNCTUATION)
    parts += sorted(f"'{n.lstrip('_')}'" for n in names if n not in _PUNCTUATION)
    return parts or (["an operator"] if operators else [])


def _one_of(parts: list[str]) -> str | None:
    if not parts or len(parts) > 6:
        return None
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _found(token: Token) -> str:
    text = str(token) if len(token) <= 40 else token[:37] + "..."
    return f"'{text}'" if "'" not in text else f'"{text}"'


def _clause_words(text: str, offset: int) -> list[str]:
    """The clause-opening words still open at ``offset``: words inside parentheses that have closed
    since are dropped (after `MATCH_RECOGNIZE (...)` we are no longer in its DEFINE)."""
    words: list[tuple[str, int]] = []
    depth, previous, closed = 0, "", False
    for token in significant(scan(text[:offset])):
        word = token.text.upper() if token.kind == "word" else ""
        if token.kind == "open":
            depth += 1
        elif token.kind == "close":
            depth -= 1
            words = [(w, d) for w, d in words if d <= depth]
            closed = bool(words) and words[-1] == ("MATCH_RECOGNIZE", depth)
        elif (word in _CLAUSE_CONTEXT or word in _CLAUSE_RANK) and previous not in (".", "AS"):
            words.append((word, depth))
        previous = word or token.text
    return [w for w, _ in words] + (["after MATCH_RECOGNIZE"] if closed and words[-1][0] == "MATCH_RECOGNIZE" else [])


def _unclosed_parenthesis(text: str, offset: int) -> ScanToken | None:
    stack: list[ScanToken] = []
    for token in significant(scan(text[:offset])):
        if token.kind == "open":
            stack.append(token)
        elif token.kind == "close" and stack:
            stack.pop()
    return stack[-1] if stack else None


def _position_hint(text: str, token: ScanToken) -> str:
    where = span_of(text, token.start, token.end)
    return f"the '{token.text}' at line {where.line}, column {where.column} is never closed"


def syntax_error_from_lark(error: UnexpectedInput, text: str) -> CepSyntaxError:
    """The one place where a Lark exception becomes a CepSyntaxError."""
    if isinstance(error, UnexpectedCharacters):
        return _character_error(error, text)
    token: Token = error.token
    expected = _acceptable_terminals(error)
    if token.type == "$END":
        end = len(text.rstrip())
        wanted = _one_of(_describe_expected(expected))
        unclosed = _unclosed_parenthesis(text, end)
        return CepSyntaxError(
            "unexpected end of query" + (f"; expected {wanted}" if wanted else ""),
            code="E0102",
            span=span_of(text, end, end),
            hint=_position_hint(text, unclosed) if unclosed else None,
        )
    mistake = _match_known_mistake(error) or _guess_mistake(token, expected, text)
    if mistake:
        return CepSyntaxError(
            mistake.message, code=mistake.code, span=mistake.span or _token_span(token), hint=mistake.hint
        )
    words = _clause_words(text, token.start_pos)
    last = words[-1] if words else ""
    context = " after MATCH_RECOGNIZE (...)" if last == "after MATCH_RECOGNIZE" else f" {_CLAUSE_CONTEXT.get(last, '')}"
    wanted = _one_of(_describe_expected(expected))
    message = (
        f"expected {wanted}{context.rstrip()}, found {_found(token)}"
        if wanted
        else f"unexpected {_found(token)}{context.rstrip()}"
    )
    return CepSyntaxError(message, code="E0101", span=_token_span(token))


def _guess_mistake(token: Token, expected: set[str], text: str) -> _Mistake | None:
    """Common mistakes recognised from the words around the error."""
    found = token.upper() if re.fullmatch(r"[^\W\d]\w*", token) else str(token)
    words = _clause_words(text, token.start_pos)
    last = words[-1] if words else ""
    misplaced = _misplaced_parenthesis(token, text)
    if misplaced:
        return misplaced
    inside_match = "MATCH_RECOGNIZE" in words and last != "after MATCH_RECOGNIZE"
    if found == "WITHIN" and inside_match and "PATTERN" not in words:
        return _Mistake(
            "E0122", "WITHIN must come after PATTERN (...)", "write PATTERN (...) WITHIN INTERVAL '10' MINUTE"
        )
    if inside_match and "PATTERN" not in words and (found in ("SUBSET", "DEFINE") or token.type == "_RPAR"):
        where = f"before {found}" if found != ")" else "in MATCH_RECOGNIZE"
        return _Mistake("E0123", f"missing PATTERN (...) {where}", "every MATCH_RECOGNIZE needs a PATTERN clause")
    within_span = None
    if found == "INTERVAL" and inside_match and last == "WITHIN" and "DEFINE" in words:
        # `DEFINE B AS x < PREV(x) WITHIN INTERVAL ...`: after a call, WITHIN reads as `f(x) WITHIN GROUP`, so
        # the parser stops at INTERVAL; the mistake is the clause order, at the word WITHIN.
        within = list(re.finditer(r"\bWITHIN\b", text[: token.start_pos], re.I))[-1]
        found, last, within_span = "WITHIN", "DEFINE", span_of(text, within.start(), within.end())
    if inside_match and found in _CLAUSE_RANK and _CLAUSE_RANK.get(last, 0) > _CLAUSE_RANK[found]:
        return _Mistake(
            "E0126",
            f"{_CLAUSE_TITLE.get(found, found)} must come before {_CLAUSE_TITLE.get(last, last)}",
            "the order is PARTITION BY, ORDER BY, MEASURES, rows per match, AFTER MATCH SKIP, PATTERN, "
            "WITHIN, SUBSET, DEFINE",
            within_span,
        )
    if token.type == "_RPAR" and "_RPAR" not in expected and _unclosed_parenthesis(text, token.start_pos) is None:
        return _Mistake("E0124", "unbalanced parentheses: this ')' closes nothing", "remove it or add the missing '('")
    if last == "MEASURES" and "_AS" in expected and "=" in _current_item(text, token.start_pos):
        return _Mistake(
            "E0121",
            f"expected AS and a name after the measure, found {_found(token)}",
            "a measure is written `expression AS name`, not `name = expression`",
        )
    if (
        "_COMMA" in expected
        and token.type in _EXPRESSION_STARTS - {"_LPAR", "MINUS", "PLUS", "NOT"}
        and last in _LIST_ITEMS
    ):
        return _Mistake("E0120", f"missing ',' between {_LIST_ITEMS[last]}", "separate the items with commas")
    if token.type in ("EQ", "NE", "LT", "LE", "GT", "GE") and not expected & {"EQ", "LT", "IDENT"}:
        return _Mistake("E0101", f"unexpected {_found(token)}", "comparisons do not chain: write a < b AND b < c")
    return None


def _misplaced_parenthesis(token: Token, text: str) -> _Mistake | None:
    """A clause keyword inside PATTERN's parentheses (a ')' is missing), or MATCH_RECOGNIZE's
    parenthesis closed before some of its clauses (one ')' too many)."""
    tokens = significant(scan(text))
    for index, opener in enumerate(tokens[:-1]):
        word = opener.text.upper()
        if opener.kind != "word" or word not in ("PATTERN", "MATCH_RECOGNIZE") or tokens[index + 1].kind != "open":
            continue
        depth = 0
        for inner in tokens[index + 1 :]:
            if inner.start > token.start_pos:
                break
            depth += {"open": 1, "close": -1}.get(inner.kind, 0)
            if word == "PATTERN" and depth >= 1 and inner.text.upper() in ("DEFINE", "SUBSET", "WITHIN"):
                return _Mistake(
                    "E0124",
                    f"expected ')' after the pattern, found '{inner.text}'",
                    _position_hint(text, tokens[index + 1]),
                    span_of(text, inner.start, inner.end),
                )
            if word == "MATCH_RECOGNIZE" and depth == 0 and inner.kind == "close":
                later = [t.text.upper() for t in tokens if inner.end <= t.start <= token.start_pos]
                if any(w in _CLAUSE_RANK and w != "ORDER" for w in later):
                    return _Mistake(
                        "E0124",
                        "unbalanced parentheses: this ')' ends MATCH_RECOGNIZE (...) before all of its clauses",
                        "remove this ')' or the '(' it was meant to close",
                        span_of(text, inner.start, inner.end),
                    )
                break
    return None


def _current_item(text: str, offset: int) -> str:
    """The text of the list item the error is in: from the last ',' or MEASURES."""
    start = max(text.rfind(",", 0, offset), text.upper().rfind("MEASURES", 0, offset) + len("MEASURES") - 1)
    return text[start + 1 : offset]


def _character_error(error: UnexpectedCharacters, text: str) -> CepSyntaxError:
    position = error.pos_in_stream
    line_end = text.find("\n", position)
    rest_of_line = span_of(text, position, line_end if line_end >= 0 else len(text))
    char = text[position]
    if char == "'":
        return CepSyntaxError(
            "unterminated string: the closing ' is missing",
            code="E0104",
            span=rest_of_line,
            hint="a quote inside a string is written twice: 'it''s'",
        )
    if char in '"`':
        return CepSyntaxError(
            f"unterminated quoted name: the closing {char} is missing", code="E0105", span=rest_of_line
        )
    hint = "quantifiers are written {n}, {n,}, {,m} or {n,m}; excluded rows {- ... -}" if char == "{" else None
    return CepSyntaxError(
        f"unexpected character '{char}'", code="E0103", span=span_of(text, position, position + 1), hint=hint
    )
