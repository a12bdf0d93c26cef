"""AST -> canonical query text.

    format_statement(statement)  the whole query: upper-case keywords, one clause per line,
                                 MATCH_RECOGNIZE's clauses indented, one measure/definition per line
    format_clauses(whole)        a whole SQL statement (grammar/statement.py): each MATCH_RECOGNIZE (...)
                                 laid out as above, the SQL around it (Spark SQL, window functions, WITH,
                                 joins) kept as written
    format_expr(expr)            one expression (used by the matcher's `explain` for DEFINE conditions)
    format_pattern(pattern)      one row pattern

The contract, tested on the conformance corpus and on generated ASTs:
``parse_unchecked(format_statement(s)) == s``. Parentheses are printed only where precedence needs
them (parentheses are not AST nodes, so printing more would still round-trip, but would read worse).
Names are printed as written; quoted names are printed with double quotes.
"""

from __future__ import annotations

import re

from cep.grammar import ast

__all__ = ["format_statement", "format_clauses", "format_expr", "format_pattern"]

_INDENT = "  "


def format_statement(statement: ast.Statement) -> str:
    lines = [f"SELECT {', '.join(_select_item(item) for item in statement.select)}"]
    lines.append(f"FROM {_relation(statement.relation)}")
    lines.append("MATCH_RECOGNIZE (")
    lines.extend(_INDENT + line for line in _match_recognize_lines(statement.match))
    lines.append(")" + (f" AS {_ident(statement.alias)}" if statement.alias else ""))
    if statement.where is not None:
        lines.append(f"WHERE {format_expr(statement.where)}")
    if statement.order_by:
        lines.append(f"ORDER BY {', '.join(_sort_key(key) for key in statement.order_by)}")
    if statement.limit is not None:
        lines.append(f"LIMIT {statement.limit}")
    return "\n".join(lines)


def format_clauses(whole) -> str:
    """The text of ``whole`` (a ``WholeStatement``) with each MATCH_RECOGNIZE (...) in canonical layout,
    indented under the line it starts on; the SQL around the clauses is Spark SQL, kept as written. A clause
    holding a subquery or a window function (replaced by a column in its AST) is kept as written too: its
    AST alone would drop them. ``split(format_clauses(w))`` gives the same clauses' ASTs."""
    text, pieces, done = whole.text, [], 0
    for clause in sorted(whole.clauses, key=lambda c: c.keyword):
        if clause.subqueries:
            continue
        line_start = text.rfind("\n", 0, clause.keyword) + 1
        indent = re.match(r"[ \t]*", text[line_start:]).group(0)
        lines = ["MATCH_RECOGNIZE ("]
        lines += [indent + _INDENT + line for line in _match_recognize_lines(clause.statement.match)]
        lines.append(indent + ")")
        pieces += [text[done : clause.keyword], "\n".join(lines)]
        done = clause.end
    return "".join([*pieces, text[done : whole.end]]).strip()


def _select_item(item: ast.SelectItem) -> str:
    text = format_expr(item.expr)
    return f"{text} AS {_ident(item.alias)}" if item.alias is not None else text


def _relation(relation: ast.Relation) -> str:
    if relation.is_path:  # read as written, '' for a quote and no backslash escapes (a Windows path stays one)
        return "'" + relation.name.replace("'", "''") + "'"
    parts = relation.name.split(".")
    return ".".join(part if re.fullmatch(r"[^\W\d]\w*", part) else _quoted(part) for part in parts)


def _sort_key(key: ast.SortKey) -> str:
    text = format_expr(key.expr) + (" DESC" if key.descending else "")
    if key.nulls_first is not None:
        text += " NULLS FIRST" if key.nulls_first else " NULLS LAST"
    return text


def _match_recognize_lines(match: ast.MatchRecognize) -> list[str]:
    lines = []
    if match.partition_by:
        lines.append("PARTITION BY " + ", ".join(format_expr(column) for column in match.partition_by))
    if match.order_by:
        lines.append("ORDER BY " + ", ".join(_sort_key(key) for key in match.order_by))
    if match.measures:
        lines += _item_list("MEASURES", [f"{format_expr(m.expr)} AS {_ident(m.name)}" for m in match.measures])
    rows = _rows_per_match(match.rows_per_match)
    if rows:
        lines.append(rows)
    if match.after_match is not None:
        lines.append("AFTER MATCH SKIP " + _skip_to(match.after_match))
    if match.seek:
        lines.append("SEEK")
    elif match.explicit_initial:
        lines.append("INITIAL")
    lines.append(f"PATTERN ({format_pattern(match.pattern)})")
    if match.within is not None:
        lines.append(f"WITHIN {format_expr(match.within)}")
    if match.subsets:
        subsets = [f"{_ident(s.name)} = ({', '.join(_ident(v) for v in s.variables)})" for s in match.subsets]
        lines += _item_list("SUBSET", subsets)
    if match.defines:
        lines += _item_list("DEFINE", [f"{_ident(d.variable)} AS {format_expr(d.condition)}" for d in match.defines])
    return lines


def _item_list(keyword: str, items: list[str]) -> list[str]:
    return [keyword] + [_INDENT + item + ("," if index < len(items) - 1 else "") for index, item in enumerate(items)]


def _rows_per_match(rows: ast.RowsPerMatch) -> str | None:
    if rows.mode == "ONE":
        if rows.show_timeout:
            return "ONE ROW PER MATCH SHOW TIMEOUT MATCHES"
        return "ONE ROW PER MATCH" if rows.explicit else None
    option = {
        "ALL_SHOW_EMPTY": " SHOW EMPTY MATCHES" if rows.explicit else "",
        "ALL_OMIT_EMPTY": " OMIT EMPTY MATCHES",
        "ALL_WITH_UNMATCHED": " WITH UNMATCHED ROWS",
    }[rows.mode]
    return "ALL ROWS PER MATCH" + option


def _skip_to(skip: ast.SkipTo) -> str:
    if skip.mode == "PAST_LAST_ROW":
        return "PAST LAST ROW"
    if skip.mode == "TO_NEXT_ROW":
        return "TO NEXT ROW"
    if skip.plain:
        return f"TO {_ident(skip.variable)}"
    return f"TO {'FIRST' if skip.mode == 'TO_FIRST' else 'LAST'} {_ident(skip.variable)}"


# ----------------------------------------------------------------------------------- names, text


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _ident(identifier: ast.Identifier) -> str:
    return _quoted(identifier.name) if identifier.quoted else identifier.name


def _string(value: str) -> str:
    # a backslash doubled: Spark's parser (and cep's) reads one as the start of an escape
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


# -------------------------------------------------------------------------------------- patterns

# Binding strength: alternation < concatenation < quantifier < primary.
_ALTERNATION, _CONCATENATION, _QUANTIFIED, _PRIMARY = 1, 2, 3, 4


def format_pattern(pattern: ast.Pattern) -> str:
    return _pattern(pattern)[0]


def _pattern_at(pattern: ast.Pattern, strength: int) -> str:
    text, own = _pattern(pattern)
    return f"({text})" if own < strength else text


def _pattern(pattern: ast.Pattern) -> tuple[str, int]:
    if isinstance(pattern, ast.Alternation):
        return " | ".join(_pattern_at(p, _CONCATENATION) for p in pattern.alternatives), _ALTERNATION
    if isinstance(pattern, ast.Concat):
        return " ".join(_pattern_at(p, _QUANTIFIED) for p in pattern.items), _CONCATENATION
    if isinstance(pattern, ast.Quantified):
        text = _pattern_at(pattern.term, _PRIMARY) + quantifier_text(pattern)
        return text + ("" if pattern.greedy else "?"), _QUANTIFIED
    if isinstance(pattern, ast.PatternVar):
        return _ident(pattern.name), _PRIMARY
    if isinstance(pattern, ast.Empty):
        return "()", _PRIMARY
    if isinstance(pattern, ast.Anchor):
        return ("^" if pattern.kind == "start" else "$"), _PRIMARY
    if isinstance(pattern, ast.Exclusion):
        return "{- " + format_pattern(pattern.pattern) + " -}", _PRIMARY
    if isinstance(pattern, ast.Permute):
        return "PERMUTE(" + ", ".join(format_pattern(p) for p in pattern.items) + ")", _PRIMARY
    if isinstance(pattern, ast.Absence):
        return "!" + _ident(pattern.variable), _PRIMARY
    raise TypeError(f"not a pattern node: {pattern!r}")


def quantifier_text(quantified: ast.Quantified) -> str:
    """The quantifier as written, or derived from the bounds for hand-built nodes without text."""
    if quantified.text:
        return quantified.text
    low, high = quantified.min, quantified.max
    shorthand = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((low, high))
    if shorthand:
        return shorthand
    if high is None:
        return f"{{{low},}}"
    return f"{{{low}}}" if low == high else f"{{{low},{high}}}"


# ----------------------------------------------------------------------------------- expressions

# Binding strength, loosest first, as in cep.lark.
_OR, _AND, _NOT, _PREDICATE, _ADDITIVE, _MULTIPLICATIVE, _UNARY, _ATOM = range(1, 9)
_BINARY_STRENGTH = {
    "OR": _OR,
    "AND": _AND,
    "=": _PREDICATE,
    "<>": _PREDICATE,
    "<": _PREDICATE,
    "<=": _PREDICATE,
    ">": _PREDICATE,
    ">=": _PREDICATE,
    "IS DISTINCT FROM": _PREDICATE,
    "IS NOT DISTINCT FROM": _PREDICATE,
    "+": _ADDITIVE,
    "-": _ADDITIVE,
    "||": _ADDITIVE,
    "*": _MULTIPLICATIVE,
    "/": _MULTIPLICATIVE,
    "%": _MULTIPLICATIVE,
    "DIV": _MULTIPLICATIVE,
}


def format_expr(expr: ast.Expr) -> str:
    return _expr(expr)[0]


def _at(expr: ast.Expr, strength: int) -> str:
    text, own = _expr(expr)
    return f"({text})" if own < strength else text


def _expr(expr) -> tuple[str, int]:
    formatter = _EXPRESSION_FORMATTERS.get(type(expr))
    if formatter is None:
        raise TypeError(f"not an expression node: {expr!r}")
    return formatter(expr)


def _binary(expr: ast.Binary) -> tuple[str, int]:
    strength = _BINARY_STRENGTH[expr.op]
    # Comparisons do not chain, so both sides bind tighter; the others are left-associative.
    left_strength = strength + 1 if strength == _PREDICATE else strength
    return f"{_at(expr.left, left_strength)} {expr.op} {_at(expr.right, strength + 1)}", strength


def _unary(expr: ast.Unary) -> tuple[str, int]:
    if expr.op == "NOT":
        return f"NOT {_at(expr.operand, _NOT)}", _NOT
    operand = _at(expr.operand, _UNARY)
    # `- -x` must keep its blank: `--` starts a comment.
    return expr.op + (" " if operand[:1] in "+-" else "") + operand, _UNARY


def _not(negated: bool) -> str:
    return "NOT " if negated else ""


def _literal(literal: ast.Literal) -> tuple[str, int]:
    if literal.kind == "string":
        return _string(literal.value), _ATOM
    if literal.kind in ("timestamp", "date"):
        return f"{literal.kind.upper()} {_string(literal.text)}", _ATOM
    return literal.text, _ATOM


def _interval(interval: ast.IntervalLiteral) -> tuple[str, int]:
    sign = "-" if interval.negative else ""
    return f"INTERVAL {sign}{_string(interval.text)} {interval.unit}", _ATOM


def _column(column: ast.ColumnRef) -> tuple[str, int]:
    prefix = _ident(column.qualifier) + "." if column.qualifier is not None else ""
    return prefix + _ident(column.column), _ATOM


def _star(star: ast.Star) -> tuple[str, int]:
    return (_ident(star.qualifier) + ".*" if star.qualifier is not None else "*"), _ATOM


def _case(case: ast.Case) -> tuple[str, int]:
    parts = ["CASE"]
    if case.operand is not None:
        parts.append(format_expr(case.operand))
    for when in case.whens:
        parts.append(f"WHEN {format_expr(when.condition)} THEN {format_expr(when.result)}")
    if case.default is not None:
        parts.append(f"ELSE {format_expr(case.default)}")
    parts.append("END")
    return " ".join(parts), _ATOM


def _cast(cast: ast.Cast) -> tuple[str, int]:
    params = f"({', '.join(str(p) for p in cast.type.params)})" if cast.type.params else ""
    return f"{'TRY_CAST' if cast.safe else 'CAST'}({format_expr(cast.operand)} AS {cast.type.name}{params})", _ATOM


def _call(name: str, args, semantics: str | None = None, distinct: bool = False) -> tuple[str, int]:
    prefix = f"{semantics} " if semantics else ""
    inside = ("DISTINCT " if distinct else "") + ", ".join(format_expr(arg) for arg in args)
    return f"{prefix}{name}({inside})", _ATOM


def _aggregate(node: ast.Aggregate) -> tuple[str, int]:
    text, strength = _call(node.name, node.args, node.semantics, node.distinct)
    if node.order_by:
        text += f" WITHIN GROUP (ORDER BY {', '.join(_sort_key(key) for key in node.order_by)})"
    return text, strength


def _navigation(node: ast.Navigation) -> tuple[str, int]:
    args = (node.operand,) if node.offset is None else (node.operand, node.offset)
    return _call(node.kind, args, node.semantics)


_EXPRESSION_FORMATTERS = {
    ast.Literal: _literal,
    ast.IntervalLiteral: _interval,
    ast.ColumnRef: _column,
    ast.Star: _star,
    ast.Unary: _unary,
    ast.Binary: _binary,
    ast.IsNull: lambda e: (f"{_at(e.operand, _ADDITIVE)} IS {_not(e.negated)}NULL", _PREDICATE),
    ast.Between: lambda e: (
        f"{_at(e.operand, _ADDITIVE)} {_not(e.negated)}BETWEEN {_at(e.low, _ADDITIVE)} AND {_at(e.high, _ADDITIVE)}",
        _PREDICATE,
    ),
    ast.InList: lambda e: (
        f"{_at(e.operand, _ADDITIVE)} {_not(e.negated)}IN ({', '.join(format_expr(i) for i in e.items)})",
        _PREDICATE,
    ),
    ast.Like: lambda e: (
        f"{_at(e.operand, _ADDITIVE)} {_not(e.negated)}{'ILIKE' if e.case_insensitive else 'LIKE'} "
        f"{_at(e.pattern, _ADDITIVE)}" + (f" ESCAPE {_at(e.escape, _ADDITIVE)}" if e.escape is not None else ""),
        _PREDICATE,
    ),
    ast.Case: _case,
    ast.Cast: _cast,
    ast.ArrayLiteral: lambda e: ("ARRAY[" + ", ".join(format_expr(i) for i in e.items) + "]", _ATOM),
    ast.FunctionCall: lambda e: _call(e.name, e.args, e.semantics),
    ast.Aggregate: _aggregate,
    ast.Navigation: _navigation,
    ast.Classifier: lambda e: (f"CLASSIFIER({_ident(e.variable) if e.variable else ''})", _ATOM),
    ast.MatchNumber: lambda e: ("MATCH_NUMBER()", _ATOM),
    ast.MatchStatus: lambda e: ("MATCH_STATUS()", _ATOM),
    ast.ProcTime: lambda e: ("PROCTIME()", _ATOM),
}
