"""What every alert sink shares: the report of one delivery, the base class, retries, the error, atomic files.

A sink that cannot take a micro-batch raises ``CepSinkError`` (E0470), rendered with the sink's own
description in front (``sqlite /var/lib/cep/alerts.db: error[E0470]: ...``), so the stream's error
names the sink. ``cep.spark_bridge.sinks.webhook`` re-exports everything here.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cep.grammar.errors import CepRuntimeError

__all__ = [
    "AlertSink",
    "Attempt",
    "Delivery",
    "DeliveryAbandoned",
    "DeliveryError",
    "RetryPolicy",
    "CepSinkError",
    "DAMAGED_SUFFIX",
    "atomic_write",
    "intact_items",
    "intact_value",
    "not_committed",
    "set_aside",
    "with_retries",
]

# A bookkeeping file that cannot be read is renamed with this suffix, never deleted: the readers skip it
# (they read ``*.json``), and whoever investigates finds the bytes as they were.
DAMAGED_SUFFIX = ".damaged"
# Bookkeeping holds full event payloads (outboxes, dead letters, bad rows): readable by its owner only.
PRIVATE_FILE_MODE = 0o600


class CepSinkError(CepRuntimeError):
    """A sink could not take a micro-batch; rendered as ``<sink>: error[E0470]: <what, and what happens next>``."""

    code = "E0470"


class DeliveryAbandoned(Exception):
    """The stream is stopping: a delivery gave up between two attempts. What it did not deliver stays
    where it was (the lane's outbox), delivered after the restart; nothing is dead-lettered for it."""


def not_committed(batch_id: int | None) -> str:
    which = "the micro-batch" if batch_id is None else f"micro-batch {batch_id}"
    return (
        f"{which} is kept (in the sink's outbox, or uncommitted in Spark's checkpoint) and delivered again, "
        "after a backoff or a restart (once per match: idempotent by match_id)"
    )


@dataclass(frozen=True)
class RetryPolicy:
    """How a sink retries a transient failure (a locked database, a lost connection) within one micro-batch.

    The budget bounds the time one micro-batch can spend retrying, so that a database locked for an
    hour stops the delivery with an error in about a minute instead of hanging it without a word.
    """

    max_attempts: int = 5
    backoff: float = 0.5  # seconds before the first retry, doubled each time
    max_backoff: float = 10.0
    budget: float = 60.0  # seconds of retrying per micro-batch

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.backoff < 0 or self.max_backoff < 0 or self.budget < 0:
            raise ValueError(f"a retry policy needs at least one attempt and no negative time: {self}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after the failed attempt number ``attempt`` (0-based)."""
        return min(self.max_backoff, self.backoff * (2**attempt))


def with_retries(
    sink: AlertSink, write: Callable[[], None], transient: Callable[[BaseException], bool], batch_id: int
) -> int:
    """Run ``write`` (one transaction) until it succeeds; returns the retries it took.

    A transient failure is retried within ``sink.retry``; any failure left is raised as a ``CepSinkError``
    naming the sink, the error, the attempts and what happens to the micro-batch.
    """
    policy: RetryPolicy = sink.retry
    started = sink.clock()
    for attempt in range(policy.max_attempts):
        try:
            write()
            return attempt
        except Exception as exc:  # noqa: BLE001 - every failure becomes a CepSinkError naming the sink
            error = sink.redact(
                f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
            )  # PostgreSQL adds the statement below
            if not transient(exc):
                raise CepSinkError(
                    f"{error} (not retried); {not_committed(batch_id)}", filename=sink.describe()
                ) from exc
            elapsed = sink.clock() - started
            wait = policy.delay(attempt)
            if attempt + 1 == policy.max_attempts or elapsed + wait > policy.budget:
                raise CepSinkError(
                    f"{error}, still after {attempt + 1} attempts over {elapsed:.1f}s "
                    f"(retry budget {policy.budget:g}s); " + not_committed(batch_id),
                    filename=sink.describe(),
                ) from exc
            sink.sleep(wait)
    raise AssertionError("unreachable: max_attempts is at least 1")  # pragma: no cover


@dataclass(frozen=True)
class DeliveryError:
    """One failure of a delivery, with the rules whose alerts it concerned (``cep status`` lists it
    under those rules only)."""

    message: str
    rules: tuple[str, ...] = ()
    key: str | None = None  # the request's idempotency key, when it was a request
    # The receiver (or the body template) refused it for good: a dead letter never sent again by itself.
    refused: bool = False

    def __str__(self) -> str:
        return self.message


@dataclass
class Delivery:
    """What one sink did with one micro-batch."""

    sink: str
    delivered: Counter = field(default_factory=Counter)  # alerts by rule id
    dead_lettered: Counter = field(default_factory=Counter)
    errors: list[DeliveryError] = field(default_factory=list)
    retries: int = 0


@dataclass(frozen=True)
class Attempt:
    """One try at one request: delivered, or the error, and whether the receiver refused it for good."""

    ok: bool
    error: str = ""
    refused: bool = False


class AlertSink:
    """Base class: ``deliver(alerts, batch_id)`` gets the micro-batch's alerts (dicts, ``ALERT_NAMES``).

    What the stream's delivery lanes (``lanes.DeliveryLanes``) use besides ``deliver``:

    * ``describe()``: how people see the sink (logs, status, errors): never a secret (``safe_text``);
    * ``key()``: a stable, file-name-safe id (its outbox and dead-letter folders, metric labels);
    * ``dead_letters``: a ``DeadLetterBox`` when the sink keeps what it cannot deliver (the webhook),
      else None; with it, ``resend(letter)`` tries one letter once and returns an ``Attempt``;
    * ``redact(text)``: an error message without the sink's secrets;
    * ``sleep``: the lane replaces it with a wait that raises ``DeliveryAbandoned`` when the stream stops.
    """

    name = "sink"
    include_suppressed = False
    retry = RetryPolicy()
    dead_letters = None
    sleep: Callable[[float], None] = staticmethod(time.sleep)
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:
        return self.name

    def key(self) -> str:
        return self.name

    def redact(self, text: str) -> str:
        return text

    def transient_failures(self) -> int:
        """Failed attempts the sink retried inside its own client (a Kafka producer during a broker outage)."""
        return 0

    def resend(self, letter) -> Attempt:  # pragma: no cover - only sinks with dead letters have it
        raise NotImplementedError(f"{self.describe()} keeps no dead letters")

    def close(self) -> None:
        pass


def atomic_write(path: str, text: str) -> None:
    """Write ``path`` whole or not at all: a reader sees the old file, the new one, or none, never half.

    The text goes to a hidden temporary name in the same directory (readers skip names starting with
    ``.``), is fsynced, then renamed over ``path``; the directory is fsynced so that the rename survives
    a power cut. A failure (a full disk) removes the temporary file and raises the ``OSError``.
    """
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")  # unique per writer
    try:
        # O_EXCL and O_NOFOLLOW: a name planted in the directory is never written through.
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
        with open(descriptor, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory or ".")


def set_aside(path: str) -> str | None:
    """Rename a damaged bookkeeping file to ``<path>.damaged`` (``.damaged.2``... when taken); returns the new
    name, or None when the file is gone (another reader set it aside first)."""
    target, number = path + DAMAGED_SUFFIX, 1
    while os.path.exists(target):
        number += 1
        target = f"{path}{DAMAGED_SUFFIX}.{number}"
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    return target


def intact_items(text: str, key: str) -> list:
    """The whole items of the JSON list under ``"key": [`` in ``text``, a JSON object cut short: what a
    truncated file still holds (empty when the list itself was not reached)."""
    start = text.find(f'"{key}"')
    start = text.find("[", start) if start >= 0 else -1
    if start < 0:
        return []
    decoder, items, at = json.JSONDecoder(), [], start + 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            item, at = decoder.raw_decode(text, at)
        except ValueError:
            return items
        items.append(item)


def intact_value(text: str, key: str):
    """The value of a top-level scalar ``"key": value`` in a JSON object cut short, or None."""
    at = text.find(f'"{key}"')
    at = text.find(":", at) if at >= 0 else -1
    if at < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[at + 1 :].lstrip())[0]
    except ValueError:
        return None


def _fsync_directory(directory: str) -> None:
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:  # not every platform opens directories; the rename is still atomic
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
