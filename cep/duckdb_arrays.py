"""Spark's array functions whose DuckDB form, as sqlglot writes it, means something else: an index out of
bounds (an error in Spark's ANSI mode, NULL in DuckDB), ``element_at`` from 1 and from the end,
``array_contains`` beside a NULL element, ``array_join`` of NULLs (part of the translation in
cep/duckdb_sql.py, called from cep/duckdb_functions.py; docs/sql-statements.md lists the rules); and
``collect_list``/``collect_set`` as Spark's (``empty_collections``, a pass after the translation)."""

from __future__ import annotations

from cep.duckdb_nodes import Refusal, call_duck, fail_with, foldable, place_of, type_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).


def array_meaning(node, types: dict[int, str]):
    """Spark's meaning of the array functions whose DuckDB form differs, or None."""
    from sqlglot import exp

    if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and _indexes_an_array(node, types):
        return _array_element(node)
    if isinstance(node, exp.ArrayContains):  # Spark: NULL, not FALSE, when the value is missing and a NULL is there
        array = node.this
        has_null = exp.LT(this=call_duck("list_count", array.copy()), expression=call_duck("len", array.copy()))
        return exp.Case(
            ifs=[exp.If(this=node.copy(), true=exp.true()), exp.If(this=has_null, true=exp.Null())],
            default=node.copy(),
        )
    if isinstance(node, exp.ArrayToString):  # Spark's array_join: NULL of a NULL array or separator, else text
        unknown = exp.or_(*(exp.Is(this=side.copy(), expression=exp.Null()) for side in (node.this, node.expression)))
        joined = exp.Coalesce(this=node.copy(), expressions=[exp.Literal.string("")])  # DuckDB: NULL of all NULLs
        return exp.Case(ifs=[exp.If(this=unknown, true=exp.Null())], default=joined)
    return None


def _indexes_an_array(node, types: dict[int, str]) -> bool:
    """Whether ``node`` (``x[i]``, ``element_at(x, i)``) reads an element of an array, by ``x``'s type or the
    function that makes it; a map's key is read alike on both engines (NULL where it is missing). Refused
    when neither tells."""
    from sqlglot import exp

    kind = type_of(node.this, types)
    makes_an_array = (exp.Array, exp.RegexpSplit, exp.Split, exp.ArrayAgg, exp.GenerateSeries, exp.ArraySort)
    if kind == "ARRAY" or isinstance(node.this, (*makes_an_array, exp.ArraySlice)):
        return True
    if kind == "MAP" or isinstance(node.this, (exp.VarMap, exp.Map, exp.StrToMap)):
        return False
    raise Refusal(
        "the python engine cannot tell whether this reads an array or a map (an array's index out of bounds "
        "is an error on Spark, NULL in DuckDB)",
        *place_of(node),
        untyped=True,
    )


def _array_element(node):
    """Spark's ``arr[i]`` (from 0) and ``element_at(arr, i)`` (from 1; from the end below 0) in ANSI mode: an
    index out of bounds is an error, as is ``element_at``'s index 0; ``try_element_at`` gives NULL out of
    bounds. DuckDB gives NULL for both, and reads a negative ``arr[i]`` from the end."""
    from sqlglot import exp

    array, index = node.this, exp.Paren(this=node.expressions[0].copy())
    written = node.expressions[0].unnest()
    if (
        isinstance(array, exp.Array)
        and not foldable(array)
        and node.args.get("offset") != 1
        and isinstance(written, exp.Literal)
        and written.is_number
        and written.this.removeprefix("-").isdigit()
    ):  # Spark's optimizer reads array(a, b)[3] and [-1] (written, not computed) as NULL, unevaluated
        return node.copy() if 0 <= int(written.this) < len(array.expressions) else exp.Null()
    count = call_duck("len", array.copy())
    zero = exp.Literal.number(0)
    from_one = node.args.get("offset") == 1
    if from_one:
        within = exp.LTE(this=call_duck("abs", index.copy()), expression=count)
    else:
        within = exp.and_(exp.GTE(this=index.copy(), expression=zero), exp.LT(this=index.copy(), expression=count))
    where = place_of(node)
    outside = (
        exp.Null()
        if node.args.get("safe")
        else fail_with(
            "the array's index is out of bounds (INVALID_ARRAY_INDEX); try_element_at gives NULL",
            where,
            element_of=array,
        )
    )
    unknown = exp.or_(*(exp.Is(this=side.copy(), expression=exp.Null()) for side in (array, index)))
    branches = [exp.If(this=unknown, true=exp.Null())]
    if from_one:  # Spark: index 0 is an error in element_at and try_element_at alike
        failed = fail_with("element_at's index must not be 0 (the first element is 1)", where, element_of=array)
        branches.append(exp.If(this=exp.EQ(this=index.copy(), expression=zero), true=failed))
    branches.append(exp.If(this=within, true=node.copy()))
    return exp.Case(ifs=branches, default=outside)


def empty_collections(tree) -> None:
    """Spark's ``collect_list`` and ``collect_set`` of no value (no row, or only NULLs) are ``[]``; DuckDB's
    ``ARRAY_AGG`` is NULL. A pass after the translation, so that the aggregate is wrapped outside its
    ``FILTER`` and ``OVER``, whatever the rules made of the window. Both skip NULLs; sqlglot's ``ARRAY_AGG``
    drops them (DuckDB's keeps them) only where the value reads a column, so a value of none
    (``collect_list(CASE WHEN false THEN 'a' END)``, ``collect_list(NULL)``) gets the FILTER here (found by the
    differential, seed 33: its size was the row count, Spark's 0)."""
    from sqlglot import exp

    for collected in list(tree.find_all(exp.ArrayAgg, exp.ArrayUniqueAgg)):
        value = collected.this
        if isinstance(collected, exp.ArrayUniqueAgg) and isinstance(value, exp.Distinct):
            # collect_set(DISTINCT i) is collect_set(i); sqlglot wrote DuckDB's LIST(DISTINCT DISTINCT i)
            value = value.expressions[0].copy()
            collected.set("this", value)
        if isinstance(collected, exp.ArrayUniqueAgg) and isinstance(collected.parent, exp.Filter):
            listed = call_duck("list", exp.Distinct(expressions=[value.copy()]))  # sqlglot's DuckDB form, unfiltered
            collected.replace(listed)
            collected = listed
            collected.set("nulls_excluded", True)
        if collected.args.get("nulls_excluded") and isinstance(collected.parent, exp.Filter):
            # sqlglot writes its NULL test as a second FILTER beside the user's (`... FILTER (WHERE ...)`), or
            # as `NOT DISTINCT i IS NULL`, neither of which DuckDB parses (a syntax error on the python engine
            # for collect_list(DISTINCT i) FILTER (WHERE ...), collect_set(i) FILTER (...)): one FILTER here
            where = collected.parent.expression
            tested = value.expressions[0] if isinstance(value, exp.Distinct) else value
            kept = exp.Not(this=exp.Is(this=tested.copy(), expression=exp.Null()))
            where.set("this", exp.and_(exp.Paren(this=where.this.copy()), kept))
            collected.set("nulls_excluded", None)
        unfiltered = collected.args.get("nulls_excluded") and not isinstance(collected.parent, exp.Filter)
        if unfiltered and value is not None and value.find(exp.Column) is None:
            collected.set("nulls_excluded", None)
            kept = exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null()))
            filtered = exp.Filter(this=collected.copy(), expression=exp.Where(this=kept))
            collected.replace(filtered)
            collected = filtered.this
        outer = collected
        while isinstance(outer.parent, (exp.Filter, exp.Window)) and outer.arg_key == "this":
            outer = outer.parent
        outer.replace(exp.Coalesce(this=outer.copy(), expressions=[exp.Array(expressions=[])]))
