"""A bucket's table as bytes: what a micro-batch reads and writes for every bucket it touches.

Format 2 of the per-key path's ``KeyTable`` and format 3 of the column-wise ``ColumnarTable`` frame their keys
as columns, so that reading and writing a bucket costs no Python step per key it does not call. Checkpoints
written in the earlier formats (tests/streaming_checkpoints/key_table_v1.json and columnar_v2.json, written by
cep before these formats) are read, and the stream resumed from them gives what the uninterrupted stream gives
(fed as cep then released rows, at the watermark, then going on with today's early release); a format this cep
does not know is refused with a sentence saying what to do.
"""

from __future__ import annotations

import base64
import datetime as dt
import gc
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep.grammar.errors import CepRuntimeError
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.column_table import TABLE_VERSION as COLUMNAR_VERSION
from cep.spark_bridge.engine.column_table import ColumnarTable
from cep.spark_bridge.engine.key_table import TABLE_VERSION, KeyTable, gc_paused
from cep.spark_bridge.engine.local import LocalStream
from tests.test_streaming_columnar import _fed, _fixture_rows, going_on

FIXTURES = Path(__file__).parent / "streaming_checkpoints"

key_values = st.one_of(
    st.text(max_size=6),
    st.integers(-(2**70), 2**70),
    st.none(),
    st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)),
    st.floats(allow_nan=False),
)


@st.composite
def tables(draw) -> KeyTable:
    width = draw(st.integers(0, 3))
    keys = draw(st.lists(st.tuples(*[key_values] * width), max_size=40 if width else 1))
    if draw(st.booleans()):  # keys of several widths (a stream's have one, a table filled by hand may not)
        keys += draw(st.lists(st.lists(key_values, max_size=3).map(tuple), max_size=5))
    table = KeyTable(buckets=draw(st.integers(0, 4096)))
    for key in keys:
        timer = draw(st.one_of(st.none(), st.integers(-(2**63) + 1, 2**63 - 1)))
        table.put(key, draw(st.binary(max_size=30)), timer)
    return table


def format_1(table: KeyTable) -> bytes:
    """``table`` in format 1, as cep wrote it before format 2: one ``[key, timer, state]`` per key."""
    entries = [[list(key), table.timers.get(key), blob] for key, blob in table.states.items()]
    return codec.encode({"v": 1, "buckets": table.buckets, "keys": entries})


def same(a: KeyTable, b: KeyTable) -> bool:
    """Equal states and timers, in the same order (a restored table calls its due keys in its timers' order),
    with keys of the same Python types (1, 1.0 and True are equal keys, but not the same values out)."""
    typed = lambda keys: [tuple(map(type, key)) for key in keys]  # noqa: E731
    return (
        a.buckets == b.buckets
        and list(a.states.items()) == list(b.states.items())
        and typed(a.states) == typed(b.states)
        and list(a.timers.items()) == list(b.timers.items())
    )


@settings(max_examples=300, deadline=None)
@given(tables())
def test_a_key_table_reads_back_what_it_wrote_and_what_format_1_wrote(table):
    written = table.encode()
    assert codec.decode(written)["v"] == TABLE_VERSION == 2
    restored = KeyTable.decode(written, table.buckets)
    assert list(restored.states.items()) == list(table.states.items()) and restored.timers == table.timers
    # exactly as format 1 restored it, timers' order included (the order a restored table calls due keys in)
    assert same(restored, KeyTable.decode(format_1(table), table.buckets))


def test_timers_come_back_in_the_order_of_the_keys_as_format_1_restored_them():
    table = KeyTable(buckets=2)
    table.put(("a",), b"1", 5)
    table.put(("b",), b"2", 3)
    table.put(("a",), b"3", 7)  # "a" keeps its place among the states; its timer moves to the end
    assert list(table.timers) == [("b",), ("a",)]
    restored = KeyTable.decode(table.encode(), 2)
    assert list(restored.timers.items()) == [(("a",), 7), (("b",), 3)]
    assert same(restored, KeyTable.decode(format_1(table), 2))


def _resumed_equals_uninterrupted(fixture_name: str, columnar: bool, written_version: int) -> None:
    fixture = json.loads((FIXTURES / fixture_name).read_text())
    batches, cut = _fixture_rows(), fixture["cut"]
    for name, saved in fixture["queries"].items():
        # the fixtures were written before keys released rows early: the uninterrupted stream releases as they did
        engine, whole = _fed(name, batches[:cut], buckets=2, columnar=columnar, early_release=False)
        resumed = LocalStream(engine, delay_ms=5_000, buckets=2, columnar=columnar)
        resumed.tables = {int(bucket): base64.b64decode(blob) for bucket, blob in saved["tables"].items()}
        assert resumed.states == whole.states and resumed.timers == whole.timers, name
        resumed.watermark_ms, resumed.max_event_ms = saved["watermark_ms"], saved["max_event_ms"]
        whole = going_on(engine, whole, buckets=2, columnar=columnar)  # from there on, both release early
        outputs = []
        for batch in batches[cut:]:
            want, got = whole.run_batch(batch), resumed.run_batch(batch)
            assert got == want, name
            outputs += got[0]
        assert outputs, name  # the resumed part emits matches
        assert {codec.decode(blob)["v"] for blob in resumed.tables.values()} == {written_version}, name


def test_a_per_key_checkpoint_of_format_1_goes_on_and_is_written_again_in_format_2():
    _resumed_equals_uninterrupted("key_table_v1.json", columnar=False, written_version=TABLE_VERSION)


def test_a_column_wise_checkpoint_of_format_2_goes_on_and_is_written_again_in_format_3():
    assert COLUMNAR_VERSION == 3
    _resumed_equals_uninterrupted("columnar_v2.json", columnar=True, written_version=COLUMNAR_VERSION)


def test_a_table_format_from_a_newer_cep_is_refused_with_what_to_do():
    table = KeyTable(buckets=2)
    table.put(("a",), b"1", 5)
    data = codec.decode(table.encode())
    data["v"] = 9
    with pytest.raises(CepRuntimeError, match="format version 9; this cep reads 1, 2.*new checkpoint") as caught:
        KeyTable.decode(codec.encode(data), 2)
    assert caught.value.code == "E0481"
    columnar = codec.decode(
        base64.b64decode(
            json.loads((FIXTURES / "columnar_v2.json").read_text())["queries"]["card_testing"]["tables"]["1"]
        )
    )
    columnar["v"] = 9
    with pytest.raises(CepRuntimeError, match="version 9 is not one of 1, 2, 3") as caught:
        ColumnarTable.decode(codec.encode(columnar), ("k", "ts", "v", "w"), 2)
    assert caught.value.code == "E0481"


def test_the_collector_is_held_off_for_a_call_and_restored_after_it_even_on_an_error():
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        with gc_paused():
            assert not gc.isenabled()
            1 / 0  # noqa: B018
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()
