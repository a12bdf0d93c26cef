"""Match ids: one deterministic id per match, the same in any micro-batch split, after a restart and in
a batch replay (``match_id``), and the tags that say which match made each output row."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import chain, repeat

from cep.spark_bridge.engine import state_codec as codec

MATCH_ID_VERSION = "cep-match-id-1"


def query_fingerprint(query_text: str) -> str:
    return hashlib.sha256(query_text.encode("utf-8")).hexdigest()


def match_id(query_fp: str, key: Sequence, session_start_us: int | None, number: int, start: int, first_time) -> str:
    """A deterministic id for one match (all output rows of a match share it; 32 hex digits).

    ``number`` is the match number in its session (0 for an unmatched row of ALL ROWS PER MATCH WITH
    UNMATCHED ROWS), ``start`` the position of its first row in the session (0-based), ``first_time``
    that row's event time. The same events give the same ids in any micro-batch split, after a restart
    from a checkpoint, and in a batch replay that numbers sessions the same way.
    """
    text = codec.canonical((MATCH_ID_VERSION, query_fp, tuple(key), session_start_us, number, start, first_time))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _head_state(query_fp: str, key: Sequence, session_start_us: int | None):
    """The hash state after the text ``match_id`` hashes up to the match's own numbers."""
    head = codec.canonical((MATCH_ID_VERSION, query_fp, tuple(key), session_start_us))
    assert head.endswith("])"), head  # canonical form of a tuple: (4, [items])
    return hashlib.sha256(head[:-2].encode("utf-8"))


# Session heads whose hash state ``SessionIds`` keeps between calls. An entry is about 0.5 KB (the hash
# state, its key and session start: measured), so the limit holds the heads of ~32k keys' open sessions
# in ~17 MB; a stream with more keys matching at once starts the cache over when full and costs what it
# cost without one (one head's canonical text per key and call).
HEAD_CACHE_LIMIT = 32_768
# Only keys of these exact types are cached: for them, equal keys have equal canonical text (1 == 1.0 ==
# True and 0.0 == -0.0 do not, and such keys may live in different tables of one stream).
_CACHED_KEY_TYPES = frozenset({str, int, type(None)})


class SessionIds:
    """``match_id`` of the matches of many sessions at once (a column-wise call): the text ``match_id``
    hashes up to a match's own numbers (its session's head) is hashed once per session and its hash state
    kept (``HEAD_CACHE_LIMIT``), since a key's open session has matches again at every call."""

    def __init__(self, query_fp: str, limit: int = HEAD_CACHE_LIMIT) -> None:
        self.query_fp = query_fp
        self.limit = limit
        self.heads: dict[tuple, object] = {}

    def ids(
        self,
        sessions: Sequence[tuple[tuple, int | None]],
        counts: Sequence[int],
        numbers: Sequence[int],
        starts: Sequence[int],
        first_us: Sequence[int],
    ) -> list[str]:
        """``match_id`` of ``counts[i]`` consecutive matches of session ``sessions[i]`` ((key, session
        start) each), in order: their numbers, first rows' session positions, and first rows' event times
        as µs (naive UTC, within the years 1 to 9999), one per match."""
        heads, prefixes = self.heads, []
        for key, session_start in sessions:
            key = tuple(key)
            if _CACHED_KEY_TYPES.issuperset(map(type, key)):
                prefix = heads.get((key, session_start))
                if prefix is None:
                    if len(heads) >= self.limit:
                        heads.clear()
                    prefix = heads[(key, session_start)] = _head_state(self.query_fp, key, session_start)
            else:
                prefix = _head_state(self.query_fp, key, session_start)
            prefixes.append(prefix)
        # each id continues a copy of its head's state: the same bytes hashed as ``match_id``'s
        ids: list[str] = []
        add, tag = ids.append, codec.T_DATETIME
        for prefix, n, s, u in zip(chain.from_iterable(map(repeat, prefixes, counts)), numbers, starts, first_us):
            sha = prefix.copy()
            sha.update(b", %d, %d, (%d, %d)])" % (n, s, tag, u))
            add(sha.hexdigest()[:32])
        return ids


class TaggingOutput:
    """Wraps the machine's ``OutputBuilder`` to record which match made each output row.

    The Pike VM appends exactly what ``match``/``unmatched`` return to its output, in call order, so
    ``tags[i]`` describes output row ``i`` of the current call: ``(match number, first row, its time)``;
    the match number is 0 for an unmatched row (ALL ROWS ... WITH UNMATCHED ROWS) and -1 for a
    TIMEOUT row (SHOW TIMEOUT MATCHES), which are not matches.
    """

    def __init__(self, inner, time_column: str | None) -> None:
        self.inner = inner
        self.time_column = time_column
        self.tags: list[tuple] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def _time(self, matcher, position: int):
        return matcher.env.value(self.time_column, position) if self.time_column is not None else None

    def match(self, matcher, number, start, end, labels, excluded):
        rows = self.inner.match(matcher, number, start, end, labels, excluded)
        if rows:
            self.tags.extend([(number, start, self._time(matcher, start))] * len(rows))
        return rows

    def timeout(self, matcher, start, end, labels):
        rows = self.inner.timeout(matcher, start, end, labels)
        if rows:
            self.tags.extend([(-1, start, self._time(matcher, start))] * len(rows))
        return rows

    def unmatched(self, matcher, position):
        rows = self.inner.unmatched(matcher, position)
        if rows:
            self.tags.extend([(0, position, self._time(matcher, position))] * len(rows))
        return rows


def statement_text(query) -> str:
    """The text of ``query``'s own statement (its span within a multi-statement file), for match ids; a
    rule of a rule set hashes its id and canonical text instead (``query.match_id_text``)."""
    override = getattr(query, "match_id_text", None)
    if override:
        return override
    text = getattr(query, "text", None) or ""
    span = getattr(query.statement, "span", None)
    if span is not None and 0 <= span.start < span.end <= len(text):
        return text[span.start : span.end]
    return text
