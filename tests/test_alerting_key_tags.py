"""Rows tagged with their partition spec and key by Spark expressions (``alerting/key_tags.py``) get exactly the
tags the Python ``mapInPandas`` gives them (``worker.Explode``): the same spec ids, the same key text byte for
byte (a checkpoint's state is held under it), the same rows carried, bad rows once to ``BAD_SPEC``.

The independent source is ``Explode`` itself, run on the same rows in-process: it writes each key with Python's
``json.dumps``, which ``key_tags`` re-creates with Spark's string functions.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep.spark_bridge.alerting.key_tags import (
    new_partitions,
    partitions_of,
    planned_partitions,
    spark_taggable,
    tag_rows,
)
from cep.spark_bridge.alerting.rule_set import BAD_SPEC, PKEY, ROW_ID, SPEC
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.alerting.worker import Explode
from tests.codegen_count import compilations_per_micro_batch

pytestmark = pytest.mark.spark

NAMES = ["card", "région", 'we"ird']
REJECT = "__cep_reject"
# Text as keys come: mostly plain, with every character json.dumps escapes, quotes, backslashes, non-ASCII
# and characters beyond the BMP; NULL too (json.dumps writes null).
TEXT = st.one_of(
    st.none(),
    st.sampled_from(["", "c1", "AAPL", 'a"b', "a\\b", "\\u0041", "tab\there", "ünï", "😀"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6),
    st.text(alphabet=st.sampled_from(['"', "\\", "/", "\x00", "\x07", "\x0b", "\x1f", "\x7f", "\u2028", "x"])),
)
ROW = st.fixed_dictionaries(
    {name: TEXT for name in NAMES} | {"n": st.integers(-5, 5), REJECT: st.sampled_from([None, None, "not_json"])}
)
PARTITION_BY = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True)  # a spec: its columns in order


def publish(directory, specs: list[list[str]]) -> RuleStore:
    store = RuleStore(str(directory))
    store.publish({"rules": [{"rule_id": f"r{i}", "partition": spec} for i, spec in enumerate(specs)]})
    return store


def python_tags(store: RuleStore, pdf, carried: list[str], reject: str | None) -> list[tuple]:
    import pandas as pd

    out = pd.concat(list(Explode(store.directory, carried, reject)(iter([pdf]))), ignore_index=True)
    return ordered(out[[SPEC, PKEY, *carried]].astype(object).itertuples(index=False))


def ordered(rows) -> list[tuple]:
    """Rows in one order, whatever their NULLs (pandas may hold one as NaN)."""
    plain = [tuple(None if value != value else value for value in row) for row in rows]  # NaN != NaN
    return sorted(plain, key=repr)


# Spark plans and compiles the tagging of each example anew (its specs are in the generated code) and runs two
# jobs (the tags, and the input for Explode): about a second an example, whatever its size. So few examples, each
# with many rows and specs: 10 examples of up to 100 rows and 8 specs (a spec is a PARTITION BY: its columns in
# order), where 40 examples had up to 25 rows and 3 specs.
ROWS = st.lists(ROW, min_size=1, max_size=100)
# one spec (a projection) in about half the examples, several (an array of tags, exploded) in the others
SPECS = st.one_of(st.lists(PARTITION_BY, min_size=1, max_size=1), st.lists(PARTITION_BY, min_size=2, max_size=8))


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rows=ROWS, specs=SPECS, with_reject=st.booleans())
def test_spark_tags_equal_explodes(spark, tmp_path_factory, rows, specs, with_reject):
    from pyspark.sql import types as T

    store = publish(tmp_path_factory.mktemp("rules"), specs)
    schema = T.StructType(
        [T.StructField(name, T.StringType()) for name in NAMES]
        + [T.StructField("n", T.LongType()), T.StructField(REJECT, T.StringType())]
    )
    df = spark.createDataFrame([[row[f.name] for f in schema.fields] for row in rows], schema)
    reject = REJECT if with_reject else None
    carried = NAMES + ["n"] + ([REJECT] if with_reject else [])
    partitions = partitions_of(store.load(store.current_id()))
    assert spark_taggable(partitions, df)
    tagged = tag_rows(df, partitions, carried, reject)
    assert [f.name for f in tagged.schema.fields] == [SPEC, PKEY, *carried]
    assert not tagged.schema[SPEC].nullable and not tagged.schema[PKEY].nullable  # the state store's grouping key
    spark_rows = ordered(tagged.collect())
    assert spark_rows == python_tags(store, df.toPandas(), carried, reject)
    if with_reject:
        bad = sum(1 for row in rows if row[REJECT] is not None)
        assert sum(1 for row in spark_rows if row[0] == BAD_SPEC) == bad
    for row in spark_rows:  # every key is a JSON object of its spec's columns
        if row[0] != BAD_SPEC:
            assert list(json.loads(row[1])) == json.loads(row[0])


def test_copies_of_a_row_share_its_row_id_and_rows_do_not(spark, tmp_path):
    """A row late for rules of two specs counts once: both copies carry one row id, unique to the row."""
    from pyspark.sql import functions as F

    store = publish(tmp_path / "rules", [["card"], ["card", "région"]])
    df = spark.range(40).select(F.col("id").cast("string").alias("card"), F.lit("x").alias("région")).repartition(3)
    partitions = partitions_of(store.load(store.current_id()))
    out = tag_rows(df, partitions, ["card", "région"], row_ids=True).toPandas()
    assert len(out) == 80
    per_row = out.groupby(ROW_ID)["card"].agg(["nunique", "size"])
    assert len(per_row) == 40 and (per_row["nunique"] == 1).all() and (per_row["size"] == 2).all()


def test_row_ids_leave_the_generated_code_the_same_at_every_micro_batch(spark, tmp_path):
    """Spark compiles a stage's generated code again when its text changes. Spark's uuid() gets a new seed at
    every micro-batch and writes it into that text, so the tagging stage (the keyed layout's largest) was
    compiled at every micro-batch: Spark's own counter (``CodegenMetrics``) counts no compilation after the first
    micro-batch now, and the row ids are still one per row, shared by its copies."""

    store = publish(tmp_path / "rules", [["card"], ["card", "région"]])
    partitions = partitions_of(store.load(store.current_id()))
    source = tmp_path / "in"
    source.mkdir()
    for index in range(4):
        path = source / f"batch-{index}.json"
        path.write_text("".join(json.dumps({"card": f"c{index}-{i}", "région": "x"}) + "\n" for i in range(5)))
        os.utime(path, (1_000 + index, 1_000 + index))  # read in this order, one file per micro-batch
    df = spark.readStream.schema("card STRING, `région` STRING").option("maxFilesPerTrigger", 1).json(str(source))
    tagged = tag_rows(df, partitions, ["card", "région"], row_ids=True)
    ids: list[dict] = []

    def read(batch):
        rows = batch.select(ROW_ID, "card").collect()
        ids.append({row_id: {r["card"] for r in rows if r[ROW_ID] == row_id} for row_id, _ in rows})

    compiled = compilations_per_micro_batch(spark, tagged, tmp_path / "ck", read)
    assert [len(batch) for batch in ids] == [5] * 4  # 10 copies per micro-batch: 5 ids, each a row's two copies
    assert all(len(cards) == 1 for batch in ids for cards in batch.values())
    assert compiled[0] > 0 and compiled[1:] == [0, 0, 0], compiled


def test_only_string_partition_columns_are_tagged_by_spark(spark):
    df = spark.createDataFrame([("a", 1)], "card STRING, n BIGINT")
    assert spark_taggable({'["card"]': ["card"]}, df)
    assert not spark_taggable({'["n"]': ["n"]}, df)  # a number's JSON text is Python's: Explode writes it
    assert not spark_taggable({}, df)  # no rule: nothing to tag by


def test_a_new_plan_tags_the_current_set_and_the_set_of_a_cut_short_batch(tmp_path):
    """A micro-batch cut short runs again with the set it started with, so a new plan tags its specs too."""
    store = publish(tmp_path / "rules", [["card"]])
    assert store.set_for_batch(7) == store.current_id()
    store.publish({"rules": [{"rule_id": "r", "partition": ["région"]}]})
    card, region = json.dumps(["card"]), json.dumps(["région"])  # spec ids as worker._RuleSetRuntime names them
    assert planned_partitions(store) == {region: ["région"]}
    assert planned_partitions(store, cut_short=7) == {card: ["card"], region: ["région"]}
    assert new_partitions({"rules": [{"partition": ["card"]}, {"partition": []}]}, {'["card"]': ["card"]}) == [[]]


ANYWHERE = """-- name: anywhere
SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES X.price AS p, X.symbol AS s PATTERN (X) DEFINE X AS price > 60)"""


def test_a_rule_with_a_partition_by_new_to_the_plan_re_plans_the_running_query(spark, tmp_path, capsys):
    """The plan tags the specs it was built with; a rule added with another PARTITION BY (here none) stops the
    query before its set is published and starts it on a new plan: the new rule sees every row after the
    change, the old one keeps its state across the re-plan, and no alert is lost or doubled."""
    from cep.spark_bridge.alerting.stream import AlertStream
    from tests.test_alerting import SENTINEL, SPAN, _schema, at, price_walk, replay, streamed, write_batch, write_rule

    rules, source = tmp_path / "rules", tmp_path / "in"
    write_rule(rules, "span.sql", SPAN)
    batches = [price_walk(["a", "b"], 50 * i, 50 * i + 40, 4, seed=i) for i in range(3)]  # none late
    batches[-1].append({"symbol": SENTINEL, "ts": at(10_000), "price": 0.0})  # the watermark past every row
    write_batch(source, 0, batches[0])
    events: list[str] = []
    df = spark.readStream.schema(_schema()).json(str(source))
    stream = AlertStream(  # the tags are the keyed layout's plan: the driver layout tags rows on the driver
        spark, str(rules), df, checkpoint=str(tmp_path / "ck"), watermark="5 seconds", on_event=events.append,
        state="spark",
    )  # fmt: skip
    stream.start()
    try:
        stream.process_all_available()
        first_run = stream.match_query.runId
        write_rule(rules, "anywhere.sql", ANYWHERE)
        assert stream.refresh_rules().added == ("anywhere/anywhere",)
        assert stream.match_query.runId != first_run and stream.match_query.isActive
        assert any("new to the query's plan" in e for e in events)
        for index in (1, 2):
            write_batch(source, index, batches[index])
            stream.process_all_available()
        capsys.readouterr()
        stream.match_query.explain()
        plan = capsys.readouterr().out
    finally:
        stream.stop()
    assert "FlatMapGroupsInPandasWithState" in plan
    assert "MapInPandas" not in plan  # both specs tagged by Spark
    out = stream.alerts().toPandas()
    assert out["match_id"].is_unique
    assert streamed(out, "span") == replay(SPAN, [e for b in batches for e in b])
    after = [e for b in batches[1:] for e in b if e["symbol"] != SENTINEL]
    anywhere = out[out["rule_id"] == "anywhere/anywhere"]
    assert set(anywhere["partition_key"]) == {"{}"}
    expected = sorted(json.dumps(row["p"]) for row in cep_rows(ANYWHERE, after))
    assert sorted(json.dumps(json.loads(m)["p"]) for m in anywhere["measures"]) == expected


def cep_rows(text: str, events: list[dict]) -> list[dict]:
    import cep

    return list(cep.compile(text).run(events))


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.none(), st.just(float("nan")), st.text(max_size=6), st.sampled_from(["S1", 'a"b', "é\n", ""])),
        max_size=40,
    ),
    other=st.sampled_from([None, 7, 2.5]),
)
def test_a_text_partition_key_s_strings_are_json_dumps_of_each_row(values, other):
    """``_key_strings`` of one column of text, encoded once per distinct value: the text ``json.dumps`` gives row by
    row (NULL and NaN as null); a column holding a value that is not text (``other``) takes the row-by-row path."""
    import pandas as pd

    from cep.spark_bridge.alerting.worker import _key_strings

    column = [*values, other] if other is not None else values
    want = [json.dumps({"sym": None if v is None or v != v else v}, ensure_ascii=False) for v in column]  # v != v: NaN
    assert _key_strings(pd.DataFrame({"sym": pd.Series(column, dtype=object)}), ["sym"]) == want
