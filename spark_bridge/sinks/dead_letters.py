"""Dead letters: the requests a sink could not deliver, kept whole until they are.

One directory per sink (``<dead-letter dir>/<sink key>/``), one JSON file per request, named by its
idempotency key:

    {"format": "cep-dead-letter-2", "sink": "webhook-hooks.example-1a2b3c4d", "sink_label": "webhook https://hooks.example/…#1a2b3c4d",
     "idempotency_key": "...", "batch_id": 12, "alerts": [...], "attempts": 5, "errors": [...], "error": "...",
     "refused": false, "first_failed_at": "...Z", "failed_at": "...Z", "next_attempt_at": "...Z", "redeliveries": 0}

``alerts`` are the alert payloads (with severity and summary), not the request body: a redelivery
renders the body again with the sink's current format, and no routing key or header is ever written
here. ``refused`` says the receiver answered that it will not take it (a 4xx other than 408/425/429):
such a letter is not sent again by itself; ``cep deliver`` sends it once the cause is fixed. The
others are redelivered with backoff (``DeliveryLanes``) as soon as the receiver answers again.

Letters written by cep before this format (``body: {"alerts": [...]}`` at the top of the dead-letter
directory, with the URL) are read too; ``adopt`` moves those of a sink into its folder.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from cep.spark_bridge.sinks.base import DAMAGED_SUFFIX, atomic_write, intact_items, intact_value, set_aside

__all__ = ["DeadLetter", "DeadLetterBox", "LETTER_FORMAT", "read_letter"]

LETTER_FORMAT = "cep-dead-letter-2"
# A letter is tried again this long after it failed, doubling per redelivery that fails, at most the cap.
REDELIVER_FIRST_S = 10.0
REDELIVER_MAX_S = 600.0


def _now() -> float:
    return time.time()


def _iso(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _epoch(text: str | None, default: float) -> float:
    if not text:
        return default
    try:
        return _dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


def _file_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)[:120] + ".json"


@dataclass(frozen=True)
class DeadLetter:
    """One request that could not be delivered."""

    path: str
    key: str  # the idempotency key
    alerts: tuple[dict, ...] = field(repr=False)
    errors: tuple[str, ...] = ()
    attempts: int = 0
    batch_id: int | None = None
    first_failed_at: float = 0.0
    failed_at: float = 0.0
    next_attempt_at: float = 0.0
    refused: bool = False
    redeliveries: int = 0
    sink: str | None = None
    sink_label: str | None = None

    @property
    def error(self) -> str:
        return self.errors[-1] if self.errors else "unknown"

    @property
    def rules(self) -> Counter:
        return Counter(str(a.get("rule_id")) for a in self.alerts)

    @property
    def stamp(self) -> str:
        """Names this letter (not its key): the same key dead-lettered again later is another letter."""
        return f"{self.key}@{int(self.first_failed_at * 1000)}"

    def record(self, sink_label: str | None = None) -> dict:
        return {
            "format": LETTER_FORMAT,
            "sink": self.sink,
            "sink_label": sink_label,
            "idempotency_key": self.key,
            "batch_id": self.batch_id,
            "alerts": list(self.alerts),
            "attempts": self.attempts,
            "error": self.error,
            "errors": list(self.errors[-20:]),
            "refused": self.refused,
            "first_failed_at": _iso(self.first_failed_at),
            "failed_at": _iso(self.failed_at),
            "next_attempt_at": _iso(self.next_attempt_at),
            "redeliveries": self.redeliveries,
        }


def read_letter(path: str) -> DeadLetter | None:
    """The letter in ``path``; None when it is gone or unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
            # From the open file: a redelivery may remove the letter right after it was read.
            written = os.fstat(fh.fileno()).st_mtime
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or "idempotency_key" not in record:
        return None
    alerts = record.get("alerts")
    if alerts is None:  # the first format: the request body
        alerts = (record.get("body") or {}).get("alerts") or []
    failed = _epoch(record.get("failed_at"), written)
    return DeadLetter(
        path=path,
        key=str(record["idempotency_key"]),
        alerts=tuple(alerts),
        errors=tuple(record.get("errors") or ()),
        attempts=int(record.get("attempts") or 0),
        batch_id=record.get("batch_id"),
        first_failed_at=_epoch(record.get("first_failed_at"), failed),
        failed_at=failed,
        next_attempt_at=_epoch(record.get("next_attempt_at"), failed + REDELIVER_FIRST_S),
        refused=bool(record.get("refused", "not retried" in str(record.get("error", "")))),
        redeliveries=int(record.get("redeliveries") or 0),
        sink=record.get("sink"),
        sink_label=record.get("sink_label"),
    )


class DeadLetterBox:
    """The dead letters of one sink, in ``directory``; every write is whole or not at all (``atomic_write``)."""

    def __init__(
        self,
        directory: str,
        *,
        sink: str | None = None,
        sink_label: str | None = None,
        first_wait: float = REDELIVER_FIRST_S,
        max_wait: float = REDELIVER_MAX_S,
        on_damage: Callable[[str, str], None] | None = None,
    ) -> None:
        self.directory = os.path.abspath(directory)
        self.sink = sink
        self.sink_label = sink_label
        self.first_wait = first_wait
        self.max_wait = max_wait
        self.on_damage = on_damage  # (message, path set aside); None: the message goes nowhere but the file is kept

    def _write(self, letter: DeadLetter) -> DeadLetter:
        os.makedirs(self.directory, exist_ok=True)
        atomic_write(letter.path, json.dumps(letter.record(self.sink_label), ensure_ascii=False, indent=1))
        return letter

    def put(
        self,
        key: str,
        alerts: Sequence[dict],
        errors: Sequence[str],
        *,
        batch_id: int | None,
        refused: bool = False,
        attempts: int | None = None,
    ) -> DeadLetter:
        """Keep a request that failed (``OSError`` if it cannot be written: the caller must not drop it)."""
        now = _now()
        path = os.path.join(self.directory, _file_name(key))
        old = read_letter(path) if os.path.exists(path) else None
        letter = DeadLetter(
            path=path,
            key=key,
            alerts=tuple(alerts),
            errors=tuple(errors),
            attempts=attempts if attempts is not None else len(errors),
            batch_id=batch_id,
            first_failed_at=old.first_failed_at if old else now,
            failed_at=now,
            next_attempt_at=now + self.first_wait,
            refused=refused,
            sink=self.sink,
        )
        return self._write(letter)

    def letters(self) -> list[DeadLetter]:
        """Every letter, oldest failure first."""
        if not os.path.isdir(self.directory):
            return []
        found = []
        for name in sorted(os.listdir(self.directory)):
            if name.endswith(".json") and not name.startswith("."):
                path = os.path.join(self.directory, name)
                letter = read_letter(path)
                if letter is None and os.path.exists(path):
                    letter = self._rebuild(path)
                if letter is not None:
                    found.append(letter)
        return sorted(found, key=lambda letter: (letter.first_failed_at, letter.key))

    def _rebuild(self, path: str) -> DeadLetter | None:
        """A letter that cannot be read (cut short, bytes damaged): set aside as ``.damaged``, and its whole
        alerts written again as a letter of the same key, which is redelivered like any other (a letter
        counts as not delivered until a receiver took it)."""
        try:
            with open(path, "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return None
        key = intact_value(text, "idempotency_key")
        key = key if isinstance(key, str) and key else os.path.basename(path)[: -len(".json")]
        alerts = [a for a in intact_items(text, "alerts") if isinstance(a, dict)]
        batch_id = intact_value(text, "batch_id")
        aside = set_aside(path)
        if aside is None:  # another reader (the lane, cep deliver) rebuilt it first
            return read_letter(path)
        letter = None
        if alerts:
            letter = self.put(
                key,
                alerts,
                [f"rebuilt from the damaged letter {aside}"],
                batch_id=batch_id if isinstance(batch_id, int) else None,
            )
        if self.on_damage is not None:
            kept = (
                f"its {len(alerts)} readable alert(s) wait in a new letter"
                if alerts
                else "no alert in it could be read"
            )
            self.on_damage(f"dead letter {path} is damaged: set aside as {aside}; {kept}", aside)
        return letter

    def damaged(self) -> list[str]:
        """The files set aside as damaged, for the status and ``cep deliver``."""
        if not os.path.isdir(self.directory):
            return []
        return sorted(os.path.join(self.directory, n) for n in os.listdir(self.directory) if DAMAGED_SUFFIX in n)

    def due(self, now: float | None = None, *, everything: bool = False) -> list[DeadLetter]:
        """The letters to try again now: not refused, and their wait is over (``everything``: whatever the wait)."""
        now = _now() if now is None else now
        return [
            letter for letter in self.letters() if not letter.refused and (everything or letter.next_attempt_at <= now)
        ]

    def next_due(self) -> float | None:
        waits = [letter.next_attempt_at for letter in self.letters() if not letter.refused]
        return min(waits) if waits else None

    def counts(self) -> tuple[int, int, int]:
        """(letters waiting, of which refused, alerts in them)."""
        letters = self.letters()
        return (
            len(letters),
            sum(1 for letter in letters if letter.refused),
            sum(len(letter.alerts) for letter in letters),
        )

    def failed_again(self, letter: DeadLetter, error: str, *, refused: bool = False) -> DeadLetter:
        now = _now()
        wait = min(self.max_wait, self.first_wait * 2 ** (letter.redeliveries + 1))
        return self._write(
            replace(
                letter,
                errors=(*letter.errors, error)[-20:],
                attempts=letter.attempts + 1,
                failed_at=now,
                next_attempt_at=now + wait,
                refused=refused or letter.refused,
                redeliveries=letter.redeliveries + 1,
            )
        )

    def remove(self, letter: DeadLetter) -> None:
        try:
            os.remove(letter.path)
        except FileNotFoundError:
            pass

    def exists(self, letter: DeadLetter) -> bool:
        current = read_letter(letter.path)
        return current is not None and current.stamp == letter.stamp

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """One redelivery at a time per box (the stream's lane and ``cep deliver`` may both try)."""
        parent, name = os.path.split(self.directory)
        os.makedirs(parent, exist_ok=True)
        with open(os.path.join(parent, f".{name}.lock"), "a") as handle:  # beside the letters, never among them
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def adopt(self, root: str, url: str) -> int:
        """Move the letters of the first format for ``url`` from ``root`` (the dead-letter directory
        itself) into this box; returns how many."""
        moved = 0
        if not os.path.isdir(root):
            return 0
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name)
            if not name.endswith(".json") or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8") as fh:
                    record = json.load(fh)
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and record.get("url") == url and "body" in record:
                os.makedirs(self.directory, exist_ok=True)
                old = read_letter(path)
                if old is not None:
                    self._write(replace(old, path=os.path.join(self.directory, _file_name(old.key)), sink=self.sink))
                    os.remove(path)
                    moved += 1
        return moved
