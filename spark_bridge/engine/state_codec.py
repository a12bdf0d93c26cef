"""Per-key streaming state <-> bytes, in a small versioned format; and canonical text for hashing.

Spark keeps each key's state in one ``BinaryType`` column (array and map state columns fail in the
Python worker of PySpark 4). What goes in is plain data built by
``cep.spark_bridge.engine.keyed``: dicts, lists, ints, floats, strings, booleans, None, and the column values of
buffered rows, which may also be datetimes, dates, Decimals, timedeltas, tuples and numpy scalars/arrays.

Format ``CEPS`` version 1::

    b"CEPS" | version (1 byte) | flags (1 byte: 1 = zlib) | payload

The payload is ``marshal.dumps(packed, 4)``. Packing turns every value marshal cannot carry into a
tuple ``(tag, payload)``; real tuples are packed too, so *every* tuple in the payload is a tag:

    (1, microseconds since 1970-01-01)   naive datetime (pandas Timestamps included; UTC wall clock)
    (2, proleptic ordinal)               date
    (3, text)                            Decimal
    (4, [items])                         tuple
    (5, microseconds)                    timedelta
    (6, microseconds since the epoch)    timezone-aware datetime (restored in UTC)
    (7, [microseconds or None, ...])     a list of naive datetimes (and NULLs): a buffered time column

numpy scalars become Python scalars and numpy arrays become lists. marshal is used because it is
C-fast, ships with Python, reads all older format versions, and (unlike pickle) never imports or calls
anything while loading; its format version is pinned to 4 (stable since Python 3.4). Payloads above
``COMPRESS_ABOVE`` bytes are zlib-compressed (level 1). An unknown magic or version raises
``CepRuntimeError`` (code E0481) instead of guessing.

``canonical(value)`` is a deterministic text form of a packed value (``repr`` of the packed data), used
to hash match ids: equal values give equal text whatever their Python type (a pandas Timestamp and
the equal datetime hash alike).
"""

from __future__ import annotations

import datetime as _dt
import marshal
import zlib
from decimal import Decimal
from typing import Any

from cep.grammar.errors import CepRuntimeError

MAGIC = b"CEPS"
VERSION = 1
MARSHAL_VERSION = 4
COMPRESS_ABOVE = 2048
_ZLIB = 1

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_PLAIN = frozenset({int, float, str, bool, type(None), bytes})

T_DATETIME, T_DATE, T_DECIMAL, T_TUPLE, T_TIMEDELTA, T_AWARE, T_DATETIMES = 1, 2, 3, 4, 5, 6, 7
_ONE_US = _dt.timedelta(microseconds=1)


def micros(delta) -> int:
    """A timedelta (or pandas Timedelta) as whole microseconds."""
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def datetime_to_micros(value: _dt.datetime) -> int:
    """Microseconds since 1970-01-01 of a naive (UTC wall clock) or aware datetime."""
    if value.tzinfo is None:
        return micros(value - _EPOCH)
    return micros(value - _EPOCH_UTC)


# The last and first instants a datetime holds, in microseconds since 1970.
_LAST_MICROS = micros(_dt.datetime.max - _EPOCH)
_FIRST_MICROS = micros(_dt.datetime.min - _EPOCH)


def micros_to_datetime(value: int) -> _dt.datetime:
    """A naive UTC datetime; a time past the year 9999 (a session end or deadline added to an event near
    the end of time) is ``datetime.max``, which no event reaches, and one before the year 1 ``datetime.min``."""
    if value > _LAST_MICROS:
        return _dt.datetime.max
    if value < _FIRST_MICROS:
        return _dt.datetime.min
    return _EPOCH + _dt.timedelta(microseconds=value)


def pack(value: Any) -> Any:
    """``value`` as data marshal can carry (see the module docstring for the tags)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list:
        if value and isinstance(value[0], _dt.datetime) and value[0].tzinfo is None:
            try:  # a column of naive datetimes (buffered event times): one tag for the whole list
                return (T_DATETIMES, [None if v is None else (v - _EPOCH) // _ONE_US for v in value])
            except TypeError:  # not all of them are naive datetimes
                pass
        if _PLAIN.issuperset(map(type, value)):  # a column of plain values (the common case): as it is
            return value
        return [v if type(v) in _PLAIN else pack(v) for v in value]
    if kind is dict:
        return {k: (v if type(v) in _PLAIN else pack(v)) for k, v in value.items()}
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            return (T_DATETIME, micros(value - _EPOCH))
        return (T_AWARE, micros(value - _EPOCH_UTC))
    if isinstance(value, _dt.date):
        return (T_DATE, value.toordinal())
    if isinstance(value, Decimal):
        return (T_DECIMAL, str(value))
    if isinstance(value, tuple):
        return (T_TUPLE, [pack(v) for v in value])
    if isinstance(value, _dt.timedelta):
        return (T_TIMEDELTA, micros(value))
    if isinstance(value, bool):
        return bool(value)
    # numpy and pandas values, without importing either
    module = kind.__module__
    if module == "numpy":
        if hasattr(value, "tolist"):
            return pack(value.tolist())  # a numpy scalar -> Python scalar; an array -> list
    if module.startswith("pandas"):
        if value != value or kind.__name__ in ("NaTType", "NAType"):  # NaT, NA
            return None
    if isinstance(value, (int, float, str, bytes)):  # subclasses (numpy float64, str enums, ...)
        base = (
            int
            if isinstance(value, int)
            else float
            if isinstance(value, float)
            else str
            if isinstance(value, str)
            else bytes
        )
        return base(value)
    if isinstance(value, (list, tuple)):
        return [pack(v) for v in value]
    raise CepRuntimeError(
        f"cannot keep a value of type {kind.__name__} in streaming state: {value!r}",
        code="E0480",
    )


def unpack(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list:
        if _PLAIN.issuperset(map(type, value)):
            return value
        return [v if type(v) in _PLAIN else unpack(v) for v in value]
    if kind is dict:
        return {k: (v if type(v) in _PLAIN else unpack(v)) for k, v in value.items()}
    tag, payload = value
    if tag == T_DATETIMES:
        epoch, delta = _EPOCH, _dt.timedelta
        return [None if m is None else epoch + delta(microseconds=m) for m in payload]
    if tag == T_DATETIME:
        return _EPOCH + _dt.timedelta(microseconds=payload)
    if tag == T_DATE:
        return _dt.date.fromordinal(payload)
    if tag == T_DECIMAL:
        return Decimal(payload)
    if tag == T_TUPLE:
        return tuple(unpack(v) for v in payload)
    if tag == T_TIMEDELTA:
        return _dt.timedelta(microseconds=payload)
    if tag == T_AWARE:
        return _EPOCH_UTC + _dt.timedelta(microseconds=payload)
    raise CepRuntimeError(f"unknown value tag {tag!r} in streaming state", code="E0481")


def encode(state: Any, compress: bool = True) -> bytes:
    """``state`` (plain data, see the module docstring) as ``CEPS`` bytes; ``compress=False``: never zlib
    (``decode`` reads both)."""
    payload = marshal.dumps(pack(state), MARSHAL_VERSION)
    flags = 0
    if compress and len(payload) > COMPRESS_ABOVE:
        payload = zlib.compress(payload, 1)
        flags = _ZLIB
    return MAGIC + bytes((VERSION, flags)) + payload


def compressed(blob: bytes) -> bytes:
    """The bytes ``encode(state)`` gives, from the bytes ``encode(state, compress=False)`` gave: a state kept
    uncompressed while it is read again at once (the driver's two calls of a micro-batch) is compressed once,
    when it is kept."""
    if blob[5] & _ZLIB or len(blob) - 6 <= COMPRESS_ABOVE:
        return blob
    return blob[:5] + bytes((blob[5] | _ZLIB,)) + zlib.compress(blob[6:], 1)


def decode(blob: bytes) -> Any:
    blob = bytes(blob)
    if blob[:4] != MAGIC or len(blob) < 6:
        raise CepRuntimeError(
            "streaming state is not in cep's CEPS format (a checkpoint from another program?)", code="E0481"
        )
    version, flags = blob[4], blob[5]
    if version != VERSION:
        raise CepRuntimeError(
            f"streaming state has format version {version}; this cep reads version {VERSION}. "
            "Restart the query with a new checkpoint location, or run the cep version that wrote it.",
            code="E0481",
        )
    payload = blob[6:]
    if flags & _ZLIB:
        payload = zlib.decompress(payload)
    return unpack(marshal.loads(payload))


def canonical(value: Any) -> str:
    """A deterministic text for ``value``: equal values of equivalent types give the same text."""
    return repr(pack(value))
