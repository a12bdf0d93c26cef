"""Column names on the Spark side: a name quoted for Spark SQL, and the columns cep adds to a DataFrame
while it runs. Those all start with ``__cep_``, a prefix input columns may not use
(``inputs.prepare_input``); none survives into a result."""

from __future__ import annotations

import warnings

# Spark's Python workers import this module (every stateful function of cep reads its names). There,
# pyspark's applyInPandasWithState serializer concatenates each output frame with all-NA filler rows,
# and pandas 2.x warns about that concatenation on every call (a FutureWarning per key group, thousands
# in a log). The filler is pyspark's and its result is right either way; the warning is silenced for
# that message from pyspark only, where it arises, rather than by hiding the workers' stderr.
warnings.filterwarnings(
    "ignore",
    message="The behavior of DataFrame concatenation with empty or all-NA entries",
    category=FutureWarning,
    module="pyspark",
)


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier, safe for dots, spaces and backticks."""
    return "`" + name.replace("`", "``") + "`"


# The grouping column added when the query has no PARTITION BY: every row lands in one group.
ALL_ROWS_KEY = "__cep_all_rows__"
# The event time as microseconds since 1970 (``unix_micros``), so no time zone or pandas conversion touches
# the comparisons; a NULL event time is NULL_TIME, so that the column stays int64 in pandas.
EVENT_US = "__cep_event_us"
NULL_TIME = -(2**63)
# The column metadata that tells Spark's stateful operator which column its watermark filters on, and the
# all-NULL column that carries it instead of the event time (``spark/streaming.py`` explains why).
WATERMARK_KEY = "spark.watermarkDelayMs"
MARKER = "__cep_watermark_marker"
# What a stateful operator's output row is (a match, a late or bad row, statistics), and the statistics.
KIND = "__cep_kind"
STATS = "__cep_stats"  # one array<bigint> per statistics row
# Why a row is bad (``inputs.mark_bad_rows``), NULL for a good row; and what it was (the unreadable line,
# or the row as read, as JSON).
REJECT = "__cep_reject"
RAW = "__cep_raw"
# The column Spark's PERMISSIVE JSON/CSV reader fills with a line it cannot read (its default
# ``columnNameOfCorruptRecord``); an input with this column has its bad lines rejected with a reason.
CORRUPT_RECORD = "_corrupt_record"
# Column metadata marking a column the reader adds about a message rather than reads from its text (the Kafka
# source's kafka_topic, kafka_offset, ...): a message whose text could not be read is still "nothing read".
MESSAGE_METADATA = "cep.message_metadata"
# A line or message whose bytes are not UTF-8 (``not_utf8``) is kept in a dead letter as this prefix and the
# base64 of its bytes: lossless, and valid text in any JSON file. The Kafka reader puts it in
# ``_corrupt_record`` already encoded, after NOT_UTF8_MARK, a byte that is never part of UTF-8 (so the
# column is not valid UTF-8, which is how a reader's line of such bytes is told too).
BASE64_PREFIX = "base64:"
NOT_UTF8_MARK = b"\xff"
