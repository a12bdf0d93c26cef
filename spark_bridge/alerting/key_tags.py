"""Each input row tagged with its partition spec and key by Spark itself, not by a Python ``mapInPandas``.

The stateful step groups rows by (partition spec, bucket of partition keys), so every row must first carry
its spec's id and its key under it (``rule_set.SPEC``, ``PKEY``), once per distinct PARTITION BY of the rule
set. ``worker.Explode`` does that in Python, and whatever it does, a ``mapInPandas`` before the shuffle sends
every row to a Python worker and back inside the first stage of each micro-batch: in a stream on a loaded
2-core machine that round trip, with its task set-up, costs several times the read and the parse it sits
beside (docs/latency.md, "Inside a micro-batch, step by step"). Here the same tags are Spark expressions,
so the first stage is the JVM's alone, as in Spark's floor query.

The key must be byte for byte the text ``Explode`` writes (``json.dumps`` of ``{column: value}``,
``ensure_ascii=False``), because the state store holds each key's tables under it, its bucket is the hash of
it, and match ids and alerts carry it: a checkpoint written by either path must go on under the other.
``key_json`` builds that text for STRING columns, the usual PARTITION BY (a user, a card, a host); a rule
set with a PARTITION BY column of another type (numbers, times: their JSON text is Python's, which Spark's
casts do not reproduce exactly) keeps ``Explode``.

The specs are those of the rule set when the query is planned; a rule set published later with a PARTITION
BY the plan does not tag needs a new plan (``new_partitions``: ``AlertStream`` restarts its query then).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cep.spark_bridge.alerting.rule_set import BAD_SPEC, PKEY, ROW_ID, SPEC
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.spark.columns import quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

__all__ = ["key_json", "new_partitions", "partitions_of", "planned_partitions", "spark_taggable", "tag_rows"]

# What json.dumps writes for the characters it must escape (its ESCAPE_DCT with ensure_ascii=False): the
# short escapes, else \u00xx in lower-case hex. The backslash goes first, so that no escape is escaped again.
_SHORT = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPES = list(_SHORT.items()) + [(chr(code), f"\\u{code:04x}") for code in range(0x20) if chr(code) not in _SHORT]
_CARRIED = "cep_carried"  # the metadata of a carried column (tag_rows), in place of the input's
# A Java regex of the characters above: a value without any (nearly every one) is written as it is.
_NEEDS_ESCAPE = '[\\x00-\\x1f"\\\\]'


def partitions_of(payload: Mapping) -> dict[str, list[str]]:
    """``{spec id: PARTITION BY columns}`` of a published rule set, as ``worker._RuleSetRuntime`` reads it."""
    return {json.dumps(list(entry["partition"])): list(entry["partition"]) for entry in payload["rules"]}


def planned_partitions(store: RuleStore, cut_short: int | None = None) -> dict[str, list[str]]:
    """The specs a new plan must tag: the current set's, and those of the set a micro-batch cut short by a
    stop or a crash started with (it runs again with that set)."""
    found: dict[str, list[str]] = {}
    pinned = store.batch_sets().get(cut_short) if cut_short is not None else None
    for set_id in {store.current_id(), pinned} - {None}:
        found.update(partitions_of(store.load(set_id)))
    return found


def new_partitions(payload: Mapping, planned: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The PARTITION BY column lists of ``payload`` that a plan tagging ``planned`` would not tag."""
    return [columns for spec, columns in partitions_of(payload).items() if spec not in planned]


def spark_taggable(partitions: Mapping[str, Sequence[str]], df: DataFrame) -> bool:
    """Whether ``tag_rows`` can tag ``df`` for these specs: at least one, every column a STRING of ``df``."""
    from pyspark.sql import types as T

    types = {f.name: f.dataType for f in df.schema.fields}
    return bool(partitions) and all(
        isinstance(types.get(name), T.StringType) for columns in partitions.values() for name in columns
    )


def json_text(value: Column) -> Column:
    """A STRING column as ``json.dumps(value, ensure_ascii=False)`` writes it (``null`` for NULL)."""
    from pyspark.sql import functions as F

    escaped = value
    for char, escape in _ESCAPES:
        escaped = F.replace(escaped, F.lit(char), F.lit(escape))
    quoted = F.concat(F.lit('"'), F.when(value.rlike(_NEEDS_ESCAPE), escaped).otherwise(value), F.lit('"'))
    return F.coalesce(quoted, F.lit("null"))


def key_json(columns: Sequence[str]) -> Column:
    """The partition key of each row as ``worker.Explode`` writes it: ``{"card": "c1", "region": null}``."""
    from pyspark.sql import functions as F

    parts: list = []
    for index, name in enumerate(columns):
        parts.append(F.lit(("{" if index == 0 else ", ") + json.dumps(name, ensure_ascii=False) + ": "))
        parts.append(json_text(F.col(quote(name))))
    return F.concat(*parts, F.lit("}")) if parts else F.lit("{}")


def tag_rows(
    df: DataFrame,
    partitions: Mapping[str, Sequence[str]],
    carried: Sequence[str],
    reject: str | None = None,
    row_ids: bool = False,
) -> DataFrame:
    """What ``worker.Explode`` gives (``SPEC``, ``PKEY``, ``carried``, with ``row_ids`` ``ROW_ID``), in Spark:
    each row once per spec, a bad row (``reject`` set) once, to ``BAD_SPEC`` with the key ``{}``."""
    from pyspark.sql import functions as F

    # Carried without their metadata, as out of a mapInPandas: the event time's watermark mark must not reach the
    # stateful operator (query.match_rules puts it on a column of its own, so that Spark drops no late row).
    # An alias keeps metadata it is given, and only non-empty metadata is given, hence a mark of our own.
    columns = [F.col(quote(c)).alias(c, metadata={_CARRIED: True}) for c in carried]
    if row_ids:  # unique within the micro-batch, which is all a row id is for; set before a row is copied
        # (a stream refuses monotonically_increasing_id; a random UUID is unique as well). Through `reflect`, not
        # Spark's uuid(): Spark draws uuid()'s seed again at every micro-batch (a seed given too) and writes it
        # into the stage's generated code, so that stage, the plan's largest, was compiled again at every
        # micro-batch; the generated code calls `reflect` rather than contains it, and stays the same.
        df = df.withColumn(ROW_ID, F.expr("reflect('java.util.UUID', 'randomUUID')"))
        columns.append(F.col(ROW_ID))
    good = [(F.lit(spec), key_json(names)) for spec, names in partitions.items()]
    if len(good) == 1:  # one PARTITION BY (most rule sets): a projection, no generator
        spec, key = good[0]
        if reject is not None:
            is_bad = F.col(reject).isNotNull()
            spec = F.when(is_bad, F.lit(BAD_SPEC)).otherwise(spec)
            key = F.when(is_bad, F.lit("{}")).otherwise(key)
        return df.select(spec.alias(SPEC), key.alias(PKEY), *columns)
    tags = F.array(*[F.struct(spec.alias(SPEC), key.alias(PKEY)) for spec, key in good])
    if reject is not None:
        bad = F.array(F.struct(F.lit(BAD_SPEC).alias(SPEC), F.lit("{}").alias(PKEY)))
        tags = F.when(F.col(reject).isNotNull(), bad).otherwise(tags)
    tagged = df.select(F.inline(tags), *columns)
    # not NULL, as a single spec's projection and Explode's schema say (the grouping key of the state store)
    return tagged.select(*[F.coalesce(F.col(c), F.lit("")).alias(c) for c in (SPEC, PKEY)], *columns)
