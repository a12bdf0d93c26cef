"""Query text -> AST: the Lark front end of cep.

    parse(text)            one statement, parsed and checked (raises CepError on any problem)
    parse_all(text)        a file of statements separated by ';', each optionally named by a
                           preceding `-- name: xyz` comment
    parse_unchecked(text)  parse only (no semantic checks); used by the formatter and tests
    parse_schema(text)     'ts TIMESTAMP, symbol STRING' -> {'ts': 'TIMESTAMP', 'symbol': 'VARCHAR'}

How it works: a forgiving pre-scan of the raw text (``scan``) enforces the length and parenthesis
depth limits and rejects subqueries before Lark sees anything; Lark's LALR parser (grammar in
``cep.lark``, positions propagated) builds a parse tree without recursion; ``_ToAst``, a
non-recursive Transformer, turns it into ``grammar.ast`` nodes; a last iterative pass bounds the AST
depth so that the recursive checker and formatter are safe. Lark exceptions become
``CepSyntaxError`` in exactly one place (``syntax_error_from_lark``: plain sentences, never Lark's
terminal names), raised ``from None``.

Normalisations (see docs/language.md): a parenthesised pattern group is not a node; a concatenation
nested in a concatenation, and an alternation nested in an alternation, are flattened (same meaning,
same preference order); ``!=`` becomes ``<>``; function names are upper-cased; ``COUNT()`` is
``COUNT(*)``; ``SKIP TO v`` is ``SKIP TO LAST v`` with plain=True; ``PATTERN ()`` is the empty pattern.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import functools
import re
from pathlib import Path
from typing import Iterator, NamedTuple

from lark import Lark, Token, Transformer_NonRecursive, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from grammar import ast, limits
from grammar.checks import AGGREGATE_FUNCTIONS, check, is_expression, is_pattern, iter_children, normalize_type
from grammar.errors import NO_SPAN, CepError, CepSemanticError, CepSyntaxError, Span

__all__ = ["parse", "parse_all", "parse_unchecked", "parse_schema", "split_statements"]


@functools.lru_cache(maxsize=1)
def lark_parser() -> Lark:
    """The LALR parser, built once per process. ``cache=True`` keeps the tables in the temp
    directory, which cuts the build from about 1.4 s to 0.1 s."""
    grammar = Path(__file__).with_name("cep.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=True, cache=True)


# ------------------------------------------------------------------------------------- pre-scan


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
_TRIVIA = frozenset({"space", "comment", "block"})


def scan(text: str) -> list[ScanToken]:
    """A forgiving tokenisation of any text (it never fails): enough to find words, parentheses
    and statement boundaries outside strings, quoted names and comments."""
    return [ScanToken(m.lastgroup, m.group(), m.start(), m.end()) for m in _SCAN.finditer(text)]


def significant(tokens: list[ScanToken]) -> list[ScanToken]:
    return [t for t in tokens if t.kind not in _TRIVIA]


def span_of(text: str, start: int, end: int) -> Span:
    """The Span of text[start:end] (1-based line and column, like Lark's)."""
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    end_line = line + text.count("\n", start, end)
    end_column = end - (text.rfind("\n", 0, end) + 1) + 1
    return Span(line, column, end_line, end_column, start, end)


def _prescan(text: str, all_tokens: list[ScanToken]) -> None:
    """Reject what the parser must not see: nesting beyond the limit, subqueries, CTEs, and an
    unterminated comment (which Lark would read as '/' and '*')."""
    for token in all_tokens:
        if token.kind == "block" and (len(token.text) < 4 or not token.text.endswith("*/")):
            raise CepSyntaxError("unterminated comment: the closing */ is missing", code="E0106",
                                 span=span_of(text, token.start, token.start + 2))
    tokens = significant(all_tokens)
    if len(tokens) > limits.MAX_QUERY_TOKENS:
        extra = tokens[limits.MAX_QUERY_TOKENS]
        raise CepSemanticError(f"the query has {len(tokens)} tokens; the limit is {limits.MAX_QUERY_TOKENS}",
                               code="E0307", span=span_of(text, extra.start, extra.end))
    if tokens and tokens[0].text.upper() == "WITH":
        raise CepSyntaxError("WITH clauses (common table expressions) are not supported: subqueries are not supported",
                             code="E0107", span=span_of(text, tokens[0].start, tokens[0].end),
                             hint="select from a table or a file path directly")
    depth = 0
    for index, token in enumerate(tokens):
        if token.kind == "close":
            depth = max(0, depth - 1)
        elif token.kind == "open":
            depth += 1
            if depth > limits.MAX_NESTING_DEPTH:
                raise CepSemanticError(f"parentheses nest deeper than the limit of {limits.MAX_NESTING_DEPTH} levels",
                                       code="E0302", span=span_of(text, token.start, token.end))
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if following and following.kind == "word" and following.text.upper() in ("SELECT", "WITH"):
                raise CepSyntaxError(
                    "subqueries are not supported", code="E0107",
                    span=span_of(text, token.start, _matching_close(tokens, index, len(text))),
                    hint="compute the value outside the query; MATCH_RECOGNIZE expressions only see the match's rows",
                )


def _matching_close(tokens: list[ScanToken], open_index: int, default: int) -> int:
    depth = 0
    for token in tokens[open_index:]:
        depth += {"open": 1, "close": -1}.get(token.kind, 0)
        if depth == 0:
            return token.end
    return default


# ------------------------------------------------------------------------------------ tree -> AST


def _span(meta) -> Span:
    if getattr(meta, "empty", True):
        return NO_SPAN
    return Span(meta.line, meta.column, meta.end_line, meta.end_column, meta.start_pos, meta.end_pos)


def _token_span(token: Token) -> Span:
    return Span(token.line, token.column, token.end_line, token.end_column, token.start_pos, token.end_pos)


def _present(items) -> list:
    """Children without the ``None`` placeholders of absent optional parts."""
    return [item for item in items if item is not None]


def _unquote(text: str, quote: str) -> str:
    return text[1:-1].replace(quote * 2, quote)


# Small factories for the many rules whose transformation is one line.
def _first(self, meta, children):
    return children[0]


def _items(self, meta, children):
    return tuple(children)


def _constant(value):
    return lambda self, meta, children: value


def _node(node_type):
    return lambda self, meta, children: node_type(_span(meta), *children)


def _constant_node(node_type):
    return lambda self, meta, children: node_type(_span(meta))


def _node_of_items(node_type):
    return lambda self, meta, children: node_type(_span(meta), tuple(_present(children)))


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive):
    """Parse tree -> ``grammar.ast``: one method per rule or alias of cep.lark."""

    start = alias = where_clause = within_clause = any_ident = _first
    select_list = order_clause = partition_clause = measures_clause = subset_clause = define_clause = _items
    show_timeout = _constant(True)
    show_empty, omit_empty, with_unmatched = (_constant(f"ALL_{m}") for m in ("SHOW_EMPTY", "OMIT_EMPTY", "WITH_UNMATCHED"))
    measure, define_item, when_clause, cast_expr = _node(ast.Measure), _node(ast.Define), _node(ast.WhenClause), _node(ast.Cast)
    pattern_variable, exclusion, absence = _node(ast.PatternVar), _node(ast.Exclusion), _node(ast.Absence)
    empty_pattern, star_argument, qualified_column = _node(ast.Empty), _constant_node(ast.Star), _node(ast.ColumnRef)
    permute, array_literal = _node_of_items(ast.Permute), _node_of_items(ast.ArrayLiteral)

    def statement(self, meta, children):
        select, relation, match, alias, where, order_by, limit = children
        return ast.Statement(_span(meta), select, relation, match, alias, where, order_by or (), limit)

    def select_star(self, meta, children):
        return ast.SelectItem(_span(meta), ast.Star(_span(meta)))

    def select_qualified_star(self, meta, children):
        return ast.SelectItem(_span(meta), ast.Star(_span(meta), children[0]))

    def select_expr(self, meta, children):
        return ast.SelectItem(_span(meta), *children)

    def relation_name(self, meta, parts):
        return ast.Relation(_span(meta), ".".join(part.name for part in parts))

    def relation_path(self, meta, children):
        return ast.Relation(_span(meta), _unquote(children[0], "'"), is_path=True)

    def limit_clause(self, meta, children):
        return int(children[0])

    def sort_key(self, meta, children):
        expr, descending, nulls_first = children
        return ast.SortKey(_span(meta), expr, bool(descending), nulls_first)

    def direction(self, meta, children):
        return children[0].type == "DESC"

    def nulls_order(self, meta, children):
        return children[0].type == "FIRST"

    # ----------------------------------------------------------------------- MATCH_RECOGNIZE

    def match_recognize(self, meta, children):
        partition, order, measures, rows, after, initial_or_seek, pattern, within, subsets, defines = children
        return ast.MatchRecognize(
            _span(meta), partition or (), order or (), measures or (), rows or ast.RowsPerMatch(NO_SPAN), after,
            pattern if pattern is not None else ast.Empty(NO_SPAN),  # `PATTERN ()`
            within, subsets or (), defines or (),
            seek=initial_or_seek == "SEEK", explicit_initial=initial_or_seek == "INITIAL",
        )

    def one_row(self, meta, children):
        return ast.RowsPerMatch(_span(meta), "ONE", show_timeout=bool(children[0]), explicit=True)

    def all_rows(self, meta, children):
        mode = children[0] or "ALL_SHOW_EMPTY"
        return ast.RowsPerMatch(_span(meta), mode, explicit=children[0] == "ALL_SHOW_EMPTY")

    def after_match(self, meta, children):
        return dataclasses.replace(children[0], span=_span(meta))

    def skip_past_last(self, meta, children):
        return ast.SkipTo(_span(meta), "PAST_LAST_ROW")

    def skip_to_next(self, meta, children):
        return ast.SkipTo(_span(meta), "TO_NEXT_ROW")

    def skip_to_first(self, meta, children):
        return ast.SkipTo(_span(meta), "TO_FIRST", children[-1])

    def skip_to_last(self, meta, children):
        return ast.SkipTo(_span(meta), "TO_LAST", children[-1])

    def skip_to_variable(self, meta, children):
        return ast.SkipTo(_span(meta), "TO_LAST", children[0], plain=True)

    def initial_or_seek(self, meta, children):
        return children[0].type

    def subset_item(self, meta, children):
        name, _equals, *variables = children
        return ast.Subset(_span(meta), name, tuple(variables))

    # -------------------------------------------------------------------------------- pattern

    def alternation(self, meta, branches):
        flat = []  # (A | (B | C)) means A | B | C, with the same preference order
        for branch in branches:
            flat.extend(branch.alternatives if isinstance(branch, ast.Alternation) else [branch])
        return ast.Alternation(_span(meta), tuple(flat))

    def concatenation(self, meta, items):
        flat = []  # A (B C) means A B C
        for item in items:
            flat.extend(item.items if isinstance(item, ast.Concat) else [item])
        return ast.Concat(_span(meta), tuple(flat))

    def quantified(self, meta, children):
        term, (low, high, greedy, text) = children
        return ast.Quantified(_span(meta), term, low, high, greedy, text)

    def quantifier(self, meta, children):
        token, reluctant = children
        shorthand = {"STAR": (0, None, "*"), "PLUS": (1, None, "+"), "QMARK": (0, 1, "?")}.get(token.type)
        low, high, text = shorthand or (*_parse_range(token), _range_text(token))
        return low, high, reluctant is None, text

    def anchor_start(self, meta, children):
        return ast.Anchor(_span(meta), "start")

    def anchor_end(self, meta, children):
        return ast.Anchor(_span(meta), "end")

    # ---------------------------------------------------------------------------- expressions

    def binary(self, meta, children):
        left, operator, right = children
        op = operator.value.upper()
        return ast.Binary(_span(meta), "<>" if op == "!=" else op, left, right)

    def unary(self, meta, children):
        return ast.Unary(_span(meta), children[0].value.upper(), children[1])

    def is_null(self, meta, children):
        return ast.IsNull(_span(meta), children[0], children[1] is not None)

    def between(self, meta, children):
        operand, negated, low, _and, high = children
        return ast.Between(_span(meta), operand, low, high, negated is not None)

    def in_list(self, meta, children):
        operand, negated, *items = children
        return ast.InList(_span(meta), operand, tuple(items), negated is not None)

    def like(self, meta, children):
        operand, negated, pattern, escape = children
        return ast.Like(_span(meta), operand, pattern, escape, negated is not None)

    def semantics_call(self, meta, children):
        keyword, call = children  # RUNNING or FINAL
        if isinstance(call, (ast.Navigation, ast.Aggregate, ast.FunctionCall)):
            return dataclasses.replace(call, span=_span(meta), semantics=keyword.type)
        # CLASSIFIER(), MATCH_NUMBER(), ...: kept as a call so that the checker can explain the mistake.
        args = (ast.ColumnRef(call.variable.span, None, call.variable),) if getattr(call, "variable", None) else ()
        return ast.FunctionCall(_span(meta), _special_name(call), args, semantics=keyword.type)

    def integer_literal(self, meta, children):
        return ast.Literal(_span(meta), "integer", int(children[0]), str(children[0]))

    def decimal_literal(self, meta, children):
        return ast.Literal(_span(meta), "decimal", decimal.Decimal(children[0]), str(children[0]))

    def string_literal(self, meta, children):
        value = _unquote(children[0], "'")
        return ast.Literal(_span(meta), "string", value, value)

    def true_literal(self, meta, children):
        return ast.Literal(_span(meta), "boolean", True, "TRUE")

    def false_literal(self, meta, children):
        return ast.Literal(_span(meta), "boolean", False, "FALSE")

    def null_literal(self, meta, children):
        return ast.Literal(_span(meta), "null", None, "NULL")

    def timestamp_literal(self, meta, children):
        return _time_literal(meta, "timestamp", datetime.datetime, children[1], "YYYY-MM-DD HH:MM:SS[.fff]")

    def date_literal(self, meta, children):
        return _time_literal(meta, "date", datetime.date, children[1], "YYYY-MM-DD")

    def interval_literal(self, meta, children):
        minus, string, first_unit, last_unit = children
        unit = " TO ".join(_interval_unit(token) for token in _present([first_unit, last_unit]))
        text = _unquote(string, "'")
        problem = _interval_problem(text, unit)
        if problem:
            raise CepSyntaxError(problem, code="E0108", span=_span(meta))
        return ast.IntervalLiteral(_span(meta), text, unit, negative=minus is not None)

    def column(self, meta, children):
        return ast.ColumnRef(_span(meta), None, children[0])

    def keyword_column(self, meta, children):
        return ast.ColumnRef(_span(meta), None, ast.Identifier(_span(meta), str(children[0])))

    def case_expr(self, meta, children):
        operand, *whens, default = children
        return ast.Case(_span(meta), operand, tuple(whens), default)

    def type_name(self, meta, children):
        name, *params = _present(children)
        return ast.TypeName(_span(meta), name.upper(), tuple(int(p) for p in params))

    def call(self, meta, children):
        name, distinct, *arguments = children
        return _build_call(_span(meta), name.name.upper(), distinct is not None, tuple(_present(arguments)))

    def qualified_star_argument(self, meta, children):
        return ast.Star(_span(meta), children[0])

    # ---------------------------------------------------------------------------- identifiers

    def plain_ident(self, meta, children):
        token = children[0]
        if token.type == "IDENT":
            return ast.Identifier(_span(meta), str(token))
        name = _unquote(token, token[0])
        if not name:
            raise CepSyntaxError("a quoted name cannot be empty", code="E0113", span=_span(meta))
        return ast.Identifier(_span(meta), name, quoted=True)

    def keyword_as_name(self, meta, children):
        return ast.Identifier(_span(meta), str(children[0]))


def _time_literal(meta, kind: str, python_type, string: Token, form: str) -> ast.Literal:
    text = _unquote(string, "'")
    try:
        value = python_type.fromisoformat(text.strip())
    except ValueError:
        raise CepSyntaxError(f"'{text}' is not a {kind}", code="E0108", span=_span(meta), hint=f"write {form}") from None
    return ast.Literal(_span(meta), kind, value, text)


_INTERVAL_UNITS = {"MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY"}  # and their plurals
# `INTERVAL '1:30' HOUR TO MINUTE` and friends: the units each field of the text stands for.
_INTERVAL_RANGES = {
    ("DAY", "HOUR"): ("DAY", "HOUR"), ("DAY", "MINUTE"): ("DAY", "HOUR", "MINUTE"),
    ("DAY", "SECOND"): ("DAY", "HOUR", "MINUTE", "SECOND"), ("HOUR", "MINUTE"): ("HOUR", "MINUTE"),
    ("HOUR", "SECOND"): ("HOUR", "MINUTE", "SECOND"), ("MINUTE", "SECOND"): ("MINUTE", "SECOND"),
}


def _interval_unit(token: Token) -> str:
    unit = token.upper()
    unit = unit[:-1] if unit.endswith("S") and unit[:-1] in _INTERVAL_UNITS else unit
    if unit not in _INTERVAL_UNITS:
        raise CepSyntaxError(f"unknown interval unit '{token}'", code="E0109", span=_token_span(token),
                             hint="use MILLISECOND, SECOND, MINUTE, HOUR or DAY (or their plurals)")
    return unit


def _interval_problem(text: str, unit: str) -> str | None:
    units = _INTERVAL_RANGES.get(tuple(unit.split(" TO ")))
    if units is None and " TO " in unit:
        return f"INTERVAL ... {unit} is not a valid range of units"
    fields = re.split(r"[ :]", text.strip())
    if len(fields) != len(units or (unit,)) or not all(re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)", f) for f in fields):
        example = {1: "10", 2: "1:30", 3: "1 2:30", 4: "1 2:30:00"}[len(units or (unit,))]
        return f"interval '{text}' does not fit {unit} (write it like '{example}')"
    return None


def _range_text(token: Token) -> str:
    """`{ 2 , 03 }` -> `{2,3}`: the quantifier as written, without blanks and leading zeros."""
    inside = re.sub(r"\s+", "", token[1:-1])
    return "{" + ",".join(str(int(part)) if part else "" for part in inside.split(",")) + "}"


def _parse_range(token: Token) -> tuple[int, int | None]:
    inside = re.sub(r"\s+", "", token[1:-1])
    if not inside:
        raise CepSyntaxError("a quantifier needs a bound: write {n}, {n,}, {,m} or {n,m}", code="E0110",
                             span=_token_span(token))
    low_text, _, high_text = inside.partition(",")
    low = int(low_text) if low_text else 0
    high = low if "," not in inside else int(high_text) if high_text else None
    if high is not None and low > high:
        raise CepSyntaxError(f"quantifier {_range_text(token)} has a minimum larger than its maximum", code="E0110",
                             span=_token_span(token))
    return low, high


_NAVIGATIONS = ("PREV", "NEXT", "FIRST", "LAST")
_NO_ARGUMENT_CALLS = {"MATCH_NUMBER": ast.MatchNumber, "MATCH_STATUS": ast.MatchStatus, "PROCTIME": ast.ProcTime}


def _special_name(node) -> str:
    if isinstance(node, ast.Classifier):
        return "CLASSIFIER"
    return next(name for name, node_type in _NO_ARGUMENT_CALLS.items() if isinstance(node, node_type))


def _build_call(span: Span, name: str, distinct: bool, args: tuple):
    """What `name(args)` means: an aggregate, a navigation, a special function or a scalar call."""
    if name in AGGREGATE_FUNCTIONS:
        return ast.Aggregate(span, name, args or ((ast.Star(span),) if name == "COUNT" else ()), distinct=distinct)
    if distinct:
        raise CepSyntaxError(f"DISTINCT is only allowed in aggregate calls, not in {name}()", code="E0112", span=span)
    if name in _NAVIGATIONS:
        if len(args) not in (1, 2):
            raise _arity_error(span, name, "takes a value and an optional offset, e.g. PREV(A.price, 2)")
        return ast.Navigation(span, name, args[0], args[1] if len(args) == 2 else None)
    if name == "CLASSIFIER":
        if not args:
            return ast.Classifier(span)
        if len(args) == 1 and isinstance(args[0], ast.ColumnRef) and args[0].qualifier is None:
            return ast.Classifier(span, args[0].column)
        raise _arity_error(span, name, "takes no argument or one pattern variable, e.g. CLASSIFIER(A)")
    if name in _NO_ARGUMENT_CALLS:
        if args:
            raise _arity_error(span, name, "takes no arguments")
        return _NO_ARGUMENT_CALLS[name](span)
    return ast.FunctionCall(span, name, args)


def _arity_error(span: Span, name: str, rule: str) -> CepSyntaxError:
    return CepSyntaxError(f"{name}() {rule}", code="E0111", span=span)


# --------------------------------------------------------------------------------- syntax errors
# Lark's exceptions name grammar terminals (`_RPAR`, `IDENT`) and parser states; users get plain
# sentences instead. Known mistakes get their own codes: some through Lark's match_examples
# (labelled bad inputs), the others from the expected-token set and the words around the error.

_PUNCTUATION = {
    "_LPAR": "'('", "_RPAR": "')'", "_LBRACKET": "'['", "_RBRACKET": "']'", "_COMMA": "','", "_DOT": "'.'",
    "_SEMI": "';'", "_PIPE": "'|'", "_BANG": "'!'", "_EXCLUSION_OPEN": "'{-'", "_EXCLUSION_CLOSE": "'-}'",
    "CARET": "'^'", "DOLLAR": "'$'", "QMARK": "'?'", "STAR": "'*'", "PLUS": "'+'", "MINUS": "'-'", "SLASH": "'/'",
    "PERCENT": "'%'", "CONCAT": "'||'", "EQ": "'='", "NE": "'<>'", "LT": "'<'", "LE": "'<='", "GT": "'>'",
    "GE": "'>='", "RANGE": "a quantifier", "STRING": "a string", "INT": "an integer", "DECIMAL": "a number",
    "$END": "the end of the query", "<END-OF-FILE>": "the end of the query",
}
_NAME_TOKENS = frozenset({"IDENT", "QUOTED_IDENT", "BACKTICK_IDENT"})
_EXPRESSION_STARTS = _NAME_TOKENS | {"INT", "DECIMAL", "STRING", "_LPAR", "NOT", "MINUS", "PLUS", "_CASE", "_CAST",
                                     "_ARRAY", "TRUE", "FALSE", "NULL", "_INTERVAL", "TIMESTAMP", "DATE", "RUNNING", "FINAL"}
_PATTERN_STARTS = _NAME_TOKENS | {"_LPAR", "CARET", "DOLLAR", "_EXCLUSION_OPEN", "_PERMUTE", "_BANG"}
_OPERATORS = frozenset({"EQ", "NE", "LT", "LE", "GT", "GE", "PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "CONCAT",
                        "AND", "OR", "_IS", "NOT", "_BETWEEN", "_IN", "_LIKE", "_DOT", "_ESCAPE"})
# Words that open a clause: to say where an error is ("in DEFINE") and to spot clauses out of order.
_CLAUSE_CONTEXT = {
    "SELECT": "in the select list", "FROM": "after FROM", "MATCH_RECOGNIZE": "in MATCH_RECOGNIZE",
    "PARTITION": "in PARTITION BY", "ORDER": "in ORDER BY", "MEASURES": "in MEASURES", "ONE": "in ONE ROW PER MATCH",
    "ALL": "in ALL ROWS PER MATCH", "AFTER": "in AFTER MATCH SKIP", "PATTERN": "in the pattern", "WITHIN": "in WITHIN",
    "SUBSET": "in SUBSET", "DEFINE": "in DEFINE", "WHERE": "in WHERE", "LIMIT": "after LIMIT",
}
_CLAUSE_RANK = {"PARTITION": 1, "ORDER": 2, "MEASURES": 3, "ONE": 4, "ALL": 4, "AFTER": 5, "INITIAL": 6, "SEEK": 6,
                "PATTERN": 7, "WITHIN": 8, "SUBSET": 9, "DEFINE": 10}
_CLAUSE_TITLE = {"PARTITION": "PARTITION BY", "ORDER": "ORDER BY", "ONE": "ONE ROW PER MATCH",
                 "ALL": "ALL ROWS PER MATCH", "AFTER": "AFTER MATCH SKIP"}
_LIST_ITEMS = {"SELECT": "select items", "PARTITION": "PARTITION BY columns", "ORDER": "ORDER BY keys",
               "MEASURES": "measures", "SUBSET": "SUBSET items", "DEFINE": "DEFINE items"}


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
    (_Mistake("E0125", "write ALL ROWS PER MATCH (ROWS, plural)", "the clause is ALL ROWS PER MATCH"),
     _examples("ALL ROW PER MATCH PATTERN (A)", "MEASURES x AS y ALL ROW PER MATCH PATTERN (A)")),
    (_Mistake("E0125", "write ONE ROW PER MATCH (ROW, singular)", "the clause is ONE ROW PER MATCH"),
     _examples("ONE ROWS PER MATCH PATTERN (A)")),
    (_Mistake("E0121", "expected AS after the variable name in DEFINE, found '='", "write `A AS A.price > 10`"),
     _examples("PATTERN (A) DEFINE A = x > 1", "PATTERN (A B) DEFINE A AS x, B = x")),
    (_Mistake("E0120", "missing ',' between DEFINE items", "separate the conditions with commas: `A AS ..., B AS ...`"),
     _examples(*(f"PATTERN (A B C) DEFINE A AS {end} B AS x" for end in _ENDINGS),
               *(f"PATTERN (A B C) DEFINE C AS y, A AS {end} B AS x" for end in _ENDINGS))),
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
        mistake = error.match_examples(_replay_example, _MISTAKE_EXAMPLES, token_type_match_fallback=True,
                                       use_accepts=False)
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
        return CepSyntaxError("unexpected end of query" + (f"; expected {wanted}" if wanted else ""), code="E0102",
                              span=span_of(text, end, end), hint=_position_hint(text, unclosed) if unclosed else None)
    mistake = _match_known_mistake(error) or _guess_mistake(token, expected, text)
    if mistake:
        return CepSyntaxError(mistake.message, code=mistake.code, span=mistake.span or _token_span(token),
                              hint=mistake.hint)
    words = _clause_words(text, token.start_pos)
    last = words[-1] if words else ""
    context = " after MATCH_RECOGNIZE (...)" if last == "after MATCH_RECOGNIZE" else f" {_CLAUSE_CONTEXT.get(last, '')}"
    wanted = _one_of(_describe_expected(expected))
    message = f"expected {wanted}{context.rstrip()}, found {_found(token)}" if wanted else \
        f"unexpected {_found(token)}{context.rstrip()}"
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
        return _Mistake("E0122", "WITHIN must come after PATTERN (...)", "write PATTERN (...) WITHIN INTERVAL '10' MINUTE")
    if inside_match and "PATTERN" not in words and (found in ("SUBSET", "DEFINE") or token.type == "_RPAR"):
        where = f"before {found}" if found != ")" else "in MATCH_RECOGNIZE"
        return _Mistake("E0123", f"missing PATTERN (...) {where}", "every MATCH_RECOGNIZE needs a PATTERN clause")
    if inside_match and found in _CLAUSE_RANK and _CLAUSE_RANK.get(last, 0) > _CLAUSE_RANK[found]:
        return _Mistake("E0126", f"{_CLAUSE_TITLE.get(found, found)} must come before {_CLAUSE_TITLE.get(last, last)}",
                        "the order is PARTITION BY, ORDER BY, MEASURES, rows per match, AFTER MATCH SKIP, PATTERN, "
                        "WITHIN, SUBSET, DEFINE")
    if token.type == "_RPAR" and "_RPAR" not in expected and _unclosed_parenthesis(text, token.start_pos) is None:
        return _Mistake("E0124", "unbalanced parentheses: this ')' closes nothing", "remove it or add the missing '('")
    if last == "MEASURES" and "_AS" in expected and "=" in _current_item(text, token.start_pos):
        return _Mistake("E0121", f"expected AS and a name after the measure, found {_found(token)}",
                        "a measure is written `expression AS name`, not `name = expression`")
    if "_COMMA" in expected and token.type in _EXPRESSION_STARTS - {"_LPAR", "MINUS", "PLUS", "NOT"} and last in _LIST_ITEMS:
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
                return _Mistake("E0124", f"expected ')' after the pattern, found '{inner.text}'",
                                _position_hint(text, tokens[index + 1]), span_of(text, inner.start, inner.end))
            if word == "MATCH_RECOGNIZE" and depth == 0 and inner.kind == "close":
                later = [t.text.upper() for t in tokens if inner.end <= t.start <= token.start_pos]
                if any(w in _CLAUSE_RANK and w != "ORDER" for w in later):
                    return _Mistake("E0124", "unbalanced parentheses: this ')' ends MATCH_RECOGNIZE (...) before all "
                                    "of its clauses", "remove this ')' or the '(' it was meant to close",
                                    span_of(text, inner.start, inner.end))
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
        return CepSyntaxError("unterminated string: the closing ' is missing", code="E0104", span=rest_of_line,
                              hint="a quote inside a string is written twice: 'it''s'")
    if char in "\"`":
        return CepSyntaxError(f"unterminated quoted name: the closing {char} is missing", code="E0105", span=rest_of_line)
    hint = "quantifiers are written {n}, {n,}, {,m} or {n,m}; excluded rows {- ... -}" if char == "{" else None
    return CepSyntaxError(f"unexpected character '{char}'", code="E0103", span=span_of(text, position, position + 1),
                          hint=hint)


# ----------------------------------------------------------------------------------- AST limits


def _check_depth(statement: ast.Statement) -> None:
    """Bound the expression/pattern nesting depth without recursion, so that every recursive pass
    over the AST afterwards (checks, formatter, evaluator) is safe."""
    stack: list[tuple[object, int]] = [(statement, 0)]
    while stack:
        node, depth = stack.pop()
        if is_expression(node) or is_pattern(node):
            depth += 1
            if depth > limits.MAX_NESTING_DEPTH:
                raise CepSemanticError(f"expressions and patterns may nest at most {limits.MAX_NESTING_DEPTH} levels deep",
                                       code="E0302", span=node.span,
                                       hint="split long chains of operators, e.g. IN (...) instead of many ORs")
        stack.extend((child, depth) for child in iter_children(node))


# ------------------------------------------------------------------------------------ public API


def parse_unchecked(text: str, *, filename: str | None = None) -> ast.Statement:
    """Parse one statement (a trailing ';' is allowed) without the semantic checks."""
    try:
        if len(text) > limits.MAX_QUERY_LENGTH:
            raise CepSemanticError(f"the query is {len(text)} characters long; the limit is {limits.MAX_QUERY_LENGTH}",
                                   code="E0301")
        tokens = scan(text)
        _prescan(text, tokens)
        statements = list(split_statements(text, tokens))
        if not statements:
            raise CepSyntaxError("the query is empty", code="E0114", span=span_of(text, 0, min(1, len(text))))
        if len(statements) > 1:
            second = next(t for t in significant(tokens) if t.start >= statements[1][0])
            raise CepSyntaxError("only one statement is expected here, but another follows the ';'", code="E0116",
                                 span=span_of(text, second.start, second.end), hint="use parse_all() for a file")
        try:
            tree = lark_parser().parse(text)
        except UnexpectedInput as error:
            raise syntax_error_from_lark(error, text) from None
        try:
            statement = _ToAst().transform(tree)
        except VisitError as error:
            raise (error.orig_exc if isinstance(error.orig_exc, CepError) else error) from None
        _check_depth(statement)
        return statement
    except CepError as error:
        raise error.with_source(text, filename) from None


def parse(text: str, *, filename: str | None = None) -> ast.Statement:
    """Parse one statement and run the semantic checks; raise CepError on any problem."""
    statement = parse_unchecked(text, filename=filename)
    check(statement, source=text, filename=filename)
    return statement


_NAME_COMMENT = re.compile(r"--\s*name\s*:\s*(\S+)", re.IGNORECASE)


def split_statements(text: str, tokens: list[ScanToken] | None = None) -> Iterator[tuple[int, int, str | None]]:
    """(start, end, name) of each statement of a file: split at ';' outside strings and comments;
    a `-- name: xyz` comment before a statement names it."""
    start, name, seen_code = 0, None, False
    for token in scan(text) if tokens is None else tokens:
        if token.kind == "comment" and not seen_code:
            match = _NAME_COMMENT.match(token.text)
            name = match.group(1) if match else name
        elif token.kind == "semi":
            if seen_code:
                yield start, token.end, name
            start, name, seen_code = token.end, None, False
        elif token.kind not in _TRIVIA:
            seen_code = True
    if seen_code:
        yield start, len(text), name


def parse_all(text: str, *, filename: str | None = None) -> list[ast.Statement]:
    """Parse and check every statement of a file. Positions in errors refer to the whole file."""
    if len(text) > limits.MAX_QUERY_LENGTH:
        raise CepSemanticError(f"the file is {len(text)} characters long; the limit is {limits.MAX_QUERY_LENGTH}",
                               code="E0301", filename=filename)
    statements = []
    for start, end, name in split_statements(text):
        # Blank out the other statements (keeping newlines) so that positions are file positions.
        padded = re.sub(r"[^\n]", " ", text[:start]) + text[start:end]
        try:
            statement = parse(padded, filename=filename)
        except CepError as error:
            raise error.with_source(text, filename) from None
        statements.append(dataclasses.replace(statement, name=name))
    return statements


_SCHEMA_FIELD = re.compile(r'\s*("(?:[^"]|"")+"|`(?:[^`]|``)+`|[^\W\d]\w*)\s*:?\s*([A-Za-z_]\w*)\s*([\s\S]*?)\s*\Z')


def parse_schema(text: str) -> dict[str, str]:
    """'ts TIMESTAMP, symbol STRING, price DOUBLE' -> {'ts': 'TIMESTAMP', 'symbol': 'VARCHAR', ...}.
    Spark, Flink and Trino spellings are accepted (STRING, LONG, INT, FLOAT, DECIMAL(10, 2), ...)."""
    schema: dict[str, str] = {}
    depth, start = 0, 0
    for index, char in enumerate(text + ","):
        depth += (char in "(<") - (char in ")>")
        if char != "," or depth > 0 or (index == len(text) and not text[start:].strip()):
            continue
        field_text, offset, start = text[start:index], start, index + 1
        match = _SCHEMA_FIELD.match(field_text)
        type_name = normalize_type(match.group(2), match.group(3)) if match else None
        if type_name is None:
            begin = offset + len(field_text) - len(field_text.lstrip())
            problem = f"unknown type '{match.group(2)}{match.group(3)}'" if match else "expected 'name TYPE'"
            raise CepSyntaxError(f"invalid schema: {problem}", code="E0115", source=text, filename="schema",
                                 span=span_of(text, begin, begin + max(1, len(field_text.strip()))),
                                 hint="write columns as 'name TYPE, ...', e.g. 'ts TIMESTAMP, symbol STRING, price DOUBLE'")
        name = match.group(1)
        schema[_unquote(name, name[0]) if name[0] in "\"`" else name] = type_name
    if not schema:
        raise CepSyntaxError("invalid schema: it lists no columns", code="E0115", source=text, filename="schema")
    return schema
