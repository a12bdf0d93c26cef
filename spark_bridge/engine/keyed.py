"""The per-key streaming engine, with no Spark in it: event-time buffering, release on the watermark,
ordering with a deterministic tie-break, sessions, late rows, caps and match ids.

``cep.spark_bridge.spark.streaming`` calls ``KeyedStream.process`` once per key per micro-batch from inside
``applyInPandasWithState``; ``local.LocalStream`` replays the same rules in-process (the tests use it to check
the engine on many more micro-batch splits than a Spark run can afford). pyspark is never imported here.

The rules (``docs/streaming.md`` explains them at length):

* **Time** is the first ORDER BY column, ascending, carried as integer microseconds since 1970-01-01
  UTC (Spark's own precision). ``W`` is the micro-batch's watermark, in microseconds.
* **Late rows**: a row whose event time is ``<= W`` when it arrives (or at/below the key's
  forced-release point, see caps) is late: it is not matched; it is returned with a reason.
* **Bad rows**: a row with a NULL event time, or one the caller rejected upstream (``rejected``: a
  line that is not JSON, a value of the wrong type, an unparseable or far-future event time; see
  ``inputs.mark_bad_rows``), is not matched either; it is returned with its reason and counted
  apart from the late ones (``bad_rows`` and one count per reason).
* **Duplicates** (``dedup_key``): a row whose key (NULL: never) equals that of a row this key
  accepted earlier is dropped and counted. Keys are remembered until the watermark passes their
  event time + ``dedup_horizon_us`` (the watermark delay): a repeat arriving later than that is late
  anyway. Without ``dedup_key`` every row counts, as in SQL.
* **Release**: every accepted row waits in the key's *pending* buffer until ``time <= W``, or, with
  ``release_delay_ms`` (the watermark delay), until it is at or below the key's *own bound*: the largest
  event time the key has read, in Spark's ms, minus the delay. That bound is never beyond the watermark
  Spark computes for the next micro-batch, so every row that could still sort before a released one is
  late in any later micro-batch: the released rows are sorted and fed to the matcher, one micro-batch
  sooner for a key that gets rows. The key remembers its bound; a row at or below it is late too (only
  after a restart can the watermark be behind it).
* **Order**: the query's ORDER BY keys, then, for rows equal on all of them, the values of every
  column the matcher reads (``tiebreak_columns``: sorted by name), compared column by column with
  ``total_order_key``. Rows equal on all of those are interchangeable: they give the same output in
  either order.
* **Clock**: after feeding, the matcher is told ``advance(clock)``, the clock being the larger of W and
  the key's own bound (no row at or before it will come), so
  WITHIN expires partial matches, SHOW TIMEOUT MATCHES reports them, and a trailing ``!B`` completes.
* **Sessions** (``session_timeout_us``): a key's rows form one session while consecutive rows (in
  that order) are at most the timeout apart. A session ends at its last row's time + the timeout:
  the matcher is told ``advance(that time)`` and then ``finish()`` (as at end of input: trailing
  matches are emitted); the key's next row starts a new session with a fresh matcher. A key whose
  session has ended and that has no pending rows has its state dropped.
* **Timers**: after each call the key asks to be called again when the watermark reaches the
  earliest of: its oldest pending row, its session end, the WITHIN deadline of its oldest live
  partial match.
* **Caps**: at most ``max_pending_rows`` rows wait per key. Beyond that, the oldest rows (whole
  event-time groups) are released at once, the key's clock moves to their time, and rows arriving
  later at or below it are late with reason ``behind_forced_release``; each forced row counts as a
  cap hit. At most ``max_match_rows`` rows are kept for live partial matches: past that, the oldest
  partial matches are given up (their starts end unmatched) and counted as ``match_cap_hits``. The
  matcher's own cap on live partial matches (``cep.matcher.pike.vm.MAX_LIVE_THREADS``) raises.
* **Match ids**: ``match_id(...)`` hashes the query text, the partition key, the session's first
  event time, the match number, the match's first row (position in the session and event time).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepRuntimeError, CepSemanticError
from cep.matcher.pike.vm import PartitionMatcher
from cep.matcher.rows.outer import sort_key
from cep.matcher.rows.partitioning import sort_columns
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.match_ids import TaggingOutput, match_id, query_fingerprint
from cep.spark_bridge.engine.ordering import total_order_key

STATE_VERSION = 1

# Rows one key may hold while they wait for the watermark. A key receiving more than this inside one
# watermark delay is either hot or the delay is too long for it; releasing early keeps memory bounded
# at the cost of making its later out-of-order rows late (counted as cap hits, never dropped silently).
DEFAULT_MAX_PENDING_ROWS = 200_000

# Rows one key's matcher may keep for its live partial matches. A partial match that can never end
# (``A+ B`` and no row is a B, with no WITHIN and no session timeout) would keep every row since its
# start, and the key's state would grow without bound. Past this, the oldest partial matches are given
# up (``PartitionMatcher.abandon_before``) down to half the cap, and counted (``match_cap_hits``).
DEFAULT_MAX_MATCH_ROWS = 100_000


LATE_NULL_TIME = "null_event_time"
LATE_BEHIND_WATERMARK = "behind_watermark"
LATE_BEHIND_FORCED = "behind_forced_release"

# Reasons a row is bad (not matched, returned with the reason, counted as ``bad_rows``); the words are
# those of the batch dead letter (``cep.matcher.rows.validate.REASONS``), which also gives their error codes.
BAD_NULL_TIME = LATE_NULL_TIME
BAD_NOT_JSON = "not_json"
BAD_WRONG_TYPE = "wrong_type"
BAD_EVENT_TIME = "bad_event_time"
BAD_FUTURE_TIME = "future_event_time"
BAD_NOT_UTF8 = "not_utf8"
# Last: a new reason goes at the end, so that the per-reason stats of STAT_NAMES keep their positions.
BAD_REASONS = (BAD_NULL_TIME, BAD_NOT_JSON, BAD_WRONG_TYPE, BAD_EVENT_TIME, BAD_FUTURE_TIME, BAD_NOT_UTF8)

STAT_NAMES = (
    "events_in",  # rows received (late, bad and duplicate ones included)
    "late_rows",  # rows not matched because they were late (behind the watermark or a forced release)
    "bad_rows",  # rows not matched because they were bad (one of BAD_REASONS; each also counted below)
    "duplicates_dropped",  # rows dropped as repeats of an earlier row's dedup key
    "released_rows",  # rows fed to the matcher
    "pending_rows",  # rows waiting for the watermark after the call
    "matcher_rows",  # rows the matcher keeps buffered after the call
    "live_matches",  # live partial matches (matcher threads) after the call
    "matches_out",  # output rows emitted
    "key_calls",  # keys called (with rows or by a timer)
    "timers_fired",  # calls made by a timer (no new rows)
    "sessions_closed",  # sessions finished (gap or idle timeout)
    "cap_hits",  # rows released early because of max_pending_rows
    "match_cap_hits",  # partial matches given up because of max_match_rows
    "state_bytes",  # size of the state blob kept after the call
) + BAD_REASONS  # bad rows per reason


@dataclass(frozen=True)
class OrderKey:
    column: str
    descending: bool
    nulls_first: bool | None


@dataclass(slots=True)
class KeyState:
    """One key's state between calls. Its bytes are the plain dict every version of the engine has written
    (``encode``/``decode``), so a checkpoint written before this class still reads."""

    key: list  # the partition key's values
    pending: dict | None = None  # rows waiting for the watermark: {"us": [µs...], "cols": {name: [values...]}}
    matcher: dict | None = None  # the open session's ``PartitionMatcher.state()``; None: no open session
    start: int | None = None  # the open session's first event time (µs), hashed into match ids
    last: int | None = None  # the open session's last fed event time (µs)
    forced: int | None = None  # how far ``max_pending_rows`` forced the key's clock (µs)
    sessions: int = 0  # sessions closed
    seen: dict | None = None  # dedup keys remembered: {"keys": [...], "us": [µs...]}
    remembers: bool = False  # the key's stream has a dedup_key: ``seen`` is written, even when None
    bound: int | None = None  # the key's own release bound (µs, ``own_bound_us``); None: not released early

    @classmethod
    def new(cls, key: Sequence | None) -> KeyState:
        return cls(key=list(key or ()))

    @classmethod
    def decode(cls, blob: bytes) -> KeyState:
        data = codec.decode(blob)
        if data.get("v") != STATE_VERSION:
            raise CepRuntimeError(f"streaming key state version {data.get('v')} is not {STATE_VERSION}", code="E0481")
        return cls(
            key=data["key"],
            pending=data["pending"],
            matcher=data["m"],
            start=data["start"],
            last=data["last"],
            forced=data["forced"],
            sessions=data["sessions"],
            seen=data.get("seen"),
            remembers="seen" in data,
            bound=data.get("bound"),
        )

    def encode(self) -> bytes:
        data = {
            "v": STATE_VERSION,
            "key": self.key,
            "pending": self.pending,
            "m": self.matcher,
            "start": self.start,
            "last": self.last,
            "forced": self.forced,
            "sessions": self.sessions,
        }
        if self.remembers:
            data["seen"] = self.seen
        if self.bound is not None:  # absent from a state written without early release, as before it existed
            data["bound"] = self.bound
        return codec.encode(data)


@dataclass
class StepResult:
    """What one call for one key produced."""

    state: bytes | None  # the key's new state; None: remove it
    timer_us: int | None  # call again when the watermark (µs) reaches this; None: only on new rows
    rows: list[tuple] = field(default_factory=list)  # output rows of the statement (after WHERE)
    match_ids: list[str] = field(default_factory=list)
    late: list[tuple[int, str]] = field(default_factory=list)  # (index of the input row, reason)
    stats: dict[str, int] = field(default_factory=dict)


class KeyedStream:
    """The streaming rules for one query over one input schema; shared by every key in a worker.

    ``input_columns`` are the input's column names as the batch path sees them (the matcher's machine
    is built for exactly these). ``proctime``: ORDER BY PROCTIME() — rows are matched in arrival
    order as they come, with no buffering, no watermark and no late rows. ``dedup_key``: column(s)
    whose repeats within a key are dropped, remembered for ``dedup_horizon_us`` past the watermark.
    ``release_delay_ms``: the watermark delay Spark computes the watermark with; given, a key releases its
    rows up to its own bound (``own_bound_us``) in the micro-batch that reads them; None: at the watermark.
    """

    def __init__(
        self,
        plan,
        input_columns: Sequence[str],
        *,
        query_text: str,
        session_timeout_us: int | None = None,
        max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS,
        dedup_key: str | Sequence[str] | None = None,
        dedup_horizon_us: int = 0,
        max_match_rows: int = DEFAULT_MAX_MATCH_ROWS,
        release_delay_ms: int | None = None,
        integer_columns: dict[str, str] | None = None,
    ) -> None:
        self.plan = plan
        self.input_columns = tuple(input_columns)
        # The input's INT columns (``types.narrow_integer_columns``): their arithmetic is an INT's, as in batch.
        self.integer_columns = dict(integer_columns or {})
        self.proctime = bool(getattr(plan, "proctime", False))
        base = plan.machine(self.input_columns, self.integer_columns)
        self.outer = plan.outer(self.input_columns)
        mr = plan.statement.match
        # A column repeated in ORDER BY (``ts, ts DESC``) orders nothing more: rows tied on it are tied on its repeat.
        keys = {}
        for k, name in sort_columns(plan.statement, base):
            keys.setdefault(name, OrderKey(name, k.descending, k.nulls_first))
        self.order = tuple(keys.values())
        self.partition_columns = tuple(base.partition_names)
        if self.proctime:
            self.time_column = None
        else:
            if not self.order:
                raise CepSemanticError(
                    "a streaming query needs ORDER BY an event-time column (or ORDER BY PROCTIME())", code="E0280"
                )
            first = mr.order_by[0]
            if not isinstance(first.expr, ast.ColumnRef) or first.descending:
                raise CepSemanticError(
                    "on a stream the first ORDER BY key must be the event-time column, ascending",
                    code="E0281",
                    span=first.span,
                )
            self.time_column = self.order[0].column
        if session_timeout_us is not None and session_timeout_us <= 0:
            raise ValueError("session_timeout must be positive")
        if max_pending_rows < 1:
            raise ValueError("max_pending_rows must be at least 1")
        if max_match_rows < 2:
            raise ValueError("max_match_rows must be at least 2")
        self.max_match_rows = max_match_rows
        if release_delay_ms is not None and release_delay_ms < 0:
            raise ValueError("release_delay_ms must be 0 or more")
        self.release_delay_ms = None if self.proctime else release_delay_ms
        self.session_timeout_us = session_timeout_us
        self.max_pending_rows = max_pending_rows
        self.query_fp = query_fingerprint(query_text)

        self.tagger = TaggingOutput(base.output, self.time_column)
        feed = base.columns
        if self.time_column is not None and self.time_column not in feed:
            feed = feed + (self.time_column,)  # so a match's first event time is at hand for its id
        self.machine = dataclasses.replace(base, columns=feed, output=self.tagger)
        self.feed_columns = feed
        # Rows tied on the event time: the time column itself cannot break the tie.
        self.tiebreak_columns = tuple(c for c in sorted(base.columns) if c != self.time_column)
        # The pending buffer keeps the event time once, as µs; the other columns as values.
        wanted = feed + tuple(k.column for k in self.order) + self.tiebreak_columns
        self.pending_columns = tuple(c for c in dict.fromkeys(wanted) if c != self.time_column)
        if isinstance(dedup_key, str):
            dedup_key = (dedup_key,)
        names = ColumnNames(self.input_columns)
        self.dedup_columns = tuple(names.option_column(name, "dedup_key") for name in dedup_key or ())
        if self.dedup_columns and self.proctime:
            raise CepSemanticError(
                "dedup_key needs event time (it forgets keys as the watermark passes them); "
                "ORDER BY PROCTIME() has none",
                code="E0283",
            )
        if dedup_horizon_us < 0:
            raise ValueError("dedup_horizon_us must be 0 or more")
        self.dedup_horizon_us = dedup_horizon_us
        # The columns ``process`` reads from new rows.
        self.read_columns = tuple(dict.fromkeys(self.pending_columns + self.dedup_columns))

    def releasing_early(self, delay_ms: int | None) -> KeyedStream:
        """This engine with ``release_delay_ms`` = ``delay_ms`` (a copy; None: release at the watermark)."""
        if delay_ms == self.release_delay_ms or self.proctime:
            return self
        if delay_ms is not None and delay_ms < 0:
            raise ValueError("release_delay_ms must be 0 or more")
        other = copy.copy(self)
        other.release_delay_ms = delay_ms
        return other

    def route(self, one_key_per_call: str | None = None):
        """How a stream runs this query (``plan.choose_route``): column-wise, or per key and why.
        ``one_key_per_call``: why the caller calls one key at a time, when it does."""
        return self.plan.route(
            self.input_columns, one_key_per_call=one_key_per_call, integer_columns=self.integer_columns
        )

    # ------------------------------------------------------------------------------------ one call

    def process(
        self,
        state: bytes | None,
        key: Sequence | None,
        columns: dict[str, list] | None,
        event_us: list[int | None] | None,
        watermark_us: int,
        *,
        timed_out: bool = False,
        rejected: Sequence[str | None] | None = None,
    ) -> StepResult:
        """One key's call in one micro-batch.

        ``columns`` holds at least ``read_columns`` for the new rows (None: a timer call), ``event_us``
        their event times in µs (None for NULL), ``key`` the partition key values (needed when there is
        no state yet), ``watermark_us`` the micro-batch's watermark, ``rejected`` a bad-row reason per
        new row (None: not rejected upstream).
        """
        st = KeyState.decode(state) if state else KeyState.new(key)
        stats = dict.fromkeys(STAT_NAMES, 0)
        stats["timers_fired"] = int(timed_out)
        stats["key_calls"] = 1
        result = StepResult(state=None, timer_us=None, stats=stats)
        self.tagger.tags.clear()
        matcher = PartitionMatcher.from_state(self.machine, st.matcher) if st.matcher is not None else None
        count = len(event_us) if event_us is not None else (len(next(iter(columns.values()))) if columns else 0)
        stats["events_in"] = count

        if self.proctime:  # arrival order, at once: nothing waits, nothing is late
            good = [i for i in range(count) if rejected is None or rejected[i] is None]
            self._reject(
                result, [(i, rejected[i]) for i in range(count) if rejected is not None and rejected[i] is not None]
            )
            if good:
                matcher = self._feed_run(st, matcher, columns, good, None, result)
                stats["released_rows"] = len(good)
            return self._finish_call(st, matcher, result, watermark_us)

        # 1. Bad, duplicate, late or accepted.
        accepted, floor, top = self._triage(st, columns, event_us, count, watermark_us, rejected, result)
        pending = st.pending or {"us": [], "cols": {name: [] for name in self.pending_columns}}
        if accepted:
            pending["us"].extend(event_us[i] for i in accepted)
            for name, target in pending["cols"].items():
                values = columns[name]
                target.extend(values[i] for i in accepted)

        # 2. The key's clock: the watermark, or its own bound, or further if the pending buffer is over its cap.
        if self.release_delay_ms is not None and top is not None:
            own = own_bound_us(top, self.release_delay_ms)
            if own > (watermark_us if st.bound is None else st.bound):
                st.bound = own
        clock = floor if st.bound is None else max(floor, st.bound)
        waiting = len(pending["us"])
        if waiting > self.max_pending_rows:
            cut = sorted(pending["us"])[waiting - self.max_pending_rows - 1]
            if cut > clock:
                stats["cap_hits"] = sum(1 for u in pending["us"] if clock < u <= cut)
                clock = cut
                st.forced = cut

        # 3. Release every row at or below the clock, in order.
        ready = [i for i, u in enumerate(pending["us"]) if u <= clock]
        if ready:
            ordered = self.release_order(ready, pending)
            matcher = self._feed_run(st, matcher, pending["cols"], ordered, pending["us"], result)
            stats["released_rows"] = len(ready)
            if len(ready) == waiting:
                pending = None
            else:
                keep = [i for i, u in enumerate(pending["us"]) if u > clock]
                pending = {
                    "us": [pending["us"][i] for i in keep],
                    "cols": {n: [v[i] for i in keep] for n, v in pending["cols"].items()},
                }
        st.pending = pending if pending and pending["us"] else None

        # 4. Time moved: close an idle session at its end, or tell the matcher the time (WITHIN).
        gap = self.session_timeout_us
        if matcher is not None and st.last is not None:
            if gap is not None and clock >= st.last + gap:
                self._close(st, matcher, result)
                matcher = None
            else:
                self._advance(st, matcher, clock, result)

        # 5. When to be called again without new rows.
        timers = []
        if st.pending is not None:
            timers.append(min(st.pending["us"]))
        if matcher is not None and gap is not None and st.last is not None:
            timers.append(st.last + gap)
        deadline = self._deadline_us(matcher) if matcher is not None else None
        if deadline is not None:
            timers.append(max(deadline, clock + 1))
        if st.seen:  # forget remembered dedup keys once the watermark passes them
            timers.append(min(st.seen["us"]) + self.dedup_horizon_us + 1)
        result.timer_us = min(timers) if timers else None
        return self._finish_call(st, matcher, result, watermark_us)

    def _triage(
        self, st: KeyState, columns, event_us, count: int, watermark_us: int, rejected, result: StepResult
    ) -> tuple[list[int], int, int | None]:
        """Tell the new rows bad, repeated, late or accepted (remembering accepted rows' dedup values). Returns
        the accepted rows' indices, the key's floor (at or below it a row is late), and the largest event time
        of the rows that are not bad (Spark's watermark saw them: they move the key's own bound)."""
        stats = result.stats
        # Behind the key's own bound is behind where the watermark is (or would be, without a restart).
        if st.bound is not None and st.bound <= watermark_us:
            st.bound = None  # the watermark has caught up with it
        behind = watermark_us if st.bound is None else st.bound
        floor = behind if st.forced is None else max(behind, st.forced)
        seen = self._seen(st, behind)
        keys = self.dedup_values(columns, count) if seen is not None else None
        accepted: list[int] = []
        top = None
        for index in range(count):
            us = event_us[index]
            bad = rejected[index] if rejected is not None else None
            if bad is None and us is None:
                bad = BAD_NULL_TIME
            if bad is not None:
                self._reject(result, [(index, bad)])
                continue
            if top is None or us > top:
                top = us
            if keys is not None and keys[index] is not None and keys[index] in seen:
                stats["duplicates_dropped"] += 1
            elif us <= floor:
                result.late.append((index, LATE_BEHIND_WATERMARK if us <= behind else LATE_BEHIND_FORCED))
                stats["late_rows"] += 1
            else:
                accepted.append(index)
                if keys is not None and keys[index] is not None:
                    seen[keys[index]] = us
        if seen is not None:
            st.seen = {"keys": list(seen), "us": list(seen.values())} if seen else None
            st.remembers = True
        return accepted, floor, top

    def _finish_call(self, st: KeyState, matcher, result: StepResult, watermark_us: int) -> StepResult:
        stats = result.stats
        stats["pending_rows"] = len(st.pending["us"]) if st.pending else 0
        if matcher is not None:
            # The matcher trims its buffer in chunks (slicing lists is O(n)); every kept row is encoded
            # and decoded again between micro-batches, so trim to the exact bound before saving.
            matcher.compact()
            stats["matcher_rows"] = matcher.buffered_rows()
            stats["live_matches"] = matcher.live_threads()
        st.matcher = matcher.state() if matcher is not None else None
        if st.matcher is None and st.pending is None and not st.seen:
            result.state = None  # nothing left to remember (a closed session): the key's state is dropped
        else:
            result.state = st.encode()
            stats["state_bytes"] = len(result.state)
        if result.state is None:
            result.timer_us = None
        stats["matches_out"] = len(result.rows)
        return result

    # ------------------------------------------------------------------------------------- helpers

    @staticmethod
    def _reject(result: StepResult, bad: list[tuple[int, str]]) -> None:
        """Return bad rows (index, reason) with their reasons, counted apart from the late ones."""
        result.late.extend(bad)
        result.stats["bad_rows"] += len(bad)
        for _, reason in bad:
            result.stats[reason] += 1

    def _seen(self, st: KeyState, watermark_us: int) -> dict | None:
        """The dedup keys still remembered (key value -> event time µs), without those the watermark
        has passed by more than the horizon; None without ``dedup_key``."""
        if not self.dedup_columns:
            return None
        saved = st.seen
        if not saved:
            return {}
        horizon = self.dedup_horizon_us
        return {key: us for key, us in zip(saved["keys"], saved["us"]) if us + horizon >= watermark_us}

    def dedup_values(self, columns: dict[str, list] | None, count: int) -> list | None:
        """Each new row's dedup key (None when any part is NULL: NULL equals nothing), hashable."""
        if not count:
            return []
        parts = [columns[name] for name in self.dedup_columns]
        if len(parts) == 1:  # the values themselves (None stays None), when all hash: checked in one C loop
            values = list(parts[0])
            try:
                dict.fromkeys(values)
            except TypeError:
                pass
            else:
                return values
        values = []
        for value in zip(*parts):
            if any(v is None for v in value):
                values.append(None)
                continue
            key = value[0] if len(value) == 1 else tuple(value)
            try:
                hash(key)
            except TypeError:  # an unhashable value (an array): compare its text, as batch does
                key = repr(key)
            values.append(key)
        return values

    def release_order(self, indices: list[int], pending: dict) -> list[int]:
        """``indices`` of pending rows in the order the stream releases them: ORDER BY order, ties broken by
        ``tiebreak_columns`` (public: a batch replay orders rows so too, spark_bridge/engine/replay.py)."""
        cols, times = pending["cols"], pending["us"]
        order = list(indices)
        key_columns = [times] + [cols[k.column] for k in self.order[1:]]
        try:
            distinct = len(set(zip(*[[c[i] for i in order] for c in key_columns]))) == len(order)
        except TypeError:  # an unhashable ORDER BY value (an array): break ties anyway
            distinct = False
        if not distinct and self.tiebreak_columns:
            tb = [cols[name] for name in self.tiebreak_columns]
            order.sort(key=lambda i: tuple(total_order_key(c[i]) for c in tb))
        for position in range(len(self.order) - 1, -1, -1):
            k = self.order[position]
            values = times if position == 0 else cols[k.column]
            order.sort(key=lambda i: sort_key(values[i], k.descending, k.nulls_first), reverse=k.descending)
        return order

    def _feed_run(
        self, st: KeyState, matcher, cols: dict, ordered: list[int], times: list[int] | None, result: StepResult
    ):
        """Feed rows ``ordered`` (indices into ``cols``) to the key's matcher, opening and closing sessions."""
        gap = self.session_timeout_us
        i, n = 0, len(ordered)
        while i < n:
            if matcher is None:
                matcher = PartitionMatcher(self.machine, tuple(st.key))
                st.start = times[ordered[i]] if times is not None else None
                st.last = None
            last = st.last
            j = i
            if gap is None or times is None:
                j = n
                last = times[ordered[n - 1]] if times is not None else None
            else:
                while j < n and (last is None or times[ordered[j]] - last <= gap):
                    last = times[ordered[j]]
                    j += 1
            if j > i:
                chunk = ordered[i:j]
                part = {name: [cols[name][r] for r in chunk] for name in self.feed_columns if name != self.time_column}
                if self.time_column is not None:
                    part[self.time_column] = [codec.micros_to_datetime(times[r]) for r in chunk]
                self._collect(st, matcher.feed(part), result)
                self._cap(st, matcher, result)
                st.last = last
            if j < n:  # the next row is more than the session timeout after the last: a new session
                self._close(st, matcher, result)
                matcher = None
            i = j
        return matcher

    def _cap(self, st: KeyState, matcher, result: StepResult) -> None:
        """Past ``max_match_rows`` kept rows, give up the oldest partial matches down to half the cap."""
        if matcher.buffered_rows() > self.max_match_rows:
            given_up = matcher.abandoned
            self._collect(st, matcher.abandon_before(matcher.total - self.max_match_rows // 2), result)
            result.stats["match_cap_hits"] += matcher.abandoned - given_up

    @staticmethod
    def _deadline_us(matcher) -> int | None:
        """When the watermark must next reach this key for WITHIN: the earliest live partial match's
        first row time + the interval (``matcher.next_deadline()``), in µs."""
        deadline = matcher.next_deadline()
        if deadline is None:
            return None
        return deadline if isinstance(deadline, int) else codec.datetime_to_micros(deadline)

    def _advance(self, st: KeyState, matcher, now_us: int, result: StepResult) -> None:
        """No row at or before ``now_us`` will reach this session any more: WITHIN expiry, deadlines."""
        self._collect(st, matcher.advance(codec.micros_to_datetime(now_us)), result)

    def _close(self, st: KeyState, matcher, result: StepResult) -> None:
        """End the session as at end of input, its clock at its last row + the session timeout."""
        if self.session_timeout_us is not None and st.last is not None:
            self._advance(st, matcher, st.last + self.session_timeout_us, result)
        self._collect(st, matcher.finish(), result)
        st.sessions += 1
        st.start = st.last = None
        result.stats["sessions_closed"] += 1

    def _collect(self, st: KeyState, rows, result: StepResult) -> None:
        """Turn the matcher's MATCH_RECOGNIZE rows into statement rows with their match ids."""
        tags, self.tagger.tags = self.tagger.tags, []
        if not rows:
            return
        rows = list(rows)
        if len(tags) != len(rows):  # rows that did not come through the output builder
            tags = [(None, position, None) for position in range(len(rows))]
        key = tuple(st.key)
        outer = self.outer
        ids: dict[tuple, str] = {}
        for row, tag in zip(rows, tags):
            projected = outer.apply([row], order_and_limit=False)
            if not projected:
                continue
            found = ids.get(tag)
            if found is None:
                number, start, first_time = tag
                found = ids[tag] = match_id(
                    self.query_fp, key, st.start, number if number is not None else -1, start, first_time
                )
            result.rows.extend(projected)
            result.match_ids.extend([found] * len(projected))


class SessionRun:
    """Part of one key's session on the Pike VM, run by the rules ``process`` applies to it, for a caller that
    holds the key's rows itself: the column-wise step (``columnar/``) hands a session piece it cannot take
    to the VM this way. Rows go in; the statement's rows and match ids come out in ``result``, the match cap's
    hits in its stats."""

    def __init__(self, engine: KeyedStream, matcher: PartitionMatcher, key: tuple, start_us: int, last_us: int) -> None:
        self.engine = engine
        self.matcher = matcher
        self.state = KeyState(key=list(key), start=start_us, last=last_us)
        self.result = StepResult(state=None, timer_us=None, stats=dict.fromkeys(STAT_NAMES, 0))
        engine.tagger.tags.clear()  # a tag the last call left unread would go to this session's rows

    def feed(self, columns: dict[str, list], *, capped: bool) -> None:
        """Feed rows (already in release order); ``capped``: apply ``max_match_rows`` after them, as a call
        that released rows does."""
        engine = self.engine
        engine._collect(self.state, self.matcher.feed(columns), self.result)
        if capped:
            engine._cap(self.state, self.matcher, self.result)

    def advance(self, now_us: int) -> None:
        """No row at or before ``now_us`` will come: WITHIN expiry and deadlines."""
        self.engine._advance(self.state, self.matcher, now_us, self.result)

    def close(self) -> None:
        """The session ended (a gap, or the clock past its last row + the timeout): its trailing matches."""
        self.engine._close(self.state, self.matcher, self.result)

    def deadline_us(self) -> int | None:
        """When the watermark must next reach the key for WITHIN (µs), or None."""
        return self.engine._deadline_us(self.matcher)


# ------------------------------------------------------------------------------------- Spark's timers


def own_bound_us(top_us: int, delay_ms: int) -> int:
    """A key's own release bound (µs), from the largest event time it has read (µs) and the watermark delay.

    Spark's watermark for the next micro-batch is at least the largest event time of every row read so far, in
    whole ms, minus the delay (its statistics divide µs by 1000, rounding toward zero, which is never below
    the floor taken here), so this bound never passes it: a row that comes later at or below the bound is late.
    """
    return (top_us // 1000 - delay_ms) * 1000


def ms_ceil(us: int) -> int:
    """The smallest whole millisecond at or after ``us`` microseconds."""
    return -((-us) // 1000)


def spark_timeout_ms(timer_us: int, watermark_ms: int) -> int:
    """The ``setTimeoutTimestamp`` value for 'call me when the watermark (ms) reaches ``timer_us``'.

    Spark fires a timeout when ``watermark > timestamp``; ``watermark_ms * 1000 >= timer_us`` is
    ``watermark_ms >= ceil(timer_us / 1000)``, i.e. ``watermark_ms > ceil(timer_us / 1000) - 1``.
    Spark refuses timestamps below the current watermark or below 1.
    """
    return max(ms_ceil(timer_us) - 1, watermark_ms, 1)


__all__ = [
    "DEFAULT_MAX_PENDING_ROWS",
    "KeyState",
    "KeyedStream",
    "STAT_NAMES",
    "SessionRun",
    "StepResult",
    "own_bound_us",
    "spark_timeout_ms",
]
