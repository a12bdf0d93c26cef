"""Delta tables for ``cep run``: ``--input delta:PATH[@vN|@TIMESTAMP]`` read by the python engine, the columns a
statement reads, and ``--output delta:PATH`` written once.

The python engine reads a Delta table with ``deltalake`` (delta-rs: no JVM), the Spark engine with Delta's own
connector (``spark_bridge.spark.delta``); both read the same snapshot (``DeltaSnapshot``) and only the columns
``columns_read`` names, so both match the same rows. Time travel: ``delta:PATH@v12`` (version 12),
``delta:PATH@2026-01-05T00:00:00`` (the latest version committed at or before that instant, UTC), or
``--delta-version``/``--delta-timestamp`` for every Delta input that names none.

Filters pushed into the read (``pushed_filters``): a condition ``column op literal`` (or ``column IN (...)``)
that every row the statement reads from a table must meet to reach the result is applied while reading it,
on both engines, so the files of the partitions it excludes are never opened (docs/getting-started.md, "Your
data is in a Delta table", says which conditions qualify). The statement still applies every condition
itself: pushing changes what is read, never what is matched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from cep.grammar.columns import ColumnNames
from cep.grammar.statement import SPARK
from cep.spark_bridge.sinks.delta import deltalake_module, write_once
from cep.spark_bridge.spark.delta import (
    CepDeltaError,
    DeltaSnapshot,
    PushedFilter,
    applicable,
    as_of,
    check_snapshot,
    condition,
    delta_path,
    is_delta,
    table_versions,
)

if TYPE_CHECKING:  # pragma: no cover
    from cep.statement import SqlStatement

# Imported inside functions: deltalake and pyarrow (only a Delta input or output needs them).

_AT_VERSION = re.compile(r"v(\d+)")
_AT_TIME = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?")
# A star in a select list (SELECT *, t.*, , *): the statement may show every column of what it reads.
_SELECT_STAR = re.compile(r"(?:\bSELECT\s+(?:ALL\s+|DISTINCT\s+)?|,\s*|\.)\*", re.I)
_WORD = re.compile(r"`((?:[^`]|``)+)`|\"([^\"]+)\"|([A-Za-z_][A-Za-z0-9_]*)")


def snapshot_of(spec: str, *, version: int | None = None, timestamp: str | None = None) -> DeltaSnapshot:
    """``delta:PATH``, ``delta:PATH@v3`` or ``delta:PATH@2026-01-05T00:00:00`` as a snapshot; ``version`` and
    ``timestamp`` (the command's flags) apply when the spec names neither."""
    path = delta_path(spec)
    head, at, tail = path.rpartition("@")
    if at and _AT_VERSION.fullmatch(tail):
        return DeltaSnapshot(head, version=int(tail[1:]))
    if at and _AT_TIME.fullmatch(tail):
        return DeltaSnapshot(head, timestamp=tail)
    return DeltaSnapshot(path, version=version, timestamp=timestamp)


def read_delta_arrow(
    snapshot: DeltaSnapshot, columns: Sequence[str] | None = None, filters: Sequence[PushedFilter] = ()
) -> Any:
    """The snapshot as an Arrow table (``columns``: only those, matched without case, read from their Parquet
    columns alone; all when none of the table's columns is among them; ``filters``: only the rows that meet
    the ``applicable`` ones, the files of partitions that fail them never opened)."""
    check_snapshot(snapshot)
    deltalake = deltalake_module()
    try:
        table = deltalake.DeltaTable(snapshot.path, version=snapshot.version)
        if snapshot.timestamp is not None:
            table.load_as_version(as_of(snapshot.timestamp))
        dataset = table.to_pyarrow_dataset()
        names = list(dataset.schema.names)
        kept = applicable(filters, {field.name: _arrow_kind(field.type) for field in dataset.schema})
        return dataset.to_table(columns=kept_columns(names, columns), filter=_arrow_filter(kept))
    except CepDeltaError:
        raise
    except Exception as exc:  # noqa: BLE001 - delta-rs raises several types; its first line says what
        line = next((s.strip() for s in str(exc).splitlines() if s.strip()), type(exc).__name__)
        raise CepDeltaError(f"cannot read the {snapshot.describe()}: {line}") from None


def _arrow_kind(data_type: Any) -> str:
    import pyarrow.types as t

    if t.is_string(data_type) or t.is_large_string(data_type) or t.is_string_view(data_type):
        return "string"
    if t.is_integer(data_type):
        return "integer"
    return "date" if t.is_date(data_type) else "other"


def _arrow_filter(filters: Sequence[PushedFilter]) -> Any:
    """The filters as one pyarrow expression (None: no filter). A fragment (a file) whose partition values
    fail it is skipped by pyarrow before it is opened."""
    import pyarrow.compute as pc

    expression = None
    for found in filters:
        here = condition(pc.field(found.column), found)
        expression = here if expression is None else expression & here
    return expression


def kept_columns(names: Sequence[str], columns: Sequence[str] | None) -> list[str] | None:
    """``names`` (a table's columns, in order) that ``columns`` holds, without case (None: read them all)."""
    if columns is None:
        return None
    return ColumnNames(names).among(columns) or None


def columns_read(statement: SqlStatement) -> list[str] | None:
    """The names that ``statement`` may read as columns of its input (None: every column). A name counts when
    it appears anywhere in the statement's text (a word, or a quoted name): over-keeping is harmless, and
    a word that is a column in one place and a keyword or alias in another only costs its read. Nothing is
    pruned when the output can show every input column: ALL ROWS PER MATCH, or a star in a select list other
    than a MATCH_RECOGNIZE's own (whose ONE ROW PER MATCH output is its PARTITION BY and MEASURES) or one
    inside its input."""
    if any(clause.statement.match.rows_per_match.mode != "ONE" for clause in statement.clauses):
        return None
    text = statement.text
    inputs = [clause.relation for clause in statement.clauses]
    for star in _SELECT_STAR.finditer(text):
        of_a_clause = any(
            re.fullmatch(r"\s*FROM\s*", text[star.end() : clause.start], re.I) for clause in statement.clauses
        )  # SELECT * FROM t MATCH_RECOGNIZE: the clause's output
        if not of_a_clause and not any(start <= star.start() < end for start, end in inputs):
            return None
    return sorted(
        {next(g for g in found.groups() if g is not None).replace("``", "`") for found in _WORD.finditer(text)}
    )


def default_table(statement: SqlStatement, named: Collection[str] = ()) -> str | None:
    """The name under which the unnamed input stands in ``statement`` (``named``: the named inputs): the plain
    name the first clause reads outside any WITH (``run_cli`` registers the unnamed input under it), else the
    one table name the statement reads that is neither a WITH nor a named input; None when that is not one."""
    clause = statement.clauses[0] if statement.clauses else None
    if clause is None:
        return None
    name = statement.text[clause.relation[0] : clause.relation[1]].strip()
    if not clause.scopes and clause.path is None and re.fullmatch(r"[A-Za-z_]\w*", name):
        return None if name in named else name
    parsed = _parse(statement)
    if parsed is None:
        return None
    known = {n.lower() for n in named} | {v.lower() for v in parsed.views.values()} | parsed.withs
    names = {table.name for tree in parsed.trees for table in _tables(tree) if table.name.lower() not in known}
    return names.pop() if len({n.lower() for n in names}) == 1 else None


@dataclasses.dataclass(frozen=True)
class _Parsed:
    """A statement as sqlglot trees: the statement with each clause replaced by a view named ``views[index]``,
    then each clause's input relation as ``SELECT * FROM <relation>`` (``relations[index]``)."""

    trees: tuple[Any, ...]
    relations: dict[int, Any]
    views: dict[int, str]
    withs: frozenset[str]  # the names of its WITH queries, lower case


def _parse(statement: SqlStatement) -> _Parsed | None:
    import sqlglot
    from sqlglot import exp

    views = {clause.index: f"_cep_clause_{clause.index}" for clause in statement.clauses}
    try:
        trees = [sqlglot.parse_one(statement.whole.render(SPARK, views, {}).text, read="spark")]
        relations = {}
        for clause in statement.clauses:
            relation = statement.whole.render(SPARK, views, {}, *clause.relation).text
            relations[clause.index] = sqlglot.parse_one(f"SELECT * FROM {relation}", read="spark")
    except Exception:  # noqa: BLE001 - sqlglot's errors have several types; nothing is pushed then
        return None
    trees += relations.values()
    withs = frozenset(cte.alias_or_name.lower() for tree in trees for cte in tree.find_all(exp.CTE))
    return _Parsed(tuple(trees), relations, views, withs)


def _tables(tree: Any) -> list[Any]:
    """The table names ``tree`` reads (no ``db.table``)."""
    from sqlglot import exp

    return [table for table in tree.find_all(exp.Table) if table.name and not table.args.get("db")]


def pushed_filters(statement: SqlStatement, table: str | None) -> tuple[PushedFilter, ...]:
    """The conditions ``column op literal`` that every row ``statement`` reads from ``table`` must meet to
    reach its result. A reference to the table contributes the ``WHERE`` conjuncts of the ``SELECT`` that
    reads it alone (no join); a clause that reads it by name, those of the ``SELECT`` that reads the clause
    alone on the clause's PARTITION BY columns (a partition's matches depend on its rows alone, and the
    ones that fail are dropped after matching). Only the conditions that every reference has are pushed;
    none when the table is read elsewhere (a join, a clause's subquery, a WITH of the same name) or the
    statement is beyond the SQL parser."""
    if table is None:
        return ()
    key = table.lower()
    for clause in statement.clauses:  # a subquery in a MATCH_RECOGNIZE that reads the table: not followed
        body = statement.text[clause.keyword : clause.end]
        if any(word.lower() == key for word in re.findall(r"[A-Za-z_]\w*", body)):
            return ()
    parsed = _parse(statement)
    if parsed is None or key in parsed.withs:
        return ()
    found: set[PushedFilter] | None = None
    for tree in parsed.trees:
        for reference in _tables(tree):
            if reference.name.lower() != key:
                continue
            clause = next((c for c in statement.clauses if parsed.relations[c.index] is tree), None)
            if clause is not None and _sole_source(reference) is tree:  # FROM t MATCH_RECOGNIZE
                here = _clause_conditions(clause, parsed.views[clause.index], parsed.trees)
            else:
                here = _conditions(reference)
            found = here if found is None else found & here
    return tuple(sorted(found or (), key=repr))


def _sole_source(reference: Any) -> Any:
    """The SELECT that reads ``reference`` as its only source (no join), or None."""
    from sqlglot import exp

    select = reference.parent.parent if isinstance(reference.parent, exp.From) else None
    if not isinstance(select, exp.Select) or select.args.get("joins") or select.args.get("laterals"):
        return None
    return select


def _clause_conditions(clause: Any, view: str, trees: Sequence[Any]) -> set[PushedFilter]:
    """The conditions on the clause's PARTITION BY columns of the SELECT that reads the clause's view."""
    from sqlglot import exp

    match = clause.statement.match
    measures = {m.name.name.lower() for m in match.measures}
    keys = {ref.column.name.lower() for ref in match.partition_by if ref.qualifier is None} - measures
    for tree in trees:
        for reference in tree.find_all(exp.Table):
            if reference.name == view:
                return {c for c in _conditions(reference) if c.column.lower() in keys}
    return set()


def _conditions(reference: Any) -> set[PushedFilter]:
    """The ``WHERE`` conjuncts of the SELECT that reads ``reference`` alone, as filters on its columns."""
    from sqlglot import exp

    select = _sole_source(reference)
    where = select.args.get("where") if select is not None else None
    if where is None:
        return set()
    condition = where.this.unnest()
    conjuncts = condition.flatten() if isinstance(condition, exp.And) else [condition]
    names = {"", reference.alias_or_name.lower()}
    return {found for c in conjuncts if (found := _filter_of(c.unnest(), names)) is not None}


def _filter_of(condition: Any, qualifiers: set[str]) -> PushedFilter | None:
    """``column op literal``, ``literal op column`` or ``column IN (literal, ...)`` as a filter."""
    from sqlglot import exp

    def column(node: Any) -> str | None:
        if isinstance(node, exp.Column) and node.table.lower() in qualifiers and not node.args.get("db"):
            return node.name
        return None

    if isinstance(condition, exp.In) and not condition.args.get("query") and not condition.args.get("unnest"):
        name, values = column(condition.this), [_literal(v) for v in condition.expressions]
        if name and values and None not in values and len({type(v) for v in values}) == 1:
            return PushedFilter(name, "in", tuple(values))
        return None
    op = _COMPARISONS.get(type(condition).__name__)
    if op is None:
        return None
    left, right = condition.this, condition.expression
    if column(left) and _literal(right) is not None:
        return PushedFilter(column(left), op, (_literal(right),))
    if column(right) and _literal(left) is not None:
        return PushedFilter(column(right), _FLIPPED[op], (_literal(left),))
    return None


_COMPARISONS = {"EQ": "=", "NEQ": "!=", "LT": "<", "LTE": "<=", "GT": ">", "GTE": ">="}
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _literal(node: Any) -> str | int | None:
    """A string or an integer literal's value (None: any other expression)."""
    from sqlglot import exp

    negative = isinstance(node, exp.Neg)
    node = node.this if negative else node
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return None if negative else str(node.this)
    if re.fullmatch(r"\d+", str(node.this)):
        return -int(node.this) if negative else int(node.this)
    return None


def input_identity(spec: str) -> str:
    """What a backtest read from one input, for its output's application id: a Delta table's resolved version
    (the latest when none is named: a table appended to since is another input), a file's size and time."""
    if is_delta(spec):
        snapshot = snapshot_of(spec)
        if snapshot.version is None and snapshot.timestamp is None:
            versions = table_versions(snapshot.path) or [-1]
            return f"delta:{snapshot.path}@v{versions[-1]}"
        return spec
    try:
        found = os.stat(spec)
    except OSError:
        return spec
    return f"{spec}@{found.st_size}:{found.st_mtime_ns}"


def app_id_of(statement_text: str, inputs: Sequence[str]) -> str:
    """The application id of a backtest's output: the same statement over the same inputs (and versions) is
    the same writer, so running it again appends nothing."""
    digest = hashlib.sha256("\0".join([statement_text, *inputs]).encode("utf-8")).hexdigest()[:20]
    return f"cep-run-{digest}"


def write_matches(pdf: Any, spec: str, app_id: str) -> bool:
    """``cep run --output delta:PATH``: the matches (pandas) appended once under ``app_id`` (``write_once``)."""
    return write_once(delta_path(spec), _arrow_us(pdf), app_id, 0)


def _arrow_us(pdf: Any) -> Any:
    """``pdf`` as Arrow with microsecond timestamps (Delta's unit; pandas' nanoseconds are refused)."""
    import pyarrow as pa

    table = pa.Table.from_pandas(pdf, preserve_index=False)
    fields = [
        pa.field(f.name, pa.timestamp("us", f.type.tz)) if pa.types.is_timestamp(f.type) else f for f in table.schema
    ]
    return table.cast(pa.schema(fields))


__all__ = [
    "snapshot_of",
    "read_delta_arrow",
    "columns_read",
    "pushed_filters",
    "default_table",
    "kept_columns",
    "input_identity",
    "app_id_of",
    "write_matches",
    "is_delta",
    "CepDeltaError",
]
