"""Deterministic event logs for the alert-rule bench: logins (brute force) and card payments (card testing).

    python bench/alert_data.py --rows 10000000          # writes bench/data/logins_10000000.parquet and payments_...

Two tables of ``rows`` rows each, in event-time order across keys (as a log delivers them):

- logins: ``user_id`` (string, ``u000000`` ..), ``ts`` (timestamp[ms]), ``status`` (``OK`` / ``FAIL``) over
  100,000 users;
- payments: ``card_id`` (string, ``c0000000`` ..), ``ts``, ``amount`` (double, whole cents) over 200,000 cards.

What makes them look like real logs rather than uniform noise:

- Activity is skewed (Zipf-like: weight 1 / (rank + 50)): the busiest key has tens of thousands of events,
  the median one tens. Ranks are shuffled over ids, so a range of ids is a fair sample of heavy and light keys.
- Events come in sessions (a new session with probability 1/6 per event: about 6 events each) that start
  anywhere in 7 days, more often in the day than at night; inside a session, events are seconds apart
  (exponential gaps, mean 20 s for logins, 90 s for payments).
- Logins fail at 3% for most users and 20% for one user in twenty (forgotten passwords): the natural
  FAIL FAIL FAIL OK runs a brute-force rule also finds, as it does in production.
- Amounts are log-normal (median 30.00): about 1% under 2.00 and 1% at 500.00 or more.
- Injected attacks, one per 5,000 rows: brute force (3-30 failures 1-20 s apart, then a success two times in
  three) and card testing (3-12 charges of 0.50-1.99 1-20 s apart, then a charge of 500-3,000 two times in
  three). One attack in three is slow (gaps of 20-60 s for logins, 1-3 minutes for cards): most of those
  outlast the rule's WITHIN limit, so the limit decides where, and whether, they match (a later start
  whose last failures and the success fit in the limit still matches: the preferred match under the limit).

Each key's timestamps are strictly increasing (ties moved one millisecond later), so ORDER BY ts gives
every engine the same order. numpy's PCG64 with a fixed seed: the same row count gives the same files.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SEED = 20261126
DATA_DIR = Path(__file__).resolve().parent / "data"
START = np.datetime64("2026-01-05T00:00:00", "ms")
DAYS = 7
MS_PER_DAY = 86_400_000
ZIPF_OFFSET = 50  # weight 1 / (rank + 50): the busiest key ~0.25% of all events, none starved
NEW_SESSION_P = 1 / 6  # about 6 events per session
ROWS_PER_ATTACK = 5_000
SLOW_ATTACK_SHARE = 1 / 3  # attacks spaced out (LogShape.slow_attack_gap_ms): most outlast the rule's WITHIN
FINISHED_ATTACK_SHARE = 2 / 3  # attacks that end with the success (login) or the big charge (card)


@dataclass(frozen=True)
class LogShape:
    table: str  # logins / payments
    key: str  # the PARTITION BY column
    key_prefix: str
    keys: int
    session_gap_ms: float  # mean gap between a session's events
    slow_attack_gap_ms: tuple[int, int]  # a slow attack's gaps: most slow attacks outlast the rule's WITHIN


# Failures per brute-force attack, small charges per card test (the success / big charge comes on top).
ATTACK_ROWS = {"logins": (3, 30), "payments": (3, 12)}
LOGINS = LogShape("logins", "user_id", "u", 100_000, 20_000, (20_000, 60_000))  # 3-30 fails, WITHIN 5 minutes
PAYMENTS = LogShape("payments", "card_id", "c", 200_000, 90_000, (60_000, 180_000))  # 3-12 charges, 10 minutes


def path_of(shape: LogShape, rows: int) -> Path:
    return DATA_DIR / f"{shape.table}_{rows}.parquet"


def key_names(shape: LogShape) -> np.ndarray:
    width = len(str(shape.keys - 1)) + 1
    return np.char.add(shape.key_prefix, np.char.zfill(np.arange(shape.keys).astype(str), width))


def _names(shape: LogShape, key: np.ndarray):
    """The key column as Arrow strings (a take from the names: building 10M Python strings takes a minute)."""
    import pyarrow as pa

    return pa.array(key_names(shape)).take(pa.array(key))


def _background_times(rng: np.random.Generator, shape: LogShape, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Key index and time (ms from START) of ``rows`` ordinary events, grouped by key."""
    weights = 1.0 / (np.arange(shape.keys) + ZIPF_OFFSET)
    per_rank = rng.multinomial(rows, weights / weights.sum())
    per_key = per_rank[rng.permutation(shape.keys)]  # rank -> a random id
    key = np.repeat(np.arange(shape.keys), per_key)
    new_session = rng.random(rows) < NEW_SESSION_P
    new_session[np.cumsum(per_key)[:-1][per_key[1:] > 0]] = True  # a key's first event opens a session
    new_session[0] = True
    session = np.cumsum(new_session) - 1
    # Session starts: uniform day, hour of day weighted towards the daytime (a cosine bump around 14:00).
    sessions = int(session[-1]) + 1
    day = rng.integers(0, DAYS, sessions)
    hour_weights = 1.2 + np.cos((np.arange(24) - 14) / 24 * 2 * np.pi)
    hour = rng.choice(24, sessions, p=hour_weights / hour_weights.sum())
    start = day * MS_PER_DAY + hour * 3_600_000 + rng.integers(0, 3_600_000, sessions)
    gaps = rng.exponential(shape.session_gap_ms, rows)
    gaps[new_session] = 0
    offset = np.cumsum(gaps)
    offset -= np.repeat(offset[new_session], np.diff(np.append(np.flatnonzero(new_session), rows)))
    return key, start[session] + offset.astype(np.int64)


def _attacks(rng: np.random.Generator, shape: LogShape, attacks: int, lengths: tuple[int, int]):
    """Key, time, whether each row is the attack's last (the success / big charge), and the attack's number,
    for ``attacks`` bursts of ``lengths`` failures / small charges (the last row comes on top)."""
    size = rng.integers(lengths[0], lengths[1] + 1, attacks)
    finished = rng.random(attacks) < FINISHED_ATTACK_SHARE
    slow = rng.random(attacks) < SLOW_ATTACK_SHARE
    rows_each = size + finished
    attack = np.repeat(np.arange(attacks), rows_each)
    low = np.where(slow, shape.slow_attack_gap_ms[0], 1_000)
    high = np.where(slow, shape.slow_attack_gap_ms[1], 20_000)
    gaps = rng.integers(low[attack], high[attack])
    first = np.concatenate(([0], np.cumsum(rows_each)[:-1]))
    gaps[first] = 0
    offset = np.cumsum(gaps)
    offset -= np.repeat(offset[first], rows_each)
    start = rng.integers(0, DAYS * MS_PER_DAY, attacks)
    is_last = np.zeros(len(attack), dtype=bool)
    is_last[(first + rows_each - 1)[finished]] = True
    return rng.integers(0, shape.keys, attacks)[attack], start[attack] + offset, is_last, attack


def _in_order(key: np.ndarray, ms: np.ndarray, *columns: np.ndarray):
    """Rows sorted by time (key breaks ties), each key's times made strictly increasing first."""
    # One int64 sort key per order (faster than lexsort): a key's block spans less than ``span`` ms.
    span = np.int64(4 * DAYS * MS_PER_DAY + 2 * len(ms))
    by_key = np.argsort(key * span + ms, kind="stable")
    key, ms, columns = key[by_key], ms[by_key], [c[by_key] for c in columns]
    # Strictly increasing per key: t_i' = max over j <= i in the key of (t_j - j) + i. A key's block is
    # lifted ``span`` above the previous one, so that the running maximum never carries across keys.
    lift = key * span
    index = np.arange(len(ms))
    ms = np.maximum.accumulate(ms - index + lift) - lift + index
    by_time = np.argsort(ms * (int(key.max()) + 1) + key, kind="stable")
    return key[by_time], ms[by_time], [c[by_time] for c in columns]


def generate_logins(rows: int, seed: int = SEED):
    """The login log as a pyarrow Table: user_id, ts, status."""
    import pyarrow as pa

    rng = np.random.default_rng([seed, 1])
    attacks = max(rows // ROWS_PER_ATTACK, 1)
    a_key, a_ms, a_ok, _ = _attacks(rng, LOGINS, attacks, ATTACK_ROWS[LOGINS.table])
    key, ms = _background_times(rng, LOGINS, rows - len(a_key))
    careless = rng.random(LOGINS.keys) < 0.05
    fail = rng.random(len(key)) < np.where(careless[key], 0.20, 0.03)
    key, ms, (fail,) = _in_order(
        np.concatenate((key, a_key)), np.concatenate((ms, a_ms)), np.concatenate((fail, ~a_ok))
    )
    status = pa.array(["OK", "FAIL"]).take(fail.astype(np.int8))
    return pa.table(
        {"user_id": _names(LOGINS, key), "ts": pa.array(START + ms.astype("timedelta64[ms]")), "status": status}
    )


def generate_payments(rows: int, seed: int = SEED):
    """The card payments log as a pyarrow Table: card_id, ts, amount."""
    import pyarrow as pa

    rng = np.random.default_rng([seed, 2])
    attacks = max(rows // ROWS_PER_ATTACK, 1)
    a_key, a_ms, a_big, _ = _attacks(rng, PAYMENTS, attacks, ATTACK_ROWS[PAYMENTS.table])
    a_cents = np.where(a_big, rng.integers(50_000, 300_001, len(a_key)), rng.integers(50, 200, len(a_key)))
    key, ms = _background_times(rng, PAYMENTS, rows - len(a_key))
    cents = np.maximum(np.round(rng.lognormal(np.log(3_000), 1.2, len(key))), 1).astype(np.int64)
    key, ms, (cents,) = _in_order(
        np.concatenate((key, a_key)), np.concatenate((ms, a_ms)), np.concatenate((cents, a_cents))
    )
    return pa.table(
        {
            "card_id": _names(PAYMENTS, key),
            "ts": pa.array(START + ms.astype("timedelta64[ms]")),
            "amount": pa.array(cents / 100.0),
        }
    )


def injected(shape: LogShape, rows: int, seed: int = SEED):
    """The attacks injected into ``shape``'s log of ``rows`` rows (the generator's first draws, made again):
    a pyarrow Table with the key, the attack's first and last time, its rows, and whether it ends with the
    success / big charge. Times are before a tie with another row of the key moved them 1 ms later."""
    import pyarrow as pa

    rng = np.random.default_rng([seed, 1 if shape is LOGINS else 2])
    key, ms, is_last, attack = _attacks(rng, shape, max(rows // ROWS_PER_ATTACK, 1), ATTACK_ROWS[shape.table])
    starts = np.flatnonzero(np.diff(np.concatenate(([-1], attack))))
    ends = np.append(starts[1:], len(ms)) - 1
    return pa.table(
        {
            shape.key: _names(shape, key[starts]),
            "first_ts": pa.array(START + ms[starts].astype("timedelta64[ms]")),
            "last_ts": pa.array(START + ms[ends].astype("timedelta64[ms]")),
            "rows": pa.array(ends - starts + 1),
            "finished": pa.array(is_last[ends]),
        }
    )


GENERATORS = {LOGINS.table: generate_logins, PAYMENTS.table: generate_payments}


def ensure(shape: LogShape, rows: int) -> Path:
    """The Parquet file of ``rows`` rows of ``shape``'s log, generated once (written aside, then renamed)."""
    import pyarrow.parquet as pq

    path = path_of(shape, rows)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        pq.write_table(GENERATORS[shape.table](rows), partial)
        os.replace(partial, path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args(argv)
    for shape in (LOGINS, PAYMENTS):
        print(ensure(shape, args.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
