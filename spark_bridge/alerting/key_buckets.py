"""How many buckets ``cep stream`` hashes its partition keys into (``--key-buckets``), fixed per checkpoint.

Each bucket is one state value in Spark's state store, read into Python and written back whole in every
micro-batch with a row or a due timer for one of its keys (``spark/buckets.py``). A bucket's value grows with
its keys: with the default 64 buckets, 10 million keys make values of about 17 MB, and a micro-batch moves
every value it touches between the store, the JVM, Arrow and Python. Buckets of a bounded size (``--expected-keys``:
about ``KEYS_PER_BUCKET`` keys each) make what a micro-batch moves follow the keys it touches, not the keys the
stream holds; the price is one Python call per touched bucket (docs/operations.md, "Many keys: what to set for
10 million").

A key's bucket is ``hash(key) mod count``: another count on a restart would look for every key in another
bucket and lose its state. So the count is recorded in the stream's status when it starts; a restart without
``--key-buckets`` takes the recorded one, and a restart with another count is refused (E0482) before the query
starts. A checkpoint from before the count was recorded ran with ``KEY_BUCKETS``; the bucket tables carry their
count too, so a status lost with its checkpoint kept is still refused in the worker rather than reset.
"""

from __future__ import annotations

import os

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.alerting.status import read_status
from cep.spark_bridge.spark.buckets import KEY_BUCKETS

# Above a million buckets even 10 million keys leave fewer than ten per bucket, and every touched bucket
# costs a Python call: a larger count is a mistake (a key count typed for a bucket count), not a setting.
MAX_KEY_BUCKETS = 1 << 20

# The keys per bucket ``--expected-keys`` aims at. A micro-batch reads and writes the whole value of every bucket
# it touches, and a micro-batch of R rows of distinct keys touches up to R buckets: what it moves through the JVM,
# Arrow and Python is about R x keys per bucket x bytes per key, so with a bounded bucket it no longer follows the
# total count of keys (docs/operations.md, "Many keys"). Fewer keys per bucket buy little more: each touched bucket
# is one Python call whose fixed pandas cost (1-2 ms) outweighs the work on its keys below about this many.
KEYS_PER_BUCKET = 64

__all__ = [
    "KEYS_PER_BUCKET",
    "MAX_KEY_BUCKETS",
    "STATUS_FIELD",
    "check_expected_keys",
    "check_key_buckets",
    "checkpoint_key_buckets",
    "expected_key_buckets",
    "key_buckets_for",
    "settle_key_buckets",
]

STATUS_FIELD = "key_buckets"  # the count in ``<checkpoint>/status.json``


def check_key_buckets(value: object, *, what: str = "--key-buckets") -> int:
    """``value`` as a bucket count (a whole number from 1 to ``MAX_KEY_BUCKETS``), or ``ValueError`` saying why."""
    text = str(value).strip().replace("_", "")
    if isinstance(value, bool) or not text.isdigit():
        raise ValueError(f"{what} must be a whole number of buckets from 1 to {MAX_KEY_BUCKETS:,}, not {value!r}")
    count = int(text)
    if not 1 <= count <= MAX_KEY_BUCKETS:
        raise ValueError(
            f"{what} must be from 1 to {MAX_KEY_BUCKETS:,}, not {count:,} (aim at about {KEYS_PER_BUCKET} keys per "
            "bucket, or give the keys instead: --expected-keys 10M)"
        )
    return count


_KEY_COUNT_SUFFIXES = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}


def check_expected_keys(value: object) -> int:
    """``value`` as a count of keys (a whole number, ``_`` allowed, or with a suffix: ``250k``, ``10M``), or
    ``ValueError`` saying what is allowed."""
    text = str(value).strip().replace("_", "").lower()
    scale = _KEY_COUNT_SUFFIXES.get(text[-1:], 1) if text else 1
    digits = text[:-1] if scale > 1 else text
    if isinstance(value, bool) or not digits.isdigit() or int(digits) == 0:
        raise ValueError(
            f"--expected-keys must be a whole number of keys above 0 (10000000, 10_000_000 or 10M), not {value!r}"
        )
    return int(digits) * scale


def key_buckets_for(expected_keys: int) -> int:
    """The bucket count for a stream expected to hold ``expected_keys`` partition keys: the power of two that gives
    each bucket at most ``KEYS_PER_BUCKET`` keys (a power of two: ``hash mod count`` spreads keys evenly for any
    count, but round figures are easier to recognise in a status), never below ``KEY_BUCKETS`` (the default's
    spread over tasks) nor above ``MAX_KEY_BUCKETS``."""
    wanted = max(1, -(-expected_keys // KEYS_PER_BUCKET))
    return min(MAX_KEY_BUCKETS, max(KEY_BUCKETS, 1 << (wanted - 1).bit_length()))


def expected_key_buckets(checkpoint: str, expected_keys: int) -> tuple[int | None, int]:
    """What ``--expected-keys`` asks of ``checkpoint``: (the count to ask for, None when the checkpoint keeps the
    count it was started with; the count ``key_buckets_for`` gives). A running checkpoint cannot change its count
    (``settle_key_buckets``), and a key count that has grown since is a reason to say so, not to refuse to start."""
    chosen = key_buckets_for(expected_keys)
    try:
        recorded = read_status(checkpoint).get(STATUS_FIELD)
    except (OSError, ValueError):
        recorded = None
    started = isinstance(recorded, int) or _has_run(checkpoint)
    return (None if started else chosen), chosen


def _has_run(checkpoint: str) -> bool:
    """Whether the matching query has logged a micro-batch in ``checkpoint`` (so its state has a bucket count)."""
    offsets = os.path.join(checkpoint, "match", "offsets")
    return os.path.isdir(offsets) and any(name.isdigit() for name in os.listdir(offsets))


def settle_key_buckets(checkpoint: str, recorded: int | None, asked: int | None) -> int:
    """The bucket count a stream on ``checkpoint`` runs with: ``asked`` (None: not given) against the count
    ``recorded`` in its status (None: not recorded). Raises ``CepSemanticError`` (E0482) when the checkpoint's
    state was written with another count."""
    if asked is not None:
        asked = check_key_buckets(asked, what="key_buckets")
    written = recorded if recorded is not None else (KEY_BUCKETS if _has_run(checkpoint) else None)
    if written is None:
        return KEY_BUCKETS if asked is None else asked
    if asked is not None and asked != written:
        raise CepSemanticError(
            f"the checkpoint {checkpoint} was started with --key-buckets {written}, not {asked}: a key's bucket is "
            f"hash(key) mod the count, so every key would be looked for in another bucket and its state lost. Run "
            f"with --key-buckets {written} (or without it: the checkpoint's count is used), or start a new "
            "checkpoint with the new count (the alerts so far stay in the old one)",
            code="E0482",
        )
    return written


def checkpoint_key_buckets(checkpoint: str, asked: int | None) -> int:
    """``settle_key_buckets`` with the count recorded in ``checkpoint``'s status file, read without Spark: what the
    CLI checks before it starts anything (a status file it cannot read is left to the stream, which says why)."""
    try:
        recorded = read_status(checkpoint).get(STATUS_FIELD)
    except (OSError, ValueError):
        recorded = None
    return settle_key_buckets(checkpoint, recorded if isinstance(recorded, int) else None, asked)
