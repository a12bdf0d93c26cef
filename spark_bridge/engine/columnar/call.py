"""A call's rows before any matching: bad, late or accepted for all rows at once; the keys called (rows or a
due timer) and their clocks (the pending cap moves a key's clock as in ``keyed.py``); the pending rows at or
below each called key's clock released, sorted once as the per-key path orders them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cep.spark_bridge.engine.column_table import NO_TIME, ColumnarTable, Rows, as_column
from cep.spark_bridge.engine.columnar.rules import ColumnarRules
from cep.spark_bridge.engine.keyed import BAD_NULL_TIME, LATE_BEHIND_FORCED, LATE_BEHIND_WATERMARK, own_bound_us
from cep.spark_bridge.engine.ordering import order_ranks, total_order_ranks


@dataclass
class CallResult:
    """What one call produced, per key (the caller orders keys as Spark calls them)."""

    rows: dict[int, list[tuple]] = field(default_factory=dict)  # key id -> output rows, in order
    match_ids: dict[int, list[str]] = field(default_factory=dict)
    late: list[tuple[int, str]] = field(default_factory=list)  # (input row, reason), in input order
    due: list[int] = field(default_factory=list)  # key ids called by their timer, in Spark's order
    stats: dict[str, int] = field(default_factory=dict)
    given: list[int] = field(default_factory=list)  # the key id of each key given with rows, in the order given
    live_matches: int = 0  # the called keys' undecided starts after the call (the VM's live partial matches)
    deadlines: dict[int, int] = field(default_factory=dict)  # key id -> its oldest open start's WITHIN deadline (µs)

    def add(self, kid: int, rows: list[tuple], ids: list[str]) -> None:
        if rows:
            self.rows.setdefault(kid, []).extend(rows)
            self.match_ids.setdefault(kid, []).extend(ids)

    def given_with_output(self) -> tuple[list[int], list[int]]:
        """The keys given that have output, in the order given: (their positions among the keys given,
        their key ids). Only keys with output are visited: most keys of a small micro-batch have none."""
        if not self.rows:
            return [], []
        kids = np.fromiter(self.rows, dtype=np.int64, count=len(self.rows))
        given = np.asarray(self.given, dtype=np.int64)
        position = np.full(max(int(kids.max()), int(given.max()) if len(given) else 0) + 1, -1, dtype=np.int64)
        position[given] = np.arange(len(given))
        found = position[kids]
        found, kids = found[found >= 0], kids[found >= 0]  # (the others were called by their timer)
        order = np.argsort(found)
        return found[order].tolist(), kids[order].tolist()

    def due_with_output(self) -> list[int]:
        """The keys called by their timer alone that have output, in Spark's order."""
        rows = self.rows
        return [kid for kid in self.due if kid in rows] if rows else []

    def in_call_order(self) -> tuple[list[tuple], list[str]]:
        """(output rows, match ids) in the order the per-key path gives them: the keys given in their
        order, then the keys called by their timer."""
        out: list[tuple] = []
        ids: list[str] = []
        for kid in self.given_with_output()[1] + self.due_with_output():
            out.extend(self.rows[kid])
            ids.extend(self.match_ids[kid])
        return out, ids


def triage(
    rules: ColumnarRules,
    table: ColumnarTable,
    kids: np.ndarray,
    columns: dict[str, list],
    event_us: np.ndarray,
    null_time: np.ndarray,
    watermark_us: int,
    rejected,
    result: CallResult,
) -> np.ndarray:
    """Tell bad rows (NULL event time, or ``rejected`` upstream), repeated ones (``dedup_key``), late rows
    (at or below the watermark, the key's own bound or its forced release) and accepted rows apart; accepted rows
    join the pending table. Moves each key's own bound (``keyed.own_bound_us``) with its rows. Returns each
    key's floor (the largest of its forced release, its own bound and the watermark)."""
    stats = result.stats
    n = len(kids)
    f = table.fields
    f["bound"][f["bound"] <= watermark_us] = NO_TIME  # the watermark has caught up with them
    behind = np.maximum(f["bound"], watermark_us)  # behind the key's own bound is behind where the watermark is
    floor = np.maximum(f["forced"], behind)
    bad = null_time
    if rejected is not None:
        bad = bad | np.fromiter((r is not None for r in rejected), dtype=bool, count=n)
    late = ~bad & (event_us <= floor[kids])
    kept = ~bad
    if rules.engine.dedup_columns:  # a repeat is dropped, counted, and neither late nor accepted
        forget(rules, table, result.given, behind)
        repeated = duplicates(rules, table, kids, columns, event_us, bad, late)
        stats["duplicates_dropped"] = int(repeated.sum())
        late &= ~repeated
        kept &= ~repeated
    out_rows = np.flatnonzero(bad | late)
    if len(out_rows):
        behind_w = event_us[out_rows] <= behind[kids[out_rows]]
        reasons = [None] * len(out_rows) if rejected is None else [rejected[i] for i in out_rows.tolist()]
        result.late = [
            (int(i), (r or BAD_NULL_TIME) if b else (LATE_BEHIND_WATERMARK if w else LATE_BEHIND_FORCED))
            for i, r, b, w in zip(out_rows.tolist(), reasons, bad[out_rows].tolist(), behind_w.tolist())
        ]
        for _, reason in result.late:
            if reason in stats and reason not in (LATE_BEHIND_WATERMARK, LATE_BEHIND_FORCED):
                stats[reason] += 1
    stats["bad_rows"] = int(bad.sum())
    stats["late_rows"] = int(late.sum())
    accepted = np.flatnonzero(kept & ~late)
    if len(accepted):
        table.pending = table.pending + Rows(
            kids[accepted], event_us[accepted], {name: as_column(columns[name])[accepted] for name in rules.columns}
        )
    delay_ms = rules.engine.release_delay_ms
    if delay_ms is not None and not bad.all():
        top = np.full(len(table.keys), NO_TIME, dtype=np.int64)
        read = ~bad  # late and repeated rows too: Spark's watermark saw them
        np.maximum.at(top, kids[read], event_us[read])
        has = top != NO_TIME
        own = np.where(has, own_bound_us(np.where(has, top, 0), delay_ms), NO_TIME)
        moved = own > behind
        f["bound"][moved] = own[moved]
        floor = np.maximum(floor, f["bound"])
    return floor


def duplicates(
    rules: ColumnarRules,
    table: ColumnarTable,
    kids: np.ndarray,
    columns: dict,
    event_us: np.ndarray,
    bad: np.ndarray,
    late: np.ndarray,
) -> np.ndarray:
    """Which rows repeat a dedup value their key remembers (``keyed.py``'s rule, row by row in input order:
    a repeat is dropped, late or not; an accepted row's value is remembered, a late row's is not; NULL in
    a dedup column repeats nothing). Updates ``table.seen``."""
    engine = rules.engine
    repeated = np.zeros(len(kids), dtype=bool)
    rows = np.flatnonzero(~bad)
    if not len(rows):
        return repeated
    parts = {name: as_column(columns[name])[rows].tolist() for name in engine.dedup_columns}
    values = engine.dedup_values(parts, len(rows))
    seen_of, us_of, late_of = table.seen, event_us[rows].tolist(), late[rows].tolist()
    for at, row, kid, value in zip(range(len(rows)), rows.tolist(), kids[rows].tolist(), values):
        if value is None:
            continue
        seen = seen_of.get(kid)
        if seen is not None and value in seen:
            repeated[row] = True
        elif not late_of[at]:
            if seen is None:
                seen = seen_of[kid] = {}
            seen[value] = us_of[at]
    return repeated


def forget(rules: ColumnarRules, table: ColumnarTable, kids, behind: np.ndarray) -> None:
    """The called keys forget the dedup values their ``behind`` (per key id: the watermark, or the key's own
    bound past it) has passed by more than ``dedup_horizon_us``."""
    if not table.seen:
        return
    horizon = rules.engine.dedup_horizon_us
    for kid in kids:
        seen = table.seen.get(kid)
        if seen is not None:
            limit = int(behind[kid])
            kept = {value: us for value, us in seen.items() if us + horizon >= limit}
            if kept:
                table.seen[kid] = kept
            else:
                del table.seen[kid]


def called_keys(
    rules: ColumnarRules, table: ColumnarTable, floor: np.ndarray, watermark_us: int, result: CallResult
) -> tuple[np.ndarray, np.ndarray]:
    """The keys called (those given with rows, then those whose timer the watermark reached: Spark's rule)
    and each key's clock: its floor, moved up by the pending cap (``max_pending_rows``) as ``keyed.py``
    moves it. Returns (called, a flag per key id; clock, per key id)."""
    stats = result.stats
    f = table.fields
    busy = result.given
    called = np.zeros(len(table.keys), dtype=bool)
    called[busy] = True
    held, at = table.timer_arrays()
    result.due = held[(at <= watermark_us) & ~called[held]].tolist()  # in the order the timers were set
    called[result.due] = True
    forget(rules, table, result.due, np.maximum(f["bound"], watermark_us))
    stats["key_calls"] = len(busy) + len(result.due)
    stats["timers_fired"] = len(result.due)
    clock = floor.copy()
    pending = table.pending
    waiting = np.bincount(pending.kid, minlength=len(table.keys))
    cap = rules.engine.max_pending_rows
    for kid in np.flatnonzero(called & (waiting > cap)).tolist():
        times = pending.us[pending.kid == kid]
        cut = int(np.sort(times)[len(times) - cap - 1])
        if cut > clock[kid]:
            stats["cap_hits"] += int(((times > clock[kid]) & (times <= cut)).sum())
            clock[kid] = f["forced"][kid] = cut
    return called, clock


def release(rules: ColumnarRules, table: ColumnarTable, called: np.ndarray, clock: np.ndarray, stats: dict) -> Rows:
    """Take every pending row of a called key at or below its clock out of the pending table, in order."""
    pending = table.pending
    ready = called[pending.kid] & (pending.us <= clock[pending.kid])
    released = pending.take(np.flatnonzero(ready))
    table.pending = pending.take(np.flatnonzero(~ready))
    stats["released_rows"] = len(released)
    return released.take(release_order(rules, released))


def release_order(rules: ColumnarRules, rows: Rows) -> np.ndarray:
    """(key, event time, the other ORDER BY keys, tie-break columns) order of released rows, stable:
    ``release_order``'s (its sorts are stable, so it orders by all of them in that order too)."""
    order = np.lexsort((rows.us, rows.kid))
    kid, us = rows.kid[order], rows.us[order]
    tied = (kid[1:] == kid[:-1]) & (us[1:] == us[:-1])
    if not tied.any():
        return order
    engine = rules.engine
    ranks = [order_ranks(rows.cols[key.column], key.descending, key.nulls_first) for key in engine.order[1:]]
    ranks += [total_order_ranks(rows.cols[name]) for name in engine.tiebreak_columns]
    return np.lexsort(tuple(reversed(ranks)) + (rows.us, rows.kid)) if ranks else order


def by_key(kept: Rows, carry: Rows) -> Rows:
    """The carried rows of the keys not called and of the called ones in one table in key order (stable: a
    key's rows keep their order); no sort when they already are (no key left out, say)."""
    merged = kept + carry
    kid = merged.kid
    if len(kid) < 2 or bool((kid[1:] >= kid[:-1]).all()):
        return merged
    return merged.take(np.argsort(kid, kind="stable"))
