"""DuckDB's words in an error, as Spark's: its type names (INT8, VARCHAR, INTEGER_LITERAL) and its binder's
errors about names (a column or table it cannot find) as Spark's sentence, placed at the name in the user's
text. Used once, where DuckDB's errors become CepErrors (cep/duckdb_results.py, ``explain_duck_error``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from cep.duckdb_nodes import Refusal
from cep.duckdb_sql import parse_spark, spark_text

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none).

# DuckDB's type names (and its aliases of them) as Spark's. A HUGEINT is what DuckDB computes a BIGINT's SUM
# in; a literal's type (INTEGER_LITERAL) is the type Spark gives the literal.
_SPARK_TYPE_OF = {
    "INT8": "TINYINT",
    "TINYINT": "TINYINT",
    "INT16": "SMALLINT",
    "SMALLINT": "SMALLINT",
    "INT32": "INT",
    "INTEGER": "INT",
    "INT4": "INT",
    "INTEGER_LITERAL": "INT",
    "INT64": "BIGINT",
    "INT128": "BIGINT",
    "HUGEINT": "BIGINT",
    "FLOAT4": "FLOAT",
    "REAL": "FLOAT",
    "FLOAT8": "DOUBLE",
    "VARCHAR": "STRING",
    "STRING_LITERAL": "STRING",
    "BLOB": "BINARY",
    "TIMESTAMP WITH TIME ZONE": "TIMESTAMP",
    "TIMESTAMPTZ": "TIMESTAMP",
    "TIMESTAMP_US": "TIMESTAMP",
    "TIMESTAMP_NS": "TIMESTAMP",
    "TIMESTAMP_MS": "TIMESTAMP",
    "TIMESTAMP_S": "TIMESTAMP",
    "BOOL": "BOOLEAN",
    '"NULL"': "VOID",
}
# Longest first, so that TIMESTAMP WITH TIME ZONE is read before TIMESTAMP; a name within a word
# (INT8 in XINT8, VARCHAR in VARCHAR_COLUMN) or in quotes (a value, a column's name) is not a type.
_TYPE_NAME = re.compile(
    r"(?<![\w\"'`])(" + "|".join(re.escape(n) for n in sorted(_SPARK_TYPE_OF, key=len, reverse=True)) + r")(?![\w\"'`])"
)
_DECIMAL = re.compile(r"(?<![\w\"'`])DECIMAL\((\d+),(\d+)\)")
_LIST = re.compile(r"(?<![\w\"'`])(\w+)\[\]")
_QUOTED = re.compile(r"('(?:[^']|'')*'|\"[^\"]*\"|`[^`]*`)")


def spark_type(name: str) -> str:
    """DuckDB's name of a type (as its messages write it) as Spark's."""
    return spark_type_names(name.strip())


def spark_type_names(sentence: str) -> str:
    """``sentence`` with each of DuckDB's type names outside quotes written as Spark's."""
    pieces = _QUOTED.split(sentence)
    for index in range(0, len(pieces), 2):  # the even pieces are outside quotes
        piece = _TYPE_NAME.sub(lambda found: _SPARK_TYPE_OF[found.group(1)], pieces[index])
        piece = _DECIMAL.sub(r"DECIMAL(\1,\2)", piece)
        pieces[index] = _LIST.sub(lambda found: f"ARRAY<{spark_type(found.group(1))}>", piece)
    return "".join(pieces)


# ------------------------------------------------------------------------------- names DuckDB cannot bind

_UNKNOWN_COLUMN = re.compile(r'Referenced column "(?P<name>[^"]+)" not found')
_NO_SUCH_COLUMN = re.compile(
    r'(?:Table|Values list|Referenced table) "(?P<table>[^"]+)" does not have a column named "(?P<name>[^"]+)"'
)
_UNKNOWN_TABLE = re.compile(r'Referenced table "(?P<table>[^"]+)" not found')
_JOIN_COLUMN = re.compile(r'Column "(?P<name>[^"]+)" does not exist on (?P<side>left|right) side of join')
_CANDIDATES = re.compile(r"Candidate bindings: :?\s*(?P<names>.+)")
_UNRESOLVED = "A column, variable, or function parameter with name {name} cannot be resolved."
_SUGGESTION = " Did you mean one of the following? [{candidates}]."


_MISMATCH = re.compile(
    r"Cannot (?:compare|mix) values of type (?P<left>.+?) and (?:type )?(?P<right>.+?) in (?P<where>IN/ANY/ALL|\w+)"
)


def mismatched_types(message: str, spark_text: str) -> tuple[str, int | None, int] | None:
    """DuckDB's refusal to compare or mix values of two types (an IN subquery's column, COALESCE's or CASE's
    branches), as a sentence in Spark's type names at the first such expression of ``spark_text``; None for
    another error."""
    import sqlglot
    from sqlglot import exp

    found = _MISMATCH.search(message)
    if found is None:
        return None
    left, right = spark_type(found.group("left")), spark_type(found.group("right"))
    where = found.group("where").upper()
    what = "an IN subquery" if where == "IN/ANY/ALL" else where
    sentence = (
        f"the python engine cannot bring a {left} and a {right} together in {what} (Spark converts one to the "
        "other by its own rules): write the CAST yourself"
    )
    kind = {"IN/ANY/ALL": exp.In, "COALESCE": exp.Coalesce, "CASE": exp.Case}.get(where)
    try:
        tree = parse_spark(spark_text)
    except sqlglot.errors.SqlglotError:
        return sentence, None, 1
    for node in tree.find_all(kind) if kind is not None else ():
        if kind is not exp.In or node.args.get("query") is not None:
            return (sentence, *_extent(node))
    named = re.search(r"(?<![\w.`])" + re.escape(where) + r"\b", spark_text, re.I)
    return sentence, named.start() if named else None, len(where) if named else 1


def _extent(node) -> tuple[int | None, int]:
    """The offset and length of ``node``'s tokens in the text parsed (None, 1 if it has none)."""
    starts = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    ends = [n.meta["end"] for n in node.walk() if "end" in n.meta]
    return (min(starts), max(ends) - min(starts) + 1) if starts else (None, 1)


def _quoted(*parts: str) -> str:
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def unresolved_name(message: str, spark_text: str) -> tuple[str, int | None, int] | None:
    """DuckDB's binder error ``message`` about a name it cannot find, as Spark's sentence
    ([UNRESOLVED_COLUMN], [UNRESOLVED_USING_COLUMN_FOR_JOIN]) with the place of the name in ``spark_text``;
    None for another error. The candidates are DuckDB's (Spark lists its own, qualified by the table)."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    listed = _CANDIDATES.search(message)
    candidates = re.findall(r'"([^"]+)"', listed.group("names")) if listed else []
    suggestion = _SUGGESTION.format(candidates=", ".join(map(_quoted, candidates))) if candidates else ""
    joined = _JOIN_COLUMN.search(first)
    if joined is not None:
        name, side = joined.group("name"), joined.group("side")
        sentence = f"USING column {_quoted(name)} cannot be resolved on the {side} side of the join."
        offset, length, _ = _place(spark_text, name, None, in_using=True)
        return sentence, offset, length
    found = _NO_SUCH_COLUMN.search(first) or _UNKNOWN_COLUMN.search(first) or _UNKNOWN_TABLE.search(first)
    if found is None:
        return None
    named = found.groupdict()
    table, name = named.get("table"), named.get("name")
    offset, length, written = _place(spark_text, name, table)
    return _UNRESOLVED.format(name=_quoted(*written)) + suggestion, offset, length


def scope_probe(text: str, offset: int) -> str | None:
    """Spark SQL that selects every column the name written at ``offset`` of ``text`` (Spark SQL) may name: ``SELECT
    *`` (``SELECT t.*`` for a name qualified by a table the FROM clause has) from the FROM clause and joins of
    the SELECT that holds it, with the statement's WITH. Bound, not run, it lists the columns for the error
    about an unknown name. None where the name is in no SELECT with a FROM clause."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = parse_spark(text)
    except sqlglot.errors.SqlglotError:
        return None
    named = next((n for n in tree.find_all(exp.Column) if _extent(n)[0] == offset), None)
    select = named.find_ancestor(exp.Select) if named is not None else None
    if select is None or select.args.get("from_") is None:
        return None
    sources = [select.args["from_"].this, *(join.this for join in select.args.get("joins") or [])]
    fold = str.casefold
    qualified = named.table and any(fold(source.alias_or_name) == fold(named.table) for source in sources)
    star = exp.Column(this=exp.Star(), table=exp.to_identifier(named.table)) if qualified else exp.Star()
    probe = exp.Select(expressions=[star], from_=select.args["from_"].copy())
    probe.set("joins", [join.copy() for join in select.args.get("joins") or []] or None)
    with_ = select.args.get("with_") or tree.args.get("with_")  # the CTEs the FROM clause may read
    if with_ is not None:
        probe.set("with_", with_.copy())
    return spark_text(probe)


def _place(spark_text: str, name: str | None, table: str | None, *, in_using: bool = False):
    """The offset and length of the first reference to column ``name`` (of ``table`` where given; any column
    of ``table`` where no name is), and the reference as written (its parts); (None, 1, parts) if none."""
    import sqlglot
    from sqlglot import exp

    written = [part for part in (table, name) if part]
    try:
        tree = parse_spark(spark_text)
    except sqlglot.errors.SqlglotError:
        return None, 1, written
    fold = str.casefold
    for node in tree.walk():
        if in_using:
            matches = isinstance(node, exp.Identifier) and isinstance(node.parent, exp.Join)
            matches = matches and fold(node.name) == fold(name)
        else:
            matches = isinstance(node, exp.Column) and (name is None or fold(node.name) == fold(name))
            matches = matches and (table is None or fold(node.table) == fold(table))
        offset, length = _extent(node) if matches else (None, 1)
        if offset is not None:
            parts = [part.name for part in node.parts] if isinstance(node, exp.Column) else [node.name]
            return offset, length, parts
    return None, 1, written


# --------------------------------------------------------------------- a SELECT list's alias in its WHERE

_ALIAS_STAND_IN = "_cep_alias_probe"


def aliases_read_in_where(text: str, cannot_find: Callable[[str, str], bool]) -> None:
    """Refuse, as Spark does ([UNRESOLVED_COLUMN]), a WHERE that reads an alias of its own SELECT list
    (``SELECT b AS z FROM m WHERE z > 0``): DuckDB reads the alias, Spark reads only the FROM clause's
    columns. A name that is both an alias and a column of the FROM clause is the column on both; to tell
    them apart the statement is bound again with the alias renamed (``cannot_find(text, name)``: whether
    DuckDB then cannot find the column ``name``), only when such a name is written: other statements pay a
    parse at most."""
    import sqlglot
    from sqlglot import exp

    fold = str.casefold
    if " where " not in fold(" ".join(text.split())):
        return
    try:
        tree = parse_spark(text)
    except sqlglot.errors.SqlglotError:
        return  # the translation reports it
    for select in tree.find_all(exp.Select):
        aliases = {fold(item.alias): item for item in select.expressions if isinstance(item, exp.Alias)}
        where = select.args.get("where")
        if not aliases or where is None:
            continue
        for column in where.find_all(exp.Column):
            alias = aliases.get(fold(column.name))
            if column.table or alias is None or column.find_ancestor(exp.Select) is not select:
                continue
            original = alias.args["alias"]
            alias.set("alias", exp.to_identifier(_ALIAS_STAND_IN))
            try:
                probe = spark_text(tree)
            finally:
                alias.set("alias", original)
            if cannot_find(probe, column.name):
                offset, length = _extent(column)
                raise Refusal(
                    _UNRESOLVED.format(name=_quoted(column.name)).rstrip(".")
                    + " (a SELECT list's alias is not a column of its own WHERE).",
                    offset,
                    length,
                    spark_too=True,
                )
