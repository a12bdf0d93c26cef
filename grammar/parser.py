"""Query text -> AST: the Lark front end of cep.

    parse(text)            one statement, parsed and checked (raises CepError on any problem)
    parse_all(text)        a file of statements separated by ';', each optionally named by a
                           preceding `-- name: xyz` comment
    parse_unchecked(text)  parse only (no semantic checks); used by the formatter and tests
    parse_schema(text)     'ts TIMESTAMP, symbol STRING' -> {'ts': 'TIMESTAMP', 'symbol': 'VARCHAR'}

How it works: a forgiving pre-scan of the raw text (``scan``) enforces the length and parenthesis
depth limits and rejects subqueries before Lark sees anything; Lark's LALR parser (grammar in
``cep.lark``, positions propagated) builds a parse tree without recursion; ``_ToAst``, a
non-recursive Transformer, turns it into ``grammar.ast`` nodes (a statement of a rule file is parsed in
place by ``lalr.Driver`` over Lark's tables, which calls ``_ToAst``'s functions as it reduces); a last
iterative pass bounds the AST depth so that the recursive checker and formatter are safe. Lark exceptions become
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
import math
import re

from lark import Token, Transformer_NonRecursive, v_args
from lark.exceptions import UnexpectedInput, VisitError

from cep.grammar import ast, limits
from cep.grammar.checks import check
from cep.grammar.errors import NO_SPAN, CepError, CepSemanticError, CepSyntaxError, Span
from cep.grammar.functions import AGGREGATE_FUNCTIONS
from cep.grammar.lalr import Driver
from cep.grammar.syntax_errors import syntax_error_from_lark
from cep.grammar.tokens import (
    ParsedStatements,
    clause_parser,
    lark_parser,
    prescan,
    prescan_passes,
    scan,
    significant,
    span_of,
    spark_unescaped,
    split_statements,
)
from cep.grammar.tokens import token_span as _token_span
from cep.grammar.type_names import decimal_problem, normalize_type
from cep.grammar.units import MICROS_PER_UNIT, TEXT_ABBREVIATIONS, UNIT_HINT, unit_name

__all__ = ["parse", "parse_all", "parse_unchecked", "parse_clause", "parse_schema", "split_statements"]


# ------------------------------------------------------------------------------------ tree -> AST


def _span(meta) -> Span:
    if getattr(meta, "empty", True):
        return NO_SPAN
    return Span(meta.line, meta.column, meta.end_line, meta.end_column, meta.start_pos, meta.end_pos)


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

    start = clause = alias = where_clause = within_clause = any_ident = _first
    select_list = order_clause = partition_clause = measures_clause = subset_clause = define_clause = _items
    show_timeout = _constant(True)
    show_empty, omit_empty, with_unmatched = (
        _constant(f"ALL_{m}") for m in ("SHOW_EMPTY", "OMIT_EMPTY", "WITH_UNMATCHED")
    )
    measure, define_item, when_clause = _node(ast.Measure), _node(ast.Define), _node(ast.WhenClause)
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
            _span(meta),
            partition or (),
            order or (),
            measures or (),
            rows or ast.RowsPerMatch(NO_SPAN),
            after,
            pattern if pattern is not None else ast.Empty(NO_SPAN),  # `PATTERN ()`
            within,
            subsets or (),
            defines or (),
            seek=initial_or_seek == "SEEK",
            explicit_initial=initial_or_seek == "INITIAL",
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
        return ast.Binary(_span(meta), {"!=": "<>", "<=>": "IS NOT DISTINCT FROM"}.get(op, op), left, right)

    def is_distinct(self, meta, children):
        operand, negated, _distinct, other = children
        return ast.Binary(
            _span(meta), "IS NOT DISTINCT FROM" if negated is not None else "IS DISTINCT FROM", operand, other
        )

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
        operand, negated, operator, pattern, escape = children
        return ast.Like(_span(meta), operand, pattern, escape, negated is not None, operator.type == "ILIKE")

    def rlike(self, meta, children):
        operand, negated, _operator, pattern = children
        call = ast.FunctionCall(_span(meta), "RLIKE", (operand, pattern))
        return ast.Unary(_span(meta), "NOT", call) if negated is not None else call

    def cast_expr(self, meta, children):
        keyword, operand, type_name = children
        return ast.Cast(_span(meta), operand, type_name, safe=keyword.type == "TRY_CAST")

    def postfix_cast(self, meta, children):
        operand, type_name = children
        return ast.Cast(_span(meta), operand, type_name)

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
        text = str(children[0])
        # Spark reads a number with an exponent (1e0, 2.5E-3) as a DOUBLE: its value is the nearest double, so
        # that 0.1e0 + 0.2e0 is 0.30000000000000004 and -0e0 is -0.0, as on Spark.
        value = float(text) if "e" in text.lower() else decimal.Decimal(text)
        if value in (math.inf, -math.inf):  # Spark's parser refuses it too (1e400 is out of a DOUBLE's range)
            raise CepSyntaxError(
                f"the number {text} is past a DOUBLE's range",
                code="E0108",
                span=_span(meta),
                hint="write at most 1.7e308",
            )
        return ast.Literal(_span(meta), "decimal", value, text)

    def string_literal(self, meta, children):
        value = spark_unescaped(_unquote(children[0], "'"))
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
        minus, value, first_unit, last_unit = children
        text = _unquote(value, "'") if value.type == "STRING" else str(value)
        if first_unit is None:  # the units are in the text: INTERVAL '1 hour 30 minutes'
            text, unit = _units_in_text(text, meta)
        else:
            unit = " TO ".join(_interval_unit(token) for token in _present([first_unit, last_unit]))
        problem = _interval_problem(text, unit)
        if problem:
            raise CepSyntaxError(problem, code="E0108", span=_span(meta))
        return ast.IntervalLiteral(_span(meta), text, unit, negative=minus is not None)

    def column(self, meta, children):
        ident = children[0]
        if not ident.quoted and ident.key in _NILADIC:  # CURRENT_TIMESTAMP without parentheses, as SQL writes it
            return ast.FunctionCall(_span(meta), ident.key, ())
        return ast.ColumnRef(_span(meta), None, ident)

    def keyword_column(self, meta, children):
        return ast.ColumnRef(_span(meta), None, ast.Identifier(_span(meta), str(children[0])))

    def case_expr(self, meta, children):
        operand, *whens, default = children
        return ast.Case(_span(meta), operand, tuple(whens), default)

    def type_name(self, meta, children):
        name, *params = _present(children)
        return ast.TypeName(_span(meta), name.upper(), tuple(int(p) for p in params))

    def call(self, meta, children):
        name, distinct, *arguments, within_group = children
        return _build_call(
            _span(meta), name.name.upper(), distinct is not None, tuple(_present(arguments)), within_group or ()
        )

    def date_function(self, meta, children):
        return ast.FunctionCall(_span(meta), "DATE", tuple(_present(children[1:])))

    def within_group(self, meta, children):
        return tuple(children)

    def from_argument(self, meta, children):
        return _SpecialArgument(_span(meta), "FROM", *children)

    def in_argument(self, meta, children):
        return _SpecialArgument(_span(meta), "IN", *children)

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
        raise CepSyntaxError(
            f"'{text}' is not a {kind}", code="E0108", span=_span(meta), hint=f"write {form}"
        ) from None
    return ast.Literal(_span(meta), kind, value, text)


# `INTERVAL '1:30' HOUR TO MINUTE` and friends: the units each field of the text stands for.
_INTERVAL_RANGES = {
    ("DAY", "HOUR"): ("DAY", "HOUR"),
    ("DAY", "MINUTE"): ("DAY", "HOUR", "MINUTE"),
    ("DAY", "SECOND"): ("DAY", "HOUR", "MINUTE", "SECOND"),
    ("HOUR", "MINUTE"): ("HOUR", "MINUTE"),
    ("HOUR", "SECOND"): ("HOUR", "MINUTE", "SECOND"),
    ("MINUTE", "SECOND"): ("MINUTE", "SECOND"),
}


_TEXT_UNIT = re.compile(r"\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*([A-Za-z]+)\s*")


def _units_in_text(text: str, meta) -> tuple[str, str]:
    """'1 hour 30 minutes' -> ('90', 'MINUTE'): the amounts in the smallest unit written (PostgreSQL's and
    Spark's INTERVAL '...' with the units inside the text)."""
    position, amounts = 0, []
    while position < len(text):
        found = _TEXT_UNIT.match(text, position)
        if found is None or found.end() == position:
            raise CepSyntaxError(
                f"interval '{text}' needs a unit: write INTERVAL '5 minutes' or INTERVAL '5' MINUTE",
                code="E0108",
                span=_span(meta),
            )
        amounts.append((decimal.Decimal(found.group(1)), _interval_unit_name(found.group(2), meta)))
        position = found.end()
    if not amounts:
        raise CepSyntaxError(
            "an interval needs an amount and a unit, e.g. INTERVAL '5 minutes'", code="E0108", span=_span(meta)
        )
    smallest = min((unit for _, unit in amounts), key=MICROS_PER_UNIT.__getitem__)
    total = sum(amount * MICROS_PER_UNIT[unit] for amount, unit in amounts) / MICROS_PER_UNIT[smallest]
    return format(total.normalize(), "f"), smallest


def _interval_unit_name(word: str, meta) -> str:
    unit = unit_name(word, TEXT_ABBREVIATIONS)
    if unit is None:
        raise CepSyntaxError(
            f"unknown interval unit '{word}'",
            code="E0109",
            span=_span(meta),
            hint=f"{UNIT_HINT}: months and years have no fixed length",
        )
    return unit


def _interval_unit(token: Token) -> str:
    unit = unit_name(token)
    if unit is None:
        raise CepSyntaxError(
            f"unknown interval unit '{token}'",
            code="E0109",
            span=_token_span(token),
            hint=f"{UNIT_HINT}: months and years have no fixed length",
        )
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
        raise CepSyntaxError(
            "a quantifier needs a bound: write {n}, {n,}, {,m} or {n,m}", code="E0110", span=_token_span(token)
        )
    low_text, _, high_text = inside.partition(",")
    low = int(low_text) if low_text else 0
    high = low if "," not in inside else int(high_text) if high_text else None
    if high is not None and low > high:
        raise CepSyntaxError(
            f"quantifier {_range_text(token)} has a minimum larger than its maximum",
            code="E0110",
            span=_token_span(token),
        )
    return low, high


_NAVIGATIONS = ("PREV", "NEXT", "FIRST", "LAST")
_NO_ARGUMENT_CALLS = {"MATCH_NUMBER": ast.MatchNumber, "MATCH_STATUS": ast.MatchStatus, "PROCTIME": ast.ProcTime}


def _special_name(node) -> str:
    if isinstance(node, ast.Classifier):
        return "CLASSIFIER"
    return next(name for name, node_type in _NO_ARGUMENT_CALLS.items() if isinstance(node, node_type))


@dataclasses.dataclass(frozen=True)
class _SpecialArgument:
    """``YEAR FROM ts`` (EXTRACT) or ``'x' IN note`` (POSITION) inside a call, before _build_call reads it."""

    span: Span
    keyword: str
    left: object
    right: object


# Calls whose first argument is a unit written as a word (DATEADD(day, 1, ts)) or a string ('day').
_UNIT_FIRST = {
    "DATEADD": 3,
    "TIMESTAMPADD": 3,
    "DATEDIFF": 3,
    "TIMESTAMPDIFF": 3,
    "DATE_ADD": 3,
    "DATE_DIFF": 3,
    "DATE_TRUNC": 2,
    "DATE_PART": 2,
    "EXTRACT": 2,
}
# Words that are calls without parentheses in SQL.
_NILADIC = frozenset({"CURRENT_TIMESTAMP", "CURRENT_DATE"})


def _unit_argument(arg):
    """DATEADD(day, ...): the word ``day`` is a unit, not a column (a string literal 'DAY' in the AST)."""
    if isinstance(arg, ast.ColumnRef) and arg.qualifier is None and not arg.column.quoted:
        return ast.Literal(arg.span, "string", arg.column.name.upper(), arg.column.name.upper())
    return arg


def _special_arguments(span: Span, name: str, args: tuple) -> tuple:
    """EXTRACT(field FROM x) and POSITION(s IN x) as plain argument lists; the FROM/IN forms elsewhere are errors."""
    special = [arg for arg in args if isinstance(arg, _SpecialArgument)]
    if not special:
        return args
    wanted = {"EXTRACT": "FROM", "POSITION": "IN"}.get(name)
    if len(args) != 1 or special[0].keyword != wanted:
        example = "EXTRACT(HOUR FROM ts)" if special[0].keyword == "FROM" else "POSITION('x' IN note)"
        raise CepSyntaxError(
            f"'{special[0].keyword}' inside {name}() is not allowed",
            code="E0111",
            span=special[0].span,
            hint=f"only {example} takes that form",
        )
    return special[0].left, special[0].right


def _build_call(span: Span, name: str, distinct: bool, args: tuple, within_group: tuple = ()):
    """What `name(args)` means: an aggregate, a navigation, a special function or a scalar call."""
    args = _special_arguments(span, name, args)
    if name in _UNIT_FIRST and len(args) == _UNIT_FIRST[name]:
        args = (_unit_argument(args[0]),) + args[1:]
    if within_group and name not in AGGREGATE_FUNCTIONS:
        raise CepSyntaxError(
            f"WITHIN GROUP (ORDER BY ...) belongs to aggregates such as LISTAGG and PERCENTILE_CONT, not to {name}()",
            code="E0111",
            span=span,
        )
    if name in AGGREGATE_FUNCTIONS:
        return ast.Aggregate(
            span, name, args or ((ast.Star(span),) if name == "COUNT" else ()), distinct=distinct, order_by=within_group
        )
    if distinct:
        raise CepSyntaxError(f"DISTINCT is only allowed in aggregate calls, not in {name}()", code="E0112", span=span)
    if name == "MATCH_SEQUENCE_NUMBER":  # Snowflake: the row's position in its match, RUNNING COUNT(*)
        if args:
            raise _arity_error(span, name, "takes no arguments")
        return ast.Aggregate(span, "COUNT", (ast.Star(span),), semantics="RUNNING")
    if name in _NAVIGATIONS or name in ("LAG", "LEAD"):
        if len(args) not in (1, 2):
            hint = (
                "; a default value (LAG's third argument) is not supported: wrap the call in COALESCE"
                if len(args) == 3 and name in ("LAG", "LEAD")
                else ""
            )
            raise _arity_error(span, name, f"takes a value and an optional offset, e.g. {name}(A.price, 2){hint}")
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


# ----------------------------------------------------------------------------------- AST limits


def _check_depth(statement: ast.Statement | ast.MatchRecognize) -> None:
    """Bound the expression/pattern nesting depth without recursion, so that every recursive pass
    over the AST afterwards (checks, formatter, evaluator) is safe. The walk is ``ast.children``'s, in its
    order (the first node past the limit is the one named), written out: it runs for every rule loaded."""
    stack: list[tuple[object, int]] = [(statement, 0)]
    while stack:
        node, depth = stack.pop()
        node_type = type(node)
        nests = _NESTS.get(node_type)
        if nests is None:
            nests = _NESTS[node_type] = ast.is_expression(node) or ast.is_pattern(node)
        if nests:
            depth += 1
            if depth > limits.MAX_NESTING_DEPTH:
                raise CepSemanticError(
                    f"expressions and patterns may nest at most {limits.MAX_NESTING_DEPTH} levels deep",
                    code="E0302",
                    span=node.span,
                    hint="split long chains of operators, e.g. IN (...) instead of many ORs",
                )
        for name in ast.field_names(node_type):
            value = getattr(node, name)
            if isinstance(value, tuple):
                stack += [(item, depth) for item in value if hasattr(type(item), "__dataclass_fields__")]
            elif hasattr(type(value), "__dataclass_fields__") and not isinstance(value, Span):
                stack.append((value, depth))


# node type -> is it an expression or a pattern (a level of nesting)
_NESTS: dict[type, bool] = {}


# ----------------------------------------------------------------------------- dialect spellings


def _rewrite(node, change):
    """``node`` with ``change`` applied bottom-up to every expression (``change`` returns a node, or None to
    keep it); unchanged subtrees stay the same objects. Recursive: it runs after ``_check_depth``."""
    updates = {}
    for name in ast.field_names(type(node)):
        value = getattr(node, name)
        if isinstance(value, tuple):
            new = tuple(_rewrite(item, change) if _is_node(item) else item for item in value)
            if any(a is not b for a, b in zip(new, value)):
                updates[name] = new
        elif _is_node(value):
            new = _rewrite(value, change)
            if new is not value:
                updates[name] = new
    node = dataclasses.replace(node, **updates) if updates else node
    return (change(node) or node) if ast.is_expression(node) else node


def _is_node(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, (Span, ast.Identifier))


def _inside_match(node, in_define: bool):
    """Inside MATCH_RECOGNIZE: a bare CLASSIFIER is CLASSIFIER() (Snowflake; quote it to read a column), and
    in DEFINE, LAG/LEAD are PREV/NEXT (Snowflake's spelling there)."""
    if (
        isinstance(node, ast.ColumnRef)
        and node.qualifier is None
        and not node.column.quoted
        and node.column.key == "CLASSIFIER"
    ):
        return ast.Classifier(node.span)
    if in_define and isinstance(node, ast.Navigation) and node.kind in ("LAG", "LEAD"):
        return dataclasses.replace(node, kind="PREV" if node.kind == "LAG" else "NEXT")
    return None


def _match_spellings(match: ast.MatchRecognize) -> ast.MatchRecognize:
    measures = tuple(_rewrite(m, lambda n: _inside_match(n, False)) for m in match.measures)
    defines = tuple(_rewrite(d, lambda n: _inside_match(n, True)) for d in match.defines)
    if all(a is b for a, b in zip(measures + defines, match.measures + match.defines)):
        return match
    return dataclasses.replace(match, measures=measures, defines=defines)


def _dialect_spellings(statement: ast.Statement) -> ast.Statement:
    match = _match_spellings(statement.match)
    return statement if match is statement.match else dataclasses.replace(statement, match=match)


# ------------------------------------------------------------------------------------ public API


def parse_unchecked(text: str, *, filename: str | None = None) -> ast.Statement:
    """Parse one statement (a trailing ';' is allowed) without the semantic checks."""
    try:
        if len(text) > limits.MAX_QUERY_LENGTH:
            raise CepSemanticError(
                f"the query is {len(text)} characters long; the limit is {limits.MAX_QUERY_LENGTH}", code="E0301"
            )
        tokens = scan(text)
        prescan(text, tokens)
        statements = list(split_statements(text, tokens))
        if not statements:
            raise CepSyntaxError("the query is empty", code="E0114", span=span_of(text, 0, min(1, len(text))))
        if len(statements) > 1:
            second = next(t for t in significant(tokens) if t.start >= statements[1][0])
            raise CepSyntaxError(
                "only one statement is expected here, but another follows the ';'",
                code="E0116",
                span=span_of(text, second.start, second.end),
                hint="use parse_all() for a file",
            )
        return _dialect_spellings(_statement_nodes(text))
    except CepError as error:
        raise error.with_source(text, filename) from None


def _statement_nodes(text: str):
    """The AST nodes of the one statement ``text``: by the LALR driver, or by Lark's own parse where the driver
    leaves it (a syntax error among them: Lark's path words every error)."""
    try:
        node = driver_nodes(text, 0, len(text), 1, 0)
    except Exception:  # noqa: BLE001 - Lark's path below raises what the statement deserves
        node = None
    if not isinstance(node, ast.Statement):
        return _tree_to_ast(lark_parser(), text)
    _check_depth(node)
    return node


def _tree_to_ast(parser, text: str):
    """Lark's parse of ``text`` as AST nodes, with the depth bound; Lark's errors become CepSyntaxError."""
    try:
        node = lark_nodes(parser, text)
    except UnexpectedInput as error:
        raise syntax_error_from_lark(error, text) from None
    except VisitError as error:
        raise (error.orig_exc if isinstance(error.orig_exc, CepError) else error) from None
    _check_depth(node)
    return node


def lark_nodes(parser, text: str):
    """The AST nodes of Lark's own parse of ``text`` by ``parser`` and Lark's own transform (the reference the
    LALR driver is tested against); raises Lark's errors."""
    return _ToAst().transform(parser.parse(text))


def driver_nodes(text: str, start: int, end: int, line: int, line_start: int):
    """The AST nodes of the statement ``text[start:end]`` (``line``: the file's line at ``start``, which begins
    at ``line_start``) by the LALR driver, or None when it leaves the statement to Lark (``lalr.Driver``)."""
    return _driver().parse(text, start, end, line, line_start)


def parse_clause(text: str, *, filename: str | None = None) -> ast.MatchRecognize:
    """Parse ``MATCH_RECOGNIZE (...)``, the only code in ``text`` (the rest of a whole SQL statement is
    blanked by ``grammar/statement.py``, so positions are those of the statement). Not checked: the
    caller wraps the clause in a statement and checks that."""
    try:
        prescan(text, scan(text))
        return _match_spellings(_tree_to_ast(clause_parser(), text))
    except CepError as error:
        raise error.with_source(text, filename) from None


def parse(text: str, *, filename: str | None = None) -> ast.Statement:
    """Parse one statement and run the semantic checks; raise CepError on any problem."""
    statement = parse_unchecked(text, filename=filename)
    check(statement, source=text, filename=filename)
    return statement


def parse_all(text: str, *, filename: str | None = None) -> list[ast.Statement]:
    """Parse and check every statement of a file. Positions in errors refer to the whole file."""
    if len(text) > limits.MAX_QUERY_LENGTH:
        raise CepSemanticError(
            f"the file is {len(text)} characters long; the limit is {limits.MAX_QUERY_LENGTH}",
            code="E0301",
            filename=filename,
        )
    statements = []
    for start, end, name in split_statements(text):
        try:
            statement = parse_part(text, start, end, filename=filename)
        except CepError as error:
            raise error.with_source(text, filename) from None
        statements.append(dataclasses.replace(statement, name=name))
    return statements


def parse_part(
    text: str, start: int, end: int, *, filename: str | None = None, line: int | None = None
) -> ast.Statement:
    """Parse and check the statement ``text[start:end]`` of a file, positions (in errors too) in the file.
    Only the statement is read (``line``: the file's line at ``start``, when the caller counts them), so a
    file of many statements parses in linear time, and the length limit is the statement's. A statement
    that loads is parsed in place (nothing copied or moved); one that does not, apart from its file
    (``_parse_apart``, the one path that words errors)."""
    if line is None:
        line = text.count("\n", 0, start) + 1
    newline = text.find("\n", start, end)
    if newline >= 0 and not text[start:newline].strip():  # the usual case: the statement starts on a line of its own
        start, line = newline + 1, line + 1
    line_start = text.rfind("\n", 0, start) + 1
    key = (text[start:end], start, line, line_start)
    statement = _PARSED.get(key)
    if statement is None:
        statement = _parse_in_place(text, start, end, line, line_start)
        if statement is None:
            return _parse_apart(text, start, end, line, line_start, filename)
        _PARSED.put(key, statement)
    return statement


_PARSED = ParsedStatements(limits.PARSED_STATEMENTS_CHARACTERS)


def _parse_apart(text: str, start: int, end: int, line: int, line_start: int, filename: str | None) -> ast.Statement:
    """The statement from its line's start, what precedes it blanked, parsed alone; positions then moved."""
    try:
        statement = parse(" " * (start - line_start) + text[start:end], filename=filename)
    except CepError as error:
        raise error.moved(line - 1, line_start) from None
    return ast.moved(statement, line - 1, line_start)


def _parse_in_place(text: str, start: int, end: int, line: int, line_start: int) -> ast.Statement | None:
    """``parse`` of the blanked statement, done where it stands (the same limits, tokens and checks), or
    None when anything is wrong with it (``_parse_apart`` then says what)."""
    try:
        if end - line_start > limits.MAX_QUERY_LENGTH:
            return None
        piece = text[start:end]
        if not prescan_passes(piece):
            tokens = scan(piece)
            prescan(piece, tokens)
            if sum(1 for _ in split_statements(piece, tokens)) != 1:
                return None
        node = driver_nodes(text, start, end, line, line_start)
        if not isinstance(node, ast.Statement):
            return None
        _check_depth(node)
        # Only a CLASSIFIER, LAG or LEAD is spelled otherwise: a statement that names none keeps its nodes.
        statement = _dialect_spellings(node) if not piece.isascii() or _RESPELLED.search(piece) else node
        check(statement)
    except Exception:  # noqa: BLE001 - _parse_apart words every failure
        return None
    return statement


_TO_AST = _ToAst()
_RESPELLED = re.compile("classifier|lag|lead", re.IGNORECASE)  # anywhere, even inside a word: never missed


@functools.cache
def _rule_function(name: str):
    """``_ToAst``'s function of (meta, children) for the rule or alias ``name`` (the LALR driver's callback),
    or None when it has none."""
    function = getattr(getattr(_ToAst, name, None), "base_func", None)
    return None if function is None else functools.partial(function, _TO_AST)


@functools.lru_cache(maxsize=1)
def _driver() -> Driver:
    """The LALR driver over the statement parser's tables, making ``_ToAst``'s nodes (built once)."""
    return Driver(lark_parser(), _rule_function)


# A name, then a space or ':' (or a quote), then the type: 'price' alone has no type (not 'pric' of type 'e').
_SCHEMA_FIELD = re.compile(
    r'\s*("(?:[^"]|"")+"|`(?:[^`]|``)+`|[^\W\d]\w*)(?:\s*:\s*|\s+|(?<=["`]))([A-Za-z_]\w*)\s*([\s\S]*?)\s*\Z'
)


def parse_schema(text: str) -> dict[str, str]:
    """'ts TIMESTAMP, symbol STRING, price DOUBLE' -> {'ts': 'TIMESTAMP', 'symbol': 'VARCHAR', ...}.
    Spark, Flink and Trino spellings are accepted (STRING, LONG, INT, FLOAT, DECIMAL(10, 2), ...); a
    DECIMAL keeps its size ('DECIMAL(10,2)'; without one Spark's DECIMAL(10,0))."""
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
            size_problem = decimal_problem(match.group(2), match.group(3)) if match else None
            word = field_text.strip()
            problem = size_problem or (
                f"unknown type '{match.group(2)}{match.group(3)}'"
                if match
                else f"column '{word}' has no type"
                if re.fullmatch(r"[^\W\d]\w*", word)
                else "expected 'name TYPE'"
            )
            raise CepSyntaxError(
                f"invalid schema: {problem}",
                code="E0115",
                source=text,
                filename="schema",
                span=span_of(text, begin, begin + max(1, len(field_text.strip()))),
                hint="write DECIMAL(precision, scale), e.g. 'price DECIMAL(10, 2)'"
                if size_problem
                else "write columns as 'name TYPE, ...', e.g. 'ts TIMESTAMP, symbol STRING, price DOUBLE'",
            )
        name = match.group(1)
        schema[_unquote(name, name[0]) if name[0] in '"`' else name] = type_name
    if not schema:
        raise CepSyntaxError("invalid schema: it lists no columns", code="E0115", source=text, filename="schema")
    return schema
