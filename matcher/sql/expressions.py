"""Expressions -> Python closures over an evaluation environment. Never eval/exec.

Three places evaluate expressions, and they differ only in what a column reference means:

- DEFINE: the current row is the row being tested, tentatively labelled with the variable under
  test; ``B.price`` is the last row labelled B so far (including the current one when testing B).
- MEASURES: the current row is the output row (ALL ROWS PER MATCH) or the match's last row (ONE ROW);
  RUNNING navigation stops at the current row, FINAL sees the whole match.
- The outer SELECT/WHERE/ORDER BY: a column reference names an output column of MATCH_RECOGNIZE.

Closures read rows and navigate the match through an ``Env`` and its view (``context.py``).
Label sets are frozensets of label ids; ``None`` means every variable (the universal row variable).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepSemanticError
from cep.matcher.sql import operators, values
from cep.matcher.sql.context import Env
from cep.matcher.sql.intervals import interval_to_timedelta
from cep.matcher.sql.running import (
    BROKEN,
    FIRST_ROW,
    LAST_ROW,
    RunningAggregate,
    RunningAggregates,
    first_row,
    incremental,
    last_row,
    last_rows,
    result_of,
)
from cep.matcher.sql.types import infer, integer_bounds

_FLOATING = frozenset({"DOUBLE", "FLOAT", "REAL"})

Closure = Callable[["Env"], Any]
RowClosure = Callable[["Env", int], Any]


class Scope:
    """What names mean where an expression is compiled.

    ``columns`` resolves a column reference to the input column (the key used in ``Env.cols``);
    ``label_sets`` maps a pattern variable or subset name to its frozenset of label ids; ``in_define``
    forbids FINAL. ``column_types`` (input column -> SQL type, where the input says) types integer
    arithmetic as Spark does (``integer_type``); a column it does not name is a BIGINT when it holds integers,
    as ``types.value_type_name`` types a column of Python ints.
    """

    def __init__(
        self,
        columns: ColumnNames,
        label_sets: dict[str, frozenset[int]],
        *,
        in_define: bool,
        own_label: int | None = None,
        column_types: Mapping[str, str] | None = None,
    ) -> None:
        self.columns = columns
        self.label_sets = label_sets
        self.in_define = in_define
        # In the DEFINE of variable v the current row is tentatively labelled v, so `v.x` (or `u.x` for
        # a subset u containing v) is simply the current row: no history to search.
        self.own_label = own_label
        self.column_types = column_types or {}
        # the types of the nodes typed so far (node id -> type; the query's AST keeps the nodes alive)
        self._known_types: dict[int, str] = {}

    def for_variable(self, own_label: int) -> Scope:
        return Scope(
            self.columns, self.label_sets, in_define=self.in_define, own_label=own_label, column_types=self.column_types
        )

    def column_type(self, ref: ast.ColumnRef) -> str:
        return self.column_types.get(self.column(ref), "BIGINT")

    def integer_type(self, expr) -> str | None:
        """The integer type Spark gives ``expr`` when it is arithmetic that can overflow one (``+ - * % DIV``,
        a negation, ``ABS``, ``ROUND``), else None: its result is checked against that type's range
        (``values.INTEGER_RANGES``)."""
        if not operators.is_integer_arithmetic(expr):
            return None
        if isinstance(expr, ast.Binary) and expr.op == "DIV":
            self._refuse_floating_div(expr)
        found = infer(expr, self.column_type, self._known_types)
        return found if integer_bounds(found) is not None else None

    def _refuse_floating_div(self, expr: ast.Binary) -> None:
        """Spark's DIV takes integers and DECIMALs only: a DOUBLE or FLOAT side is its analysis error
        (DATATYPE_MISMATCH), so the clause refuses it before reading a row rather than truncate a double."""
        sides = [infer(side, self.column_type, self._known_types) for side in (expr.left, expr.right)]
        floating = [kind for kind in sides if kind in _FLOATING]
        if floating:
            raise CepSemanticError(
                f"cannot apply 'DIV' to {sides[0]} and {sides[1]}: DIV takes integers and DECIMALs, as in Spark",
                code="E0235",
                span=expr.span,
                hint="write CAST(a / b AS BIGINT) (truncated toward zero, as DIV is), or CAST the DOUBLE to a DECIMAL",
            )

    def is_current_row(self, labels) -> bool:
        return labels is not None and self.own_label is not None and self.own_label in labels

    def column(self, ref: ast.ColumnRef) -> str:
        return self.columns.resolve(ref.column, ref.span)

    def labels_of(self, qualifier: ast.Identifier | None):
        if qualifier is None:
            return None
        found = self.label_sets.get(qualifier.key)
        if found is None:
            raise CepSemanticError(
                f"'{qualifier.name}' is not a pattern variable or subset", code="E0206", span=qualifier.span
            )
        return found


# ----------------------------------------------------------------------------------- variable analysis


def referenced_labels(expr, scope: Scope):
    """The label set a navigation or aggregate argument ranges over: its one qualifier, or all (None)."""
    qualifiers = {q.key: q for q in _qualifiers(expr)}
    if not qualifiers:
        return None
    if len(qualifiers) > 1:
        raise CepSemanticError(
            "a navigation or aggregate argument must refer to one pattern variable, found "
            + ", ".join(sorted(qualifiers)),
            code="E0212",
            span=getattr(expr, "span", None),
        )
    return scope.labels_of(next(iter(qualifiers.values())))


def _qualifiers(expr):
    if isinstance(expr, ast.ColumnRef):
        if expr.qualifier is not None:
            yield expr.qualifier
    elif isinstance(expr, ast.Star):
        if expr.qualifier is not None:
            yield expr.qualifier
    elif isinstance(expr, ast.Classifier):
        if expr.variable is not None:
            yield expr.variable
    elif isinstance(expr, (ast.Navigation, ast.Aggregate)):
        return  # a nested navigation ranges over its own variables
    else:
        for child in ast.children(expr):
            yield from _qualifiers(child)


def constant_offset(node: ast.Navigation, default: int) -> int:
    if node.offset is None:
        return default
    offset = node.offset
    if isinstance(offset, ast.Literal) and offset.kind == "integer" and isinstance(offset.value, int):
        if offset.value >= 0:
            return offset.value
    raise CepSemanticError(
        f"the offset of {node.kind} must be a non-negative integer constant", code="E0213", span=node.span
    )


# -------------------------------------------------------------------------------------------- compiler


_BINARY = {
    "+": values.add,
    "-": values.subtract,
    "*": values.multiply,
    "/": values.divide,
    "DIV": values.integer_divide,
    "%": values.modulo,
    "||": values.concat,
}


def compile_generic(
    expr,
    leaf: Callable[[Any], Callable | None],
    recurse: Callable[[Any], Callable],
    integer_type: Callable[[Any], str | None] | None = None,
):
    """``_compile_generic``, with run-time errors located at ``expr`` when it is an operation that can fail
    (arithmetic, comparison, cast, function call, LIKE): E0410 and friends say where. ``integer_type(expr)``
    (``Scope.integer_type``) names the integer type whose range an arithmetic result must stay in."""
    closure = _compile_generic(expr, leaf, recurse, integer_type or _no_integer_type)
    if (
        isinstance(expr, _CAN_FAIL)
        and not getattr(closure, "column", None)
        and not getattr(closure, "located", False)
        and not (isinstance(expr, ast.Binary) and expr.op in ("AND", "OR"))
    ):  # these never fail themselves
        return operators.located(closure, expr.span)
    return closure


def _no_integer_type(expr) -> None:
    """No integer type checks (the outer query's expressions: outside the clause)."""
    return None


def _compile_generic(expr, leaf: Callable[[Any], Callable | None], recurse: Callable[[Any], Callable], integer_type):
    """Compile the operators that mean the same everywhere; ``leaf`` handles context-specific nodes.

    Every closure takes ``(env, position=None)`` so the same code serves ``f(env)`` and
    ``f(env, position)``; children are called with both arguments (a plain call: ``*args`` packing
    doubled the cost of each call, and a DEFINE condition makes about ten).
    """
    special = leaf(expr)
    if special is not None:
        return special
    if isinstance(expr, ast.Literal):
        value = expr.value
        return lambda env, position=None: value
    if isinstance(expr, ast.IntervalLiteral):
        value = interval_to_timedelta(expr)
        return lambda env, position=None: value
    if isinstance(expr, ast.Binary):
        left, right = recurse(expr.left), recurse(expr.right)
        if expr.op == "AND":

            def conj(env, position=None):
                lv = left(env, position)
                if lv is False:
                    return False
                rv = right(env, position)
                if rv is False:
                    return False
                return None if lv is None or rv is None else True

            return conj
        if expr.op == "OR":

            def disj(env, position=None):
                lv = left(env, position)
                if lv is True:
                    return True
                rv = right(env, position)
                if rv is True:
                    return True
                return None if lv is None or rv is None else False

            return disj
        if expr.op in ("IS DISTINCT FROM", "IS NOT DISTINCT FROM"):
            same = expr.op == "IS NOT DISTINCT FROM"
            return lambda env, position=None: values.distinct_from(left(env, position), right(env, position)) != same
        constant = expr.right.value if isinstance(expr.right, ast.Literal) else None
        if expr.op in operators.PLAIN_ARITHMETIC:
            return operators.arithmetic(expr.op, left, right, constant, expr.span, integer_type(expr))
        if expr.op in _BINARY:
            op = _BINARY[expr.op]
            closure = lambda env, position=None: op(left(env, position), right(env, position))  # noqa: E731
            return operators.bounded(closure, expr.op, integer_type(expr), expr.span)
        return operators.comparison(expr.op, left, right, constant, expr.span)
    if isinstance(expr, ast.Unary):
        operand = recurse(expr.operand)
        if expr.op == "NOT":
            return lambda env, position=None: values.logical_not(operand(env, position))
        if expr.op == "-":
            negated = lambda env, position=None: values.negate(operand(env, position))  # noqa: E731
            return operators.bounded(negated, "-", integer_type(expr), expr.span)
        return operand
    if isinstance(expr, ast.IsNull):
        operand, negated = recurse(expr.operand), expr.negated
        return lambda env, position=None: (operand(env, position) is None) != negated
    if isinstance(expr, ast.Between):
        operand, low, high, negated = recurse(expr.operand), recurse(expr.low), recurse(expr.high), expr.negated

        def between(env, position=None):
            value = operand(env, position)
            lower = values.compare(">=", value, low(env, position))
            upper = values.compare("<=", value, high(env, position))
            result = False if lower is False or upper is False else (None if lower is None or upper is None else True)
            return values.logical_not(result) if negated else result

        return between
    if isinstance(expr, ast.InList):
        operand, items, negated = recurse(expr.operand), [recurse(i) for i in expr.items], expr.negated

        def in_list(env, position=None):
            value = operand(env, position)
            if value is None:
                return None
            saw_null = False
            for item in items:
                result = values.compare("=", value, item(env, position))
                if result:
                    return not negated
                saw_null = saw_null or result is None
            return None if saw_null else negated

        return in_list
    if isinstance(expr, ast.Like):
        operand, pattern = recurse(expr.operand), recurse(expr.pattern)
        escape = recurse(expr.escape) if expr.escape is not None else (lambda env, position=None: None)
        negated, folded = expr.negated, expr.case_insensitive

        def like(env, position=None):
            result = values.like(operand(env, position), pattern(env, position), escape(env, position), folded)
            return values.logical_not(result) if negated else result

        return like
    if isinstance(expr, ast.Case):
        return _compile_case(expr, recurse)
    if isinstance(expr, ast.Cast):
        operand, type_name, params = recurse(expr.operand), expr.type.name, expr.type.params
        convert = values.safe_cast if expr.safe else values.cast
        return lambda env, position=None: convert(operand(env, position), type_name, params)
    if isinstance(expr, ast.ArrayLiteral):
        items = [recurse(i) for i in expr.items]
        return lambda env, position=None: [item(env, position) for item in items]
    if isinstance(expr, ast.FunctionCall):
        function = values.SCALAR_FUNCTIONS.get(expr.name)
        if function is None:
            raise CepSemanticError(f"unknown function {expr.name}()", code="E0230", span=expr.span)
        args = [recurse(arg) for arg in expr.args]
        call = lambda env, position=None: function(*(arg(env, position) for arg in args))  # noqa: E731
        return operators.bounded(call, expr.name.lower(), integer_type(expr), expr.span)
    raise CepSemanticError(f"{type(expr).__name__} is not allowed here", code="E0231", span=getattr(expr, "span", None))


# Operations whose evaluation can raise a run-time error, located at their span (``compile_generic``).
_CAN_FAIL = (ast.Binary, ast.Unary, ast.Cast, ast.FunctionCall, ast.Like, ast.Between, ast.InList)


def _compile_case(expr: ast.Case, recurse):
    operand = recurse(expr.operand) if expr.operand is not None else None
    whens = [(recurse(w.condition), recurse(w.result)) for w in expr.whens]
    default = recurse(expr.default) if expr.default is not None else (lambda env, position=None: None)

    def case(env, position=None):
        subject = operand(env, position) if operand is not None else None
        for condition, result in whens:
            test = condition(env, position)
            if operand is not None:
                test = values.compare("=", subject, test)
            if test:
                return result(env, position)
        return default(env, position)

    return case


class ExpressionCompiler:
    """Compiles DEFINE and MEASURES expressions against a ``Scope``."""

    def __init__(
        self, scope: Scope, running: RunningAggregates | None = None, final_states: RunningAggregates | None = None
    ) -> None:
        self.scope = scope
        # DEFINE only: aggregates that qualify are carried with the thread's history (running.py).
        self.running = running
        # MEASURES only: the DEFINE aggregates carried with the history, which a measure may read at the
        # match's last row instead of folding (``_final_state``).
        self.final_states = final_states

    # An expression evaluated "at a row": every column reference reads that row, whatever its qualifier.
    # ``final``: the row was found with FINAL semantics, so the whole match is mapped; otherwise (RUNNING)
    # a row after the current one has no label yet, and CLASSIFIER() there is NULL.
    def at_row(self, expr, final: bool = False) -> RowClosure:
        def leaf(node):
            if isinstance(node, ast.ColumnRef):
                self.scope.labels_of(node.qualifier)  # validates the qualifier
                return _row_reader(self.scope.column(node))
            if isinstance(node, ast.Classifier):
                names = None
                return lambda env, position: _label_name(env, env.view.label_at(position, final), names)
            if isinstance(node, ast.MatchNumber):
                return lambda env, position: env.match_number
            if isinstance(node, ast.MatchStatus):
                return lambda env, position: env.match_status
            if isinstance(node, (ast.Navigation, ast.Aggregate)):
                raise CepSemanticError(
                    f"{_describe(node)} cannot be nested inside another navigation or aggregate",
                    code="E0210",
                    span=node.span,
                )
            return None

        return compile_generic(expr, leaf, lambda child: self.at_row(child, final), self.scope.integer_type)

    def compile(self, expr) -> Closure:
        return compile_generic(expr, self._leaf, self.compile, self.scope.integer_type)

    def _leaf(self, node):
        scope = self.scope
        if isinstance(node, ast.ColumnRef):
            column = scope.column(node)
            labels = scope.labels_of(node.qualifier)
            if node.qualifier is None or scope.is_current_row(labels):
                if scope.in_define:
                    return current_row_reader(column)
                return lambda env, position=None: env.value(column, env.row)
            return self._column_at_last(column, labels, 0, False)
        if isinstance(node, ast.Classifier):
            if node.variable is None:
                return lambda env, position=None: _label_name(env, env.view.label_at(env.row), None)
            labels = scope.labels_of(node.variable)
            return lambda env, position=None: _label_name(
                env, env.view.label_at(env.view.last_in(labels, 0, False)), None
            )
        if isinstance(node, ast.MatchNumber):
            return lambda env, position=None: env.match_number
        if isinstance(node, ast.MatchStatus):
            return lambda env, position=None: env.match_status
        if isinstance(node, ast.Navigation):
            return self._navigation(node)
        if isinstance(node, ast.FunctionCall) and node.name in values.AGGREGATES:
            node = ast.Aggregate(node.span, node.name, node.args)
        if isinstance(node, ast.Aggregate):
            return operators.bounded(self._aggregate(node), node.name.lower(), scope.integer_type(node), node.span)
        if isinstance(node, ast.Star):
            raise CepSemanticError("'*' is only allowed in COUNT(*)", code="E0232", span=node.span)
        return None

    def _navigation(self, node: ast.Navigation) -> Closure:
        final = node.semantics == "FINAL"
        if final and self.scope.in_define:
            raise CepSemanticError("FINAL is not allowed in DEFINE", code="E0214", span=node.span)
        if node.kind in ("FIRST", "LAST"):
            n = constant_offset(node, 0)
            labels = referenced_labels(node.operand, self.scope)
            if isinstance(node.operand, ast.ColumnRef):
                self.at_row(node.operand)  # validates the reference
                column = self.scope.column(node.operand)
                if node.kind == "LAST":
                    return self._column_at_last(column, labels, n, final)
                find_first = self._first_row(labels, n, final)

                def first(env, position=None):
                    found = find_first(env.view)
                    return None if found is None else env.cols[column][found - env.base]

                return first
            if node.kind == "LAST":
                find = self._last_row(labels, n) if not final else (lambda view: view.last_in(labels, n, final))
            else:
                find = self._first_row(labels, n, final)
            inner = self.at_row(node.operand, final)
            return lambda env, position=None: inner(env, find(env.view))
        # PREV/NEXT: find the row the operand would read, then move by n physical rows. LAG/LEAD
        # (Snowflake) move the same way; in MEASURES they stay inside the match (``_within_match``).
        n = constant_offset(node, 1)
        step = -n if node.kind in ("PREV", "LAG") else n
        operand = node.operand
        if isinstance(operand, ast.Navigation) and operand.kind in ("FIRST", "LAST"):
            anchor = self._logical_position(operand)
            inner = self.at_row(operand.operand, operand.semantics == "FINAL")
        elif isinstance(operand, ast.Navigation):
            raise CepSemanticError(
                f"{operand.kind} cannot be nested inside {node.kind}", code="E0210", span=operand.span
            )
        else:
            labels = referenced_labels(operand, self.scope)
            inner = self.at_row(operand)
            if labels is None or self.scope.is_current_row(labels):
                anchor = lambda env, position=None: env.row  # noqa: E731
            else:
                anchor = lambda env, position=None: env.view.last_in(labels, 0, False)  # noqa: E731

        if node.kind in ("LAG", "LEAD") and not self.scope.in_define:
            return _within_match(anchor, inner, step)

        def physical(env, position=None):
            position = anchor(env)
            return None if position is None else inner(env, position + step)

        return physical

    def _logical_position(self, node: ast.Navigation) -> Closure:
        final = node.semantics == "FINAL"
        n = constant_offset(node, 0)
        labels = referenced_labels(node.operand, self.scope)
        if node.kind == "LAST":
            return lambda env, position=None: env.view.last_in(labels, n, final)
        return lambda env, position=None: env.view.first_in(labels, n, final)

    def _aggregate(self, node: ast.Aggregate) -> Closure:
        final = node.semantics == "FINAL"
        if final and self.scope.in_define:
            raise CepSemanticError("FINAL is not allowed in DEFINE", code="E0214", span=node.span)
        name, distinct = node.name, node.distinct
        args = list(node.args)
        if name == "COUNT" and not args:
            args = [ast.Star(node.span)]  # Trino's COUNT() is COUNT(*)
        if name == "COUNT" and len(args) == 1 and isinstance(args[0], ast.Star):
            labels = self.scope.labels_of(args[0].qualifier)
            count = lambda env, position=None: len(env.view.positions_in(labels, final))  # noqa: E731
            if node.distinct:
                return count
            return self._running_count(node, labels) or self._final_state("COUNT", labels, None, count)
        if not args:
            raise CepSemanticError(f"{name}() needs an argument", code="E0233", span=node.span)
        if name in values.PARAMETRIZED or node.order_by:
            return self._parametrized(node, name, distinct, final)
        # Trailing integer constants are parameters (the N of MIN(x, N)), not per-row arguments.
        extra: tuple = ()
        if name in ("MIN", "MAX", "MIN_BY", "MAX_BY"):
            arity = 1 if name in ("MIN", "MAX") else 2
            if len(args) == arity + 1 and isinstance(args[-1], ast.Literal) and args[-1].kind == "integer":
                extra = (args[-1].value,)
                args = args[:arity]
        labels = referenced_labels(ast.ArrayLiteral(node.span, tuple(args)), self.scope)
        per_row = [self.at_row(arg, final) for arg in args]
        fold = values.aggregate

        if all(isinstance(arg, ast.ColumnRef) for arg in args):
            # Plain columns (the usual case): the match's rows are buffered, so index them directly.
            names = [self.scope.column(arg) for arg in args]
            if len(names) == 1:  # one argument (most aggregates): no comprehension over the arguments
                column = names[0]

                def aggregate(env, position=None):
                    return fold(name, [env.view.values_in(env.cols[column], env.base, labels, final)], distinct, extra)
            else:

                def aggregate(env, position=None):
                    positions = env.view.positions_in(labels, final)
                    base, cols = env.base, env.cols
                    columns = [[column[p - base] for p in positions] for column in (cols[n] for n in names)]
                    return fold(name, columns, distinct, extra)
        else:

            def aggregate(env, position=None):
                positions = env.view.positions_in(labels, final)
                columns = [[arg(env, p) for p in positions] for arg in per_row]
                return fold(name, columns, distinct, extra)

        if self.running is not None and incremental(name, args, distinct, extra):
            column = self.scope.column(args[0]) if isinstance(args[0], ast.ColumnRef) else None
            return self._running(RunningAggregate(name, labels, per_row[0], column), args[0], aggregate)
        if incremental(name, args, distinct, extra):
            return self._final_state(name, labels, args[0], aggregate)
        return aggregate

    def _parametrized(self, node: ast.Aggregate, name: str, distinct: bool, final: bool) -> Closure:
        """An aggregate with constant parameters (LISTAGG's separator, the fraction of PERCENTILE_CONT and
        APPROX_PERCENTILE) and/or WITHIN GROUP (ORDER BY ...): the rows ranged over are sorted by the keys
        (stably: ties keep match order), the values folded by ``values.aggregate``."""
        keys = [key.expr for key in node.order_by]
        if name in ("PERCENTILE_CONT", "PERCENTILE_DISC"):
            folded, constants = keys[:1], list(node.args)  # PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)
        else:
            folded, constants = list(node.args[:1]), list(node.args[1:])
        labels = referenced_labels(ast.ArrayLiteral(node.span, tuple(folded + keys)), self.scope)
        per_row = [self.at_row(value, final) for value in folded]
        by = [(self.at_row(key.expr, final), key.descending, key.nulls_first) for key in node.order_by]
        parameters = [self.compile(constant) for constant in constants]
        fold = values.aggregate

        def aggregate(env, position=None):
            positions = env.view.positions_in(labels, final)
            for key, descending, nulls_first in reversed(by):
                positions = values.sorted_by([key(env, p) for p in positions], positions, descending, nulls_first)
            columns = [[value(env, p) for p in positions] for value in per_row]
            return fold(name, columns, distinct, tuple(parameter(env) for parameter in parameters))

        return aggregate

    def _final_state(self, name: str, labels, argument, full_fold: Closure) -> Closure:
        """A MEASURES aggregate that DEFINE carries too (same fold, variables and column): at the last
        row of a match (ONE ROW PER MATCH) it is the carried state after that row, which the output
        passes as ``MatchView.final_states``; elsewhere, or if that state broke, the full fold."""
        if self.final_states is None or not (argument is None or isinstance(argument, ast.ColumnRef)):
            return full_fold
        slot = self.final_states.find((name, labels, None if argument is None else self.scope.column(argument)))
        if slot is None:
            return full_fold
        result = result_of(name)

        def final_state(env, position=None):
            states = env.view.final_states
            if states is not None:
                state = states[slot]
                if state is not BROKEN:
                    return state if result is None else result(state)
            return full_fold(env, position)

        return final_state

    def _running_count(self, node: ast.Aggregate, labels) -> Closure | None:
        if self.running is None or node.distinct:
            return None
        return self._running(RunningAggregate("COUNT", labels, None), None, None)

    def _carried_slot(self, labels, n: int) -> int | None:
        """In DEFINE, the position of the last row (n = 0) of a variable set is carried with the thread
        (running.py) rather than found by walking the history back to it: its slot, or None (walk)."""
        if self.running is None or n != 0 or labels is None:
            return None
        return self.running.slot(last_row(labels), (LAST_ROW, labels))

    def _first_row(self, labels, n: int, final: bool) -> Callable:
        """view -> the position of the n-th first row labelled in ``labels``. In DEFINE, FIRST of a
        variable is carried with the thread (running.py) and FIRST of the match is its start: no walk
        over the history, whose length a partial match that stays open would pay on every row."""
        if self.running is None or final or (labels is not None and n != 0):
            return lambda view: view.first_in(labels, n, final)
        if labels is None:
            return lambda view: view.start + n if view.start + n <= view.row else None
        slot = self.running.slot(first_row(labels), (FIRST_ROW, labels))

        def carried(view):
            chain = view.chain
            found = None if chain is None else chain[2][slot]
            if found is None and view.current in labels:
                return view.row
            return found

        return carried

    def _last_row(self, labels, n: int) -> Callable:
        """view -> the position of the n-th last row labelled in ``labels``, RUNNING (None if none)."""
        slot = self._carried_slot(labels, n)
        if slot is None:
            return lambda view: view.last_in(labels, n, False)

        def carried(view):
            if view.current in labels:
                return view.row
            chain = view.chain
            return None if chain is None else chain[2][slot]

        return carried

    def _running(self, aggregate: RunningAggregate, argument, full_fold: Closure | None) -> Closure:
        """A DEFINE aggregate read from the thread's running state plus the row under test."""
        same_as = None
        if argument is None or isinstance(argument, ast.ColumnRef):
            column = None if argument is None else self.scope.column(argument)
            same_as = (aggregate.name, aggregate.labels, column)
        slot = self.running.slot(aggregate, same_as)
        labels, argument_at, step, result = aggregate.labels, aggregate.argument, aggregate.step, aggregate.result
        initial, column = aggregate.initial, aggregate.column

        def running(env, position=None):
            view = env.view
            chain = view.chain
            state = initial if chain is None else chain[2][slot]
            if (labels is None or view.current in labels) and state is not BROKEN:
                try:
                    if column is not None:  # the row under test is buffered: index it
                        value = env.cols[column][view.row - env.base]
                    else:
                        value = 1 if argument_at is None else argument_at(env, env.row)
                    state = step(state, value)
                except Exception:  # noqa: BLE001 - the full fold below raises it as it always did
                    state = BROKEN
            if state is BROKEN:
                return full_fold(env)
            return state if result is None else result(state)

        return running

    def _column_at_last(self, column: str, labels, n: int, final: bool) -> Closure:
        """``column`` at the n-th last row labelled in ``labels`` (None when there is none).

        A row of the (partial) match is always buffered, so it is indexed directly, without
        ``Env.value``'s range checks; the row is found inline (``_last_row``'s two cases), as these are
        most of the history reads of a DEFINE condition."""
        if 0 < n < MAX_CARRIED_OFFSET and not final and self.running is not None and labels is not None:
            return self._column_at_nth_last(column, labels, n)
        slot = None if final else self._carried_slot(labels, n)
        if slot is None:

            def walked(env, position=None):
                found = env.view.last_in(labels, n, final)
                return None if found is None else env.cols[column][found - env.base]

            return walked

        def carried(env, position=None):
            view = env.view
            if view.current in labels:
                return env.cols[column][view.row - env.base]
            chain = view.chain
            found = None if chain is None else chain[2][slot]
            return None if found is None else env.cols[column][found - env.base]

        return carried

    def _column_at_nth_last(self, column: str, labels, n: int) -> Closure:
        """In DEFINE, ``LAST(v.column, n)`` for 0 < n < MAX_CARRIED_OFFSET, from the positions of the
        last n + 1 history rows labelled in ``labels`` that the thread carries (running.py)."""
        slot = self.running.slot(last_rows(labels, n + 1), ("LAST_ROWS", labels, n + 1))
        # The row under test is labelled with the variable this DEFINE defines (is_current_row): when
        # that is in ``labels`` it is the last such row, and the n-th last is the (n-1)-th of the history.
        index = n - 1 if self.scope.is_current_row(labels) else n

        def carried_nth(env, position=None):
            chain = env.view.chain
            if chain is None:  # no history row: only the row under test, which is never the n-th last
                return None
            positions = chain[2][slot]
            return env.cols[column][positions[index] - env.base] if index < len(positions) else None

        return carried_nth


# LAST(v.x, n) in DEFINE with n below this is read from positions carried with the thread; a larger
# n walks the history back (each carried position costs a little on every row labelled v).
MAX_CARRIED_OFFSET = 8


def _within_match(anchor, inner, step: int) -> Closure:
    """Snowflake's LAG/LEAD in MEASURES: window functions over the match's rows, so the row ``step`` away
    must be in the match (LAG is NULL on its first row, LEAD on its last), and LEAD sees the whole match
    even under RUNNING semantics (Snowflake's printed output shows both)."""

    def in_match(env, position=None):
        found = anchor(env)
        if found is None:
            return None
        view = env.view
        target = found + step
        if not view.start <= target < view.start + len(view.labels):
            return None
        return inner(env, target)

    return in_match


def _row_reader(column: str) -> RowClosure:
    """``column`` at a given position, None outside the partition's rows (``Env.value``, inlined)."""

    def read(env, position):
        if position is None or position < 0 or position >= env.total:
            return None
        return env.cols[column][position - env.base]

    return read


def current_row_reader(column: str) -> Closure:
    """In DEFINE, ``column`` at the row under test (always buffered, so indexed directly).

    The closure is tagged with the column (``.column``): an operator over it reads the value inline
    instead of calling it (``_comparison``, ``_arithmetic``).
    """

    def current(env, position=None):
        return env.cols[column][env.row - env.base]

    current.column = column
    return current


def _label_name(env: Env, label, _unused):
    return None if label is None else env.label_names[label]


def _describe(node) -> str:
    if isinstance(node, ast.Navigation):
        return f"{node.kind}()"
    return f"{node.name}()"
