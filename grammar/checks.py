"""Semantic checks: the query parses, but does it mean something?

``check(statement, schema=...)`` walks the AST once per clause, collects every problem as a
``Diagnostic`` and raises them together as one ``CepSemanticError`` sorted by position (like
miniwdl's multi_context). Codes: E02xx for meaning, E03xx for the limits of grammar/limits.py.
The table of codes is in docs/language.md; codes already used by the matcher for the same problem
(E0206, E0210, E0212, E0213, E0214, E0220, E0221, E0230, E0232, E0233, E0240) are reused here.

This module also owns the function catalogue (which names are aggregates, which scalar functions
exist). The tree walks are ``ast.walk`` and ``ast.children``.

The walks are recursive; the parser bounds the AST depth (limits.MAX_NESTING_DEPTH) first.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from cep.grammar import ast, limits
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import NO_SPAN, CepSemanticError, Diagnostic, Span
from cep.grammar.functions import (
    AGGREGATE_FUNCTIONS,
    AGGREGATES,
    DATETIME_PATTERN_ARGUMENT,
    NEEDS_ORDER,
    ORDERED_AGGREGATES,
    SCALAR_FUNCTIONS,
    SCALARS,
    PatternError,
    Signature,
    compile_regex,
    datetime_pattern,
    like_segments,
    suggest,
)
from cep.grammar.suggestions import column_hint, did_you_mean, names_hint
from cep.grammar.type_names import (
    ARITHMETIC_FAMILIES,
    CAST_TYPES,
    LITERAL_FAMILY,
    TYPE_WORDS,
    decimal_problem,
    family_of_type,
    is_floating,
    normalize_type,
)

__all__ = [
    "AGGREGATE_FUNCTIONS",
    "SCALAR_FUNCTIONS",
    "check",
    "normalize_type",
    "decimal_problem",
    "family_of_type",
    "pattern_variables",
]

# ----------------------------------------------------------------------------------- catalogue
# The function catalogue is grammar/functions.py and the type names grammar/type_names.py; the names
# are re-exported here for the callers that have always imported them from the checker.


def pattern_variables(pattern: ast.Pattern) -> dict[str, ast.Identifier]:
    """Pattern variable key -> its first occurrence, in order of appearance (absences included)."""
    found: dict[str, ast.Identifier] = {}
    for node in ast.walk(pattern):
        if isinstance(node, (ast.PatternVar, ast.Absence)):
            name = node.name if isinstance(node, ast.PatternVar) else node.variable
            found.setdefault(name.key, name)
    return found


# ------------------------------------------------------------------------------------- checking


class _Scope(NamedTuple):
    """Where an expression is: the clause, and the innermost navigation or aggregate around it."""

    clause: str  # DEFINE, MEASURES, PARTITION BY, ORDER BY, SELECT, WHERE, outer ORDER BY
    enclosing: object = None

    @property
    def inside_match(self) -> bool:
        return self.clause in ("DEFINE", "MEASURES")


def check(
    statement: ast.Statement,
    *,
    schema: dict[str, str] | None = None,
    source: str | None = None,
    filename: str | None = None,
) -> None:
    """Raise one CepSemanticError listing every problem of ``statement`` (sorted by position)."""
    problems = _Checker(statement, schema).run()
    if problems:
        problems.sort(key=lambda d: (d.span.line, d.span.column, d.code))
        first = problems[0]
        raise CepSemanticError(
            first.message,
            code=first.code,
            span=first.span,
            hint=first.hint,
            source=source,
            filename=filename,
            errors=problems,
        )


class _Checker:
    def __init__(self, statement: ast.Statement, schema: dict[str, str] | None) -> None:
        self.statement = statement
        self.match = statement.match
        self.schema = schema
        self.schema_columns = ColumnNames(schema) if schema else None
        self.problems: list[Diagnostic] = []
        self.variables = pattern_variables(self.match.pattern)
        self.subsets = {s.name.key: s for s in self.match.subsets}
        self.has_absence = any(isinstance(n, ast.Absence) for n in ast.walk(self.match.pattern))

    def report(self, code: str, message: str, span: Span = NO_SPAN, hint: str | None = None) -> None:
        self.problems.append(Diagnostic(code, message, span, hint))

    def run(self) -> list[Diagnostic]:
        self._check_pattern_limits()
        self._check_absences()
        self._check_subsets()
        self._check_defines()
        self._check_measures()
        self._check_skip_and_options()
        self._check_partition_and_order()
        self._check_outer_query()
        return self.problems

    # ------------------------------------------------------------------------------ pattern

    def _check_pattern_limits(self) -> None:
        pattern = self.match.pattern
        if len(self.variables) > limits.MAX_PATTERN_VARIABLES:
            self.report(
                "E0305",
                f"the pattern has {len(self.variables)} variables; the limit is {limits.MAX_PATTERN_VARIABLES}",
                pattern.span,
            )
        for node in ast.walk(pattern):
            if isinstance(node, ast.Quantified) and max(node.min, node.max or 0) > limits.MAX_QUANTIFIER_BOUND:
                self.report(
                    "E0303",
                    f"quantifier {node.text or '{…}'} exceeds the largest allowed bound, {limits.MAX_QUANTIFIER_BOUND}",
                    node.span,
                    "use + or * for long runs of rows",
                )
            elif isinstance(node, ast.Permute) and len(node.items) > limits.MAX_PERMUTE_ITEMS:
                self.report(
                    "E0304",
                    f"PERMUTE has {len(node.items)} items; the limit is {limits.MAX_PERMUTE_ITEMS} "
                    f"(it expands to every order: {len(node.items)}! alternatives)",
                    node.span,
                )
        if not any(p.code in ("E0303", "E0304") for p in self.problems):
            size = ast.expanded_size(pattern, limits.MAX_EXPANDED_PATTERN_TERMS + 1)
            if size > limits.MAX_EXPANDED_PATTERN_TERMS:
                self.report(
                    "E0306",
                    f"the pattern expands to more than {limits.MAX_EXPANDED_PATTERN_TERMS} terms "
                    "once quantifier bounds and PERMUTE are unrolled",
                    pattern.span,
                )

    def _check_absences(self) -> None:
        """`!B` (our extension) must be a term of the top-level sequence, neither first nor, unless
        WITHIN bounds the wait, last: it means "no B row until the next term (or the deadline)"."""
        pattern = self.match.pattern
        terms = pattern.items if isinstance(pattern, ast.Concat) else (pattern,)
        top_level = {id(term) for term in terms}
        for node in ast.walk(pattern):
            if not isinstance(node, ast.Absence):
                continue
            name = node.variable.name
            if id(node) not in top_level:
                self.report(
                    "E0226",
                    f"absence !{name} cannot be inside a quantifier, alternation, PERMUTE or exclusion",
                    node.span,
                    "write it as a term of the main sequence: A !B C",
                )
            elif node is terms[0]:
                self.report(
                    "E0224",
                    f"absence !{name} cannot start the pattern",
                    node.span,
                    "an absence needs a row before it to start waiting from",
                )
            elif node is terms[-1] and self.match.within is None:
                self.report(
                    "E0225",
                    f"absence !{name} at the end of the pattern needs WITHIN",
                    node.span,
                    "add WITHIN INTERVAL '...' to say how long B must stay absent",
                )

    def _check_subsets(self) -> None:
        seen: set[str] = set()
        for subset in self.match.subsets:
            key = subset.name.key
            if key in self.variables:
                self.report(
                    "E0205", f"subset name '{subset.name.name}' is already a pattern variable", subset.name.span
                )
            elif key in seen:
                self.report("E0205", f"subset '{subset.name.name}' is defined twice", subset.name.span)
            seen.add(key)
            for variable in subset.variables:
                if variable.key not in self.variables:
                    self.report(
                        "E0204",
                        f"subset '{subset.name.name}' names '{variable.name}', which is not a pattern variable",
                        variable.span,
                        names_hint(variable.name, [v.name for v in self.variables.values()], "the pattern's variables"),
                    )

    def _check_defines(self) -> None:
        seen: set[str] = set()
        for define in self.match.defines:
            key = define.variable.key
            if key not in self.variables:
                self.report(
                    "E0202",
                    f"DEFINE gives a condition for '{define.variable.name}', which does not appear in PATTERN",
                    define.variable.span,
                    names_hint(define.variable.name, self._names(), self._listed_as()),
                )
            elif key in seen:
                self.report(
                    "E0203", f"pattern variable '{define.variable.name}' is defined twice", define.variable.span
                )
            seen.add(key)
            # A condition for an unknown variable may name it: that is already reported (E0202).
            self._expression(define.condition, _Scope("DEFINE"), also_known={key})

    def _check_measures(self) -> None:
        seen: set[str] = set()
        for measure in self.match.measures:
            if measure.name.key in seen:
                self.report("E0237", f"measure '{measure.name.name}' is defined twice", measure.name.span)
            seen.add(measure.name.key)
            self._expression(measure.expr, _Scope("MEASURES"))

    def _check_skip_and_options(self) -> None:
        match = self.match
        skip = match.after_match
        if skip is not None and skip.variable is not None and skip.variable.key not in self._names_by_key():
            self.report(
                "E0223",
                f"AFTER MATCH SKIP TO '{skip.variable.name}': no such pattern variable or subset",
                skip.variable.span,
                names_hint(skip.variable.name, self._names(), self._listed_as()),
            )
        if match.rows_per_match.mode == "ALL_WITH_UNMATCHED":
            exclusion = next((n for n in ast.walk(match.pattern) if isinstance(n, ast.Exclusion)), None)
            if exclusion is not None:
                self.report(
                    "E0243",
                    "a pattern with an exclusion {- ... -} cannot be used with ALL ROWS PER MATCH "
                    "WITH UNMATCHED ROWS (SQL:2016 forbids it: an excluded row would be neither a match "
                    "row nor an unmatched row)",
                    exclusion.span,
                    "drop the exclusion, or use ALL ROWS PER MATCH without WITH UNMATCHED ROWS",
                )
        if match.rows_per_match.show_timeout and match.within is None:
            self.report(
                "E0227",
                "SHOW TIMEOUT MATCHES needs a WITHIN clause",
                match.rows_per_match.span,
                "a match can only time out when WITHIN gives it a deadline",
            )
        if match.within is not None:
            if not _is_positive_interval(match.within):
                self.report("E0238", "the WITHIN interval must be longer than zero", match.within.span)
            if not match.order_by:
                self.report("E0240", "WITHIN needs an ORDER BY column holding the event time", match.within.span)

    def _check_partition_and_order(self) -> None:
        for column in self.match.partition_by:
            self._input_column(column, "PARTITION BY", code="E0201")
        for index, key in enumerate(self.match.order_by):
            if isinstance(key.expr, ast.ColumnRef):
                type_name = self._input_column(key.expr, "ORDER BY", code="E0201")
                if type_name is not None and family_of_type(type_name) not in ("number", "string", "time", "boolean"):
                    self.report(
                        "E0236",
                        f"cannot order by '{key.expr.column.name}' of type {type_name}",
                        key.expr.span,
                        "order by a time, number or text column",
                    )
                elif (
                    index == 0
                    and self.match.within is not None
                    and family_of_type(type_name or "") in ("string", "boolean")
                ):
                    # WITHIN subtracts event times: text would be ordered, but never counted in seconds
                    self.report(
                        "E0240",
                        f"WITHIN needs an ORDER BY column holding the event time: "
                        f"'{key.expr.column.name}' is {type_name}",
                        key.expr.span,
                        "order by a TIMESTAMP (or a number of time units); a file whose time column holds a "
                        "value that is not a time reads it as text",
                    )
            elif not isinstance(key.expr, ast.ProcTime):
                self._expression(key.expr, _Scope("ORDER BY"))

    def _input_column(self, column: ast.ColumnRef, clause: str, code: str) -> str | None:
        if column.qualifier is not None:
            self.report("E0239", f"{clause} columns are input columns and take no qualifier", column.qualifier.span)
            return None
        if self.schema is None:
            return None
        found, type_name = self.schema_type(column.column)
        if not found:
            self.report(
                code,
                f"{clause} column '{column.column.name}' is not in the input",
                column.span,
                column_hint(column.column.name, self.schema),
            )
        return type_name

    def schema_type(self, ident: ast.Identifier, *, report: bool = True) -> tuple[bool, str | None]:
        """(whether the schema has the column ``ident`` names, its type). A name that two columns differing
        only in case both match is reported (E0220) and taken as found, with no type."""
        if not self.schema_columns:
            return False, None
        try:
            name = self.schema_columns.lookup(ident)
        except CepSemanticError as ambiguous:
            if report:
                self.report(ambiguous.code, ambiguous.message, ident.span, ambiguous.hint)
            return True, None
        return (False, None) if name is None else (True, self.schema[name])

    # ------------------------------------------------------------------------------ outer query

    def _check_outer_query(self) -> None:
        statement = self.statement
        outputs = self._output_columns()
        for item in statement.select:
            self._outer_expression(item.expr, "SELECT", outputs)
        if statement.where is not None:
            self._outer_expression(statement.where, "WHERE", outputs)
        aliases = {item.alias.key: item.alias for item in statement.select if item.alias is not None}
        order_outputs = None if outputs is None else {**outputs, **{k: None for k in aliases}}
        for key in statement.order_by:
            self._outer_expression(key.expr, "outer ORDER BY", order_outputs)

    def _output_columns(self) -> dict[str, str | None] | None:
        """Column key -> type of what MATCH_RECOGNIZE outputs, or None when it cannot be known
        (ALL ROWS PER MATCH outputs every input column, unknown without a schema)."""
        match = self.match
        outputs: dict[str, str | None] = {}
        if match.rows_per_match.mode != "ONE":
            if self.schema is None:
                return None
            outputs.update({name.upper(): type_name for name, type_name in self.schema.items()})
        for column in match.partition_by:
            outputs[column.column.key] = self.schema_type(column.column, report=False)[1]
        for measure in match.measures:
            outputs[measure.name.key] = None
        return outputs

    def _outer_expression(self, expr: ast.Expr, clause: str, outputs) -> None:
        alias = self.statement.alias
        if isinstance(expr, ast.Star) and clause == "SELECT":
            if expr.qualifier is not None and (alias is None or expr.qualifier.key != alias.key):
                self.report(
                    "E0207",
                    f"'{expr.qualifier.name}' is not known in SELECT; qualify columns with the MATCH_RECOGNIZE alias",
                    expr.qualifier.span,
                )
            return
        for node in ast.walk(expr):
            if isinstance(node, (ast.Navigation, ast.Aggregate, ast.Classifier, ast.MatchNumber, ast.MatchStatus)):
                self.report(
                    "E0208",
                    f"{_describe(node)} can only be used inside MATCH_RECOGNIZE, not in {clause}",
                    node.span,
                    "compute it as a measure and select the measure",
                )
            elif isinstance(node, (ast.ColumnRef, ast.Star)) and node.qualifier is not None:
                if alias is None or node.qualifier.key != alias.key:
                    expected = (
                        f"the MATCH_RECOGNIZE alias '{alias.name}'"
                        if alias
                        else "an alias: add AS m after MATCH_RECOGNIZE (...)"
                    )
                    self.report(
                        "E0207",
                        f"'{node.qualifier.name}' is not known in {clause}; qualify columns with {expected}",
                        node.qualifier.span,
                    )
                    continue
            if (
                isinstance(node, ast.ColumnRef)
                and outputs is not None
                and node.column.key.upper() not in _upper(outputs)
            ):
                self.report(
                    "E0221",
                    f"'{node.column.name}' is not an output column of MATCH_RECOGNIZE",
                    node.span,
                    did_you_mean(node.column.name, [k.lower() for k in outputs]),
                )
        self._expression(expr, _Scope(clause), outer=True)

    # ------------------------------------------------------------------------------ expressions

    def _expression(self, expr: ast.Expr, scope: _Scope, outer: bool = False, also_known=frozenset()) -> str | None:
        """Check one expression tree; return its type family (None when unknown)."""
        return _ExpressionChecker(self, outer, self._names_by_key() | set(also_known)).visit(expr, scope)

    def _names(self) -> list[str]:
        return [i.name for i in self.variables.values()] + [s.name.name for s in self.match.subsets]

    def _listed_as(self) -> str:
        """How a hint introduces ``_names()``."""
        return "the pattern's variables and subsets" if self.match.subsets else "the pattern's variables"

    def _names_by_key(self) -> set[str]:
        return set(self.variables) | set(self.subsets)


def _upper(outputs: dict) -> set[str]:
    return {key.upper() for key in outputs}


def _describe(node) -> str:
    if isinstance(node, ast.Navigation):
        return f"{node.kind}()"
    if isinstance(node, (ast.Aggregate, ast.FunctionCall)):
        return f"{node.name}()"
    return {
        ast.Classifier: "CLASSIFIER()",
        ast.MatchNumber: "MATCH_NUMBER()",
        ast.MatchStatus: "MATCH_STATUS()",
        ast.ProcTime: "PROCTIME()",
    }.get(type(node), type(node).__name__)


class _ExpressionChecker:
    """One recursive pass over an expression: structure rules and type families together."""

    def __init__(self, checker: _Checker, outer: bool, known_variables: set[str]) -> None:
        self.checker = checker
        self.outer = outer
        self.known = known_variables  # pattern variables and subsets, by key
        self.report = checker.report

    def visit(self, node, scope: _Scope) -> str | None:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node, scope)
        for child in ast.children(node):  # WhenClause and other plain containers
            if ast.is_expression(child):
                self.visit(child, scope)
        return None

    def visit_Literal(self, node: ast.Literal, scope: _Scope) -> str | None:
        return LITERAL_FAMILY.get(node.kind)

    def visit_IntervalLiteral(self, node, scope) -> str:
        return "interval"

    def visit_ColumnRef(self, node: ast.ColumnRef, scope: _Scope) -> str | None:
        checker = self.checker
        if self.outer or not scope.inside_match:
            return None  # outer references were checked against the output columns
        if node.qualifier is not None and node.qualifier.key not in self.known:
            self._unknown_variable(node.qualifier, scope)
        if checker.schema is None:
            return None
        found, type_name = checker.schema_type(node.column)
        if not found:
            self.report(
                "E0220",
                f"unknown column '{node.column.name}'",
                node.column.span,
                column_hint(node.column.name, checker.schema, quoted=node.column.quoted),
            )
            return None
        return None if type_name is None else family_of_type(type_name)

    def _unknown_variable(self, name: ast.Identifier, scope: _Scope) -> None:
        self.report(
            "E0206",
            f"pattern variable '{name.name}' is used in {scope.clause} but never appears in PATTERN",
            name.span,
            names_hint(name.name, self.checker._names(), self.checker._listed_as()),
        )

    def visit_Star(self, node: ast.Star, scope: _Scope) -> None:
        self.report("E0232", "'*' is only allowed in COUNT(*) and SELECT *", node.span)

    def visit_Unary(self, node: ast.Unary, scope: _Scope) -> str | None:
        family = self.visit(node.operand, scope)
        return "boolean" if node.op == "NOT" else family

    def visit_Binary(self, node: ast.Binary, scope: _Scope) -> str | None:
        left, right = self.visit(node.left, scope), self.visit(node.right, scope)
        if node.op in ("AND", "OR"):
            return "boolean"
        if node.op == "||":
            return "array" if left == "array" else "string"
        if node.op in ("=", "<>", "<", "<=", ">", ">=", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"):
            self._comparable(node, node.left, left, node.right, right)
            return "boolean"
        return self._arithmetic(node, left, right)

    def _comparable(self, node, left_expr, left, right_expr, right) -> None:
        if left is None or right is None or left == right:
            return
        text = next((e for e in (left_expr, right_expr) if isinstance(e, ast.Literal) and e.kind == "string"), None)
        if {left, right} == {"string", "time"} and text is not None:
            self.report(
                "E0234", f"cannot compare a time with the text '{text.value}'", text.span, time_literal_hint(text.value)
            )
            return
        self.report(
            "E0234",
            f"cannot compare {TYPE_WORDS.get(left, left)} with {TYPE_WORDS.get(right, right)}",
            node.span,
            "CAST one side to the other's type",
        )

    def _arithmetic(self, node: ast.Binary, left: str | None, right: str | None) -> str | None:
        if left is None or right is None:
            return left if left == right else None
        operators, result = ARITHMETIC_FAMILIES.get((left, right), ((), None))
        if node.op == "DIV" and any(self._floating(side) for side in (node.left, node.right)):
            self.report(
                "E0235",
                "cannot apply 'DIV' to a DOUBLE: DIV takes integers and DECIMALs, as in Spark",
                node.span,
                "write CAST(a / b AS BIGINT) (truncated toward zero, as DIV is), or CAST the DOUBLE to a DECIMAL",
            )
            return None
        if node.op not in operators:
            self.report(
                "E0235",
                f"cannot apply '{node.op}' to {TYPE_WORDS.get(left, left)} and {TYPE_WORDS.get(right, right)}",
                node.span,
            )
            return None
        return result

    def _floating(self, node) -> bool:
        def column_type(ref: ast.ColumnRef) -> str | None:
            return None if self.outer else self.checker.schema_type(ref.column, report=False)[1]

        return is_floating(node, column_type)

    def visit_IsNull(self, node: ast.IsNull, scope: _Scope) -> str:
        self.visit(node.operand, scope)
        return "boolean"

    def visit_Between(self, node: ast.Between, scope: _Scope) -> str:
        operand = self.visit(node.operand, scope)
        for bound in (node.low, node.high):
            self._comparable(node, node.operand, operand, bound, self.visit(bound, scope))
        return "boolean"

    def visit_InList(self, node: ast.InList, scope: _Scope) -> str:
        operand = self.visit(node.operand, scope)
        for item in node.items:
            self._comparable(item, node.operand, operand, item, self.visit(item, scope))
        return "boolean"

    def visit_Like(self, node: ast.Like, scope: _Scope) -> str:
        for part in (node.operand, node.pattern, node.escape):
            if part is not None:
                self.visit(part, scope)
        escape = node.escape.value if isinstance(node.escape, ast.Literal) and node.escape.kind == "string" else None
        if escape is not None and len(escape) != 1:
            self.report("E0245", f"the ESCAPE character must be one character, not '{escape}'", node.escape.span)
        elif (
            isinstance(node.pattern, ast.Literal)
            and node.pattern.kind == "string"
            and (node.escape is None or escape is not None)
        ):
            try:
                like_segments(node.pattern.value, escape)
            except PatternError as error:
                self.report("E0245", str(error), node.pattern.span, "escape %, _ or the escape character itself")
        return "boolean"

    def visit_Case(self, node: ast.Case, scope: _Scope) -> str | None:
        if node.operand is not None:
            self.visit(node.operand, scope)
        results = []
        for when in node.whens:
            self.visit(when.condition, scope)
            results.append(self.visit(when.result, scope))
        if node.default is not None:
            results.append(self.visit(node.default, scope))
        return next((r for r in results if r is not None), None)

    def visit_Cast(self, node: ast.Cast, scope: _Scope) -> str | None:
        self.visit(node.operand, scope)
        if node.type.name not in CAST_TYPES:
            self.report(
                "E0242",
                f"unknown type '{node.type.name}' in CAST",
                node.type.span,
                did_you_mean(node.type.name, CAST_TYPES),
            )
            return None
        return family_of_type(node.type.name)

    def visit_ArrayLiteral(self, node: ast.ArrayLiteral, scope: _Scope) -> str:
        for item in node.items:
            self.visit(item, scope)
        return "array"

    def visit_FunctionCall(self, node: ast.FunctionCall, scope: _Scope) -> str | None:
        signature = SCALARS.get(node.name)
        if node.semantics is not None:
            self.report(
                "E0222", f"{node.semantics} applies only to FIRST, LAST and aggregates, not to {node.name}()", node.span
            )
        elif signature is None:
            self.report("E0230", f"unknown function {node.name}()", node.span, suggest(node.name))
        else:
            self._arity(node, signature)
        families = [self.visit(arg, scope) for arg in node.args]
        self._literal_pattern(node)
        return _result_family(signature, families)

    def _literal_pattern(self, node: ast.FunctionCall) -> None:
        """A regular expression or datetime pattern written as text is checked now, with its place."""
        if node.name in _REGEX_FUNCTIONS:
            index, validate, code, hint = 1, compile_regex, "E0246", _REGEX_HINT
        elif node.name in DATETIME_PATTERN_ARGUMENT:
            index, validate, code = DATETIME_PATTERN_ARGUMENT[node.name], datetime_pattern, "E0247"
            hint = _DATETIME_HINT
        else:
            return
        pattern = node.args[index] if len(node.args) > index else None
        if isinstance(pattern, ast.Literal) and pattern.kind == "string":
            try:
                validate(pattern.value)
            except PatternError as error:
                self.report(code, str(error), pattern.span, hint)

    def _arity(self, node, signature: Signature) -> None:
        count = len(node.args)
        if count < signature.least or (signature.most is not None and count > signature.most):
            wanted = (
                f"{signature.least}"
                if signature.least == signature.most
                else f"at least {signature.least}"
                if signature.most is None
                else f"{signature.least} to {signature.most}"
            )
            self.report(
                "E0111", f"{node.name}() takes {wanted} argument{'s' if wanted != '1' else ''}, not {count}", node.span
            )

    def visit_Classifier(self, node: ast.Classifier, scope: _Scope) -> str:
        if node.variable is not None and not self.outer and node.variable.key not in self.known:
            self._unknown_variable(node.variable, scope)
        return "string"

    def visit_MatchNumber(self, node, scope: _Scope) -> str:
        # Allowed in DEFINE: Trino's tests use it there (the number the match will get).
        return "number"

    def visit_MatchStatus(self, node, scope: _Scope) -> str:
        match = self.checker.match
        if scope.clause == "DEFINE":
            self.report("E0229", "MATCH_STATUS() cannot be used in DEFINE", node.span)
        elif not (match.rows_per_match.show_timeout or self.checker.has_absence) and not self.outer:
            self.report(
                "E0228",
                "MATCH_STATUS() needs ONE ROW PER MATCH SHOW TIMEOUT MATCHES or an absence (!B) in the pattern",
                node.span,
                "without them every match has status 'MATCHED'",
            )
        return "string"

    def visit_ProcTime(self, node, scope: _Scope) -> None:
        self.report("E0231", "PROCTIME() is only allowed as an ORDER BY key of MATCH_RECOGNIZE", node.span)
        return None  # no type: one error is enough

    # ------------------------------------------------------------------------ navigation

    def visit_Navigation(self, node: ast.Navigation, scope: _Scope) -> str | None:
        if self.outer:
            return None  # already reported as E0208
        logical = node.kind in ("FIRST", "LAST")
        if node.semantics is not None and not logical:
            self.report(
                "E0222", f"{node.semantics} applies only to FIRST, LAST and aggregates, not to {node.kind}()", node.span
            )
        if node.semantics == "FINAL" and scope.clause == "DEFINE":
            self.report(
                "E0214",
                "FINAL cannot be used in DEFINE",
                node.span,
                "DEFINE conditions only see the rows matched so far",
            )
        self._check_offset(node)
        self._check_nesting(node, scope.enclosing)
        self._single_variable(node, node.operand, f"{node.kind}()")
        return self.visit(node.operand, scope._replace(enclosing=node))

    def _check_offset(self, node: ast.Navigation) -> None:
        offset = node.offset
        if offset is not None and not (isinstance(offset, ast.Literal) and offset.kind == "integer"):
            self.report(
                "E0213",
                f"the offset of {node.kind}() must be a non-negative integer constant",
                offset.span,
                "write e.g. PREV(A.price, 2)",
            )

    def _check_nesting(self, node, enclosing) -> None:
        if enclosing is None:
            return
        if isinstance(node, ast.Aggregate):
            if isinstance(enclosing, ast.Aggregate):
                self.report("E0215", f"aggregates cannot be nested: {node.name}() inside {enclosing.name}()", node.span)
            else:
                self.report("E0211", f"an aggregate cannot be used inside {enclosing.kind}()", node.span)
            return
        if isinstance(enclosing, ast.Aggregate):
            self.report(
                "E0218",
                f"{node.kind}() cannot be used inside the aggregate {enclosing.name}()",
                node.span,
                "aggregate the column directly, e.g. SUM(A.price)",
            )
            return
        inner_logical, outer_logical = node.kind in ("FIRST", "LAST"), enclosing.kind in ("FIRST", "LAST")
        if inner_logical == outer_logical:
            self.report("E0210", f"{node.kind}() cannot be nested inside {enclosing.kind}()", node.span)
        elif outer_logical:
            self.report(
                "E0216",
                f"{node.kind}() cannot be nested inside {enclosing.kind}()",
                node.span,
                f"write it the other way round: {node.kind}({enclosing.kind}(...))",
            )
        elif enclosing.operand is not node:
            self.report(
                "E0217",
                f"{node.kind}() inside {enclosing.kind}() must be its whole first argument",
                node.span,
                f"write e.g. {enclosing.kind}({node.kind}(A.price), 1)",
            )

    def _single_variable(self, node, arguments, what: str) -> None:
        qualifiers: dict[str, ast.Identifier] = {}
        for argument in arguments if isinstance(arguments, tuple) else (arguments,):
            for inner in ast.walk(argument):
                name = inner.variable if isinstance(inner, ast.Classifier) else getattr(inner, "qualifier", None)
                if isinstance(inner, (ast.ColumnRef, ast.Star, ast.Classifier)) and name is not None:
                    qualifiers.setdefault(name.key, name)
        if len(qualifiers) > 1:
            names = ", ".join(q.name for q in qualifiers.values())
            self.report(
                "E0212",
                f"the argument of {what} must refer to one pattern variable, but it refers to {names}",
                node.span,
            )

    def visit_Aggregate(self, node: ast.Aggregate, scope: _Scope) -> str | None:
        if self.outer:
            return None
        if node.semantics == "FINAL" and scope.clause == "DEFINE":
            self.report(
                "E0214",
                "FINAL cannot be used in DEFINE",
                node.span,
                "DEFINE conditions only see the rows matched so far",
            )
        if not node.args:
            self.report("E0233", f"{node.name}() needs an argument", node.span)
        else:
            self._arity(node, AGGREGATES.get(node.name, Signature(1, None, None)))
        if node.order_by and node.name not in ORDERED_AGGREGATES:
            self.report("E0111", f"{node.name}() takes no WITHIN GROUP (ORDER BY ...)", node.span)
        elif node.name in NEEDS_ORDER and len(node.order_by) != 1:
            self.report(
                "E0111",
                f"{node.name}(fraction) needs WITHIN GROUP (ORDER BY one value)",
                node.span,
                f"write {node.name}(0.5) WITHIN GROUP (ORDER BY price)",
            )
        self._check_nesting(node, scope.enclosing)
        self._single_variable(node, node.args + tuple(key.expr for key in node.order_by), f"{node.name}()")
        inner = scope._replace(enclosing=node)
        families = []
        for argument in node.args:
            if isinstance(argument, ast.Star) and node.name == "COUNT" and len(node.args) == 1:
                if argument.qualifier is not None and argument.qualifier.key not in self.known:
                    self._unknown_variable(argument.qualifier, scope)
                families.append(None)
            else:
                families.append(self.visit(argument, inner))
        ordered = [self.visit(key.expr, inner) for key in node.order_by]
        if node.name in NEEDS_ORDER:
            return ordered[0] if ordered and ordered[0] == "time" else "number"
        if node.name in ("MIN", "MAX", "MAX_BY", "MIN_BY") and len(node.args) > (
            1 if node.name in ("MIN", "MAX") else 2
        ):
            return "array"  # MIN(x, n): the n smallest
        return _result_family(AGGREGATES.get(node.name), families)


def time_literal_hint(text: str) -> str:
    """What to write instead of a time given as text: TIMESTAMP '...' or DATE '...'."""
    kind = "DATE" if re.fullmatch(r"\s*\d{4}-\d{2}-\d{2}\s*", text) else "TIMESTAMP"
    return f"write a time literal: {kind} '{text.strip()}'"


_REGEX_FUNCTIONS = frozenset({"REGEXP_LIKE", "RLIKE", "REGEXP_SUBSTR", "REGEXP_REPLACE"})
_REGEX_HINT = "RE2 syntax: no backreferences (\\1) and no lookaround ((?=...), (?<!...))"
_DATETIME_HINT = "Spark's pattern letters: yyyy MM dd HH mm ss SSS a EEE; quote text: 'T'"


def _result_family(signature: Signature | None, families: list) -> str | None:
    """A call's result family from its signature and its arguments' families."""
    if signature is None:
        return None
    if signature.family == "same":
        return next((f for f in families if f is not None), None)
    if signature.family == "second":
        return families[1] if len(families) > 1 else None
    return signature.family


def _is_positive_interval(interval: ast.IntervalLiteral) -> bool:
    try:
        fields = [Decimal(f) for f in re.split(r"[ :]", interval.text.strip()) if f]
    except InvalidOperation:
        return True  # the parser validated the text; nothing to add here
    negative = interval.negative or interval.text.strip().startswith("-")
    return any(fields) and not negative
