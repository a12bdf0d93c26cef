"""A call's rows cut into session pieces: per key, its carried rows then its released ones, split where a
session ends (a gap, or the clock past its end). Every piece is one partition of one engine run over all
keys; a key's session that ends here is closed (or counted, when a later piece starts the next one)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cep.spark_bridge.engine.column_table import NO_TIME, ColumnarTable
from cep.spark_bridge.engine.columnar.rules import ColumnarRules


@dataclass
class Pieces:
    """Session pieces of one call, as partitions of the engine's run (rows in engine order)."""

    begin: np.ndarray  # first row of each piece
    end: np.ndarray
    kid: np.ndarray
    closed: np.ndarray  # the session ends with this piece (a gap after it, or the clock past its end)
    clock: np.ndarray  # the time the engine is told (µs): the key's clock, or the session's end
    context: np.ndarray  # carried rows at the piece's head that are no starts (PREV reads them)
    position: np.ndarray  # the session position of the piece's first row
    number: np.ndarray  # matches emitted in the session before the piece
    start: np.ndarray  # the session's first event time
    released_from: int  # the call's rows from this one on (in ``rows``' order) were released in this call


def session_pieces(
    rules: ColumnarRules,
    table: ColumnarTable,
    kid: np.ndarray,
    us: np.ndarray,
    called: np.ndarray,
    clock: np.ndarray,
    carried_count: np.ndarray,
    stats: dict,
    *,
    released_from: int,
) -> Pieces:
    """The pieces of the rows ``kid``/``us`` (engine order: per key, carried rows then released ones)."""
    f = table.fields
    gap = rules.engine.session_timeout_us
    m = len(kid)
    first_of_key = np.ones(m, dtype=bool)
    first_of_key[1:] = kid[1:] != kid[:-1]
    live = f["live"][kid].astype(bool)
    previous = np.empty(m, dtype=np.int64)
    previous[1:] = us[:-1]
    previous[first_of_key] = f["last"][kid[first_of_key]]
    if gap is None:
        gap_before = np.zeros(m, dtype=bool)
    else:
        gap_before = (us - previous > gap) & (previous != NO_TIME)
    continues = first_of_key & live & ~gap_before  # the key's open session goes on
    begins = first_of_key | gap_before
    # A key's open session that ends before its first row here (no carried rows: nothing undecided).
    ended = np.flatnonzero(first_of_key & live & gap_before)
    close_keys(table, kid[ended], stats)
    # Called keys with an open session and no rows at all: it may end by the clock.
    idle = called & f["live"].astype(bool)
    idle[kid] = False
    if gap is not None:
        over = np.flatnonzero(idle & (clock >= f["last"] + gap) & (f["last"] != NO_TIME))
        close_keys(table, over, stats)
    begin = np.flatnonzero(begins)
    end = np.append(begin[1:], m)
    pkid = kid[begin]
    last_of_key = np.ones(len(begin), dtype=bool)
    last_of_key[:-1] = pkid[1:] != pkid[:-1]
    last_us = us[end - 1] if m else np.zeros(0, dtype=np.int64)
    if gap is None:
        closed = ~last_of_key
        end_clock = clock[pkid]
    else:
        closed = ~last_of_key | (clock[pkid] >= last_us + gap)
        end_clock = np.where(closed, last_us + gap, clock[pkid])
    cont = continues[begin]
    return Pieces(
        begin=begin,
        end=end,
        kid=pkid,
        closed=closed,
        clock=end_clock,
        context=np.where(cont, f["context"][pkid], 0),
        position=np.where(cont, f["total"][pkid] - carried_count[pkid], 0),
        number=np.where(cont, f["number"][pkid], 0),
        start=np.where(cont, f["start"][pkid], us[begin]),
        released_from=released_from,
    )


def close_keys(table: ColumnarTable, kids: np.ndarray, stats: dict) -> None:
    """The open sessions of ``kids`` ended: their session fields are reset and the session counted."""
    if len(kids):
        f = table.fields
        f["live"][kids] = 0
        f["sessions"][kids] += 1
        for name in ("start", "last"):
            f[name][kids] = NO_TIME
        for name in ("total", "number", "context"):
            f[name][kids] = 0
        stats["sessions_closed"] += len(kids)


def end_piece(table: ColumnarTable, pieces: Pieces, piece: int, stats: dict) -> None:
    """The session of ``piece`` ended: the key's session closes (its last piece) or is counted (a later
    piece of the key starts the next session)."""
    kid = int(pieces.kid[piece])
    if piece + 1 == len(pieces.kid) or pieces.kid[piece + 1] != kid:
        close_keys(table, np.array([kid]), stats)
    else:
        table.fields["sessions"][kid] += 1
        stats["sessions_closed"] += 1
