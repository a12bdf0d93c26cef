"""Columns of naive UTC times as text and as epoch milliseconds, a whole column at a time (numpy), for the writers
that make a micro-batch's JSON column by column: the alerts' rows (``alerting/alert_rows.py``), the outbox's
entries (``outbox.entry``) and the Kafka messages (``kafka_messages.batch_messages``)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

import numpy as np

# Imported inside functions: pandas (heavy; only a column of times needs it).

# Microseconds since the epoch below which a float64 holds every value exactly (2**53): within it, numpy's float
# division and Python's int division round alike (``epoch_millis``).
_EXACT_MICROS = 2**53


def naive_micros(values: Sequence[_dt.datetime]) -> np.ndarray | None:
    """Each naive ``datetime`` of ``values`` as ``datetime64[us]``; None when one is aware, or beyond the years
    pandas' nanoseconds reach (1677 to 2262): the caller goes value by value then."""
    import pandas as pd

    try:
        index = pd.DatetimeIndex(np.fromiter(values, dtype=object, count=len(values)))
    except (ValueError, TypeError, OverflowError):  # aware and naive together, or beyond the years 1677 to 2262
        return None
    if index.dtype != np.dtype("datetime64[ns]"):  # aware
        return None
    return index.to_numpy(dtype="datetime64[us]")


def iso_texts(micros: np.ndarray) -> list[str]:
    """``datetime.isoformat`` of each time: numpy's ISO 8601 text of the whole column, the fraction cut where it is
    zero (as ``isoformat`` leaves it out), about twice as fast as ``isoformat`` value by value."""
    texts = np.datetime_as_string(micros, unit="us").astype(object)
    whole = micros.view(np.int64) % 1_000_000 == 0
    if whole.any():
        texts[whole] = [text[:-7] for text in texts[whole]]  # ".000000"
    return texts.tolist()


def epoch_millis(micros: np.ndarray) -> list[int] | None:
    """``int(time.replace(tzinfo=UTC).timestamp() * 1000)`` of each time (the float product truncated, as the Kafka
    message's timestamp has always been made); None beyond 2**53 microseconds from the epoch (about the year
    2255), where a float64 of the microseconds is not exact."""
    counts = micros.view(np.int64)
    if len(counts) and int(np.abs(counts).max()) >= _EXACT_MICROS:
        return None
    return ((counts.astype(np.float64) / 1e6) * 1000.0).astype(np.int64).tolist()
