"""Each sink's outbox on disk: ``<dir>/<sink key>/<batch:012d>.<alerts>.json``, one entry per micro-batch, and
the seal that hands the entries up to a micro-batch over to the sink's lane (``lanes.py`` says how the stream
writes, seals and delivers them across ``kill -9``).

**An entry** is ``json.dumps({"batch_id": N, "alerts": [alert, ...]}, ensure_ascii=False)``, each alert the
object of its ``ALERT_NAMES`` values in that order, times as ``isoformat`` (``alert_record``). ``entry`` makes
it column by column (one pass per field over the micro-batch's alerts: the texts of its strings, times and
flags, then each alert's object filled into one template), which ``foreachBatch`` pays for on its one thread
before the micro-batch commits; a micro-batch with a value of another type is written alert by alert through
``json``. tests/test_outbox_entries.py holds the text equal to ``json.dumps`` of the records on random alerts.

``entry`` also says whether the entry reads back (``Outbox.load``) as the very alerts it was made of: every
alert a dict of exactly ``ALERT_NAMES``, its strings ``str``, its flag ``bool``, its times naive
``datetime``s, or None. Then the lane is handed those alerts in memory (``DeliveryLanes.stage``) and reads the
entry only after a restart."""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Callable, Sequence

from cep.spark_bridge.sinks.alerts import ALERT_NAMES
from cep.spark_bridge.sinks.base import DAMAGED_SUFFIX, atomic_write, intact_items, set_aside
from cep.spark_bridge.sinks.time_columns import iso_texts, naive_micros

__all__ = ["SEAL_NAME", "Outbox", "alert_record", "entry", "entry_text", "ignore_damage", "name_count"]

_TIMES = ("first_event_time", "last_event_time", "emit_time")
# Per sink, the last micro-batch whose outbox entry was written whole (``Outbox.sealed_through``); a dot
# name, so never taken for an entry.
SEAL_NAME = ".sealed"
# a str as JSON text with ``ensure_ascii=False`` (C's encoder, what ``json.dumps`` uses for a str)
_STRING = json.encoder.encode_basestring
_NULL = "null"
# One alert's object as ``json.dumps`` writes it (``", "`` and ``": "``), each value's JSON text filled in.
_ALERT_TEMPLATE = "{" + ", ".join(f"{_STRING(name)}: %s" for name in ALERT_NAMES) + "}"
_NONE = type(None)
_STRING_TYPES = frozenset((str, _NONE))
_FLAG_TYPES = frozenset((bool, _NONE))
_TIME_TYPES = frozenset((_dt.datetime, _NONE))


def alert_record(alert: dict) -> dict:
    """One alert as its entry holds it: its ``ALERT_NAMES`` values, times as ``isoformat``."""
    out = {}
    for name in ALERT_NAMES:
        value = alert.get(name)
        if value is None or isinstance(value, (str, bool)):  # most values: no look for a time
            out[name] = value
            continue
        if hasattr(value, "to_pydatetime"):
            value = value.to_pydatetime()
        if isinstance(value, _dt.datetime):
            value = value.isoformat()
        out[name] = value
    return out


def _column_texts(name: str, values: list) -> tuple[list[str] | None, bool]:
    """The JSON texts of one field's values across the alerts, and whether they read back as themselves; None
    when a value is of a type written otherwise (the entry is then made alert by alert)."""
    types = set(map(type, values))
    if name in _TIMES:
        if not types <= _TIME_TYPES:
            return None, False
        micros = naive_micros(values) if types == {_dt.datetime} else None
        if micros is not None:  # naive times, none NULL: numpy's text of the column
            return list(map('"%s"'.__mod__, iso_texts(micros))), True
        texts = [_NULL if value is None else '"' + value.isoformat() + '"' for value in values]
        return texts, all(value.tzinfo is None for value in values if value is not None)
    flags = name == "suppressed"
    if types <= (_FLAG_TYPES if flags else _STRING_TYPES):
        return _texts_of(values, types), True
    if types <= _STRING_TYPES or types <= _FLAG_TYPES:  # read back alike, but not of the documented types
        return _texts_of(values, types), False
    return None, False


def _texts_of(values: list, types: set) -> list[str]:
    if bool in types:
        return [_NULL if value is None else ("true" if value else "false") for value in values]
    return [_NULL if value is None else _STRING(value) for value in values]


def entry(batch_id: int, alerts: Sequence[dict]) -> tuple[str, bool]:
    """An outbox entry's text (``entry_text``), and whether it reads back as ``alerts`` themselves (the module
    doc): equal dicts of the same keys in the same order, values of the same types."""
    columns = []
    same = all(map(ALERT_NAMES.__eq__, map(tuple, alerts)))
    for name in ALERT_NAMES:
        texts, back = _column_texts(name, [alert.get(name) for alert in alerts])
        if texts is None:
            text = json.dumps({"batch_id": batch_id, "alerts": [alert_record(a) for a in alerts]}, ensure_ascii=False)
            return text, False
        columns.append(texts)
        same = same and back
    objects = ", ".join(_ALERT_TEMPLATE % row for row in zip(*columns))
    return '{"batch_id": ' + json.dumps(batch_id) + ', "alerts": [' + objects + "]}", same


def entry_text(batch_id: int, alerts: Sequence[dict]) -> str:
    """An outbox entry: micro-batch ``batch_id``'s alerts as JSON (``Outbox.put``)."""
    return entry(batch_id, alerts)[0]


def ignore_damage(message: str, path: str) -> None:
    """Readers without a status to report to (``cep deliver``'s listing) still set damaged files aside."""


def name_count(name: str) -> int | None:
    """The alert count in an outbox entry's name ``<batch>.<alerts>.json``."""
    parts = name.split(".")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


def _from_json(record: dict) -> dict:
    alert = dict(record)
    for name in _TIMES:
        if isinstance(alert.get(name), str):
            alert[name] = _dt.datetime.fromisoformat(alert[name])
    return alert


class Outbox:
    """Per-sink queues of micro-batches on disk: ``<dir>/<sink key>/<batch:012d>.<alerts>.json``."""

    def __init__(self, directory: str, on_damage: Callable[[str, str], None] | None = None) -> None:
        self.directory = os.path.abspath(directory)
        self.on_damage = on_damage or ignore_damage

    def _folder(self, sink: str) -> str:
        return os.path.join(self.directory, sink)

    def put(
        self, sink: str, batch_id: int, alerts: Sequence[dict], *, seal: bool = True, text: str | None = None
    ) -> None:
        """Write the entry, then seal it (``seal``): only then may the lane deliver it. ``text``: the entry
        already made of the same alerts (``entry_text``), for another sink."""
        folder = self._folder(sink)
        os.makedirs(folder, exist_ok=True)
        self.sealed_through(sink)  # an outbox from before seals is sealed through its entries, not this one
        for old in self._names(sink, batch_id):  # a micro-batch run again replaces its unsealed entry
            if not old.endswith(f".{len(alerts)}.json"):
                os.remove(os.path.join(folder, old))
        text = entry_text(batch_id, alerts) if text is None else text
        atomic_write(os.path.join(folder, f"{batch_id:012d}.{len(alerts)}.json"), text)
        if seal:
            self.seal(sink, batch_id)

    def seal(self, sink: str, batch_id: int) -> None:
        """Hand the entries up to ``batch_id`` over to the lane (written whole before this)."""
        if batch_id > self.sealed_through(sink):
            atomic_write(os.path.join(self._folder(sink), SEAL_NAME), str(batch_id))

    def sealed_through(self, sink: str) -> int:
        """The last micro-batch handed to ``sink``: its entry was written whole before the seal moved
        (``-1``: none). A micro-batch run again after a crash that is not above it was handed over
        already (delivered, or waiting in the outbox) and is not handed over twice; one above it is
        not, and its entry, written or not, is written again. A sink's folder without a seal (new, or
        from before seals were written) is sealed through its last entry the first time it is read."""
        path = os.path.join(self._folder(sink), SEAL_NAME)
        try:
            with open(path, encoding="utf-8") as fh:
                return int(fh.read().strip())
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            aside = set_aside(path)
            if aside is not None:
                self.on_damage(
                    f"outbox seal {path} is damaged ({type(exc).__name__}: {exc}): set aside as {aside}; "
                    "the outbox is sealed through its last entry",
                    aside,
                )
        if not os.path.isdir(self._folder(sink)):
            return -1
        named = [int(n.split(".")[0]) for n in self._names(sink) if n.split(".")[0].isdigit()]
        sealed = max(named, default=-1)  # before seals, an entry was handed over once it had its name
        atomic_write(path, str(sealed))
        return sealed

    def _names(self, sink: str, batch_id: int | None = None) -> list[str]:
        folder = self._folder(sink)
        if not os.path.isdir(folder):
            return []
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))
        return [n for n in names if batch_id is None or n.startswith(f"{batch_id:012d}.")]

    def entries(self, sink: str) -> list[tuple[int, int]]:
        """(batch id, alerts) waiting for ``sink``, oldest first: the sealed entries only (``put``)."""
        out = []
        names = self._names(sink)
        sealed = self.sealed_through(sink) if names else -1
        for name in names:
            parts = name.split(".")
            if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and int(parts[0]) <= sealed:
                out.append((int(parts[0]), int(parts[1])))
        return out

    def load(self, sink: str, batch_id: int) -> list[dict]:
        for name in self._names(sink, batch_id):
            path = os.path.join(self._folder(sink), name)
            with open(path, "rb") as fh:
                data = fh.read()
            try:
                return [_from_json(a) for a in json.loads(data.decode("utf-8"))["alerts"]]
            except (ValueError, KeyError, TypeError) as exc:
                return self._salvage(sink, batch_id, path, data, exc)
        return []

    def _salvage(self, sink: str, batch_id: int, path: str, data: bytes, exc: Exception) -> list[dict]:
        """A damaged entry: set aside, its whole alerts queued again under the same micro-batch (what a
        cut-short file lost is named in the message: the alert output still holds it)."""
        alerts = [a for a in intact_items(data.decode("utf-8", "replace"), "alerts") if isinstance(a, dict)]
        expected = name_count(os.path.basename(path))
        aside = set_aside(path)
        if aside is None:  # another reader took it first
            return self.load(sink, batch_id)
        if alerts:
            self.put(sink, batch_id, alerts)
        lost = (
            f"; {expected - len(alerts)} could not be read (they are in the alert output)"
            if expected is not None and expected > len(alerts)
            else ""
        )
        self.on_damage(
            f"outbox entry {path} is damaged ({type(exc).__name__}: {exc}): set aside as {aside}; "
            f"its {len(alerts)} readable alert(s) are delivered{lost}",
            aside,
        )
        return [_from_json(a) for a in alerts]

    def remove(self, sink: str, batch_id: int) -> None:
        for name in self._names(sink, batch_id):
            try:
                os.remove(os.path.join(self._folder(sink), name))
            except FileNotFoundError:
                pass

    def has(self, sink: str, batch_id: int) -> bool:
        return bool(self._names(sink, batch_id))

    def damaged(self, sink: str) -> list[str]:
        folder = self._folder(sink)
        return (
            sorted(os.path.join(folder, n) for n in os.listdir(folder) if DAMAGED_SUFFIX in n)
            if os.path.isdir(folder)
            else []
        )

    def sinks(self) -> list[str]:
        return (
            sorted(n for n in os.listdir(self.directory) if os.path.isdir(os.path.join(self.directory, n)))
            if os.path.isdir(self.directory)
            else []
        )
