"""Delivery lanes: each alert sink delivers on its own, so a failing webhook never holds back a database.

The stream's query (Spark, ``foreachBatch``) hands each micro-batch's alerts over in two quick steps
around the alert output's commit: before it, ``stage`` writes them, once per sink, to that sink's
**outbox** (``<checkpoint>/outbox/<sink key>/<batch id>.<alerts>.json``, fsynced and renamed into place);
after it, ``seal`` records the batch id in ``<sink key>/.sealed`` (the last batch handed over) and wakes
the lane; Spark then commits the micro-batch. A lane delivers only sealed entries, and a batch id not
above the seal is not written again, so a micro-batch Spark runs again after a ``kill -9`` reaches each
sink once: killed before the seal, nothing of it was delivered, and the re-run writes the entry again
(or keeps it, when the output had committed it: the sink then gets the output's alerts); killed after
it, the re-run leaves the outbox alone (the lane has the entry, or delivered it). The entry is made once
for the sinks that take the same alerts (``outbox.entry``, column by column), and those very alerts are
handed to the lane in memory with it (``DeliveryLanes.handed``): the lane delivers them without reading
the entry back, which it reads only after a restart, or when it is more than ``HANDED_ALERTS_MAX`` alerts
behind. Each sink has a **lane**, a thread that delivers its outbox in micro-batch order:

* a micro-batch delivered is recorded in the **journal** (``<checkpoint>/journal/``, one small file)
  and then taken out of the outbox. A crash in between delivers it again (at least once; every sink
  is idempotent by match_id), and one after the journal record does not (the record says it went);
* a sink that raises (a database down) keeps its micro-batch at the head of its outbox and tries again
  after a backoff (1 s doubling to 60 s), while the other lanes go on; the outbox is on disk, so a
  restart goes on where it stopped;
* a webhook request that still fails after its retries is a **dead letter** (``dead_letters.py``); the
  lane redelivers dead letters by itself once the receiver answers again: at once after a request to
  it succeeds, else one letter at a time as a probe when its wait (10 s, doubling to 10 minutes) is
  over. A letter the receiver refused (4xx) waits for ``cep deliver``;
* when the stream stops, a lane gives up between two attempts (``DeliveryAbandoned``); what it had not
  delivered stays in its outbox.

The journal is how the counts in ``status.json`` stay right across ``kill -9``: the stream folds each
record into the status once its outbox entry (or dead letter) is gone, writes the status, and only then
deletes the record (``Journal``). The matching query's per-batch counts go through the same journal.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from cep.spark_bridge.sinks.base import AlertSink, Delivery, DeliveryAbandoned, DeliveryError, atomic_write, set_aside
from cep.spark_bridge.sinks.dead_letters import read_letter
from cep.spark_bridge.sinks.outbox import Outbox, entry, ignore_damage
from cep.spark_bridge.sinks.safe_text import file_safe

__all__ = ["DeliveryLanes", "Journal", "LaneState", "Outbox"]

FAILURE_BACKOFF_S = 1.0
FAILURE_BACKOFF_MAX_S = 60.0
IDLE_WAIT_S = 1.0
# Alerts a sink's lane may be handed in memory beside its outbox (``DeliveryLanes._hand``): about eight
# micro-batches of the Kafka bench at 20,000 ticks/s (6,400 alerts each, about a kilobyte apiece, most of it
# shared with the other sinks). A lane further behind than that reads its entries from disk, as after a restart.
HANDED_ALERTS_MAX = 50_000


def _now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class Journal:
    """Records of work done, each folded into the status exactly once (see the module doc)."""

    def __init__(self, directory: str, on_damage: Callable[[str, str], None] | None = None) -> None:
        self.directory = os.path.abspath(directory)
        self.on_damage = on_damage or ignore_damage

    def write(self, name: str, record: dict) -> None:
        os.makedirs(self.directory, exist_ok=True)
        atomic_write(os.path.join(self.directory, f"{name}.json"), json.dumps(record, ensure_ascii=False, default=str))

    def has(self, name: str) -> bool:
        """Is there a readable record ``name``? A damaged one is set aside and counts as not written: the
        work it records is done again (every sink is idempotent), and counted then."""
        return self._read(f"{name}.json") is not None

    def _read(self, file_name: str) -> dict | None:
        path = os.path.join(self.directory, file_name)
        try:
            with open(path, "rb") as fh:
                record = json.loads(fh.read().decode("utf-8"))
            if isinstance(record, dict):
                return record
            problem = "not a JSON object"
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        aside = set_aside(path)
        if aside is not None:
            self.on_damage(
                f"journal record {path} is damaged ({problem}): set aside as {aside}; "
                "the work it recorded is done again where it can be (a delivery), or its counts are lost "
                "(a micro-batch's statistics)",
                aside,
            )
        return None

    def pending(self) -> list[tuple[str, dict]]:
        if not os.path.isdir(self.directory):
            return []
        out = []
        for file_name in sorted(os.listdir(self.directory)):
            if file_name.endswith(".json") and not file_name.startswith("."):
                record = self._read(file_name)
                if record is not None:
                    out.append((file_name[:-5], record))
        return out

    def remove(self, name: str) -> None:
        try:
            os.remove(os.path.join(self.directory, f"{name}.json"))
        except FileNotFoundError:
            pass


def delivered_name(sink: str, batch_id: int) -> str:
    return f"deliver.{sink}.{batch_id:012d}"


def redelivered_name(sink: str, stamp: str) -> str:
    return f"redeliver.{sink}.{file_safe(stamp, 120)}"


def report_record(kind: str, sink: AlertSink, report: Delivery, **extra) -> dict:
    return {
        "kind": kind,
        "sink": sink.key(),
        "label": sink.describe(),
        "time": _now_iso(),
        "delivered": dict(report.delivered),
        "dead_lettered": dict(report.dead_lettered),
        "retries": report.retries,
        "errors": [{"message": e.message, "rules": list(e.rules), "key": e.key} for e in report.errors],
        **extra,
    }


@dataclass
class LaneState:
    """What a lane is doing, for the status line, ``cep status`` and the metrics."""

    sink: str
    label: str
    failing_since: float | None = None  # wall clock of the first failure of the current streak
    last_error: str | None = None
    last_exception: BaseException | None = field(default=None, repr=False)
    last_error_at: float | None = None
    last_success_at: float | None = None
    failures: int = 0  # deliveries that raised, since the start
    redelivered: int = 0
    idle: bool = False
    answering: bool = False
    stuck_batch: int | None = None
    events: list[str] = field(default_factory=list)


class _Lane(threading.Thread):
    def __init__(self, lanes: DeliveryLanes, sink: AlertSink) -> None:
        super().__init__(name=f"cep-lane-{sink.key()}", daemon=True)
        self.lanes = lanes
        self.sink = sink
        self.key = sink.key()
        self.wake = threading.Event()
        self.state = LaneState(self.key, sink.describe())
        self.retry_at = 0.0
        self.streak = 0
        self.probe_at = 0.0  # when the next probe of a receiver that did not answer may go
        self.probe_wait = 0.0
        self.outage_since: float | None = None  # the wall clock of the first dead letter of a receiver outage
        self.outage_dead = 0

    # -- waiting that the stop interrupts

    def _sleep(self, seconds: float) -> None:
        if self.lanes.stopping.wait(seconds):
            raise DeliveryAbandoned(f"{self.sink.describe()}: the stream is stopping")

    def run(self) -> None:
        self.sink.sleep = self._sleep
        while not self.lanes.stopping.is_set():
            try:
                if self._step():
                    continue
            except DeliveryAbandoned:
                break
            except Exception as exc:  # noqa: BLE001 - a lane never dies; the error is reported
                self._failed(None, exc)
            self.state.idle = True
            self.lanes.idle_changed()
            self.wake.wait(self._wait())
            self.wake.clear()
            self.state.idle = False

    def _wait(self) -> float:
        now = time.monotonic()
        wait = IDLE_WAIT_S
        if self.retry_at > now:
            wait = min(wait, self.retry_at - now)
        return max(0.01, wait)

    def _step(self) -> bool:
        """Deliver the next micro-batch or redeliver dead letters; True when something was done."""
        entries = self.lanes.outbox.entries(self.key)
        if entries and time.monotonic() >= self.retry_at:
            batch_id, _ = entries[0]
            self._deliver(batch_id)
            return True
        box = self.sink.dead_letters
        if box is not None and not entries and time.monotonic() >= max(self.retry_at, self.probe_at):
            return self._redeliver(box)
        return False

    def _deliver(self, batch_id: int) -> None:
        name = delivered_name(self.key, batch_id)
        if self.lanes.journal.has(name):  # delivered before a crash took the entry out
            self.lanes.outbox.remove(self.key, batch_id)
            self.lanes._hand(self.key, batch_id, None)
            return
        alerts = self.lanes.handed(self.key, batch_id)
        if alerts is None:  # after a restart, or a lane far behind: the entry on disk
            alerts = self.lanes.outbox.load(self.key, batch_id)
        try:
            report = self.sink.deliver(alerts, batch_id) if alerts else Delivery(self.sink.name)
        except DeliveryAbandoned:
            raise
        except Exception as exc:  # noqa: BLE001 - kept in the outbox, tried again after a backoff
            self._failed(batch_id, exc)
            return
        self.lanes.journal.write(name, report_record("deliver", self.sink, report, batch=batch_id))
        self.lanes.outbox.remove(self.key, batch_id)
        self.lanes._hand(self.key, batch_id, None)
        self._succeeded(batch_id, report)

    def _failed(self, batch_id: int | None, exc: BaseException) -> None:
        now = time.time()
        self.streak += 1
        wait = min(FAILURE_BACKOFF_MAX_S, FAILURE_BACKOFF_S * 2 ** (self.streak - 1))
        self.retry_at = time.monotonic() + wait
        message = self.sink.redact(
            str(exc) if str(exc).startswith(self.sink.describe()) else f"{type(exc).__name__}: {exc}"
        )
        state = self.state
        state.failures += 1
        first = state.failing_since is None
        state.failing_since = state.failing_since or now
        state.last_error, state.last_error_at, state.stuck_batch = message, now, batch_id
        state.last_exception = exc
        waiting = self.lanes.outbox.entries(self.key)
        if first or self.streak in (2, 4, 8) or self.streak % 16 == 0:
            self.lanes.event(
                f"sink {self.sink.describe()}: micro-batch {batch_id} not delivered ({message.splitlines()[0]}); "
                f"trying again in {wait:g}s; {len(waiting)} micro-batches ({sum(n for _, n in waiting)} alerts) "
                "wait for it, the other sinks go on",
                level="warning",
            )

    def _succeeded(self, batch_id: int, report: Delivery) -> None:
        state = self.state
        if state.failing_since is not None:
            self.lanes.event(
                f"sink {self.sink.describe()} delivers again (micro-batch {batch_id}), "
                f"after {int(time.time() - state.failing_since)}s of failures"
            )
        state.failing_since, state.stuck_batch, state.last_exception = None, None, None
        state.last_success_at = time.time()
        self.streak, self.retry_at = 0, 0.0
        refused = [error for error in report.errors if error.refused]
        if refused:
            self._refused(refused)
        if report.dead_lettered and len(refused) < len(report.errors):
            state.answering = False
            first = next(e.message for e in report.errors if not e.refused)
            state.last_error, state.last_error_at = first.split(": ", 1)[-1], time.time()
            self._outage_started(report)
        elif report.delivered or refused:
            state.answering = True
            self.probe_at, self.probe_wait = 0.0, 0.0
            self._outage_ended()

    def _refused(self, refused: list[DeliveryError]) -> None:
        """Requests refused for good (a 4xx other than 408/425/429, a body template that fails on an alert):
        the receiver answered, so this is no outage, and their letters are never sent again by themselves.
        One warning per delivery, saying what to do."""
        first = refused[0]
        state = self.state
        state.last_error, state.last_error_at = first.message.split(": ", 1)[-1], time.time()
        more = f" and {len(refused) - 1} more request(s)" if len(refused) > 1 else ""
        self.lanes.event(
            f"sink {self.sink.describe()}: refused for good, {first.key or '?'} (rules {', '.join(first.rules)})"
            f"{more}: {first.message.split(': ', 1)[-1]}; kept as dead letters that are not sent again by "
            "themselves: fix the cause (the receiver's answer, or the template), then send them with cep deliver "
            "--checkpoint CHECKPOINT --sink webhook URL",
            level="warning",
        )

    def _outage_started(self, report: Delivery) -> None:
        """One warning per receiver outage (the first dead letter), not one per request that failed: the
        rest are counted, in the status (per rule) and in the metrics, and summed up when it ends."""
        dead = sum(report.dead_lettered.values())
        if self.outage_since is not None:
            self.outage_dead += dead
            return
        self.outage_since, self.outage_dead = time.time(), dead
        error = next((e for e in report.errors if not e.refused), None)
        what = (
            "?"
            if error is None
            else f"{error.key or '?'} (rules {', '.join(error.rules)}): {error.message.split(': ', 1)[-1]}"
        )
        self.lanes.event(
            f"sink {self.sink.describe()}: dead-lettered after its retries, {what}; the alerts that fail "
            "until the receiver answers again become dead letters too, redelivered then (one line when "
            "it does; each is in cep deliver)",
            level="warning",
        )

    def _outage_ended(self) -> None:
        if self.outage_since is None:
            return
        self.lanes.event(
            f"sink {self.sink.describe()} answers again after {int(time.time() - self.outage_since)}s; "
            f"{self.outage_dead} alert(s) were dead-lettered meanwhile and are redelivered"
        )
        self.outage_since = None

    def _redeliver(self, box) -> bool:
        """One round of redelivery; True when a letter was tried. Receiver answering: every letter
        waiting; else the letters whose wait is over, the first as a probe."""
        if not box.due(everything=self.state.answering):
            return False
        sent = tried = 0
        with box.lock():
            letters = [letter for letter in box.letters() if not letter.refused]
            for letter in letters:
                if self.lanes.stopping.is_set():
                    break
                if not self.state.answering and letter.next_attempt_at > time.time():
                    continue
                if not box.exists(letter):  # cep deliver sent it meanwhile
                    continue
                tried += 1
                attempt = self.sink.resend(letter)
                if attempt.ok:
                    record = {
                        "kind": "redeliver",
                        "sink": self.key,
                        "label": self.sink.describe(),
                        "time": _now_iso(),
                        "delivered": dict(letter.rules),
                        "letter": letter.path,
                        "stamp": letter.stamp,
                    }
                    self.lanes.journal.write(redelivered_name(self.key, letter.stamp), record)
                    box.remove(letter)
                    sent += 1
                    self.state.answering = True
                    continue
                box.failed_again(letter, attempt.error, refused=attempt.refused)
                self.state.last_error, self.state.last_error_at = attempt.error, time.time()
                if not attempt.refused:  # the receiver is down again: every letter waits for the next probe
                    self.state.answering = False
                    self.probe_wait = min(box.max_wait, max(box.first_wait, self.probe_wait * 2))
                    self.probe_at = time.monotonic() + self.probe_wait
                    break
        self.state.redelivered += sent
        waiting, refused, _ = box.counts()
        if sent:
            self.probe_at, self.probe_wait = 0.0, 0.0
            self._outage_ended()
            self.lanes.event(
                f"sink {self.sink.describe()}: redelivered {sent} dead letter(s); {waiting} waiting"
                + (f" ({refused} refused by the receiver: send them with cep deliver)" if refused else "")
            )
        elif tried:
            self.lanes.event(
                f"sink {self.sink.describe()}: the receiver still does not take dead letters "
                f"({self.state.last_error or 'failed'}); {waiting} waiting, next try in {self.probe_wait:g}s"
            )
        return tried > 0


class DeliveryLanes:
    """One lane per sink over ``outbox_dir``, recording into ``journal`` (see the module doc)."""

    def __init__(
        self,
        sinks: Iterable[AlertSink],
        outbox_dir: str,
        journal: Journal,
        on_event: Callable[[str, str], None] | None = None,
        on_damage: Callable[[str, str], None] | None = None,
    ) -> None:
        self.sinks = list(sinks)
        self.on_event = on_event
        self.on_damage = on_damage or (lambda message, path: self.event(message, "warning"))
        self.outbox = Outbox(outbox_dir, on_damage=self.on_damage)
        self.journal = journal
        for sink in self.sinks:
            if sink.dead_letters is not None and sink.dead_letters.on_damage is None:
                sink.dead_letters.on_damage = self.on_damage
        self.stopping = threading.Event()
        self._idle = threading.Condition()
        keys = [s.key() for s in self.sinks]
        if len(set(keys)) != len(keys):
            raise ValueError(f"two sinks are the same sink: {', '.join(sorted(k for k in keys if keys.count(k) > 1))}")
        self.lanes = {s.key(): _Lane(self, s) for s in self.sinks}
        self._writers: ThreadPoolExecutor | None = None  # ``_each_sink``'s threads, made at the first need
        self._handed: dict[str, dict[int, list[dict]]] = {key: {} for key in self.lanes}  # ``_hand``
        self._handed_lock = threading.Lock()

    def event(self, message: str, level: str = "info") -> None:
        if self.on_event is not None:
            self.on_event(message, level)

    def spool(self, batch_id: int, alerts: Sequence[dict]) -> None:
        """A micro-batch's alerts into every sink's outbox, handed over at once (``stage`` then ``seal``)."""
        self.seal(self.stage(batch_id, alerts))

    def stage(self, batch_id: int, alerts: Sequence[dict], *, keep_written: bool = False) -> tuple[int, list[str]]:
        """Write a micro-batch's alerts into every sink's outbox (the suppressed ones only to sinks that
        ask), not yet for delivery; returns what ``seal`` hands over. At most once per batch id: a
        micro-batch that Spark runs again after a crash and that a sink's outbox has sealed already
        (``Outbox.sealed_through``) is not written again. ``keep_written``: the alert output committed
        this batch before a crash, from the entry written then; that entry stays, so that the sinks
        get what the output holds (its emit times), not the re-run's."""
        staged = []
        made: dict[bool, tuple[list[dict], str, bool]] = {}  # per choice: its alerts, entry, read back as them
        writes: list[Callable[[], None]] = []
        handing: dict[str, list[dict] | None] = {}
        for sink in self.sinks:
            key = sink.key()
            if batch_id <= self.outbox.sealed_through(key):
                continue
            self._hand(key, batch_id, None)  # a micro-batch staged again: what an earlier try handed is dropped
            choice = bool(sink.include_suppressed)
            if choice not in made:
                chosen = [a for a in alerts if choice or not a.get("suppressed")]
                made[choice] = (chosen, *entry(batch_id, chosen)) if chosen else (chosen, "", False)
            chosen, text, as_read_back = made[choice]
            if keep_written and self.outbox.has(key, batch_id):
                staged.append(key)  # the lane reads the entry written before the crash
            elif chosen:
                writes.append(partial(self.outbox.put, key, batch_id, chosen, seal=False, text=text))
                handing[key] = chosen if as_read_back else None
                staged.append(key)
        self._each_sink(writes)
        for key, chosen in handing.items():
            self._hand(key, batch_id, chosen)
        return batch_id, staged

    def _hand(self, key: str, batch_id: int, alerts: list[dict] | None) -> None:
        """Keep ``alerts`` (None: forget them) for sink ``key``'s lane to deliver as micro-batch ``batch_id``
        without reading its entry back: they are what the entry reads back as (``outbox.entry``), and the
        entry, written and fsynced before the seal, is what a restart delivers. Up to ``HANDED_ALERTS_MAX``
        alerts waiting per sink; a lane further behind reads its entries from disk."""
        with self._handed_lock:
            waiting = self._handed[key]
            waiting.pop(batch_id, None)
            if alerts is not None and sum(map(len, waiting.values())) + len(alerts) <= HANDED_ALERTS_MAX:
                waiting[batch_id] = alerts

    def handed(self, key: str, batch_id: int) -> list[dict] | None:
        """Micro-batch ``batch_id``'s alerts for sink ``key``, when ``stage`` handed them in memory."""
        with self._handed_lock:
            return self._handed[key].get(batch_id)

    def seal(self, staged: tuple[int, list[str]]) -> None:
        """Hand the staged entries over to their lanes (``stage``)."""
        batch_id, keys = staged
        self._each_sink([partial(self._seal_one, key, batch_id) for key in keys])

    def _seal_one(self, key: str, batch_id: int) -> None:
        self.outbox.seal(key, batch_id)
        self.lanes[key].wake.set()

    def _each_sink(self, writes: Sequence[Callable[[], None]]) -> None:
        """Run each sink's write of a micro-batch (``stage``, ``seal``) at the same time: each is that sink's own
        files in its own folder, fsynced, and the disk takes the fsyncs of several files together about as fast
        as one. Returns once every write has ended, raising the first one's error: the caller goes on (to the
        output's commit, to Spark's) only when every outbox holds what it must."""
        if len(writes) <= 1:
            for write in writes:
                write()
            return
        if self._writers is None:  # kept for the stream's life: one thread per sink beyond the caller's own
            self._writers = ThreadPoolExecutor(max_workers=len(self.sinks) - 1, thread_name_prefix="cep-outbox")
        others = [self._writers.submit(write) for write in writes[1:]]
        error: BaseException | None = None
        try:
            writes[0]()
        except BaseException as exc:  # noqa: BLE001 - raised below, once the other sinks' writes have ended
            error = exc
        for future in others:
            failed = future.exception()
            error = error or failed
        if error is not None:
            raise error

    def start(self) -> DeliveryLanes:
        for lane in self.lanes.values():
            if not lane.is_alive():
                lane.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.stopping.set()
        if self._writers is not None:  # idle: the micro-batches that use it have ended
            self._writers.shutdown(wait=False)
            self._writers = None
        for lane in self.lanes.values():
            lane.wake.set()
        deadline = time.monotonic() + timeout
        for lane in self.lanes.values():
            if lane.is_alive():
                lane.join(max(0.0, deadline - time.monotonic()))
        # A sink holds a kept-alive connection or a producer with buffered records: give them back once its
        # lane has ended. A lane still running past the timeout keeps its sink open (closing under it would
        # fail its delivery), and a sink that fails to close never keeps the others open.
        for lane in self.lanes.values():
            if lane.is_alive():
                continue
            try:
                lane.sink.close()
            except Exception as exc:  # noqa: BLE001 - one sink's close never stops the others'
                self.event(f"sink {lane.sink.describe()}: closing it failed ({type(exc).__name__}: {exc})", "warning")

    def idle_changed(self) -> None:
        with self._idle:
            self._idle.notify_all()

    def drain(self, timeout: float | None = None) -> list[str]:
        """Wait until every lane has nothing left to do now (or is failing); returns the failing sinks."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for lane in self.lanes.values():
            lane.wake.set()
        with self._idle:
            while True:
                busy = [
                    lane
                    for lane in self.lanes.values()
                    if lane.is_alive()
                    and not (
                        lane.state.idle and (lane.state.failing_since is not None or not self.outbox.entries(lane.key))
                    )
                ]
                if not busy:
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._idle.wait(0.2 if left is None else min(0.2, left))
        return [lane.sink.describe() for lane in self.lanes.values() if lane.state.failing_since is not None]

    def settled(self, record: dict) -> bool:
        """May this journal record be folded: is its outbox entry, or its dead letter, gone?"""
        if record.get("kind") == "deliver":
            return not self.outbox.has(record["sink"], int(record["batch"]))
        if record.get("kind") == "redeliver":
            letter = read_letter(record.get("letter") or "")
            return letter is None or letter.stamp != record.get("stamp")
        return True

    def snapshot(self) -> dict[str, dict]:
        """Per sink: its queue, its dead letters and how its lane is doing."""
        out = {}
        for key, lane in self.lanes.items():
            entries = self.outbox.entries(key)
            box = lane.sink.dead_letters
            waiting, refused, letter_alerts = box.counts() if box is not None else (0, 0, 0)
            state = lane.state
            out[key] = {
                "label": state.label,
                "queue_batches": len(entries),
                "queue_alerts": sum(n for _, n in entries),
                "dead_letters_waiting": waiting,
                "dead_letters_refused": refused,
                "dead_letter_alerts": letter_alerts,
                "failing_since": state.failing_since,
                "last_error": state.last_error,
                "last_error_at": state.last_error_at,
                "last_success_at": state.last_success_at,
                "failures": state.failures + lane.sink.transient_failures(),
                "redelivered": state.redelivered,
                "damaged_files": self.outbox.damaged(key) + (box.damaged() if box is not None else []),
            }
        return out
