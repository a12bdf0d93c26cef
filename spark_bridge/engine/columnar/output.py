"""The rows of the matches a call emits: every chosen start's measures in column programs
(``sequence_output``), MATCH_NUMBER and ``match_id`` as the per-key VM gives them, the outer WHERE and
select list, in one pass over the matches of all pieces, cut by piece after."""

from __future__ import annotations

from itertools import compress

import numpy as np

from cep.matcher.vector import all_rows, kernels, sequence_output
from cep.spark_bridge.engine.column_table import DATETIME_US, ColumnarTable
from cep.spark_bridge.engine.columnar.pieces import Pieces
from cep.spark_bridge.engine.columnar.rules import ColumnarRules
from cep.spark_bridge.engine.columnar.walk import Walk


def measure(
    rules: ColumnarRules, table: ColumnarTable, order: np.ndarray, pieces: Pieces, walk: Walk
) -> dict[int, tuple[list, list]] | None:
    """piece -> (output rows, match ids) of the walk's chosen starts; None when a measure's column program
    refuses these matches (the caller then runs their pieces on the VM)."""
    chosen, timeouts, data, values = walk.chosen, walk.timeouts, walk.data, walk.values
    if not chosen:
        return {}
    starts = np.asarray(chosen, dtype=np.int64)
    counts = walk.spans[:, starts]
    begins = starts + np.cumsum(counts, axis=0) - counts
    parts = walk.piece_of[starts]
    first = np.searchsorted(parts, parts, side="left")
    if timeouts is None or not timeouts.any():
        timeouts = None
        numbers = np.arange(len(starts), dtype=np.int64) - first + 1 + pieces.number[parts]
    else:  # MATCH_NUMBER(): the matches so far in the session; a TIMEOUT row's id hashes -1 (TaggingOutput)
        matched = np.cumsum(~timeouts)
        numbers = matched - (matched[first] - (~timeouts[first]).astype(np.int64)) + pieces.number[parts]
    loaded = dict(values)

    def load(name: str) -> kernels.Value:
        if name not in loaded:
            loaded[name] = data.load(name, order)
        return loaded[name]

    measured = None
    if rules.plan.all_rows is None:
        matches = sequence_output.Matches(
            starts, begins, counts, numbers, order, data, load, values, timeouts, pieces.begin[parts]
        )
        measured = sequence_output.columns(rules.measures, matches)
        if measured is None:
            return None
    positions = starts - pieces.begin[parts] + pieces.position[parts]
    first_us = walk.us[starts]
    clamped = (first_us < DATETIME_US[0]) | (first_us > DATETIME_US[1])
    if clamped.any():  # the id hashes the datetime the VM sees: clamped to the years 1 to 9999
        first_us = np.where(first_us < DATETIME_US[0], DATETIME_US[0], np.minimum(first_us, DATETIME_US[1]))
    # One pass over the matches of all pieces (the rows, their ids, the outer query), cut by piece after.
    group = np.append(0, np.flatnonzero(np.diff(parts)) + 1)  # each piece's first match
    group_parts = parts[group]
    keys = [table.keys[k] for k in pieces.kid[group_parts].tolist()]
    per_piece = np.diff(np.append(group, len(starts)))
    tagged = numbers if timeouts is None else np.where(timeouts, -1, numbers)
    ids = rules.session_ids.ids(
        list(zip(keys, pieces.start[group_parts].tolist())),
        per_piece.tolist(),
        tagged.tolist(),
        positions.tolist(),
        first_us.tolist(),
    )
    key_of = np.repeat(np.arange(len(keys)), per_piece)  # each match's key
    if measured is None:  # ALL ROWS PER MATCH: a row per match row, each with its match's id
        lengths = counts.sum(axis=0)
        found = every_row(rules, data, order, starts, counts, numbers)
        per_piece = np.bincount(key_of, weights=lengths, minlength=len(keys)).astype(np.int64)
        key_of = np.repeat(key_of, lengths)
        ids = np.repeat(np.asarray(ids, dtype=object), lengths).tolist()
    key_columns = [np.fromiter(column, dtype=object, count=len(keys))[key_of].tolist() for column in zip(*keys)]
    found = list(zip(*key_columns, *(measured if measured is not None else found)))  # the key, then the rest
    ends = np.cumsum(per_piece)
    if rules.where is not None:  # WHERE may drop rows: each kept row keeps its match's id
        where = rules.where
        kept = [where(row) is True for row in found]
        found, ids = list(compress(found, kept)), list(compress(ids, kept))
        ends = np.cumsum(kept)[ends - 1]
    found = rules.select.apply(found, order_and_limit=False)
    out: dict[int, tuple[list, list]] = {}
    lo = 0
    for part, hi in zip(group_parts.tolist(), ends.tolist()):
        out[part] = (found[lo:hi], ids[lo:hi])
        lo = hi
    return out


def every_row(rules: ColumnarRules, data, order: np.ndarray, starts: np.ndarray, counts: np.ndarray, numbers) -> list:
    """ALL ROWS PER MATCH: the columns after the key of every row of the matches at ``starts`` (engine
    order; ``counts``: rows per item and match), as the VM's ``OutputBuilder`` lays them out: the ORDER BY
    columns, the measures (``all_rows.measure_columns``), the other input columns."""
    plan = rules.plan
    layout = rules.base.output.layout
    lengths = counts.sum(axis=0)
    first_out = np.cumsum(lengths) - lengths
    match_of = np.repeat(np.arange(len(starts)), lengths)
    within = np.arange(int(lengths.sum()), dtype=np.int64) - first_out[match_of]
    rows = order[starts[match_of] + within]  # the row (in ``data``) of each output row
    # each item is one variable: a row's label is its item's, the items' rows in pattern order
    labels = np.repeat(np.tile(np.asarray(plan.item_labels, dtype=np.int64), len(starts)), counts.T.ravel())
    head, tail = layout.row_columns[: layout.order_count], layout.row_columns[layout.order_count :]
    columns = [data.gather(name, rows, False) for name in head]
    columns += all_rows.measure_columns(
        plan.all_rows, rules.base.label_names, data, rows, lengths, numbers, labels, False
    )
    columns += [data.gather(name, rows, False) for name in tail]
    return columns
