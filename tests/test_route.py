"""The one engine chooser (``matcher/plan.py``'s ``choose_route``) and the public doors between engines.

* The ``Route`` a query gets is the engine its runs take: the plan a batch run uses is the route's, a
  stream's path (``LocalStream``, the alerting worker) is the route's, and ``cep explain`` prints it.
* ``PartitionMatcher.resume``: a matcher resumed at a point where every earlier start is decided (what the
  column-wise stream step hands the VM) emits exactly what the VM fed the whole partition emits from there,
  checked against ``match_partition`` on random rows.
* ``KeyState`` writes the dict the per-key engine has always written: old checkpoints read, new ones are
  byte for byte what the old code wrote.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cep
from cep.matcher.pike.vm import PartitionMatcher, match_partition
from cep.matcher.plan import COLUMN_WISE, PER_KEY, PIKE, REGEX, SEQUENCE, Route
from cep.matcher.vector.fastpath import FastPlan
from cep.matcher.vector.sequence import SequencePlan
from cep.spark_bridge.alerting.rule_set import build_rule_set
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.alerting.worker import runtime_for
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.keyed import KeyedStream, KeyState
from cep.spark_bridge.engine.local import LocalStream

T0 = dt.datetime(2024, 1, 1)
COLUMNS = ("k", "ts", "v")


def query(pattern: str, defines: str, *, measures: str = "COUNT(*) AS n", within: str = "") -> str:
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES {measures} ONE ROW PER MATCH "
        f"AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) {within} DEFINE {defines})"
    )


REGEX_QUERY = query("A B+ C", "B AS B.v > PREV(B.v), C AS C.v < 3")
SEQUENCE_QUERY = query(
    "A B{2,} C", "A AS A.v > 5, B AS B.v < A.v, C AS C.v > A.v", within="WITHIN INTERVAL '30' SECOND"
)
VM_QUERY = query("(A | B)+ C", "A AS A.v > 5, B AS B.v < FIRST(A.v), C AS C.v = 0")


def test_the_route_names_the_engine_a_batch_run_takes():
    for text, engine, plan_type in (
        (REGEX_QUERY, REGEX, FastPlan),
        (SEQUENCE_QUERY, SEQUENCE, SequencePlan),
        (VM_QUERY, PIKE, type(None)),
    ):
        q = cep.compile(text)
        route = q.plan.route(COLUMNS)
        assert route.batch == engine, text
        assert isinstance(route.column_plan, plan_type)
        assert q.plan.route(COLUMNS) is route  # chosen once per input schema
        assert ("route: batch on the " + engine) in q.explain()
        assert (engine == REGEX) == (route.batch_reasons == ())
    vm = cep.compile(VM_QUERY).plan.route(COLUMNS)
    assert any(reason.startswith("not the sequence engine: ") for reason in vm.batch_reasons)


def test_explain_says_once_and_rightly_why_a_within_query_skips_the_regex_fast_path():
    """The sequence engine runs WITHIN itself, so the reason is what the regex path lacks (not "the VM
    does it"), and the sequence engine's line gives it once, not after a second "not eligible" prefix."""
    text = cep.compile(SEQUENCE_QUERY).explain()
    assert "(not the regex fast path: WITHIN needs event-time expiry, which Python's re cannot do)" in text
    assert "not eligible for the fast path" not in text
    assert "which the VM does" not in text


def test_a_route_is_frozen_and_its_plans_stay_out_of_equality():
    route = cep.compile(SEQUENCE_QUERY).plan.route(COLUMNS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        route.stream = PER_KEY  # type: ignore[misc]
    assert route == Route(
        batch=route.batch, stream=route.stream, batch_reasons=route.batch_reasons, stream_reasons=route.stream_reasons
    )


def test_a_stream_runs_where_the_route_says_and_the_stream_facts_count():
    q = cep.compile(SEQUENCE_QUERY)
    plain = KeyedStream(q.plan, COLUMNS, query_text=q.text)
    assert plain.route().stream == COLUMN_WISE and LocalStream(plain, delay_ms=0).step is not None
    deduped = KeyedStream(q.plan, COLUMNS, query_text=q.text, dedup_key="v")  # repeats dropped column-wise too
    assert deduped.route() is plain.route() and LocalStream(deduped, delay_ms=0).step is not None
    forced = LocalStream(plain, delay_ms=0, columnar=False)
    assert forced.step is None and forced.route.stream_reasons == ("columnar=False",)
    after = cep.compile(query("A{2,} B", "A AS A.v < 5, B AS B.v >= 5", measures="NEXT(B.v) AS later"))
    reasons = KeyedStream(after.plan, COLUMNS, query_text=after.text).route().stream_reasons
    assert reasons == ("NEXT in a measure (a match waits for the rows after it)",)
    assert after.explain().splitlines()[-1] == "  streaming: per key on the Pike VM (" + reasons[0] + ")"
    # the V shape: runs that are not the pattern's last item stream column-wise
    vshape = cep.compile(query("A B+ C+", "B AS B.v < PREV(B.v), C AS C.v > PREV(C.v)"))
    assert KeyedStream(vshape.plan, COLUMNS, query_text=vshape.text).route().stream == COLUMN_WISE


def test_the_alerting_worker_runs_each_rule_where_the_chooser_and_cep_explain_say(tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "burst.sql").write_text(
        "-- name: burst\n" + SEQUENCE_QUERY.replace("FROM t", "FROM tx"), encoding="utf-8"
    )
    (tmp_path / "rules" / "either.sql").write_text(
        "-- name: either\n" + VM_QUERY.replace("FROM t", "FROM tx"), encoding="utf-8"
    )
    payload, _ = build_rule_set(str(tmp_path / "rules"), input_types={"k": "VARCHAR", "ts": "TIMESTAMP", "v": "DOUBLE"})
    store = RuleStore(str(tmp_path / "store"))
    store.publish(payload)
    runtime = runtime_for(store.directory, "0")
    burst, either = runtime.rule("burst/burst"), runtime.rule("either/either")
    assert burst.route.stream == COLUMN_WISE and burst.columnar is not None and burst.route.stream_reasons == ()
    assert either.route.stream == PER_KEY and either.columnar is None
    # per rule, the same route (and the same reasons) as the rule's query alone, which cep explain prints
    for rule, text in ((burst, SEQUENCE_QUERY), (either, VM_QUERY)):
        alone = KeyedStream(cep.compile(text).plan, COLUMNS, query_text=text).route()
        assert (rule.route.stream, rule.route.stream_reasons) == (alone.stream, alone.stream_reasons)
    assert either.route.stream_reasons[0].startswith("not the sequence engine")
    assert cep.compile(VM_QUERY).explain().splitlines()[-1].startswith("  streaming: per key on the Pike VM (not the")


def _rows(rng: random.Random, n: int) -> dict[str, list]:
    return {
        "k": ["a"] * n,
        "ts": [T0 + dt.timedelta(seconds=i) for i in range(n)],
        "v": [rng.choice([0, 1, 2, 4, 6, 8, 9]) for _ in range(n)],
    }


RESUMED_QUERIES = [
    query(
        "A B+ C",
        "A AS A.v > 5, B AS B.v < PREV(B.v), C AS C.v > PREV(C.v)",
        measures="MATCH_NUMBER() AS m, FIRST(A.v) AS a, COUNT(*) AS n, LAST(C.ts) AS c",
    ),
    query(
        "A B{2,} C",
        "A AS A.v > 5, B AS B.v < A.v, C AS C.v > A.v",
        measures="MATCH_NUMBER() AS m, FIRST(A.ts) AS a, SUM(B.v) AS s",
    ),
    query("A C", "A AS A.v >= 4, C AS C.v > PREV(C.v, 2)", measures="MATCH_NUMBER() AS m, A.ts AS a"),
]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), which=st.sampled_from(range(len(RESUMED_QUERIES))), cut=st.integers(0, 6))
def test_a_resumed_matcher_emits_what_the_whole_partition_emits_from_there(seed, which, cut):
    q = cep.compile(RESUMED_QUERIES[which])
    machine = q.plan.machine(COLUMNS)
    columns = _rows(random.Random(seed), 60)
    whole = match_partition(machine, ("a",), {name: columns[name] for name in machine.columns})
    # Every start before the row after a match's last row is decided (SKIP PAST LAST ROW): resume there.
    ts_at = {value: index for index, value in enumerate(columns["ts"])}
    ends = [ts_at[row[-1]] for row in whole] if which == 0 else []
    done = min(cut, len(whole))
    if which == 0:
        head = ends[done - 1] + 1 if done else 0
    else:  # no last row among the measures: find the head by feeding the matcher until `done` matches
        head = 0
        matcher = PartitionMatcher(machine, ("a",))
        emitted = 0
        while emitted < done and head < len(columns["ts"]):
            emitted += len(matcher.feed({name: [columns[name][head]] for name in machine.columns}))
            head += 1
        done = emitted
        assume(matcher.first_undecided() == head)  # else a start before the head is undecided: no point to resume at
    context = min(machine.lookback, head)
    resumed = PartitionMatcher.resume(
        machine,
        ("a",),
        {name: columns[name][head - context : head] for name in machine.columns},
        position=head - context,
        match_number=done,
    )
    out = resumed.feed({name: columns[name][head:] for name in machine.columns}) + resumed.finish()
    assert out == whole[done:]


def test_key_state_bytes_are_the_dict_the_engine_always_wrote():
    written = {
        "v": 1,
        "key": ["a"],
        "pending": {"us": [5], "cols": {"v": [1]}},
        "m": None,
        "start": None,
        "last": None,
        "forced": 3,
        "sessions": 2,
    }
    state = KeyState.decode(codec.encode(written))
    assert (state.key, state.pending, state.forced, state.sessions, state.remembers) == (
        ["a"],
        written["pending"],
        3,
        2,
        False,
    )
    assert state.encode() == codec.encode(written)
    remembered = dict(written, seen=None)
    assert KeyState.decode(codec.encode(remembered)).encode() == codec.encode(remembered)
    with pytest.raises(cep.CepRuntimeError) as raised:
        KeyState.decode(codec.encode(dict(written, v=2)))
    assert raised.value.code == "E0481"
