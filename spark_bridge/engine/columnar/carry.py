"""What the called keys keep after a call: closed sessions counted; an open session keeps its rows from its
first undecided start (and the ``lookback`` rows PREV reads before it), each kept start's final decision
with it (the next call matches only the starts still undecided, and the new rows'), its session fields;
and each called key's next timer, set in call order as Spark sets them."""

from __future__ import annotations

import numpy as np

from cep.matcher.vector import decisions
from cep.spark_bridge.engine.column_table import KNOWN, NO_TIME, SEARCHED, SPAN, ColumnarTable, Rows
from cep.spark_bridge.engine.columnar.call import CallResult
from cep.spark_bridge.engine.columnar.pieces import Pieces, close_keys
from cep.spark_bridge.engine.columnar.resume import Resumed
from cep.spark_bridge.engine.columnar.rules import ColumnarRules
from cep.spark_bridge.engine.columnar.walk import Walk


def carry(
    rules: ColumnarRules,
    table: ColumnarTable,
    rows: Rows,
    order: np.ndarray,
    pieces: Pieces,
    walk: Walk,
    resumed: dict[int, Resumed],
    result: CallResult,
) -> Rows:
    """The sessions after the call: closed ones counted, open ones keep their rows from the first
    undecided start (and the ``lookback`` rows before it); returns those rows."""
    m = len(order)
    us, piece_of, on_vm = walk.us, walk.piece_of, walk.on_vm
    stats = result.stats
    f = table.fields
    count = len(pieces.begin)
    columnwise = np.ones(count, dtype=bool)
    columnwise[list(on_vm)] = False
    last_of_key = np.ones(count, dtype=bool)
    last_of_key[:-1] = pieces.kid[1:] != pieces.kid[:-1]
    ended = columnwise & pieces.closed
    np.add.at(f["sessions"], pieces.kid[ended & ~last_of_key], 1)
    stats["sessions_closed"] += int((ended & ~last_of_key).sum())
    close_keys(table, pieces.kid[ended & last_of_key], stats)
    going = np.flatnonzero(columnwise & ~pieces.closed)
    first_open = walk.stop[going]
    begin, end = pieces.begin[going], pieces.end[going]
    carry_from = np.maximum(begin, first_open - rules.lookback)
    matched = np.asarray(walk.chosen, dtype=np.int64)
    if walk.timeouts is not None:  # TIMEOUT rows use up no match number
        matched = matched[~walk.timeouts]
    emitted_count = np.bincount(piece_of[matched], minlength=count)[going]
    numbers, totals = pieces.number[going] + emitted_count, pieces.position[going] + end - begin
    waiting = first_open < end
    result.live_matches += int(waiting.sum())
    deadlines = None
    if rules.within_us is not None:
        deadlines = np.where(waiting, us[np.minimum(first_open, m - 1)] + rules.within_us, NO_TIME)
    kids = pieces.kid[going]
    if resumed:
        vm = np.asarray(sorted(resumed), dtype=np.int64)
        stopped = [resumed[p] for p in vm.tolist()]
        kids = np.concatenate([kids, pieces.kid[vm]])
        going = np.concatenate([going, vm])
        carry_from = np.concatenate([carry_from, [s.carry_from for s in stopped]]).astype(np.int64)
        first_open = (
            np.concatenate([first_open - carry_from[: len(first_open)], [s.first_open for s in stopped]]).astype(
                np.int64
            )
            + carry_from
        )
        numbers = np.concatenate([numbers, [s.match_number for s in stopped]]).astype(np.int64)
        totals = np.concatenate([totals, [s.total for s in stopped]]).astype(np.int64)
        end = pieces.end[going]
        if deadlines is not None:
            deadlines = np.concatenate(
                [deadlines, [NO_TIME if s.deadline_us is None else s.deadline_us for s in stopped]]
            ).astype(np.int64)
    f["live"][kids] = 1
    f["start"][kids] = pieces.start[going]
    f["last"][kids] = us[end - 1]
    f["total"][kids] = totals
    f["number"][kids] = numbers
    f["context"][kids] = first_open - carry_from
    if deadlines is not None:
        result.deadlines = {k: d for k, d in zip(kids.tolist(), deadlines.tolist()) if d != NO_TIME}
    sizes = end - carry_from
    if not sizes.sum():
        return Rows.empty(rules.columns)
    within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    kept = np.repeat(carry_from, sizes) + within  # engine positions of the carried rows
    rows_kept = rows.take(order[kept])
    _keep_decisions(rules, rows_kept, walk, kept)
    return rows_kept


def _keep_decisions(rules: ColumnarRules, carried: Rows, walk: Walk, kept: np.ndarray) -> None:
    """Keep each carried start's decision when it is final (column-wise pieces only; the next call then
    matches only the starts still undecided, and the new rows'), and where undecided starts' searches
    stopped."""
    found, piece_of, on_vm = walk.found, walk.piece_of, walk.on_vm
    final = np.zeros(len(piece_of), dtype=bool)
    vm_pieces = np.fromiter(on_vm, dtype=np.int64, count=len(on_vm))
    if found is not None:
        settled = np.isin(walk.outcome, (decisions.FAIL, decisions.MATCH, decisions.TIMEOUT))
        final = ~walk.undecided & ~walk.context & settled
        final[np.isin(piece_of, vm_pieces)] = False
    final = final[kept]
    carried.cols[KNOWN] = np.where(final, walk.outcome[kept] if found is not None else -1, -1).astype(np.int64)
    for item in range(len(rules.plan.items)):
        carried.cols[f"{SPAN}{item}"] = np.where(final, walk.spans[item, kept] if found is not None else 0, 0).astype(
            np.int64
        )
    if found is not None and found.searched.any():  # where undecided starts' searches stopped (column-wise pieces)
        on_engine = ~np.isin(piece_of, vm_pieces)
        carried.cols[SEARCHED] = np.where(walk.undecided & on_engine, found.searched, 0)[kept]
    else:
        carried.cols.pop(SEARCHED, None)


def set_timers(
    rules: ColumnarRules, table: ColumnarTable, call_order: list[int], clock: np.ndarray, result: CallResult
) -> None:
    """Each called key's next timer (``keyed.py`` step 5), set in call order as Spark sets them."""
    gap = rules.engine.session_timeout_us
    stats = result.stats
    f = table.fields
    pending = table.pending
    size = len(table.keys)
    waiting = np.bincount(pending.kid, minlength=size)
    oldest = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(oldest, pending.kid, pending.us)
    carried = np.bincount(table.carried.kid, minlength=size)
    live = f["live"]
    called = np.asarray(call_order, dtype=np.int64)
    stats["pending_rows"] = int(waiting[called].sum()) if len(called) else 0
    stats["matcher_rows"] = int((carried[called] * live[called]).sum()) if len(called) else 0
    stats["live_matches"] = result.live_matches
    timers, deadlines = table.timers, result.deadlines
    if not len(called):
        return
    table.drop_timers(called)  # a called key's timer is set anew, after the others' (Spark's order)
    never = np.iinfo(np.int64).max
    has_rows, is_live = waiting[called] > 0, live[called].astype(bool)
    due = np.where(has_rows, oldest[called], never)
    if gap is not None:
        due = np.where(is_live, np.minimum(due, f["last"][called] + gap), due)
    if deadlines:
        deadline = np.full(size, NO_TIME, dtype=np.int64)
        deadline[np.fromiter(deadlines, dtype=np.int64, count=len(deadlines))] = list(deadlines.values())
        found = deadline[called]
        due = np.where(is_live & (found != NO_TIME), np.minimum(due, np.maximum(found, clock[called] + 1)), due)
    keeps = has_rows | is_live
    if table.seen:  # forget remembered dedup values once the watermark passes them
        remembered = [table.seen.get(kid) for kid in called.tolist()]
        has_seen = np.fromiter((bool(seen) for seen in remembered), dtype=bool, count=len(called))
        horizon = rules.engine.dedup_horizon_us
        forget_at = [min(seen.values()) + horizon + 1 if seen else never for seen in remembered]
        due = np.minimum(due, np.asarray(forget_at, dtype=np.int64))
        keeps |= has_seen
    setting = keeps & (due != never)
    timers.update(zip(called[setting].tolist(), due[setting].tolist()))
