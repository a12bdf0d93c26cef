"""Bad events and duplicates in batch (``Query.run``): counted, dead-lettered with the reason, the rest matched.

The central property: injecting bad rows anywhere into good data changes nothing for the good rows.
``q.run(mixed, dead_letter=dl)`` returns exactly ``q.run(good)``, and ``dl`` holds exactly the injected
rows, each with the reason it was injected for. Rules: matcher/rows/validate.py; table: docs/reliability.md.
"""

from __future__ import annotations

import datetime as dt
import math

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.grammar.errors import CepRuntimeError, CepSemanticError
from cep.matcher.rows import validate

T0 = dt.datetime(2024, 1, 1)
UTC = dt.UTC

V_SHAPE = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts
  MEASURES FIRST(A.ts) AS t0, LAST(B.ts) AS t1, COUNT(*) AS n
  PATTERN (A B+) DEFINE B AS price < PREV(price))"""

QUERIES = {
    # the fast path (numpy + re)
    "v_shape": V_SHAPE,
    # the Pike VM: C reads the match history
    "history": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts
      MEASURES FIRST(A.ts) AS t0, LAST(C.ts) AS t1, SUM(price) AS total
      PATTERN (A B+ C) DEFINE B AS price < PREV(price), C AS price > FIRST(B.price))""",
    # every input row comes out, matched or not
    "all_rows": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts
      MEASURES CLASSIFIER() AS cls, RUNNING SUM(price) AS running_total, MATCH_NUMBER() AS m
      ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP TO NEXT ROW
      PATTERN (A B*) DEFINE A AS price > 2, B AS price <= PREV(price))""",
    # event time: WITHIN expiry and timeouts are decided by the largest event time in the input
    "within": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts
      MEASURES A.ts AS t0, MATCH_STATUS() AS status, COUNT(*) AS n
      ONE ROW PER MATCH SHOW TIMEOUT MATCHES
      PATTERN (A B+ C) WITHIN INTERVAL '8' SECOND
      DEFINE A AS price >= 3, B AS price < PREV(price), C AS price > PREV(price))""",
    # no partition
    "unpartitioned": """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
      MEASURES FIRST(ts) AS t0, COUNT(*) AS n, LAST(s) AS last_s
      PATTERN (A+ B) DEFINE A AS price >= 2, B AS price < 2)""",
}


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def rows(*specs, s="a"):
    """rows((0, 5.0), (1, 4.0)) -> dicts with s, ts (seconds after T0) and price."""
    return [dict(s=s, ts=at(t), price=p) for t, p in specs]


GOOD = rows((0, 5.0), (1, 4.0), (2, 3.0), (3, 6.0), (4, 2.0)) + rows((0, 9.0), (2, 1.0), s="b")


def run_with_dead_letter(query_text, data, **options):
    dead: list[dict] = []
    stats: dict = {}
    out = cep.compile(query_text).run(data, dead_letter=dead, stats=stats, **options)
    return out, dead, stats


# ------------------------------------------------------------------------------------------ event time


def test_null_event_time_is_dead_lettered():
    bad = dict(s="a", ts=None, price=1.0)
    out, dead, stats = run_with_dead_letter(V_SHAPE, GOOD[:2] + [bad] + GOOD[2:])
    assert out == cep.compile(V_SHAPE).run(GOOD)
    assert dead == [
        {
            **bad,
            "_cep_error": "null_event_time",
            "_cep_error_code": "E0440",
            "_cep_error_detail": "event time 'ts' is NULL",
            "_cep_row": 2,
        }
    ]
    assert stats == {
        "events_in": 8,
        "dead_lettered": 1,
        "duplicates_dropped": 0,
        "events_matched": 7,
        "by_reason": {"null_event_time": 1},
    }


def test_missing_event_time_key_is_null_event_time():
    bad = dict(s="a", price=1.0)  # a dict row without the key: SQL NULL
    out, dead, _ = run_with_dead_letter(V_SHAPE, [bad] + GOOD)
    assert out == cep.compile(V_SHAPE).run(GOOD)
    assert [(d["_cep_error"], d["_cep_row"], "ts" in d) for d in dead] == [("null_event_time", 0, False)]


def test_unparseable_event_time_is_dead_lettered():
    bad = dict(s="a", ts="yesterday-ish", price=1.0)
    out, dead, _ = run_with_dead_letter(V_SHAPE, GOOD + [bad])
    assert out == cep.compile(V_SHAPE).run(GOOD)
    assert [(d["_cep_error"], d["_cep_error_code"], d["_cep_row"]) for d in dead] == [("bad_event_time", "E0441", 7)]
    assert "'ts'" in dead[0]["_cep_error_detail"] and "timestamp" in dead[0]["_cep_error_detail"]


def test_event_time_strings_are_parsed_with_a_schema():
    as_text = [{**row, "ts": row["ts"].isoformat()} for row in GOOD]
    bad = dict(s="a", ts="2024-13-45T99:00:00", price=1.0)
    out, dead, _ = run_with_dead_letter(V_SHAPE, as_text + [bad], schema={"ts": "TIMESTAMP", "price": "DOUBLE"})
    assert out == cep.compile(V_SHAPE).run(GOOD)  # matched on the parsed times; the output holds datetimes
    assert [(d["_cep_error"], d["ts"]) for d in dead] == [("bad_event_time", "2024-13-45T99:00:00")]
    assert "ISO 8601" in dead[0]["_cep_error_detail"]


def test_nan_event_time_is_dead_lettered():
    numeric = [{**row, "ts": (row["ts"] - T0).total_seconds()} for row in GOOD]
    bad = dict(s="a", ts=math.nan, price=1.0)
    out, dead, _ = run_with_dead_letter(V_SHAPE, numeric + [bad])
    assert out == cep.compile(V_SHAPE).run(numeric)
    assert [(d["_cep_error"], d["_cep_row"]) for d in dead] == [("bad_event_time", 7)]


def test_naive_and_time_zone_aware_times_do_not_mix():
    bad = dict(s="a", ts=at(3).replace(tzinfo=UTC), price=1.0)  # cannot be compared with naive times
    out, dead, _ = run_with_dead_letter(V_SHAPE, GOOD + [bad])
    assert out == cep.compile(V_SHAPE).run(GOOD)
    assert [d["_cep_error"] for d in dead] == ["bad_event_time"]


def test_without_dead_letter_null_event_times_sort_as_sql_says():
    """The default run is unchanged: it trusts its input as SQL trusts a typed table (NULLS LAST)."""
    q = cep.compile(V_SHAPE)
    data = GOOD + [dict(s="a", ts=None, price=0.5)]
    # the row with no time sorts last in its partition and extends the second V by one row
    assert q.run(data) == [
        {"s": "a", "t0": at(0), "t1": at(2), "n": 3},
        {"s": "a", "t0": at(3), "t1": None, "n": 3},
        {"s": "b", "t0": at(0), "t1": at(2), "n": 2},
    ]
    # ... and with a dead letter, the row with no time is set aside instead
    assert q.run(data, dead_letter=[]) == q.run(GOOD)


# ------------------------------------------------------------------------------------------ wrong types


def test_string_in_a_numeric_column_is_dead_lettered_not_an_E0410():
    bad = dict(s="a", ts=at(2), price="abc")
    data = GOOD[:2] + [bad] + GOOD[2:]
    with pytest.raises(CepRuntimeError) as raised:  # without a dead letter the comparison fails mid-match
        cep.compile(V_SHAPE.replace("PREV(price)", "PREV(price) AND price > 0")).run(data)
    assert raised.value.code == "E0410"
    out, dead, _ = run_with_dead_letter(V_SHAPE, data)
    assert out == cep.compile(V_SHAPE).run(GOOD)
    assert dead == [
        {
            **bad,
            "_cep_error": "wrong_type",
            "_cep_error_code": "E0442",
            "_cep_row": 2,
            "_cep_error_detail": "column 'price' holds string 'abc' where number is expected",
        }
    ]


@pytest.mark.parametrize("value", [True, [1.0], {"v": 1}, b"1", dt.date(2024, 1, 1)])
def test_other_wrong_types_in_a_numeric_column(value):
    out, dead, _ = run_with_dead_letter(V_SHAPE, GOOD + [dict(s="a", ts=at(9), price=value)])
    assert out == cep.compile(V_SHAPE).run(GOOD)
    assert [(d["_cep_error"], d["price"]) for d in dead] == [("wrong_type", value)]


def test_ints_floats_and_decimals_are_all_numbers():
    from decimal import Decimal

    data = GOOD + [dict(s="a", ts=at(9), price=1), dict(s="a", ts=at(10), price=Decimal("0.5"))]
    out, dead, _ = run_with_dead_letter(V_SHAPE, data)
    assert dead == [] and out == cep.compile(V_SHAPE).run(data)


def bad_positions(prices) -> list[int]:
    data = [dict(s="a", ts=at(i), price=p) for i, p in enumerate(prices)]
    return [d["_cep_row"] for d in run_with_dead_letter(V_SHAPE, data)[1]]


def test_inferred_type_is_the_most_common_then_the_first_seen():
    assert bad_positions([1.0, "x", 2.0, "y", 3.0]) == [1, 3]  # 3 numbers against 2 strings
    assert bad_positions(["x", 1.0, "y", 2.0]) == [1, 3]  # 2 against 2: the type seen first (string) wins
    assert bad_positions([None, None, 1.0, "x", 2]) == [3]  # NULLs are of every type: they do not vote


def test_a_schema_decides_even_against_the_majority():
    data = [dict(s="a", ts=at(i), price=p) for i, p in enumerate(["x", "y", 3.0, 2.0, "z"])]
    out, dead, _ = run_with_dead_letter(V_SHAPE, data, schema="price DOUBLE")
    assert [d["_cep_row"] for d in dead] == [0, 1, 4]
    assert "(declared DOUBLE)" in dead[0]["_cep_error_detail"]
    assert out == cep.compile(V_SHAPE).run([data[2], data[3]])


def test_schema_without_dead_letter_raises_on_the_first_bad_row():
    data = GOOD + [dict(s="a", ts=at(9), price="x"), dict(s="a", ts=None, price=1.0)]
    with pytest.raises(CepRuntimeError) as raised:
        cep.compile(V_SHAPE).run(data, schema={"price": "DOUBLE", "ts": "TIMESTAMP"})
    assert raised.value.code == "E0442"
    assert "row 7" in raised.value.message and "'price'" in raised.value.message and "1 more" in raised.value.message
    assert "dead_letter" in str(raised.value)
    assert cep.compile(V_SHAPE).run(GOOD, schema={"price": "DOUBLE"}) == cep.compile(V_SHAPE).run(GOOD)


def test_unknown_schema_type_is_refused():
    with pytest.raises(ValueError, match="unknown type"):
        cep.compile(V_SHAPE).run(GOOD, dead_letter=[], schema={"price": "MONEY"})


def test_columns_the_query_does_not_read_are_not_checked():
    data = [{**row, "note": i if i % 2 else str(i)} for i, row in enumerate(GOOD)]  # mixed, but unread
    out, dead, _ = run_with_dead_letter(V_SHAPE, data)
    assert dead == [] and out == cep.compile(V_SHAPE).run(GOOD)
    # ... unless the schema declares them
    out, dead, _ = run_with_dead_letter(V_SHAPE, data, schema={"note": "VARCHAR"})
    assert [d["_cep_row"] for d in dead] == [1, 3, 5]


def test_wrong_type_in_a_partition_key_and_an_unusable_key():
    data = GOOD + [dict(s=7, ts=at(1), price=1.0)]
    out, dead, _ = run_with_dead_letter(V_SHAPE, data)
    assert out == cep.compile(V_SHAPE).run(GOOD) and [d["_cep_error"] for d in dead] == ["wrong_type"]
    lists = [dict(s=["a"], ts=at(1), price=1.0), dict(s=["a"], ts=at(2), price=0.5)]  # every key a list
    with pytest.raises(TypeError):  # what the default run does with such keys
        cep.compile(V_SHAPE).run(lists)
    out, dead, _ = run_with_dead_letter(V_SHAPE, lists)
    assert out == [] and [d["_cep_error"] for d in dead] == ["bad_partition_key", "bad_partition_key"]
    assert {d["_cep_error_code"] for d in dead} == {"E0444"}


def test_items_that_are_not_rows():
    data = [None, *GOOD[:3], "price=5", 42, [1, 2], *GOOD[3:]]
    out, dead, stats = run_with_dead_letter(V_SHAPE, data)
    assert out == cep.compile(V_SHAPE).run(GOOD)
    assert [(d["_cep_row"], d["_cep_value"], d["_cep_error_code"]) for d in dead] == [
        (0, None, "E0443"),
        (4, "price=5", "E0443"),
        (5, 42, "E0443"),
        (6, [1, 2], "E0443"),
    ]
    assert stats["events_in"] == 11 and stats["dead_lettered"] == 4 and stats["by_reason"] == {"not_a_row": 4}


def test_options_without_a_dead_letter_refuse_items_that_are_not_rows():
    with pytest.raises(CepRuntimeError) as raised:  # dedup_key and stats do not check types, but need rows
        cep.compile(V_SHAPE).run(with_ids(GOOD) + ["junk"], dedup_key="event_id", stats={})
    assert raised.value.code == "E0443" and "row 7" in raised.value.message


def test_a_bad_row_gets_one_reason_the_event_time_first():
    bad = dict(s=7, ts=None, price="x")
    _, dead, _ = run_with_dead_letter(V_SHAPE, GOOD + [bad])
    assert [d["_cep_error"] for d in dead] == ["null_event_time"]
    bad = dict(s=7, ts=at(5), price="x")  # then the columns in input order
    _, dead, _ = run_with_dead_letter(V_SHAPE, GOOD + [bad])
    assert [(d["_cep_error"], "'s'" in d["_cep_error_detail"]) for d in dead] == [("wrong_type", True)]


def test_every_row_bad_gives_no_match():
    out, dead, stats = run_with_dead_letter(V_SHAPE, [dict(s="a", ts=None, price=1.0)] * 3 + ["x"])
    assert out == [] and len(dead) == 4 and stats["events_matched"] == 0


def test_dead_letter_can_be_a_function():
    seen = []
    cep.compile(V_SHAPE).run(GOOD + [dict(s="a", ts=None, price=1.0)], dead_letter=seen.append)
    assert [d["_cep_row"] for d in seen] == [7]
    with pytest.raises(TypeError, match="dead_letter"):
        cep.compile(V_SHAPE).run(GOOD, dead_letter="errors.jsonl")


def test_the_dead_letter_record_keeps_the_row_and_the_caller_data_is_untouched():
    bad = dict(s="a", ts=None, price=1.0, extra="kept", _cep_error="mine")
    data = GOOD + [bad]
    snapshot = [dict(row) for row in data]
    _, dead, _ = run_with_dead_letter(V_SHAPE, data)
    assert data == snapshot
    assert dead[0]["extra"] == "kept" and dead[0]["_cep_error"] == "null_event_time"  # _cep_* is reserved
    assert set(dead[0]) == {
        "s",
        "ts",
        "price",
        "extra",
        validate.ERROR,
        validate.ERROR_CODE,
        validate.ERROR_DETAIL,
        validate.ROW,
    }


def test_pandas_and_arrow_inputs():
    frame = pd.DataFrame(GOOD + [dict(s="a", ts=None, price=2.5), dict(s="b", ts=at(7), price="oops")])
    dead: list[dict] = []
    out = cep.compile(V_SHAPE).run(frame, dead_letter=dead)
    assert isinstance(out, pd.DataFrame)
    expected = cep.compile(V_SHAPE).run(pd.DataFrame(GOOD))
    assert out.to_dict("records") == expected.to_dict("records")
    assert [(d["_cep_row"], d["_cep_error"]) for d in dead] == [(7, "null_event_time"), (8, "wrong_type")]
    assert pd.DataFrame(dead).shape == (2, 7)  # a dead letter list is one DataFrame away

    table = pa.Table.from_pylist(GOOD + [dict(s="a", ts=None, price=2.5)])
    dead = []
    out = cep.compile(V_SHAPE).run(table, dead_letter=dead)
    assert isinstance(out, pa.Table)
    assert out.to_pylist() == cep.compile(V_SHAPE).run(pa.Table.from_pylist(GOOD)).to_pylist()
    assert [d["_cep_row"] for d in dead] == [7]


# ------------------------------------------------------------------------------ missing and extra columns


def test_a_missing_key_is_null_and_only_bad_where_null_is():
    without_price = dict(s="a", ts=at(5))  # price NULL: the DEFINE is NULL, hence false; not a bad row
    out, dead, _ = run_with_dead_letter(V_SHAPE, GOOD + [without_price])
    assert dead == []
    assert out == cep.compile(V_SHAPE).run(GOOD + [dict(s="a", ts=at(5), price=None)])


@pytest.mark.parametrize("options", [{}, {"dead_letter": []}, {"schema": {"price": "DOUBLE"}}])
def test_a_column_missing_from_the_whole_input_is_a_semantic_error(options):
    data = [dict(s="a", ts=at(i), cost=1.0) for i in range(3)]
    with pytest.raises(CepSemanticError) as raised:
        cep.compile(V_SHAPE).run(data, **options)
    assert raised.value.code == "E0220" and "'price'" in raised.value.message


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_null_partition_key_is_a_partition_of_its_own(name):
    q = cep.compile(QUERIES[name])
    nulls = [{**row, "s": None} for row in GOOD if row["s"] == "a"]
    mixed = GOOD + nulls
    out = q.run(mixed, dead_letter=[])
    assert out == q.run(mixed)  # not bad: NULL is a key like any other
    if "PARTITION BY" in QUERIES[name]:
        alone = q.run(nulls)
        assert [r for r in out if r["s"] is None] == alone
        assert [r for r in out if r["s"] is not None] == q.run(GOOD)
        assert alone == [{**r, "s": None} for r in q.run([r for r in GOOD if r["s"] == "a"])]


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_extra_columns_are_ignored(name):
    q = cep.compile(QUERIES[name])
    extra = [{**row, "comment": f"row {i}", "score": [i]} for i, row in enumerate(GOOD)]
    dead: list = []
    out = q.run(extra, dead_letter=dead)
    assert dead == []
    if "ALL ROWS" in QUERIES[name]:  # every input column is passed through, untouched
        assert [{k: v for k, v in r.items() if k not in ("comment", "score")} for r in out] == q.run(GOOD)
    else:
        assert out == q.run(GOOD)


# ------------------------------------------------------------------------------------------ duplicates


def with_ids(data):
    return [{**row, "event_id": f"e{i}"} for i, row in enumerate(data)]


COUNT_RUNS = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts
  MEASURES COUNT(*) AS n, SUM(price) AS total PATTERN (A+) DEFINE A AS price > 0)"""


def test_without_dedup_key_duplicates_are_distinct_rows():
    data = with_ids(GOOD)
    doubled = data[:3] + [dict(data[2])] + data[3:]
    q = cep.compile(COUNT_RUNS)
    assert q.run(data) == [{"s": "a", "n": 5, "total": 20.0}, {"s": "b", "n": 2, "total": 10.0}]
    assert q.run(doubled) == [{"s": "a", "n": 6, "total": 23.0}, {"s": "b", "n": 2, "total": 10.0}]  # as SQL
    assert q.run(doubled, dedup_key="event_id") == q.run(data)


def test_dedup_key_drops_repeats_within_a_partition():
    data = with_ids(GOOD)
    doubled = data[:3] + [dict(data[2]), dict(data[0])] + data[3:] + [dict(data[6]), dict(data[2])]
    stats: dict = {}
    dead: list = []
    q = cep.compile(V_SHAPE)
    assert q.run(doubled, dedup_key="event_id", stats=stats, dead_letter=dead) == q.run(data)
    assert stats["duplicates_dropped"] == 4 and stats["events_matched"] == len(data) and dead == []


def test_dedup_is_per_partition_and_null_keys_are_never_duplicates():
    data = [
        dict(s="a", ts=at(0), price=5.0, event_id="x"),
        dict(s="b", ts=at(1), price=4.0, event_id="x"),
        dict(s="a", ts=at(2), price=3.0, event_id=None),
        dict(s="a", ts=at(3), price=2.0, event_id=None),
    ]
    stats: dict = {}
    q = cep.compile(V_SHAPE)
    assert q.run(data, dedup_key="event_id", stats=stats) == q.run(data)
    assert stats["duplicates_dropped"] == 0


def test_dedup_on_several_columns_and_a_bad_row_never_hides_a_good_one():
    data = [dict(s="a", ts=at(0), price=5.0), dict(s="a", ts=at(1), price=4.0)]
    bad_first = dict(s="a", ts=at(1), price="4.0")  # same (s, ts) as a good row, but bad: it goes first
    stats: dict = {}
    dead: list = []
    out = cep.compile(V_SHAPE).run(
        [data[0], bad_first, data[1], dict(data[1])], dead_letter=dead, dedup_key=["ts"], stats=stats
    )
    assert out == cep.compile(V_SHAPE).run(data)
    assert [d["_cep_row"] for d in dead] == [1] and stats["duplicates_dropped"] == 1


def test_dedup_key_must_be_a_column():
    with pytest.raises(CepSemanticError) as raised:
        cep.compile(V_SHAPE).run(GOOD, dedup_key="event_id")
    assert raised.value.code == "E0220" and "event_id" in raised.value.message


# ------------------------------------------------------------------------------------- the property


PARTITIONS_WITH_NULL = st.sampled_from(["a", "b", None])
PRICES = st.sampled_from([1.0, 2.0, 3.0, 4.0, 5.0, 2, 4])


PARTITIONS = st.sampled_from(["a", "b"])


@st.composite
def good_rows(draw, partitions=PARTITIONS):
    count = draw(st.integers(0, 24))
    return [dict(s=draw(partitions), ts=at(draw(st.integers(0, 40))), price=draw(PRICES)) for _ in range(count)]


# Each kind of bad row has exactly one problem, so its reason is known. ("type" kinds put a value of
# another type in a column; without a schema they must stay fewer than the good values of that column.)
BAD_KINDS = {
    "null_time": ("null_event_time", False, lambda r: {**r, "ts": None}),
    "missing_time": ("null_event_time", False, lambda r: {"s": r["s"], "price": r["price"]}),
    "text_time": ("bad_event_time", True, lambda r: {**r, "ts": "not a time"}),
    "number_time": ("bad_event_time", True, lambda r: {**r, "ts": 1_700_000_000}),
    "aware_time": ("bad_event_time", True, lambda r: {**r, "ts": r["ts"].replace(tzinfo=UTC)}),
    "text_price": ("wrong_type", True, lambda r: {**r, "price": "12.5"}),
    "bool_price": ("wrong_type", True, lambda r: {**r, "price": True}),
    "list_price": ("wrong_type", True, lambda r: {**r, "price": [1.0]}),
    "number_key": ("wrong_type", True, lambda r: {**r, "s": 7}),
    "not_a_dict": ("not_a_row", False, lambda r: "s,ts,price"),
    "none_item": ("not_a_row", False, lambda r: None),
}


@st.composite
def with_bad_rows(draw, good, typed_limit, template=None):
    """``good`` with bad rows at random places: (mixed input, positions of the bad rows, their reasons)."""
    template = template or dict(s="a", ts=at(3), price=2.0)
    count = draw(st.integers(0, 10))
    kinds = []
    typed = 0
    for _ in range(count):
        kind = draw(st.sampled_from(sorted(BAD_KINDS)))
        if BAD_KINDS[kind][1]:
            if typed >= typed_limit:
                continue
            typed += 1
        kinds.append(kind)
    mixed = list(good)
    bad_objects = []
    for kind in kinds:
        source = draw(st.sampled_from(good)) if good else template
        row = BAD_KINDS[kind][2](dict(source))
        bad_objects.append((row, BAD_KINDS[kind][0]))
        mixed.insert(draw(st.integers(0, len(mixed))), row)
    ids = {id(row): reason for row, reason in bad_objects}
    positions = [i for i, item in enumerate(mixed) if id(item) in ids]
    return mixed, positions, [ids[id(mixed[i])] for i in positions]


def lacks_the_event_time_column(mixed) -> bool:
    """Every dict lacks ``ts``: the whole input has no such column, a query error rather than bad rows."""
    dicts = [item for item in mixed if isinstance(item, dict)]
    return bool(dicts) and not any("ts" in item for item in dicts)


def run_mixed(q, mixed, **options):
    """``q.run(mixed, **options)``, or None after checking the error when the input has no ``ts`` at all."""
    if lacks_the_event_time_column(mixed):
        with pytest.raises(CepSemanticError) as raised:
            q.run(mixed, **options)
        assert raised.value.code == "E0220" and "'ts'" in raised.value.message
        return None
    return q.run(mixed, **options)


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(data=st.data(), name=st.sampled_from(sorted(QUERIES)))
def test_bad_rows_change_nothing_for_the_good_ones_inferred_types(data, name):
    good = data.draw(good_rows())
    mixed, positions, reasons = data.draw(with_bad_rows(good, typed_limit=max(0, len(good) - 1)))
    q = cep.compile(QUERIES[name])
    dead: list[dict] = []
    stats: dict = {}
    out = run_mixed(q, mixed, dead_letter=dead, stats=stats)
    if out is None:
        return
    assert out == q.run(good)
    assert [d["_cep_row"] for d in dead] == positions
    assert [d["_cep_error"] for d in dead] == reasons
    assert stats["events_in"] == len(mixed) and stats["events_matched"] == len(good)


@PROPERTY
@given(data=st.data(), name=st.sampled_from(sorted(QUERIES)))
def test_bad_rows_change_nothing_for_the_good_ones_with_a_schema(data, name):
    good = data.draw(good_rows(PARTITIONS_WITH_NULL))
    mixed, positions, reasons = data.draw(with_bad_rows(good, typed_limit=10))  # any number: the schema decides
    q = cep.compile(QUERIES[name])
    dead: list[dict] = []
    schema = {"s": "VARCHAR", "ts": "TIMESTAMP_NTZ", "price": "DOUBLE"}
    out = run_mixed(q, mixed, dead_letter=dead, schema=schema)
    if out is None:
        return
    assert out == q.run(good)
    assert [d["_cep_row"] for d in dead] == positions
    # with a declared TIMESTAMP, "not a time" fails to parse: still bad_event_time
    assert [d["_cep_error"] for d in dead] == reasons


@PROPERTY
@given(data=st.data(), name=st.sampled_from(sorted(QUERIES)))
def test_duplicates_and_bad_rows_change_nothing_with_a_dedup_key(data, name):
    good = [{**row, "event_id": i} for i, row in enumerate(data.draw(good_rows(PARTITIONS_WITH_NULL)))]
    mixed = list(good)
    copies = data.draw(st.integers(0, 8)) if good else 0
    for _ in range(copies):  # an at-least-once source delivers some events again, later
        original = data.draw(st.integers(0, len(good) - 1))
        after = mixed.index(good[original]) + 1
        mixed.insert(data.draw(st.integers(after, len(mixed))), dict(good[original]))
    template = dict(s="a", ts=at(3), price=2.0, event_id=-1)
    mixed, positions, _ = data.draw(with_bad_rows(mixed, typed_limit=10, template=template))
    q = cep.compile(QUERIES[name])
    stats: dict = {}
    dead: list = []
    out = run_mixed(
        q,
        mixed,
        dead_letter=dead,
        dedup_key="event_id",
        stats=stats,
        schema={"s": "VARCHAR", "ts": "TIMESTAMP_NTZ", "price": "DOUBLE"},
    )
    if out is None:
        return
    assert out == q.run(good)
    assert stats["duplicates_dropped"] == copies and len(dead) == len(positions)
