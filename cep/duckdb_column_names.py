"""The names Spark gives to the output columns written without ``AS``, for the python engine's results.

Spark names such a column after its own text of the expression, as its analyser has resolved it
(``toPrettySQL``: ``usePrettyExpression(e).sql``): an operator in parentheses (``(i + 1)``, ``(NOT (i = 1))``
for ``i <> 1``), a function in lower case with the arguments it fills in (``round(x, 0)`` for ``round(x)``), a
text literal without its quotes (``concat(s, x)``), ``count(1)`` for ``count(*)``, the column's own name for a
cast of a column (``CAST(x AS INT)`` is ``x``), and no trace of the casts it adds itself. DuckDB names them after
its own text, so the translation gives each such column Spark's name (``name_unnamed_columns``).

The names are built for the expressions whose Spark text is known here, each form checked against Spark itself
(tests/test_output_column_names.py, and the generated expressions of tests/test_sql_differential.py).
Any other expression gets a marked name (``UNNAMED_MARK``): when one reaches a result, the python engine refuses
before running and asks for ``AS`` (``refuse_unnamed_columns``) rather than show a header Spark would not.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from decimal import Decimal

from cep.duckdb_call_names import ANY_COUNT, AS_WRITTEN, CLASS_WORDS, DEFAULTS, RENAMED, UPPER_CASE
from cep.duckdb_intervals import interval_fields_name, interval_name
from cep.duckdb_nodes import INTERVAL_FIELDS_META, TIME_TYPES, Refusal, place_of, type_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none).

# A column named this way holds an expression whose Spark name is not known here; the offset and length of the
# expression in the statement's text follow, so that the refusal can point at it.
UNNAMED_MARK = "__cep_unnamed_"
_MARKED = re.compile(re.escape(UNNAMED_MARK) + r"(\d+)_(\d+)")

# Operators Spark writes as ``(left OP right)``.
_BINARY = {
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "Div": "/",
    "Mod": "%",
    "IntDiv": "div",
    "EQ": "=",
    "LT": "<",
    "LTE": "<=",
    "GT": ">",
    "GTE": ">=",
    "NullSafeEQ": "<=>",
    "And": "AND",
    "Or": "OR",
    "BitwiseAnd": "&",
    "BitwiseOr": "|",
    "BitwiseXor": "^",
}
# Types for which the arithmetic operators are arithmetic on Spark (a DATE's + is date_add, an interval's has no
# parentheses, a text's is cast to a number first).
_ARITHMETIC = {"Add", "Sub", "Mul", "Div", "Mod", "IntDiv"}
_NUMBERS = {"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"}
# Spark's names of the types a CAST writes (sqlglot's Spark text of the type -> Spark's).
_TYPE_NAMES = {"REAL": "FLOAT", "DECIMAL": "DECIMAL(10,0)"}
_SIMPLE_TYPE = re.compile(r"TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|STRING|DATE|TIMESTAMP|BOOLEAN|DECIMAL\(\d+,\d+\)")


@dataclasses.dataclass(frozen=True)
class Source:
    """What a name is built from: the statement's ``text`` (sqlglot's nodes hold places in it) and the
    ``types`` of the operands the translation typed (``annotated_types``)."""

    text: str
    types: dict[int, str]
    untyped: list = dataclasses.field(default_factory=list)  # the operands a rule asked the type of, not known

    def type_of(self, node) -> str | None:
        found = type_of(node, self.types)
        if found is None:
            self.untyped.append(node)
        return found


def name_unnamed_columns(tree, types: dict[int, str], text: str) -> set[str]:
    """Give each output column of each SELECT in ``tree`` written without ``AS`` Spark's name for it, or a
    marked name (``UNNAMED_MARK``) where Spark's is not known here. A column read as it is keeps its name.
    Returns the marked names not known whatever the operands' types (those `cep check` can refuse)."""
    from sqlglot import exp

    certain = set()
    for select in list(tree.find_all(exp.Select)):
        for projection in list(select.expressions):
            if isinstance(projection, (exp.Alias, exp.Column, exp.Star)):
                continue
            source = Source(text, types)
            name = spark_name(projection, source)
            if name is None:
                offset, length = _place(projection, text)
                name = f"{UNNAMED_MARK}{offset}_{length}"
                if not source.untyped:
                    certain.add(name)
            projection.replace(exp.alias_(projection.copy(), name, quoted=True, copy=False))
    return certain


def refuse_unnamed_results(tree, certain: set[str]) -> None:
    """`cep check`'s refusal of ``refuse_unnamed_columns``: a column of the statement's result (its outer SELECT,
    through ``*`` into a subquery or a WITH) whose marked name is among ``certain`` (``name_unnamed_columns``)."""
    refuse_unnamed_columns([name for name in _result_columns(tree, {}) if name in certain])


def _result_columns(query, named: dict) -> list[str]:
    """The names of the columns ``query`` gives, as far as they can be told without the tables (``named``: the
    WITH queries in scope, by name)."""
    from sqlglot import exp

    within = query.args.get("with_")
    if within is not None:
        named = {**named, **{cte.alias_or_name.casefold(): cte.this for cte in within.expressions}}
    if isinstance(query, exp.Subquery):
        return _result_columns(query.this, named)
    if isinstance(query, exp.SetOperation):
        return _result_columns(query.left, named)  # the first query names a union's columns
    if not isinstance(query, exp.Select):
        return []
    from_ = query.args.get("from_")
    sources = ([from_.this] if from_ is not None else []) + [join.this for join in query.args.get("joins") or []]
    names = []
    for projection in query.expressions:
        if isinstance(projection, exp.Alias):
            names.append(projection.alias)
        star = isinstance(projection, exp.Star) or isinstance(projection, exp.Column) and projection.is_star
        for source in sources if star else ():
            table = projection.table if isinstance(projection, exp.Column) else ""
            if table and table.casefold() != source.alias_or_name.casefold():
                continue
            alias = source.args.get("alias")
            if alias is not None and alias.columns:
                continue  # (SELECT ...) q(a, b): renamed
            if isinstance(source, exp.Subquery):
                names.extend(_result_columns(source.this, named))
            elif isinstance(source, exp.Table) and source.name.casefold() in named:
                names.extend(_result_columns(named[source.name.casefold()], named))
    return names


def _place(node, text: str) -> tuple[int, int]:
    """The offset and length of ``node``'s text: from its first token back over the words and parentheses
    sqlglot keeps no place for (``INTERVAL '1' DAY``, ``CAST(``), to its last token's end."""
    offset, length = place_of(node)
    offset = offset or 0
    start = offset
    while start > 0 and re.match(r"[\w\s(~-]", text[start - 1]):
        start -= 1
    lead = re.match(r"\s*(?:(?:SELECT|DISTINCT|ALL)\b\s*)*", text[start:offset], re.IGNORECASE)
    start += lead.end() if lead else 0
    ends = [n.meta["end"] for n in node.walk() if "end" in n.meta]
    return start, max([offset + length - start, *(end - start + 1 for end in ends)])


def refuse_unnamed_columns(columns: list[str]) -> None:
    """A Refusal, placed at the expression, when a result's column has a marked name (``name_unnamed_columns``)."""
    for column in columns:
        found = _MARKED.fullmatch(column)
        if found is not None:
            raise Refusal(
                "the name Spark gives to this output column, written without AS, is not known here: name it "
                "(... AS name)",
                int(found.group(1)),
                int(found.group(2)),
            )


def spark_name(node, source: Source) -> str | None:
    """Spark's name for the output column ``node`` (an expression without ``AS``), or None when not known."""
    from sqlglot import exp

    inner = node.this if isinstance(node, exp.Paren) else node
    if isinstance(inner, (exp.Cast, exp.TryCast)) and isinstance(inner.this, exp.Column):
        return inner.this.name  # Spark names a cast of a column after the column
    return _pretty(node, source)


def _pretty(node, source: Source) -> str | None:  # noqa: C901, PLR0911, PLR0912 - one case a form
    from sqlglot import exp

    kind = type(node).__name__
    text = source.text
    written = _written_name(node, text)
    if isinstance(node, exp.Paren):
        return _pretty(node.this, source)
    if isinstance(node, exp.TsOrDsToDate) and "start" not in node.meta:  # sqlglot's, around year(d)'s date
        return _pretty(node.this, source)
    if isinstance(node, exp.Column):
        return node.name  # as written (Spark keeps the query's spelling), a qualified one (m.i) by its name
    if isinstance(node, exp.Literal) and node.is_string:
        return _text(node, text)
    if isinstance(node, exp.Null):
        return "NULL"
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    number = _number(node, source)
    if number is not None:
        return number
    if isinstance(node, exp.Neg):
        operand = _number(node.this, source)
        if operand is not None:  # a number's minus belongs to the literal (Spark's grammar)
            negated = operand[1:] if operand.startswith("-") else f"-{operand}"
            return negated[1:] if re.fullmatch(r"-0+(\.0+)?", negated) and not _floating(node.this, source) else negated
        operand = _pretty(node.this, source)
        return None if operand is None else f"(- {operand})"
    rewritten = _rewritten(node, written, source)
    if rewritten is not _NOT_REWRITTEN:
        return rewritten
    if kind in _BINARY and written is None:
        sides = (node.this, node.expression)
        if kind in _ARITHMETIC and not all(source.type_of(side) in _NUMBERS for side in sides):
            return None
        return _joined("({} " + _BINARY[kind] + " {})", (node.this, node.expression), source)
    if isinstance(node, exp.NEQ):
        return _joined("(NOT ({} = {}))", (node.this, node.expression), source)
    if isinstance(node, exp.Not):
        if isinstance(node.this, exp.Is) and isinstance(node.this.expression, exp.Null):
            return _joined("({} IS NOT NULL)", (node.this.this,), source)
        if isinstance(node.this, exp.Like) and not node.this.args.get("escape"):
            return _joined("(NOT {} LIKE {})", (node.this.this, node.this.expression), source)
        return _joined("(NOT {})", (node.this,), source)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return _joined("({} IS NULL)", (node.this,), source)
    if isinstance(node, exp.Like) and not node.args.get("escape"):
        template = "(NOT {} LIKE {})" if node.args.get("negate") else "{} LIKE {}"
        return _joined(template, (node.this, node.expression), source)
    if isinstance(node, exp.In) and node.expressions and not node.args.get("query"):
        names = [_pretty(operand, source) for operand in (node.this, *node.expressions)]
        return None if None in names else f"({names[0]} IN ({', '.join(names[1:])}))"
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return _cast(node, source)
    if isinstance(node, exp.Case):
        return _case(node, source)
    if isinstance(node, exp.If) and written == "if" and node.args.get("false") is not None:
        return _joined("(IF({}, {}, {}))", (node.this, node.args["true"], node.args["false"]), source)
    if isinstance(node, exp.Filter):
        aggregate = _pretty(node.this, source)
        condition = node.expression.this if isinstance(node.expression, exp.Where) else None
        where = None if condition is None else _pretty(condition, source)
        return None if aggregate is None or where is None else f"{aggregate} FILTER (WHERE {where})"
    if isinstance(node, exp.Window):
        return _window(node, source)
    if isinstance(node, (exp.IgnoreNulls, exp.RespectNulls)):  # first(x, true) among them: Spark's own text
        return None
    if isinstance(node, exp.Count) and written == "count":
        return _count(node, source)
    if written in AS_WRITTEN:
        return _call(node, written, AS_WRITTEN[written], source)
    if written in UPPER_CASE:
        return _call(node, written.upper(), UPPER_CASE[written], source)
    if written in RENAMED:
        return _call(node, RENAMED[written], ANY_COUNT, source)
    return None


def _joined(template: str, operands, source: Source) -> str | None:
    names = [_pretty(operand, source) for operand in operands]
    return None if None in names else template.format(*names)


def _written_name(node, text: str) -> str | None:
    """The name of the function ``node`` as written (lower case), or None when ``node`` is no call. sqlglot
    places some calls at their name, others (``floor(x)``, ``IF(...)``) at their first argument only."""
    from sqlglot import exp

    start, end = node.meta.get("start"), node.meta.get("end")
    if start is None or end is None:
        arguments = _arguments(node) if isinstance(node, exp.Func) and not isinstance(node, exp.Binary) else []
        first = place_of(arguments[0])[0] if arguments else None
        unit = r"(?:\w+\s*,\s*)?" if node.args.get("unit") is not None else ""  # timestampdiff(HOUR, ...)
        # before the first argument: its own parentheses, minus or typed literal's word (-2, DATE '...')
        opening = r"(?:\(\s*|-\s*|(?:DATE|TIMESTAMP)\s+)*"
        called = (
            re.search(r"\b(\w+)\s*\(\s*" + unit + opening + "$", text[:first], re.IGNORECASE)
            if first is not None
            else None
        )
        word = called.group(1).lower() if called else None
        # the call's own name, not an enclosing one's (first(x, true) is sqlglot's IGNORE NULLS around first)
        kind = type(node).__name__
        return word if word and (word.replace("_", "") == kind.lower() or word in CLASS_WORDS.get(kind, ())) else None
    word = text[start : end + 1]
    if not re.fullmatch(r"\w+", word) or not re.match(r"\s*\(", text[end + 1 :]):
        return None
    return word.lower()


def _text(node, text: str) -> str | None:
    """A text literal as Spark writes it in a name: without its quotes (when written plainly)."""
    value = str(node.this)
    return value if _token(node, text) == f"'{value}'" and "\\" not in value else None


# The suffixes of Spark's typed numbers: 100L (BIGINT), 2S (SMALLINT), 1Y (TINYINT), 1.5BD (DECIMAL), 1.5D
# (DOUBLE) and 1.5F (FLOAT); a double's text is Java's.
_INTEGRAL_SUFFIX = re.compile(r"(\d+)(L|S|Y)?", re.IGNORECASE)
_DECIMAL_SUFFIX = re.compile(r"(\d+\.\d+)(BD)?", re.IGNORECASE)
_DOUBLE_SUFFIX = re.compile(r"(\d+(?:\.\d*)?(?:E[-+]?\d+)?)D?|(\d+\.\d*E[-+]?\d+|\d+E[-+]?\d+)", re.IGNORECASE)


def _number(node, source: Source) -> str | None:
    """A number literal (plain or typed: ``100L``, ``1.5D``, ``1.5e3``) as Spark writes it in a name, or None."""
    from sqlglot import exp

    literal = node.this if isinstance(node, (exp.Cast, exp.TryCast)) else node
    if not isinstance(literal, exp.Literal) or literal.is_string:
        return None
    written = _token(literal, source.text)
    if written is None or (literal is not node and not written[-1:].isalpha()):
        return None  # a cast of a number is a typed number only when written as one (100L, 1.5D)
    sign = "-" if str(literal.this).startswith("-") else ""  # negative_literals moved a minus into it
    if _INTEGRAL_SUFFIX.fullmatch(written):  # Spark writes the value: -0 and 00 are 0 (seed 62: CAST(0 AS STRING))
        return str(int(sign + _INTEGRAL_SUFFIX.fullmatch(written).group(1)))
    if _DECIMAL_SUFFIX.fullmatch(written):  # a DECIMAL has no negative zero: -0.0 is 0.0
        digits = re.match(r"[\d.]+", written).group(0)
        return ("" if Decimal(digits) == 0 else sign) + digits
    if _DOUBLE_SUFFIX.fullmatch(written) and (written[-1:] in "dD" or "e" in written.lower()):
        value = float(sign + written.rstrip("dD"))
        # Java's Double.toString: Python's repr where Java writes no exponent (0 and 1e-3 <= |v| < 1e7)
        return repr(value) if value == 0 or 1e-3 <= abs(value) < 1e7 else None
    return None


def _floating(node, source: Source) -> bool:
    """Whether the number literal ``node`` is a DOUBLE or FLOAT (``0.0D``, ``0E0``), which keep a negative zero in
    Spark's name; an integer's or a DECIMAL's minus zero is 0 (``-0L`` is ``0``, ``-0.0`` is ``0.0``)."""
    from sqlglot import exp

    literal = node.this if isinstance(node, (exp.Cast, exp.TryCast)) else node
    written = _token(literal, source.text) or ""
    return written[-1:] in ("d", "D", "f", "F") or "e" in written.lower()


def _cast(node, source: Source) -> str | None:
    from sqlglot import exp

    text = source.text
    if isinstance(node.this, exp.Literal) and node.this.is_string:
        typed = _typed_literal(node, text)
        if typed is not None:
            return typed
    if not _written_cast(node, text):
        return None  # a cast sqlglot adds (to_utc_timestamp's argument): Spark shows none
    target = node.args["to"].sql(dialect="spark").upper().replace(" ", "")
    target = _TYPE_NAMES.get(target, target)
    if not _SIMPLE_TYPE.fullmatch(target):
        return None
    operand = _pretty(node.this, source)
    if operand is None:
        return None
    word = "TRY_CAST" if isinstance(node, exp.TryCast) and node.args.get("safe") else "CAST"
    return f"{word}({operand} AS {target})"


def _typed_literal(node, text: str) -> str | None:
    """``DATE '2021-03-28'`` or ``TIMESTAMP '2021-03-28 01:30:00'`` (sqlglot's cast of the text) as Spark names
    it, when written so with a canonical value."""
    start = node.this.meta.get("start")
    written = re.search(r"\b(DATE|TIMESTAMP)\s*$", text[:start] if start is not None else "", re.IGNORECASE)
    if written is None:
        return None
    kind, value = written.group(1).upper(), _canonical_time(written.group(1).upper(), str(node.this.this))
    return f"{kind} '{value}'" if value is not None and _text(node.this, text) else None


# The texts of a date or time (without a zone) that Spark reads as written fields; it writes the value back.
_DATE_TEXT = re.compile(r"\s*(\d{4})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?\s*", re.S)
_TIME_TEXT = re.compile(
    r"\s*(\d{4})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?)?)?\s*"
)


def _canonical_time(kind: str, text: str) -> str | None:
    """Spark's text of the value of ``DATE 'text'`` or ``TIMESTAMP 'text'`` (``2021-03`` is ``2021-03-01``), or None
    for a text whose value is not read here (a zone, a special word, a year before 1)."""
    found = (_DATE_TEXT if kind == "DATE" else _TIME_TEXT).fullmatch(text)
    if found is None:
        return None
    fields = [int(group) if group else default for group, default in zip(found.groups(), (1, 1, 1, 0, 0, 0))]
    try:
        value = dt.datetime(*fields[:6])  # noqa: DTZ001 - a value without a zone, as Spark's literal
    except ValueError:
        return None  # out of range: Spark's error
    if kind == "DATE":
        return value.date().isoformat()
    fraction = (found.group(7) or "")[:6].rstrip("0")
    return value.isoformat(sep=" ") + (f".{fraction}" if fraction else "")


def _written_cast(node, text: str) -> bool:
    """Whether the cast ``node`` is written in ``text`` (``CAST(x AS T)``, ``TRY_CAST``, ``x::T``)."""
    offset = place_of(node.this)[0]
    ends = [n.meta["end"] for n in node.this.walk() if "end" in n.meta]
    if offset is None or not ends:
        return False
    before = re.search(r"\b(try_)?cast\s*\(\s*(\(\s*)*$", text[:offset], re.IGNORECASE)
    if before is not None:
        return True
    after = re.match(r"[\s)]*::\s*(\w+)", text[max(ends) + 1 :])  # x::T, T the cast's own type
    return after is not None and _same_type(after.group(1), node.args["to"])


def _same_type(written: str, target) -> bool:
    from sqlglot import exp

    try:
        return exp.DataType.build(written, dialect="spark").this == target.this
    except Exception:  # noqa: BLE001 - sqlglot's parse errors have many kinds: not a type
        return False


def _token(node, text: str) -> str | None:
    """The text of ``node``'s own token, as written."""
    start, end = node.meta.get("start"), node.meta.get("end")
    return None if start is None or end is None else text[start : end + 1]


def _case(node, source: Source) -> str | None:
    from sqlglot import exp

    parts = ["CASE"]
    for branch in node.args.get("ifs") or []:
        condition = branch.this
        if node.this is not None:  # CASE x WHEN v: Spark writes (x = v)
            condition = exp.EQ(this=node.this, expression=condition)
        names = [_pretty(condition, source), _pretty(branch.args["true"], source)]
        if None in names:
            return None
        parts.append(f"WHEN {names[0]} THEN {names[1]}")
    default = node.args.get("default")
    if default is not None:
        name = _pretty(default, source)
        if name is None:
            return None
        parts.append(f"ELSE {name}")
    return " ".join([*parts, "END"])


def _count(node, source: Source) -> str | None:
    from sqlglot import exp

    operand = node.this
    if isinstance(operand, exp.Star):
        return "count(1)"
    if isinstance(operand, exp.Distinct):
        names = [_pretty(e, source) for e in operand.expressions]
        return None if None in names or not names else f"count(DISTINCT {', '.join(names)})"
    return _call(node, "count", AS_WRITTEN["count"], source)


def _call(node, name: str, counts, source: Source) -> str | None:
    """``name(arguments)``: the arguments are the node's children in the order written (each checked), when
    their number is one of ``counts``."""
    from sqlglot import exp

    arguments = _arguments(node)
    distinct = len(arguments) == 1 and isinstance(arguments[0], exp.Distinct)
    if distinct:  # max(DISTINCT s)
        arguments = arguments[0].expressions
    names = [_pretty(argument, source) for argument in arguments]
    missing = DEFAULTS.get(name)
    if missing is not None and len(arguments) == missing[0]:
        names.extend(missing[1])  # Spark writes the arguments it fills in
    if len(names) not in counts or None in names:
        return None
    return f"{name}({'DISTINCT ' if distinct else ''}{', '.join(names)})"


def _arguments(node) -> list:
    """The children of the call ``node`` in the order its text writes them (sqlglot's order of its arguments,
    which for the functions of ``AS_WRITTEN`` is the written one)."""
    from sqlglot import exp

    found = []
    for key in node.arg_types:
        value = node.args.get(key)
        if isinstance(value, list):
            found.extend(value)
        elif isinstance(value, exp.Expression) and not isinstance(value, exp.Var):
            found.append(value)
    offsets = [place_of(argument)[0] for argument in found]
    if None in offsets:
        return found  # an argument sqlglot added (no place): its order is sqlglot's
    return [argument for _offset, argument in sorted(zip(offsets, found, strict=True), key=lambda pair: pair[0])]


# Window functions Spark names in upper case, and the frame it gives each kind of window function that has none
# written (its ``SpecifiedWindowFrame``'s text).
_RANKS = {"row_number": "row_number", "rank": "RANK", "dense_rank": "DENSE_RANK", "percent_rank": "PERCENT_RANK"}
_WHOLE_PARTITION = "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
_UP_TO_THE_ROW = "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
_UP_TO_ITS_PEERS = "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"


def _window(node, source: Source) -> str | None:
    """``f(...) OVER (PARTITION BY ... ORDER BY ... frame)``, as Spark writes a window: each ORDER BY key with
    its direction and NULL order, and the frame, written or Spark's default for the function."""
    from sqlglot import exp

    function, written = node.this, _written_name(node.this, source.text)
    if node.args.get("alias") or isinstance(function, exp.RespectNulls):
        return None
    ignoring = isinstance(function, exp.IgnoreNulls)
    if ignoring:  # first_value(x) IGNORE NULLS is Spark's first(x); nth_value says so itself
        function = function.this
        written = _written_name(function, source.text)
        if written not in ("first_value", "last_value", "nth_value", "first", "last"):
            return None
    parts = []
    partition = [_pretty(key, source) for key in node.args.get("partition_by") or []]
    if partition:
        parts.append("PARTITION BY " + ", ".join(partition) if None not in partition else None)
    order = node.args.get("order")
    if order is not None:
        keys = [_ordered(key, source) for key in order.expressions]
        parts.append("ORDER BY " + ", ".join(keys) if None not in keys else None)
    spec = node.args.get("spec")
    if written in _RANKS or written in ("cume_dist", "ntile", "lag", "lead"):
        if spec is not None or order is None:
            return None  # Spark refuses a frame here, and a ranking without an order
        if written in ("lag", "lead"):
            name, frame = _offset(function, written, source)
        else:
            arguments = [_pretty(argument, source) for argument in _arguments(function)]
            frame = _UP_TO_ITS_PEERS if written == "cume_dist" else _UP_TO_THE_ROW
            if None in arguments or len(arguments) != (written == "ntile"):
                return None
            name = f"{_RANKS.get(written, written)}({', '.join(arguments)})"
    else:
        name = _pretty(function, source)
        if ignoring and name is not None:
            name = re.sub(r"^(first|last)(?:_value)?\(", r"\1(", name) + (" ignore nulls" * (written == "nth_value"))
        keys = [] if order is None else [(key.this, bool(key.args.get("desc"))) for key in order.expressions]
        frame = _frame(spec, keys, source) if spec is not None else _UP_TO_ITS_PEERS if keys else _WHOLE_PARTITION
    parts.append(frame)
    if name is None or None in parts:
        return None
    return f"{name} OVER ({' '.join(parts)})"


def _ordered(key, source: Source) -> str | None:
    from sqlglot import exp

    if not isinstance(key, exp.Ordered):
        return None
    name = _pretty(key.this, source)
    descending = bool(key.args.get("desc"))
    nulls_first = key.args.get("nulls_first") is not False if not descending else key.args.get("nulls_first") is True
    direction = "DESC" if descending else "ASC"
    return None if name is None else f"{name} {direction} NULLS {'FIRST' if nulls_first else 'LAST'}"


def _offset(function, written: str, source: Source) -> tuple[str | None, str]:
    """lag and lead with the offset and default Spark fills in, and their one-row frame."""
    arguments = _arguments(function)
    if not 1 <= len(arguments) <= 3:
        return None, ""
    names = [_pretty(argument, source) for argument in arguments]
    offset = names[1] if len(names) > 1 else "1"
    if offset is None or not re.fullmatch(r"\d+", offset):
        return None, ""
    names = [*names[:1], offset, names[2] if len(names) > 2 else "NULL"]
    if None in names:
        return None, ""
    steps = f"-{offset}" if written == "lag" else offset
    return f"{written}({', '.join(names)})", f"ROWS BETWEEN {steps} FOLLOWING AND {steps} FOLLOWING"


def _frame(spec, keys: list, source: Source) -> str | None:
    """A written frame as Spark writes it: ROWS; RANGE to the ends, the current row, an interval, or a number of
    an INT or DATE key (``keys``: the ORDER BY's (expression, descending)), as written; a number's PRECEDING
    over another key Spark writes ``(- n) FOLLOWING`` (an ascending key's)."""
    from sqlglot import exp

    kind = str(spec.args.get("kind") or "").upper()
    if kind not in ("ROWS", "RANGE"):
        return None
    key_type = source.type_of(keys[0][0]) if len(keys) == 1 else None
    ends = []
    for side in ("start", "end"):
        bound, direction = spec.args.get(side), str(spec.args.get(f"{side}_side") or "").upper()
        if kind == "RANGE" and isinstance(bound, exp.Interval) and direction in ("PRECEDING", "FOLLOWING"):
            interval = interval_name(bound, source.text)
            ends.append(
                None if interval is None or key_type not in (*_DATES, *TIME_TYPES) else f"{interval} {direction}"
            )
            continue
        if not isinstance(bound, str) and not (isinstance(bound, exp.Literal) and not bound.is_string):
            return None
        text = bound if isinstance(bound, str) else bound.name
        if text.upper() == "CURRENT ROW":
            ends.append("CURRENT ROW")
        elif text.upper() == "UNBOUNDED" and direction in ("PRECEDING", "FOLLOWING"):
            ends.append(f"UNBOUNDED {direction}")
        elif kind == "ROWS" and re.fullmatch(r"\d+", text) and direction in ("PRECEDING", "FOLLOWING"):
            ends.append(f"{text} {direction}")
        elif kind == "RANGE" and re.fullmatch(r"\d+", text) and key_type in ("INT", "DATE"):
            ends.append(f"{text} {direction}" if direction in ("PRECEDING", "FOLLOWING") else None)
        elif kind == "RANGE" and re.fullmatch(r"\d+(\.\d+)?", text) and key_type in ("BIGINT", "DOUBLE", "DECIMAL"):
            if keys[0][1] or direction not in ("PRECEDING", "FOLLOWING"):
                return None
            ends.append(f"(- {text}) FOLLOWING" if direction == "PRECEDING" else f"{text} FOLLOWING")
        else:
            return None
    return None if None in ends else f"{kind} BETWEEN {ends[0]} AND {ends[1]}"


# ------------------------------------------------------------------------------------------ forms Spark rewrites

_NOT_REWRITTEN = object()  # ``_rewritten``'s answer for a node none of its forms is
_DATES = ("DATE",)
_DAY_OPERANDS = ("INT", "SMALLINT", "TINYINT")  # date_add's second argument (a BIGINT is Spark's error)
_UNIT_CALLS = {"datediff": "timestampdiff", "date_diff": "timestampdiff", "timestampdiff": "timestampdiff"}
_UNIT_CALLS |= {"dateadd": "timestampadd", "timestampadd": "timestampadd"}


def _rewritten(node, written: str | None, source: Source):  # noqa: C901, PLR0911, PLR0912 - one case a form
    """Spark's name of the forms its parser or analyser rewrites (``a || b`` is ``concat(a, b)``, ``d + 1`` is
    ``date_add(d, 1)``, an interval in Spark's own text), None where not known, or ``_NOT_REWRITTEN``."""
    from sqlglot import exp

    if isinstance(node, exp.DPipe):
        return _joined("concat({}, {})", (node.this, node.expression), source)
    if isinstance(node, exp.Interval):
        return interval_name(node, source.text)
    if isinstance(node, exp.Add) and node.meta.get(INTERVAL_FIELDS_META):
        return interval_fields_name(node, source.text)
    if isinstance(node, (exp.Add, exp.Sub)) and written is None:
        return _time_arithmetic(node, source)
    if isinstance(node, exp.Between) and not node.args.get("symmetric"):
        return _joined("between({}, {}, {})", (node.this, node.args["low"], node.args["high"]), source)
    if isinstance(node, exp.BitwiseNot):
        return _joined("~{}", (node.this,), source)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
        return _joined("({} <=> " + ("true" if node.expression.this else "false") + ")", (node.this,), source)
    if isinstance(node, exp.NullSafeNEQ):
        return _joined("(NOT ({} <=> {}))", (node.this, node.expression), source)
    if isinstance(node, exp.Escape):
        like, escape = node.this, node.expression
        if not isinstance(like, exp.Like) or not (isinstance(escape, exp.Literal) and escape.is_string):
            return None
        character = _text(escape, source.text)
        template = "{} LIKE {} ESCAPE '" + str(character) + "'"
        template = f"(NOT {template})" if like.args.get("negate") else template
        return None if character is None else _joined(template, (like.this, like.expression), source)
    if isinstance(node, exp.ILike) and not node.args.get("escape"):
        template = "(NOT ilike({}, {}))" if node.args.get("negate") else "ilike({}, {})"
        return _joined(template, (node.this, node.expression), source)
    if isinstance(node, exp.StrPosition) and written == "position" and len(_arguments(node)) == 2:
        first, second = _arguments(node)
        between = source.text[(place_of(first)[0] or 0) + place_of(first)[1] : place_of(second)[0] or 0]
        if re.search(r"\bIN\b", between, re.IGNORECASE):  # position(a IN s) is Spark's locate(a, s, 1)
            return _call(node, "locate", {3}, source)
    if isinstance(node, exp.RegexpLike) and written is None and not node.args.get("flag"):  # s RLIKE p
        return _joined("RLIKE({}, {})", (node.this, node.expression), source)
    if isinstance(node, exp.Extract):
        before = source.text[: place_of(node.expression)[0] or 0]
        field = re.search(r"\bextract\s*\(\s*(\w+)\s+from\s*(?:(?:DATE|TIMESTAMP)\s+)?$", before, re.IGNORECASE)
        return None if field is None else _joined(f"extract({field.group(1)} FROM {{}})", (node.expression,), source)
    if isinstance(node, exp.Log) and place_of(node.this)[0] is None:  # log10(x), log2(x): sqlglot adds the base
        called = re.search(r"\b(log10|log2)\s*\(\s*$", source.text[: place_of(node.expression)[0] or 0], re.I)
        return None if called is None else _joined(called.group(1).upper() + "({})", (node.expression,), source)
    if isinstance(node, exp.Trim):
        return _trim(node, written, source)
    if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, (exp.First, exp.Last)):  # first(x, true)
        word = "first" if isinstance(node.this, exp.First) else "last"
        arguments = _arguments(node.this)
        return _joined(word + "({})", arguments, source) if len(arguments) == 1 else None
    if isinstance(node, exp.VarMap):
        keys, values = node.args["keys"].expressions, node.args["values"].expressions
        pairs = [item for pair in zip(keys, values, strict=True) for item in pair]
        return _joined("map(" + ", ".join(["{}"] * len(pairs)) + ")", pairs, source)
    if isinstance(node, exp.Bracket) and written is None and len(node.expressions) == 1 and _indexed(node):
        return _joined("{}[{}]", (node.this, node.expressions[0]), source)
    if written in _UNIT_CALLS and node.args.get("unit") is not None:
        return _unit_call(node, _UNIT_CALLS[written], source)
    return _NOT_REWRITTEN


def _indexed(node) -> bool:
    """Whether the Bracket ``node`` is written ``x[i]`` (sqlglot reads ``element_at(x, i)`` as one too, with its
    offset and safety)."""
    return node.args.get("offset") is None and node.args.get("safe") is None


def _time_arithmetic(node, source: Source):
    """``+`` and ``-`` over dates, timestamps and intervals as Spark's analyser rewrites them, or
    ``_NOT_REWRITTEN`` for arithmetic over numbers."""
    from sqlglot import exp

    left, right = node.this, node.expression
    kinds = [source.type_of(left), source.type_of(right)]
    times = (*_DATES, *TIME_TYPES)
    adding = isinstance(node, exp.Add)
    if adding and kinds[0] in ("INTERVAL", *_DAY_OPERANDS) and kinds[1] in times:
        left, right, kinds = right, left, kinds[::-1]  # Spark writes the date or time first
    if kinds[0] in times and kinds[1] == "INTERVAL":
        interval = _pretty(right, source)
        operand = _pretty(left, source)
        if interval is None or operand is None:
            return None
        if kinds[0] == "DATE" and re.fullmatch(r"INTERVAL '[^']*' DAY", interval):  # whole days: date_add
            days = f"extractansiintervaldays({interval})"
            return f"date_add({operand}, {days if adding else f'(- {days})'})"
        return f"{operand} {'+' if adding else '-'} {interval}"
    if kinds[0] == "DATE" and kinds[1] in _DAY_OPERANDS:
        return _joined(("date_add" if adding else "date_sub") + "({}, {})", (left, right), source)
    if not adding and all(kind in times for kind in kinds):
        return _joined("({} - {})", (left, right), source)
    if "INTERVAL" in kinds or any(kind in times for kind in kinds):
        return None
    return _NOT_REWRITTEN


def _trim(node, written: str | None, source: Source) -> str | None:
    """``trim(s)``, ``ltrim(s)``, ``rtrim(s)`` as written; with the characters, ``TRIM(BOTH a FROM s)``."""
    position = str(node.args.get("position") or "BOTH").upper()
    characters = node.args.get("expression")
    if characters is None:
        expected = {"BOTH": "trim", "LEADING": "ltrim", "TRAILING": "rtrim"}.get(position)
        return _joined(f"{written}({{}})", (node.this,), source) if written == expected else None
    return _joined(f"TRIM({position} {{}} FROM {{}})", (characters, node.this), source)


def _unit_call(node, name: str, source: Source) -> str | None:
    """``timestampdiff(HOUR, a, b)`` (``datediff``'s and ``dateadd``'s three-argument forms), the unit as written."""
    arguments = _arguments(node)
    first = place_of(arguments[0])[0] if arguments else None
    unit = re.search(r"\(\s*(\w+)\s*,\s*$", source.text[:first]) if first is not None else None
    if unit is None or len(arguments) != 2:
        return None
    return _joined(f"{name}({unit.group(1)}, {{}}, {{}})", arguments, source)
