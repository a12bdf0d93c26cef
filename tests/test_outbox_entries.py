"""The outbox's entries made column by column, and the lane handed its alerts in memory.

An entry's text is held equal to ``json.dumps`` of the documented form (each alert the object of its
``ALERT_NAMES`` values in that order, times as ``isoformat``), written here without cep, on random alerts of every
type an alert's value can have. When ``entry`` says the entry reads back as the alerts themselves, ``Outbox.load``
gives them back equal, of the same types, with the same keys in the same order: that is what lets a lane deliver
the alerts it was handed in memory instead of reading the entry, which it does until a restart."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep.spark_bridge.sinks.alerts import ALERT_NAMES
from cep.spark_bridge.sinks.base import AlertSink, Delivery
from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal
from cep.spark_bridge.sinks.outbox import Outbox, entry, entry_text
from tests.test_sinks import alert

TIME_NAMES = ("first_event_time", "last_event_time", "emit_time")


def documented_entry(batch_id: int, alerts: list[dict]) -> str:
    """The entry as the outbox documents it, with nothing of cep: the values, times as ``isoformat``."""

    def value(v):
        if isinstance(v, pd.Timestamp):
            v = v.to_pydatetime()
        return v.isoformat() if isinstance(v, dt.datetime) else v

    records = [{name: value(alert.get(name)) for name in ALERT_NAMES} for alert in alerts]
    return json.dumps({"batch_id": batch_id, "alerts": records}, ensure_ascii=False)


# every character JSON escapes, beyond the BMP, and none of the lone surrogates UTF-8 cannot write
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
NAIVE = st.one_of(
    st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2200, 1, 1)).map(
        lambda t: t.replace(microsecond=0)  # whole seconds: isoformat leaves the fraction out
    ),
)
AWARE = NAIVE.filter(lambda t: 2 <= t.year <= 9998).map(lambda t: t.replace(tzinfo=dt.timezone(dt.timedelta(hours=2))))
TIME = st.one_of(NAIVE, st.none(), AWARE, NAIVE.filter(lambda t: 1700 < t.year < 2200).map(pd.Timestamp))
PLAIN_TIME = st.one_of(NAIVE, st.none())
FLAG = st.one_of(st.booleans(), st.none())


def alerts_of(time, text, flag, *, mixed: bool):
    fields = {name: time if name in TIME_NAMES else text for name in ALERT_NAMES}
    fields["suppressed"] = flag
    if mixed:  # a value of another type in a text column (an odd sink's row): written alert by alert
        fields["measures"] = st.one_of(text, st.integers(), st.floats(allow_nan=False), st.booleans())
    in_order = st.fixed_dictionaries(fields).map(lambda alert: {name: alert[name] for name in ALERT_NAMES})
    return st.lists(in_order, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    batch_id=st.integers(0, 10**12),
    alerts=st.one_of(
        alerts_of(PLAIN_TIME, st.one_of(TEXT, st.none()), FLAG, mixed=False),
        alerts_of(TIME, st.one_of(TEXT, st.none()), st.one_of(FLAG, st.just("yes")), mixed=True),
    ),
)
def test_an_entry_is_json_dumps_of_its_alerts_and_reads_back_as_them_when_it_says_so(
    tmp_path_factory, batch_id, alerts
):
    text, as_read_back = entry(batch_id, alerts)
    assert text == documented_entry(batch_id, alerts)
    assert entry_text(batch_id, alerts) == text
    plain = all(
        (type(a[n]) is dt.datetime and a[n].tzinfo is None) or a[n] is None
        if n in TIME_NAMES
        else type(a[n]) in ((bool, type(None)) if n == "suppressed" else (str, type(None)))
        for a in alerts
        for n in ALERT_NAMES
    )
    assert as_read_back == plain
    if alerts:
        outbox = Outbox(str(tmp_path_factory.mktemp("outbox")))
        outbox.put("s", batch_id, alerts, text=text)
        back = outbox.load("s", batch_id)
        if as_read_back:
            assert back == alerts
            assert [list(a) for a in back] == [list(ALERT_NAMES)] * len(alerts)
            assert [[type(v) for v in a.values()] for a in back] == [[type(v) for v in a.values()] for a in alerts]
        assert entry_text(batch_id, back) == text  # what a restart reads, written again, is the same entry


def test_an_alert_with_other_keys_or_another_order_is_read_back_from_the_entry():
    alert = {name: None for name in ALERT_NAMES}
    assert entry(1, [alert])[1]
    assert not entry(1, [dict(reversed(alert.items()))])[1]
    assert not entry(1, [{**alert, "extra": 1}])[1]


def make_alert(i: int, *, emitted: dt.datetime | None = None) -> dict:
    """tests/test_sinks.py's alert, every fifth one suppressed."""
    return alert(i, suppressed=i % 5 == 0, emitted=emitted)


class Recording(AlertSink):
    """A sink that keeps what it is given, per micro-batch."""

    def __init__(self, name: str, include_suppressed: bool = False) -> None:
        self.name, self.include_suppressed = name, include_suppressed
        self.got: dict[int, list[dict]] = {}
        self.done = threading.Event()

    def deliver(self, alerts, batch_id) -> Delivery:
        self.got[batch_id] = [dict(a) for a in alerts]
        report = Delivery(self.name)
        report.delivered.update(a["rule_id"] for a in alerts)
        return report


def delivered_by(lanes: DeliveryLanes) -> None:
    lanes.start()
    try:
        assert lanes.drain(timeout=30) == []
    finally:
        lanes.stop()


def test_a_lane_delivers_the_alerts_it_was_handed_without_reading_its_entry(tmp_path, monkeypatch):
    reads = Counter()
    load = Outbox.load

    def counted(self, sink, batch_id):
        reads[sink] += 1
        return load(self, sink, batch_id)

    monkeypatch.setattr(Outbox, "load", counted)
    sinks = [Recording("plain"), Recording("all", include_suppressed=True)]
    lanes = DeliveryLanes(sinks, str(tmp_path / "outbox"), Journal(str(tmp_path / "journal")))
    alerts = [make_alert(i) for i in range(40)]
    lanes.spool(3, alerts)
    delivered_by(lanes)
    assert sinks[0].got == {3: [a for a in alerts if not a["suppressed"]]}
    assert sinks[1].got == {3: alerts}
    assert reads == Counter()  # handed in memory: no entry read back
    assert lanes.outbox.entries("plain") == lanes.outbox.entries("all") == []


def test_after_a_restart_the_lane_reads_the_entry_and_delivers_the_same_alerts(tmp_path):
    alerts = [make_alert(i) for i in range(40)]
    first = DeliveryLanes([Recording("plain")], str(tmp_path / "outbox"), Journal(str(tmp_path / "journal")))
    first.spool(3, alerts)  # handed over, never delivered: the process is gone before its lane ran
    sink = Recording("plain")
    again = DeliveryLanes([sink], str(tmp_path / "outbox"), Journal(str(tmp_path / "journal")))
    assert again.handed("plain", 3) is None
    delivered_by(again)
    assert sink.got == {3: [a for a in alerts if not a["suppressed"]]}


def test_a_micro_batch_run_again_after_the_output_committed_delivers_the_entry_written_first(tmp_path):
    """``keep_written``: the re-run's alerts (other emit times) are not handed over; the entry's are delivered."""
    before = [make_alert(i, emitted=dt.datetime(2026, 1, 1, 1)) for i in range(6)]
    rerun = [make_alert(i, emitted=dt.datetime(2026, 1, 1, 2)) for i in range(6)]
    crashed = DeliveryLanes([Recording("plain")], str(tmp_path / "outbox"), Journal(str(tmp_path / "journal")))
    crashed.stage(5, before)  # written, not sealed: the crash came before the seal
    sink = Recording("plain")
    lanes = DeliveryLanes([sink], str(tmp_path / "outbox"), Journal(str(tmp_path / "journal")))
    lanes.seal(lanes.stage(5, rerun, keep_written=True))
    assert lanes.handed("plain", 5) is None
    delivered_by(lanes)
    assert sink.got == {5: [a for a in before if not a["suppressed"]]}


def test_a_lane_far_behind_is_not_handed_more_than_the_limit(tmp_path, monkeypatch):
    from cep.spark_bridge.sinks import lanes as lanes_mod

    monkeypatch.setattr(lanes_mod, "HANDED_ALERTS_MAX", 10)
    sink = Recording("all", include_suppressed=True)
    lanes = DeliveryLanes([sink], str(tmp_path / "outbox"), Journal(str(tmp_path / "journal")))
    batches = {b: [make_alert(i + 100 * b) for i in range(4)] for b in range(1, 5)}
    for batch_id, alerts in batches.items():
        lanes.spool(batch_id, alerts)
    assert [lanes.handed("all", b) is not None for b in batches] == [True, True, False, False]
    delivered_by(lanes)
    assert sink.got == batches
    assert [lanes.handed("all", b) for b in batches] == [None] * 4


@pytest.mark.parametrize("bad", ["not json", ""])
def test_a_damaged_entry_read_after_a_restart_is_still_set_aside(tmp_path, bad):
    alerts = [make_alert(i) for i in range(3)]
    DeliveryLanes([Recording("plain")], str(tmp_path / "outbox"), Journal(str(tmp_path / "journal"))).spool(2, alerts)
    (path,) = (tmp_path / "outbox" / "plain").glob("000000000002.*.json")
    path.write_text(bad)
    sink = Recording("plain")
    damaged = []
    lanes = DeliveryLanes(
        [sink], str(tmp_path / "outbox"), Journal(str(tmp_path / "journal")), on_damage=lambda m, p: damaged.append(p)
    )
    delivered_by(lanes)
    assert len(damaged) == 1 and sink.got == {}
